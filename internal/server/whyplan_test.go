package server

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// planConfig: one eastus block of 4 A100 machines (32 GPUs); tenants
// alpha and beta may each use all of it (limits past it, so that only
// capacity binds), with nothing guaranteed (so no
// reclaim) and one priority (so no preemption by priority).
const planConfig = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
tenants:
  - name: alpha
    quota:
      - {flavor: A100-80G, region: eastus, limit: 64}
  - name: beta
    quota:
      - {flavor: A100-80G, region: eastus, limit: 64}
`

// planWorld runs alpha's train-a (3 × 8 GPUs, expected 2h) and beta's
// prep (1 × 8 GPUs, expected 1h), filling the block, then submits beta's
// gang big (bigGang(4) unless given), and runs a cycle. It returns
// train-a's start.
func planWorld(t *testing.T, h *harness, alpha, beta *client.Client, big ...api.WorkloadSpec) time.Time {
	t.Helper()
	a := spec("train-a", 8, 3)
	a.ExpectedRuntime = api.Duration(2 * time.Hour)
	p := spec("prep", 8, 1)
	p.ExpectedRuntime = api.Duration(time.Hour)
	if _, err := alpha.Submit(h.ctx, "alpha", a); err != nil {
		t.Fatal(err)
	}
	if _, err := beta.Submit(h.ctx, "beta", p); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	ta, err := alpha.Workload(h.ctx, "alpha", "train-a")
	if err != nil || ta.Running == nil {
		t.Fatalf("train-a not running: %+v %v", ta, err)
	}
	g := bigGang(4)
	if len(big) > 0 {
		g = big[0]
	}
	if _, err := beta.Submit(h.ctx, "beta", g); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	return ta.Running.StartedAt
}

// bigGang is beta's gang big: replicas × 8 GPUs in one block.
func bigGang(replicas int) api.WorkloadSpec {
	big := spec("big", 8, replicas)
	big.Topology = "same-block"
	return big
}

// TestWhyPlannedStart: the live server plans (default planning, nothing
// configured): a gang waiting for running work with expected runtimes is
// told when and where it is planned to start, in the text and in the
// JSON (planned_start, planned_block, ...); the admin sees every name the
// plan waits for.
func TestWhyPlannedStart(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, planConfig, Options{Clock: tc.Now, RateLimit: -1})
	alpha, beta := h.tenant("alpha"), h.tenant("beta")
	started := planWorld(t, h, alpha, beta)

	y, err := h.admin.Why(h.ctx, "beta", "big")
	if err != nil {
		t.Fatal(err)
	}
	want := started.Add(2 * time.Hour).UTC().Truncate(time.Second)
	if y.State != "Pending" || !y.PlannedStart.Equal(want) {
		t.Fatalf("why big: state %s planned_start %v, want Pending planned at %v (train-a's expected end); reason %q", y.State, y.PlannedStart, want, y.Reason)
	}
	if y.PlannedBlock != "eus-a" || y.PlannedRegion != "eastus" || y.PlannedFlavor != "A100-80G" || y.PlannedNodes != 4 {
		t.Errorf("planned block %q region %q flavor %q nodes %d, want eus-a eastus A100-80G 4", y.PlannedBlock, y.PlannedRegion, y.PlannedFlavor, y.PlannedNodes)
	}
	if y.PlannedAfterCount != 2 || strings.Join(y.PlannedAfter, ",") != "alpha/train-a,beta/prep" {
		t.Errorf("admin planned_after %v of %d, want [alpha/train-a beta/prep] of 2", y.PlannedAfter, y.PlannedAfterCount)
	}
	t.Logf("admin's why: %s", y.Reason)
	at := want.Format(time.RFC3339)
	for _, s := range []string{"planned to start at " + at + " in eastus block eus-a", "when alpha/train-a and beta/prep end"} {
		if !strings.Contains(y.Reason, s) {
			t.Errorf("admin reason %q does not say %q", y.Reason, s)
		}
	}

	// Running work is not planned and says nothing of plans.
	r, err := alpha.Why(h.ctx, "alpha", "train-a")
	if err != nil || !r.PlannedStart.IsZero() || r.Overrun != 0 {
		t.Errorf("why train-a: %+v %v", r, err)
	}
}

// TestWhyPlannedStartHidesOtherTenants (hostile): the plan of beta's gang
// waits for alpha's train-a; beta's why must not name alpha's workload
// (in the reason, the details, the blockers or planned_after), must
// still count it and give the planned start, and may name beta's own.
func TestWhyPlannedStartHidesOtherTenants(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, planConfig, Options{Clock: tc.Now, RateLimit: -1})
	alpha, beta := h.tenant("alpha"), h.tenant("beta")
	started := planWorld(t, h, alpha, beta)

	y, err := beta.Why(h.ctx, "beta", "big")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("beta's why: %s", y.Reason)
	all := y.Reason + "\n" + strings.Join(y.Details, "\n") + "\n" + string(y.Blockers) + "\n" + strings.Join(y.PlannedAfter, "\n")
	for _, secret := range []string{"train-a", "alpha"} {
		if strings.Contains(all, secret) {
			t.Errorf("beta's why names %q of another tenant:\n%s", secret, all)
		}
	}
	if want := "when beta/prep and 1 other end"; !strings.Contains(y.Reason, want) {
		t.Errorf("beta's reason %q does not say %q", y.Reason, want)
	}
	if !strings.HasPrefix(y.Reason, "no block in eastus") {
		t.Errorf("beta's reason %q lost the blocker's text", y.Reason)
	}
	if want := started.Add(2 * time.Hour).Truncate(time.Second); !y.PlannedStart.Equal(want) || y.PlannedBlock != "eus-a" {
		t.Errorf("beta's planned start %v block %q, want %v eus-a", y.PlannedStart, y.PlannedBlock, want)
	}
	if y.PlannedAfterCount != 2 || len(y.PlannedAfter) != 1 || y.PlannedAfter[0] != "beta/prep" {
		t.Errorf("beta's planned_after %v of %d, want [beta/prep] of 2", y.PlannedAfter, y.PlannedAfterCount)
	}

	// Once beta's own prep has ended, the plan waits for alpha's work
	// only: beta is told a count and nothing else.
	if _, err := beta.Cancel(h.ctx, "beta", "prep"); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	y, err = beta.Why(h.ctx, "beta", "big")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("beta's why, prep ended: %s", y.Reason)
	if strings.Contains(y.Reason, "train-a") || strings.Contains(y.Reason, "alpha") || len(y.PlannedAfter) != 0 {
		t.Errorf("beta's why names alpha's work: %q %v", y.Reason, y.PlannedAfter)
	}
	if want := "when 1 running workload"; !strings.Contains(y.Reason, want) || y.PlannedAfterCount != 1 || y.PlannedStart.IsZero() {
		t.Errorf("beta's why %q (planned_after_count %d, planned_start %v), want %q and a planned start", y.Reason, y.PlannedAfterCount, y.PlannedStart, want)
	}
}

// TestPendingReasonTenantView: the tenant's reason is the blocker's text
// and the plan with only the tenant's names, whatever the core's text
// holds; a text the core did not render from blockers is not passed on.
func TestPendingReasonTenantView(t *testing.T) {
	at := time.Date(2030, 1, 2, 14, 20, 0, 0, time.UTC)
	plan := &sched.PlannedStart{Start: at, Block: "eus-ib3", Flavor: "H100-80G", Region: "eastus", Nodes: 4,
		Ending: []workload.ID{"a/train-a", "b/mine", "a/other"}, EndingCount: 5}
	blocker := sched.Blocker{Code: sched.ReasonNoBlock, Flavor: "H100-80G", Region: "eastus", Requested: 32000, Replicas: 4, PerReplica: 8000}
	withBlockers := sched.Pending{Workload: "b/big", Code: sched.ReasonNoBlock, Blockers: []sched.Blocker{blocker}, Planned: plan}
	withBlockers.Render()
	custom := sched.Pending{Workload: "b/big", Reason: "a/train-a holds it", Planned: plan}
	show := nameShown(principal{role: "tenant", tenant: "b"})
	tests := []struct {
		name  string
		p     sched.Pending
		admin bool
		want  string
	}{
		{"admin sees the core's text", withBlockers, true, withBlockers.Reason},
		{"tenant", withBlockers, false, blocker.String() + "; planned to start at 2030-01-02T14:20:00Z in eastus block eus-ib3 when b/mine and 4 others end"},
		{"custom text withheld", custom, false, "planned to start at 2030-01-02T14:20:00Z in eastus block eus-ib3 when b/mine and 4 others end"},
		{"no plan", sched.Pending{Reason: "tenant b at limit"}, false, "tenant b at limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pendingReason(tt.p, tt.admin, show)
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if !tt.admin && strings.Contains(got, "a/") {
				t.Errorf("tenant b's reason %q names tenant a's work", got)
			}
		})
	}
	// A token that is neither admin nor a tenant's sees no names.
	if nameShown(principal{role: "node", node: "n1"})("b/mine") {
		t.Error("a node token may see workload names")
	}
	// A tenant named as a prefix of another sees only its own.
	if nameShown(principal{role: "tenant", tenant: "b"})("bb/x") {
		t.Error("tenant b sees tenant bb's names")
	}
}

// TestWhyOverrun: why on a running workload past its expected runtime
// says by how much, in the text and the JSON.
func TestWhyOverrun(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, planConfig, Options{Clock: tc.Now, RateLimit: -1})
	alpha := h.tenant("alpha")
	s := spec("long", 8, 1)
	s.ExpectedRuntime = api.Duration(time.Hour)
	if _, err := alpha.Submit(h.ctx, "alpha", s); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	y, err := alpha.Why(h.ctx, "alpha", "long")
	if err != nil || y.State != "Running" || y.Overrun != 0 || strings.Contains(y.Reason, "past its expected") {
		t.Fatalf("within its runtime: %+v %v", y, err)
	}
	w, err := alpha.Workload(h.ctx, "alpha", "long")
	if err != nil {
		t.Fatal(err)
	}
	tc.Advance(w.Running.StartedAt.Add(3 * time.Hour).Sub(tc.Now()))
	y, err = alpha.Why(h.ctx, "alpha", "long")
	if err != nil {
		t.Fatal(err)
	}
	if want := "; 2h past its expected runtime of 1h"; !strings.HasSuffix(y.Reason, want) {
		t.Errorf("reason %q, want it to end %q", y.Reason, want)
	}
	if y.Overrun != api.Duration(2*time.Hour) || y.ExpectedRuntime != api.Duration(time.Hour) {
		t.Errorf("overrun %v expected_runtime %v, want 2h 1h", time.Duration(y.Overrun), time.Duration(y.ExpectedRuntime))
	}
}

// TestServerPlanningOptions: the server plans by default, takes the
// configured planning as it is, and a depth of 0 turns it off.
func TestServerPlanningOptions(t *testing.T) {
	if got := schedulingOptions(sched.Options{}).Planning; got.Depth != sched.DefaultPlanDepth || got.MaxWait == nil {
		t.Errorf("nothing set: planning %+v, want sched.DefaultPlanning()", got)
	}
	custom := sched.DefaultPlanning()
	custom.Depth, custom.PreemptOverrun = 3, true
	if got := schedulingOptions(sched.Options{Planning: custom}).Planning; got.Depth != 3 || !got.PreemptOverrun {
		t.Errorf("configured: planning %+v, want depth 3 and preempt overrun", got)
	}
	if got := schedulingOptions(sched.Options{Planning: NoPlanning()}).Planning; got.Depth != 0 {
		t.Errorf("NoPlanning: depth %d, want 0", got.Depth)
	}
	tc := newTestClock()
	h := newHarness(t, planConfig, Options{Clock: tc.Now, RateLimit: -1, Scheduling: sched.Options{Planning: NoPlanning()}})
	alpha, beta := h.tenant("alpha"), h.tenant("beta")
	planWorld(t, h, alpha, beta)
	if y, err := beta.Why(h.ctx, "beta", "big"); err != nil || !y.PlannedStart.IsZero() || strings.Contains(y.Reason, "planned to start") {
		t.Errorf("planning off: why %+v %v, want no plan", y, err)
	}
}

// TestQuietCycleNotWithHolds: a cycle that held capacity for a planned
// start is not settled: an alike submission after it runs the core (a
// quiet cycle would repeat the planned workload's decision, made past its
// own hold), and why then gives the new gang its own answer.
func TestQuietCycleNotWithHolds(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, planConfig, Options{Clock: tc.Now, RateLimit: -1})
	alpha, beta := h.tenant("alpha"), h.tenant("beta")
	planWorld(t, h, alpha, beta)
	quiet := testutil.ToFloat64(h.s.metrics.quietCycles)
	big2 := spec("big2", 8, 4)
	big2.Topology = "same-block"
	if _, err := beta.Submit(h.ctx, "beta", big2); err != nil {
		t.Fatal(err)
	}
	h.s.cycle(h.ctx, true)
	if got := testutil.ToFloat64(h.s.metrics.quietCycles); got != quiet {
		t.Fatalf("a cycle after one that held capacity for a plan was quiet")
	}
	y, err := beta.Why(h.ctx, "beta", "big2")
	if err != nil || y.State != "Pending" || strings.HasPrefix(y.Reason, "not yet considered") {
		t.Fatalf("why big2: %+v %v, want the core's answer", y, err)
	}
	t.Logf("why big2: %s", y.Reason)
	first, err := beta.Why(h.ctx, "beta", "big")
	if err != nil || first.PlannedStart.IsZero() {
		t.Fatalf("why big: %+v %v, want its plan kept", first, err)
	}
	if !y.PlannedStart.IsZero() && !y.PlannedStart.After(first.PlannedStart) {
		t.Errorf("big2 planned at %v, not after big's %v: the second gang cannot start in the block held for the first", y.PlannedStart, first.PlannedStart)
	}
}

// TestOverrunEvictionHidesPlannedWorkload (hostile): with overrun:
// preempt, beta's gang's planned start evicts alpha's workload that ran
// past its expected runtime; what alpha is told of the eviction (why's
// last preemption, its events) must not name beta's workload.
func TestOverrunEvictionHidesPlannedWorkload(t *testing.T) {
	tc := newTestClock()
	planning := sched.DefaultPlanning()
	planning.PreemptOverrun = true
	h := newHarness(t, planConfig, Options{Clock: tc.Now, RateLimit: -1, Scheduling: sched.Options{Planning: planning}})
	alpha, beta := h.tenant("alpha"), h.tenant("beta")
	over := spec("over", 8, 4)
	over.ExpectedRuntime = api.Duration(time.Hour)
	if _, err := alpha.Submit(h.ctx, "alpha", over); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	tc.Advance(2 * time.Hour)
	big := spec("secret-gang", 8, 4)
	big.Topology = "same-block"
	if _, err := beta.Submit(h.ctx, "beta", big); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	y, err := alpha.Why(h.ctx, "alpha", "over")
	if err != nil {
		t.Fatal(err)
	}
	if y.State != "Pending" {
		t.Fatalf("over not evicted by the planned start: %+v", y)
	}
	evs, err := alpha.Events(h.ctx, 0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	told := y.Reason + "\n" + strings.Join(y.Details, "\n")
	for _, e := range evs.Items {
		told += "\n" + e.Message
	}
	t.Logf("alpha is told:\n%s", told)
	if !strings.Contains(told, "past its expected runtime") {
		t.Errorf("alpha is not told its workload was evicted for overrunning")
	}
	if strings.Contains(told, "secret-gang") {
		t.Errorf("alpha is told the name of beta's workload")
	}
}
