package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// series gathers the registry into "name{l1="v1",...}" → value, labels
// sorted by name (histograms: their _count and _sum).
func series(t *testing.T, m *metrics) map[string]float64 {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, x := range f.GetMetric() {
			var ls []string
			for _, l := range x.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			key := f.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				out[f.GetName()+"_count{"+strings.Join(ls, ",")+"}"] = float64(x.GetHistogram().GetSampleCount())
				out[f.GetName()+"_sum{"+strings.Join(ls, ",")+"}"] = x.GetHistogram().GetSampleSum()
			case dto.MetricType_COUNTER:
				out[key] = x.GetCounter().GetValue()
			default:
				out[key] = x.GetGauge().GetValue()
			}
		}
	}
	return out
}

// named keeps the series of one metric name.
func named(all map[string]float64, name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range all {
		if strings.HasPrefix(k, name+"{") {
			out[k] = v
		}
	}
	return out
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// describedNames are the names of the metrics the server's registry can
// export, read from its collectors' descriptions (a vector with no series
// yet is described too).
func describedNames(t *testing.T, m *metrics) []string {
	t.Helper()
	var out []string
	for _, c := range m.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			mm := fqName.FindStringSubmatch(d.String())
			if mm == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			out = append(out, mm[1])
		}
	}
	return out
}

// exportedNames are the series names the server can export: the
// described names, with a histogram's _bucket, _sum and _count.
func exportedNames(t *testing.T, m *metrics) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, name := range describedNames(t, m) {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			out[name+suffix] = true
		}
	}
	return out
}

// TestMetricNames: the arbiter_ metrics follow the naming rules of
// docs/server.md: a counter ends in _total and nothing else does, a
// histogram of seconds ends in _duration_seconds or _wait_seconds, the
// unit goes last.
func TestMetricNames(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	h.s.Cycle(h.ctx)
	types := map[string]dto.MetricType{}
	fams, _ := h.s.metrics.reg.Gather()
	for _, f := range fams {
		types[f.GetName()] = f.GetType()
	}
	n := 0
	for _, name := range describedNames(t, h.s.metrics) {
		if !strings.HasPrefix(name, "arbiter_") {
			continue
		}
		n++
		typ, seen := types[name]
		if strings.HasSuffix(name, "_total") != (seen && typ == dto.MetricType_COUNTER) && seen {
			t.Errorf("%s is a %s: counters, and only they, end in _total", name, typ)
		}
		if seen && typ == dto.MetricType_HISTOGRAM && strings.HasSuffix(name, "_seconds") &&
			!strings.HasSuffix(name, "_duration_seconds") && !strings.HasSuffix(name, "_wait_seconds") {
			t.Errorf("histogram %s: want _duration_seconds (or _wait_seconds)", name)
		}
		for _, unit := range []string{"_seconds_", "_gpus_"} {
			if strings.Contains(name, unit) {
				t.Errorf("%s: the unit goes last", name)
			}
		}
	}
	if n < 25 {
		t.Errorf("%d arbiter_ metrics described, want every one (25 or more)", n)
	}
}

