package agent

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// testSpotNotice is the servers' spot notice in these tests.
const testSpotNotice = time.Second

// spotScript records its environment, copies the notice file when it
// appears (with when it saw it) and records SIGTERM.
const spotScript = `#!/bin/sh
out="$OUTDIR/$ARBITER_WORKLOAD"
env | sort > "$out.env.tmp" && mv "$out.env.tmp" "$out.env"
trap 'date +%s.%N > "$out.term.tmp" && mv "$out.term.tmp" "$out.term"; exit 0' TERM
while :; do
  if [ ! -f "$out.seen" ] && [ -f "$ARBITER_NOTICE_FILE" ]; then
    cp "$ARBITER_NOTICE_FILE" "$out.notice" && date +%s.%N > "$out.seen.tmp" && mv "$out.seen.tmp" "$out.seen"
  fi
  sleep 0.05
done
`

func unixFile(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return time.Unix(0, int64(sec*1e9))
}

// TestSpotNotice: a spot workload preempted by a guarantee's owner gets
// the eviction notice in $ARBITER_NOTICE_FILE and at $ARBITER_EVENTS_URL
// (Azure Scheduled Events' shape) before SIGTERM, which comes no sooner
// than the server's spot notice after it.
func TestSpotNotice(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	e.startAgent("n1")
	e.waitFor("the node", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })
	spot := filepath.Join(e.dir, "spot.sh")
	os.WriteFile(spot, []byte(spotScript), 0o755)
	_, err := e.admin.Submit(e.ctx, "team", api.WorkloadSpec{Name: "spotty", GPUs: api.GPUs(resource.GPUs(8)), Replicas: 1, Priority: "spot", Preemptible: true,
		Flavors: []string{"A100-80G"}, Regions: []string{"local"}, GracePeriod: api.Duration(500 * time.Millisecond),
		Command: &api.Command{Argv: []string{"/bin/sh", spot}, Env: map[string]string{"OUTDIR": e.out}}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(e.out, "spotty")
	e.waitFor("the spot workload to run", 10*time.Second, func() bool { return e.workload("spotty").State == "Running" && exists(out+".env") })
	m := readEnv(t, out+".env")
	evURL := m["ARBITER_EVENTS_URL"]
	if !strings.HasPrefix(evURL, "http://127.0.0.1:") || m["ARBITER_NOTICE_FILE"] == "" {
		t.Fatalf("ARBITER_EVENTS_URL=%q ARBITER_NOTICE_FILE=%q", evURL, m["ARBITER_NOTICE_FILE"])
	}
	events := func() ScheduledEvents {
		var doc ScheduledEvents
		resp, err := http.Get(evURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	if doc := events(); len(doc.Events) != 0 {
		t.Fatalf("events before any preemption: %+v", doc)
	}

	e.submit("urgent", "high", 1, time.Second, "1")
	var doc ScheduledEvents
	e.waitFor("the Preempt event at ARBITER_EVENTS_URL", 10*time.Second, func() bool { doc = events(); return len(doc.Events) > 0 })
	if exists(out + ".term") {
		t.Fatal("SIGTERM arrived before the event was served")
	}
	ev := doc.Events[0]
	if ev.EventType != "Preempt" || ev.EventStatus != "Scheduled" || !strings.Contains(ev.Description, "reclaims its guarantee") {
		t.Errorf("event %+v", ev)
	}
	notBefore, err := time.Parse(http.TimeFormat, ev.NotBefore)
	if err != nil {
		t.Errorf("NotBefore %q: %v", ev.NotBefore, err)
	}
	e.waitFor("the script to see the notice file", 10*time.Second, func() bool { return exists(out + ".seen") })
	e.waitFor("SIGTERM", 10*time.Second, func() bool { return exists(out + ".term") })
	seen, term := unixFile(t, out+".seen"), unixFile(t, out+".term")
	var fileEv ScheduledEvent
	if b, err := os.ReadFile(out + ".notice"); err != nil || json.Unmarshal(b, &fileEv) != nil {
		t.Fatalf("notice file copy: %v %s", err, b)
	}
	issued, err := time.Parse(time.RFC3339Nano, fileEv.Issued)
	if err != nil || fileEv.EventType != "Preempt" || fileEv.Description != ev.Description {
		t.Fatalf("notice file %+v (%v), served %+v", fileEv, err, ev)
	}
	if !seen.Before(term) {
		t.Errorf("the script saw the notice at %v, not before SIGTERM at %v", seen, term)
	}
	if gap := term.Sub(issued); gap < testSpotNotice {
		t.Errorf("SIGTERM %v after the notice, want at least %v", gap, testSpotNotice)
	} else {
		t.Logf("notice seen %v after it was given; SIGTERM %v after it", seen.Sub(issued).Round(time.Millisecond), gap.Round(time.Millisecond))
	}
	if term.Before(notBefore) {
		t.Errorf("SIGTERM at %v, before NotBefore %v", term, notBefore)
	}
	e.waitFor("the stop report", 10*time.Second, func() bool { return len(e.events("ReplicaStopped")) >= 1 })
	if msg := e.events("ReplicaStopped")[0].Message; !strings.Contains(msg, "after SIGTERM") {
		t.Errorf("stop report %q: the script exits on SIGTERM", msg)
	}
	e.waitFor("the notice to be withdrawn after the stop", 5*time.Second, func() bool { return len(events().Events) == 0 && !exists(m["ARBITER_NOTICE_FILE"]) })
}
