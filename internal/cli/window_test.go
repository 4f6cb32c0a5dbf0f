package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

const windowWorld = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: h1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
tenants:
  - name: fabrikam
`

// windowServer is a live server with windowWorld seeded; it returns the
// flags that reach it as the admin acting for fabrikam.
func windowServer(t *testing.T) []string {
	t.Helper()
	_, url := seededServer(t, windowWorld)
	return []string{"--server", url, "--token", testAdmin, "--tenant", "fabrikam"}
}

// testAdmin is the admin token of seededServer's servers.
const testAdmin = "admin-secret-for-cli-tests-0123"

// seededServer is a live server (bbolt store in a temporary directory,
// real HTTP) seeded with the config world, closed with the test; its
// admin token is testAdmin.
func seededServer(t *testing.T, world string) (*server.Server, string) {
	t.Helper()
	s, _, url := seededServerWith(t, world, server.Options{})
	return s, url
}

// seededServerWith is seededServer with the server's options (Store,
// AdminToken, RateLimit and Logger are set here), returning its store too.
func seededServerWith(t *testing.T, world string, o server.Options) (*server.Server, *store.BoltStore, string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenBolt(filepath.Join(t.TempDir(), "a.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg, err := config.Parse("world.yaml", []byte(world))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Seed(ctx, st, cfg, time.Now()); err != nil {
		t.Fatal(err)
	}
	o.Store, o.AdminToken, o.RateLimit, o.Logger = st, testAdmin, -1, slog.New(slog.DiscardHandler)
	s, err := server.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, st, hs.URL
}

// TestReservationCreateWindowFlags (issue 17 item 4): --start and --end
// take RFC 3339 or +durations; the reservation comes back Scheduled
// with its window and no machines; list shows the window and state; bad
// values are refused naming the flag.
func TestReservationCreateWindowFlags(t *testing.T) {
	conn := windowServer(t)
	create := func(args ...string) (string, string, int) {
		base := []string{"reservation", "create", "--sku", "Standard_ND96isr_H100_v5", "--capacity", "1", "--region", "eastus", "-o", "json"}
		return run(t, append(append(base, conn...), args...)...)
	}
	before := time.Now()
	out, errOut, code := create("--name", "soon", "--start", "+2h", "--end", "+4h")
	if code != 0 {
		t.Fatalf("create --start +2h --end +4h: exit %d: %s", code, errOut)
	}
	var r api.Reservation
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	after := time.Now()
	if r.Start.Before(before.Add(2*time.Hour).Truncate(time.Second)) || r.Start.After(after.Add(2*time.Hour)) ||
		r.End.Sub(r.Start).Round(time.Second) != 2*time.Hour {
		t.Errorf("window %v to %v, want now+2h to now+4h", r.Start, r.End)
	}
	if r.State != "Scheduled" || len(r.Nodes) != 0 {
		t.Errorf("state %q nodes %v, want Scheduled with no machines yet", r.State, r.Nodes)
	}
	if _, errOut, code := create("--name", "later", "--start", "2030-01-06T08:00:00Z", "--end", "2030-01-07T08:00:00Z"); code != 0 {
		t.Fatalf("create with RFC 3339: exit %d: %s", code, errOut)
	}
	out, errOut, code = run(t, append([]string{"reservation", "list"}, conn...)...)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"BOUND", "STATE", "START", "END", "Scheduled", "2030-01-06T08:00:00Z", "2030-01-07T08:00:00Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--start", "tomorrow"}, "--start"},
		{[]string{"--start", "+-2h"}, "--start"},
		{[]string{"--start", "+0s"}, "--start"},
		{[]string{"--end", "2030-13-01T00:00:00Z"}, "--end"},
		{[]string{"--start", "+4h", "--end", "+2h"}, "--end"},
		{[]string{"--start", "+" + strings.Repeat("9", 80) + "h"}, "--start"},
	} {
		_, errOut, code := create(append([]string{"--name", "bad"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.flag) {
			t.Errorf("%v: exit %d, stderr %q; want a failure naming %s", c.args, code, errOut, c.flag)
		}
	}
}

// FuzzParseWhen: parseWhen never panics, and what it accepts is either
// unset or a time it can show.
func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"", "+2h", "+90m", "+3d", "+1h30m", "2030-01-06T08:00:00Z", "2030-01-06T08:00:00+02:00", "+-1h", "+0d", "+99999999999d", "x", "+"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseWhen(s, now)
		if err != nil {
			return
		}
		if s == "" != got.IsZero() {
			t.Fatalf("%q: got %v", s, got)
		}
		if strings.HasPrefix(s, "+") && !got.After(now) {
			t.Fatalf("%q: relative bound %v not after now", s, got)
		}
	})
}

// TestScheduleFutureReservationExample: examples/future-reservation.yaml
// shows what it promises: before the window, short work on the reserved
// machines, the long job waiting with the reason, the 2030 reservation
// holding nothing.
func TestScheduleFutureReservationExample(t *testing.T) {
	out, errOut, code := run(t, "schedule", "--config", "../../examples/future-reservation.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Placements []struct{ Workload, Node string }   `json:"placements"`
		Pending    []struct{ Workload, Reason string } `json:"pending"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	on := map[string]string{}
	for _, p := range plan.Placements {
		on[p.Workload] = p.Node
	}
	reserved := map[string]bool{"eus-h1-n0000": true, "eus-h1-n0001": true} // train-window's, bound in fleet order
	if !reserved[on["eval-short"]] || on["busy"] != "eus-h1-n0002" || len(on) != 2 {
		t.Errorf("placements %v: want eval-short on train-window's machines, busy on eus-h1-n0002, nothing else", on)
	}
	if len(plan.Pending) != 1 || plan.Pending[0].Workload != "long-train" ||
		!strings.Contains(plan.Pending[0].Reason, "8 idle H100-80G held for a reservation from 2026-03-02T10:00:00Z") {
		t.Errorf("pending %v: want long-train alone, its reason naming the 8 GPUs held from 10:00", plan.Pending)
	}
}