// TestBuildInfoAndRouteLabels: arbiter_build_info carries the version and
// commit the CLI passes and the Go version; the request metrics have the
// method and the route pattern apart.
func TestBuildInfoAndRouteLabels(t *testing.T) {
	h := newHarness(t, testConfig, Options{Build: BuildInfo{Version: "v9.8.7", Commit: "0123456789ab"}})
	if _, err := h.admin.Nodes(h.ctx, ""); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", h.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	for _, want := range []string{
		fmt.Sprintf(`arbiter_build_info{commit="0123456789ab",goversion=%q,version="v9.8.7"} 1`, runtime.Version()),
		`arbiter_http_requests_total{code="200",method="GET",route="/v1/nodes"} 1`,
		`arbiter_http_request_duration_seconds_count{method="GET",route="/v1/nodes"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(body, "arbiter_"))
		}
	}
	// Without them: dev and unknown.
	d := newMetrics(BuildInfo{})
	if got := named(series(t, d), "arbiter_build_info"); len(got) != 1 || got[fmt.Sprintf(`arbiter_build_info{commit="unknown",goversion=%q,version="dev"}`, runtime.Version())] != 1 {
		t.Errorf("default build info: %v", got)
	}
}

// TestTenantGauges: after each cycle the per-tenant gauges are GET
// /v1/usage's entries, as the plan left them (no later cycle needed): one
// series per quota entry, no limit series for an unlimited entry.
func TestTenantGauges(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	fab, con := h.tenant("fabrikam"), h.tenant("contoso")
	for i := 0; i < 3; i++ { // 24 of fabrikam's A100 eastus: 8 guaranteed, 16 borrowed
		s := spec(fmt.Sprintf("f%d", i), 8, 1)
		s.Preemptible = true
		if _, err := fab.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := con.Submit(h.ctx, "contoso", spec("c0", 8, 1)); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		us, err := h.admin.Usage(h.ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{}
		for _, u := range us {
			l := fmt.Sprintf(`{flavor=%q,region=%q,tenant=%q}`, u.Flavor, u.Region, u.Tenant)
			want["arbiter_tenant_guaranteed_gpus"+l] = u.Guaranteed
			want["arbiter_tenant_used_gpus"+l] = u.CurrentValue
			want["arbiter_tenant_borrowed_gpus"+l] = u.Borrowed
			if u.Limit != nil {
				want["arbiter_tenant_limit_gpus"+l] = *u.Limit
			}
		}
		all := series(t, h.s.metrics)
		got := map[string]float64{}
		for _, name := range []string{"arbiter_tenant_guaranteed_gpus", "arbiter_tenant_used_gpus", "arbiter_tenant_borrowed_gpus", "arbiter_tenant_limit_gpus"} {
			for k, v := range named(all, name) {
				got[k] = v
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: tenant gauges differ from GET /v1/usage (-usage +metrics):\n%s", step, d)
		}
	}
	h.s.Cycle(h.ctx)
	check("placed")
	all := series(t, h.s.metrics)
	for k, want := range map[string]float64{
		`arbiter_tenant_used_gpus{flavor="A100-80G",region="eastus",tenant="fabrikam"}`:      24,
		`arbiter_tenant_borrowed_gpus{flavor="A100-80G",region="eastus",tenant="fabrikam"}`:  16,
		`arbiter_tenant_guaranteed_gpus{flavor="A100-80G",region="eastus",tenant="contoso"}`: 16,
		`arbiter_tenant_used_gpus{flavor="A100-80G",region="eastus",tenant="contoso"}`:       8,
	} {
		if got, ok := all[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if _, ok := all[`arbiter_tenant_limit_gpus{flavor="A100-80G",region="westus2",tenant="fabrikam"}`]; ok {
		t.Error("a limit series for an entry fabrikam does not have")
	}
	// contoso reclaims its guarantee from fabrikam's borrowed work: the
	// gauges follow the preemption in the same cycle.
	if _, err := con.Submit(h.ctx, "contoso", spec("c1", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	if got := testutil.ToFloat64(h.s.metrics.preemptions.WithLabelValues("fabrikam")); got != 1 {
		t.Fatalf("%v preemptions of fabrikam, want 1 (the reclaim)", got)
	}
	check("reclaimed")
}

// TestNodeStateGauge: each node counts in exactly one state; drained wins
// over lost (an operator who drained a node and stopped its agent is not
// told it is lost).
func TestNodeStateGauge(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	drained := true
	if _, err := h.admin.UpdateNode(h.ctx, "eus-a-n0000", api.NodeUpdate{Drained: &drained}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.UpdateNode(h.ctx, "eus-a-n0002", api.NodeUpdate{Cordoned: &drained}); err != nil {
		t.Fatal(err)
	}
	err := h.st.Update(h.ctx, func(tx store.WriteTx) error {
		for id, f := range map[string]func(n *store.Node){
			"eus-a-n0000": func(n *store.Node) { n.Down, n.Lost = true, true }, // drained, then lost
			"eus-a-n0001": func(n *store.Node) { n.Down, n.Lost = true, true },
			"eus-h-n0000": func(n *store.Node) { n.Down = true },
		} {
			n, err := store.Get[store.Node](tx, id)
			if err != nil {
				return err
			}
			f(n)
			if err := store.Put(tx, n, n.Meta.Revision); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	all := series(t, h.s.metrics)
	want := map[string]float64{`arbiter_nodes{state="ready"}`: 4, `arbiter_nodes{state="cordoned"}`: 1, `arbiter_nodes{state="drained"}`: 1, `arbiter_nodes{state="lost"}`: 1, `arbiter_nodes{state="down"}`: 1}
	if d := cmp.Diff(want, named(all, "arbiter_nodes")); d != "" {
		t.Errorf("arbiter_nodes (-want +got):\n%s", d)
	}
	// Capacity leaves the three out (the cordoned node is up: its work
	// stays): 2 of 4 A100 nodes in eastus, 1 of 2 H100.
	for k, v := range map[string]float64{`arbiter_capacity_gpus{flavor="A100-80G",region="eastus"}`: 16, `arbiter_capacity_gpus{flavor="H100-80G",region="eastus"}`: 8} {
		if all[k] != v {
			t.Errorf("%s = %v, want %v", k, all[k], v)
		}
	}
}

// faultyStore runs the scheduler's transactions the hard way: before the
// next Update it commits a node change (the plan computed before goes
// stale), and the Update after runs its function twice, the first run
// rolled back, as the etcd store does when another replica committed
// meanwhile.
type faultyStore struct {
	*store.BoltStore
	conflicts atomic.Int32 // Updates still to precede by a node change
	reruns    atomic.Int32 // Updates still to run twice
	ran       atomic.Int32 // function runs of the Updates made twice
}

var errRerun = errors.New("test: run again")

func (f *faultyStore) Update(ctx context.Context, fn func(store.WriteTx) error) error {
	if f.conflicts.Add(-1) >= 0 {
		err := f.BoltStore.Update(ctx, func(tx store.WriteTx) error {
			n, err := store.Get[store.Node](tx, "wus-a-n0001")
			if err != nil {
				return err
			}
			n.Labels = map[string]string{"touched": fmt.Sprint(tx.Revision())}
			return store.Put(tx, n, n.Meta.Revision)
		})
		if err != nil {
			return err
		}
	} else if f.reruns.Add(-1) >= 0 {
		err := f.BoltStore.Update(ctx, func(tx store.WriteTx) error {
			f.ran.Add(1)
			if err := fn(tx); err != nil {
				return err
			}
			return errRerun
		})
		if !errors.Is(err, errRerun) {
			return err
		}
		f.ran.Add(1)
	}
	return f.BoltStore.Update(ctx, fn)
}

// TestPlacementWait: arbiter_placement_wait_seconds observes each workload
// placed for the first time once, with its wait from submission on the
// server's clock, by priority class: not for a plan refused as stale, not
// twice for a transaction the store ran twice, not again in later cycles.
// The last-cycle timestamp appears with the first cycle.
func TestPlacementWait(t *testing.T) {
	tc := newTestClock()
	var fs *faultyStore
	h := newHarnessOver(t, testConfig, Options{Clock: tc.Now, RateLimit: -1}, func(st *store.BoltStore) store.Store {
		fs = &faultyStore{BoltStore: st}
		return fs
	})
	if got := named(series(t, h.s.metrics), "arbiter_last_cycle_timestamp_seconds"); len(got) != 0 {
		t.Errorf("a last-cycle timestamp before any cycle: %v", got)
	}
	con := h.tenant("contoso")
	hi := spec("urgent", 8, 1)
	hi.Priority = "high"
	for _, s := range []api.WorkloadSpec{spec("a", 8, 1), hi} {
		if _, err := con.Submit(h.ctx, "contoso", s); err != nil {
			t.Fatal(err)
		}
	}
	tc.Advance(90 * time.Second)
	fs.conflicts.Store(1)
	fs.reruns.Store(1)
	h.s.Cycle(h.ctx)
	if fs.ran.Load() != 2 {
		t.Fatalf("the plan's transaction ran %d times, want 2 (the fault did not hit it)", fs.ran.Load())
	}
	if got := testutil.ToFloat64(h.s.metrics.conflicts); got != 1 {
		t.Fatalf("%v plan conflicts, want 1", got)
	}
	want := map[string]float64{
		`arbiter_placement_wait_seconds_count{priority="normal"}`: 1, `arbiter_placement_wait_seconds_sum{priority="normal"}`: 90,
		`arbiter_placement_wait_seconds_count{priority="high"}`: 1, `arbiter_placement_wait_seconds_sum{priority="high"}`: 90,
	}
	waits := func() map[string]float64 {
		all := series(t, h.s.metrics)
		out := named(all, "arbiter_placement_wait_seconds_count")
		for k, v := range named(all, "arbiter_placement_wait_seconds_sum") {
			out[k] = v
		}
		return out
	}
	if d := cmp.Diff(want, waits()); d != "" {
		t.Errorf("placement waits (-want +got):\n%s", d)
	}
	if got := named(series(t, h.s.metrics), "arbiter_last_cycle_timestamp_seconds"); got["arbiter_last_cycle_timestamp_seconds{}"] != float64(tc.Now().UnixNano())/1e9 {
		t.Errorf("last cycle timestamp %v, want %v", got, float64(tc.Now().UnixNano())/1e9)
	}
	tc.Advance(time.Minute)
	h.s.Cycle(h.ctx)
	if d := cmp.Diff(want, waits()); d != "" {
		t.Errorf("a later cycle observed again (-want +got):\n%s", d)
	}
}

// TestReservationGauges: a reservation's capacity and what its owner uses
// of it are two gauges, and the alert metric reservation_utilization is
// their ratio.
func TestReservationGauges(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	if _, err := c.CreateReservation(h.ctx, "contoso", api.ReservationRequest{Name: "r", SKU: "Standard_ND96isr_H100_v5", Capacity: 2, Region: "eastus"}); err != nil {
		t.Fatal(err)
	}
	job := spec("on-r", 8, 1)
	job.Flavors, job.Reservation = []string{"H100-80G"}, "r"
	if _, err := c.Submit(h.ctx, "contoso", job); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	all := series(t, h.s.metrics)
	for k, v := range map[string]float64{
		`arbiter_reservation_capacity_gpus{reservation="r",tenant="contoso"}`:  16,
		`arbiter_reservation_allocated_gpus{reservation="r",tenant="contoso"}`: 8,
	} {
		if got, ok := all[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	found := false
	for _, x := range h.s.alerts.sample() {
		if x.Metric == "reservation_utilization" {
			found = true
			if x.Value != 0.5 || x.Labels["tenant"] != "contoso" || x.Labels["reservation"] != "r" {
				t.Errorf("reservation_utilization sample %+v, want contoso/r at 0.5", x)
			}
		}
	}
	if !found {
		t.Error("no reservation_utilization sample")
	}
}

// TestStepDownForgetsStateGauges: a replica whose term ended exports no
// gauge of the state (the new leader does), only its own history.
func TestStepDownForgetsStateGauges(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	if _, err := h.tenant("contoso").Submit(h.ctx, "contoso", spec("a", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	h.s.metrics.stepDown()
	left := map[string]bool{}
	for k := range series(t, h.s.metrics) {
		left[k[:strings.IndexByte(k, '{')]] = true
	}
	for _, name := range []string{"arbiter_allocated_gpus", "arbiter_capacity_gpus", "arbiter_tenant_used_gpus", "arbiter_tenant_guaranteed_gpus", "arbiter_nodes"} {
		if left[name] {
			t.Errorf("%s still exported after the term ended", name)
		}
	}
	for _, name := range []string{"arbiter_placement_wait_seconds_count", "arbiter_last_cycle_timestamp_seconds", "arbiter_build_info"} {
		if !left[name] {
			t.Errorf("%s gone after the term ended", name)
		}
	}
}

// TestTouchedBy: the workloads a plan changes are found by index as a
// pass over all of them with a map finds them, whether the workloads are
// in name order (binary search) or not (the pass), and a plan's workload
// not in the list is left out.
func TestTouchedBy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(60)
		var ws []*workload.Workload
		for i := 0; i < n; i++ {
			ws = append(ws, &workload.Workload{Spec: workload.Spec{Name: workload.ID(fmt.Sprintf("t%d/w%03d", i%3, i))}})
		}
		slices.SortFunc(ws, func(a, b *workload.Workload) int { return strings.Compare(string(a.Name), string(b.Name)) })
		if round%2 == 1 {
			rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		}
		name := func() workload.ID {
			if rng.IntN(10) == 0 {
				return "t9/absent"
			}
			return ws[rng.IntN(len(ws))].Name
		}
		var plan sched.Plan
		for i := rng.IntN(8); i > 0; i-- {
			plan.Placements = append(plan.Placements, sched.Placement{Workload: name(), Node: fleet.NodeID(fmt.Sprint(rng.IntN(4)))})
		}
		for i := rng.IntN(4); i > 0; i-- {
			plan.Preemptions = append(plan.Preemptions, sched.Preemption{Workload: name()})
		}
		for i := rng.IntN(4); i > 0; i-- {
			plan.Resizes = append(plan.Resizes, sched.Resize{Workload: name(), To: 1 + rng.IntN(5)})
		}
		// The naive reference: maps, one pass.
		var want []touch
		for i, w := range ws {
			t := touch{at: i}
			for _, p := range plan.Placements {
				if p.Workload == w.Name && !t.placed {
					t.placed, t.placement = true, p
				}
			}
			for _, p := range plan.Preemptions {
				t.evicted = t.evicted || p.Workload == w.Name
			}
			for _, r := range plan.Resizes {
				if r.Workload == w.Name {
					t.resized, t.size = true, r.To
				}
			}
			if t.placed || t.evicted || t.resized {
				want = append(want, t)
			}
		}
		if got := touchedBy(ws, plan); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: touchedBy = %+v, want %+v", round, got, want)
		}
	}
}
