package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestGraceCapped: a submission asking for more grace than its priority
// class is allowed is refused with a 400 naming grace_period and the cap;
// the default cap holds without options; a workload stored before the cap
// is stopped with the capped grace (what its agent is told).
func TestGraceCapped(t *testing.T) {
	f := newAgentFleet(t, Options{MaxGrace: time.Minute, MaxGraceClass: map[workload.Priority]time.Duration{workload.PrioritySpot: 10 * time.Second, workload.PriorityCritical: time.Hour}})
	tenant := f.tenant("contoso")
	if _, err := f.admin.SetAllowedPriorities(f.ctx, "contoso", []string{"critical", "normal", "spot"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prio  string
		grace time.Duration
		cap   string // "" accepted
	}{
		{"normal", time.Minute, ""},
		{"normal", time.Minute + time.Second, "1m0s"},
		{"normal", 1_000_000 * time.Hour, "1m0s"},
		{"spot", 10 * time.Second, ""},
		{"spot", 11 * time.Second, "10s"},
		{"critical", 30 * time.Minute, ""},
		{"critical", 2 * time.Hour, "1h0m0s"},
	} {
		sp := spec("g-"+c.prio+"-"+strings.ReplaceAll(c.grace.String(), ".", ""), 1, 1)
		sp.Priority, sp.GracePeriod = c.prio, api.Duration(c.grace)
		_, err := tenant.Submit(f.ctx, "contoso", sp)
		var ae *api.Error
		switch {
		case c.cap == "" && err != nil:
			t.Errorf("%s grace %v refused: %v", c.prio, c.grace, err)
		case c.cap != "" && (!errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != "grace_period" || !strings.Contains(ae.Message, c.cap)):
			t.Errorf("%s grace %v: %v, want a 400 on grace_period naming %s", c.prio, c.grace, err, c.cap)
		}
	}
	if got := f.s.LongestGrace(); got != time.Hour {
		t.Errorf("longest grace %v, want 1h", got)
	}
	// Stored before the cap (or seeded): the agent gets the cap.
	f.place("old", "n1", []int{0}, 1_000_000*time.Hour)
	reply, err := f.beat("n1", api.Heartbeat{})
	if err != nil || len(reply.Tasks) != 1 {
		t.Fatalf("heartbeat: %+v %v", reply, err)
	}
	if g := time.Duration(reply.Tasks[0].GracePeriod); g != time.Minute {
		t.Errorf("the agent is told a grace of %v, want the cap of 1m", g)
	}

	d := newHarness(t, testConfig, Options{RateLimit: -1})
	sp := spec("huge", 1, 1)
	sp.GracePeriod = api.Duration(1_000_000 * time.Hour)
	if _, err := d.tenant("contoso").Submit(d.ctx, "contoso", sp); apiField(err) != "grace_period" || !strings.Contains(err.Error(), "10m0s") {
		t.Errorf("default cap: %v, want a 400 on grace_period naming 10m0s", err)
	}
}

func apiField(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Field
	}
	return ""
}

func TestParseMaxGraceClass(t *testing.T) {
	for _, c := range []struct {
		in   string
		p    workload.Priority
		d    time.Duration
		fail bool
	}{
		{in: "spot=30s", p: workload.PrioritySpot, d: 30 * time.Second},
		{in: "critical = 1h", p: workload.PriorityCritical, d: time.Hour},
		{in: "spot", fail: true},
		{in: "urgent=1m", fail: true},
		{in: "spot=0s", fail: true},
		{in: "spot=-1s", fail: true},
		{in: "spot=soon", fail: true},
		{in: "=1m", fail: true},
	} {
		p, d, err := ParseMaxGraceClass(c.in)
		if (err != nil) != c.fail || !c.fail && (p != c.p || d != c.d) {
			t.Errorf("%q: %v %v %v", c.in, p, d, err)
		}
	}
}

func FuzzParseMaxGraceClass(f *testing.F) {
	for _, s := range []string{"spot=30s", "normal=10m", "x", "low=", "=", "high=1h=2h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, d, err := ParseMaxGraceClass(s)
		if err == nil && (d <= 0 || p < workload.PrioritySpot || p > workload.PriorityCritical) {
			t.Fatalf("%q accepted as %v %v", s, p, d)
		}
	})
}