// TestScheduleBackfillExample: examples/backfill.yaml (issue 17 item 6)
// shows a planned start for the 256-GPU gang, with planned_start and
// planned_block in the JSON; the short job backfilled onto the held
// block; the long job refused there with the reason; the future
// reservation holding nothing.
func TestScheduleBackfillExample(t *testing.T) {
	out, errOut, code := run(t, "schedule", "--config", "../../examples/backfill.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Placements []struct{ Workload, Node string } `json:"placements"`
		Pending    []struct {
			Workload, Reason string
			Planned          *struct {
				Start string `json:"planned_start"`
				Block string `json:"planned_block"`
			} `json:"planned"`
		} `json:"pending"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Placements) != 1 || plan.Placements[0].Workload != "eval-short" || !strings.HasPrefix(plan.Placements[0].Node, "eus-ib1-") {
		t.Errorf("placements %v: want eval-short alone, backfilled on eus-ib1", plan.Placements)
	}
	reasons := map[string]string{}
	for _, p := range plan.Pending {
		reasons[p.Workload] = p.Reason
		if p.Workload == "train-256" && (p.Planned == nil || p.Planned.Start != "2026-03-02T16:00:00Z" || p.Planned.Block != "eus-ib1") {
			t.Errorf("train-256 planned %+v: want planned_start 2026-03-02T16:00:00Z, planned_block eus-ib1", p.Planned)
		}
	}
	if !strings.Contains(reasons["train-256"], "planned to start at 2026-03-02T16:00:00Z in eastus block eus-ib1 when sweep-a and sweep-b end") {
		t.Errorf("train-256: %q", reasons["train-256"])
	}
	if !strings.Contains(reasons["finetune-long"], "held for planned starts from 2026-03-02T16:00:00Z") {
		t.Errorf("finetune-long: %q: want the held capacity named", reasons["finetune-long"])
	}
}

// TestScheduleElasticExample: examples/elastic.yaml (issue 18 point 3)
// shows an elastic workload giving its growth back, 6 -> 2, to a
// guarantee's claim, while the preemptible batch job that borrows too is
// not preempted.
func TestScheduleElasticExample(t *testing.T) {
	out, errOut, code := run(t, "schedule", "--config", "../../examples/elastic.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Placements  []struct{ Workload, Node string } `json:"placements"`
		Preemptions []struct{ Workload string }       `json:"preemptions"`
		Resizes     []struct {
			Workload, By, Reason string
			From, To             int
		} `json:"resizes"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Placements) != 2 || plan.Placements[0].Workload != "train-7b" {
		t.Errorf("placements %v: want train-7b's two replicas", plan.Placements)
	}
	if len(plan.Preemptions) != 0 {
		t.Errorf("preemptions %v: want none (the shrink is enough)", plan.Preemptions)
	}
	if len(plan.Resizes) != 1 || plan.Resizes[0].Workload != "chat-serve" || plan.Resizes[0].From != 6 || plan.Resizes[0].To != 2 || plan.Resizes[0].By != "train-7b" {
		t.Errorf("resizes %+v: want chat-serve 6 -> 2 by train-7b", plan.Resizes)
	}
	table, _, _ := run(t, "schedule", "--config", "../../examples/elastic.yaml")
	if !strings.Contains(table, "RESIZES (1)") || !strings.Contains(table, "chat-serve  6 -> 2") {
		t.Errorf("table output has no resize:\n%s", table)
	}
}

// TestScheduleMIGExample: examples/mig.yaml (docs/gpus.md) places MIG
// instances at NVIDIA's positions, asr's gpu_memory: 20GiB (no gpus, no
// mig) as the smallest MIG instance with that much (1g.20gb), whole-GPU
// work off the MIG machine, and leaves the 7g.80gb pending.
func TestScheduleMIGExample(t *testing.T) {
	out, errOut, code := run(t, "schedule", "--config", "../../examples/mig.yaml", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var plan struct {
		Placements []struct {
			Workload, Node string
			MIG            *struct {
				Profile string
				Start   int
			}
		} `json:"placements"`
		Pending []struct{ Workload string } `json:"pending"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, p := range plan.Placements {
		at := p.Node
		if p.MIG != nil {
			at += fmt.Sprintf("/%s@%d", p.MIG.Profile, p.MIG.Start)
		}
		got[p.Workload] = append(got[p.Workload], at)
	}
	want := map[string][]string{
		"asr":        {"eus-mig-n0000/1g.20gb@6"},
		"chat-small": {"eus-mig-n0000/1g.10gb@5", "eus-mig-n0000/1g.10gb@4"},
		"embed":      {"eus-mig-n0000/3g.40gb@0"},
		"train":      {"eus-h100-n0000"},
		"big-model":  {"eus-h100-n0000"},
	}
	if !maps.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("placements %v, want %v", got, want)
	}
	if len(plan.Pending) != 1 || plan.Pending[0].Workload != "full-gpu" {
		t.Errorf("pending %v, want full-gpu", plan.Pending)
	}
}
