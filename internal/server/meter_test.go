package server

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestMeteringEndPathsAcrossRestart: runs placed by plans open usage
// records; a replica's exit (agent report), a cancel and a preemption
// close them at the time of the change; the server is closed mid-run and
// a new one opened on the same bbolt file goes on with the open records
// (none lost or doubled); a run ended behind the server's back is closed
// by the next cycle; the records match the event log's runs, and the
// counters of /metrics add them up.
func TestMeteringEndPathsAcrossRestart(t *testing.T) {
	clk := newTestClock()
	f := newAgentFleet(t, Options{Clock: clk.Now})
	c := f.tenant("contoso")
	// Only the agents' nodes take work.
	nodes, err := f.admin.Nodes(f.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, n := range nodes {
		if n.ID != "n1" && n.ID != "n2" {
			if _, err := f.admin.UpdateNode(f.ctx, n.ID, api.NodeUpdate{Cordoned: &yes}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := &api.Command{Argv: []string{"/bin/true"}}
	for _, w := range []api.WorkloadSpec{
		{Name: "exits", GPUs: 4000, Command: cmd},
		{Name: "cancelled", GPUs: 2000, Command: cmd},
	} {
		w.Flavors, w.Regions = []string{"A100-80G"}, []string{"eastus"}
		if _, err := c.Submit(f.ctx, "contoso", w); err != nil {
			t.Fatal(err)
		}
	}
	f.s.Cycle(f.ctx)
	t0 := clk.Now()
	open := f.usage()
	if len(open) != 2 {
		t.Fatalf("%d usage records after the first plan, want 2: %+v", len(open), open)
	}
	for _, r := range open {
		if !r.Open() || !r.Start.Equal(t0) || r.UnitPrice <= 0 || r.SKU != "Standard_ND96amsr_A100_v4" || strings.Join(r.Path, "/") != "customers/"+r.Tenant {
			t.Errorf("open record %+v: want open from %s at a price, on the agent's SKU, path customers/%s", r, t0, r.Tenant)
		}
	}

	// Restart mid-run.
	clk.Advance(30 * time.Minute)
	f.s = reopenWith(t, f.harness, Options{Clock: clk.Now, RateLimit: -1})
	hs := httptest.NewServer(f.s.Handler())
	t.Cleanup(hs.Close)
	f.url, f.admin = hs.URL, client.New(hs.URL, testAdmin)
	c = f.tenant("contoso")
	for id := range f.nodes {
		tok, err := f.admin.CreateNodeToken(f.ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		f.nodes[id] = client.New(f.url, tok.Secret)
	}
	f.s.Cycle(f.ctx)
	if got := len(f.usage()); got != 2 {
		t.Fatalf("%d records after the restart and a cycle, want the same 2", got)
	}

	// The agent reports "exits" exited at t0+1h.
	clk.Advance(30 * time.Minute)
	x := f.stored("exits")
	ref := api.ReplicaRef{Workload: "contoso/exits", Replica: 0, StartedAt: x.Running.StartedAt}
	if _, err := f.beat(string(x.Running.Replicas[0].Node), api.Heartbeat{Reports: []api.ReplicaReport{{ReplicaRef: ref, Kind: api.ReportStarted}, {ReplicaRef: ref, Kind: api.ReportExited}}}); err != nil {
		t.Fatal(err)
	}
	// "cancelled" is cancelled at t0+1h30.
	clk.Advance(30 * time.Minute)
	if _, err := c.Cancel(f.ctx, "contoso", "cancelled"); err != nil {
		t.Fatal(err)
	}
	// At t0+2h more work starts.
	clk.Advance(30 * time.Minute)
	if _, err := c.Submit(f.ctx, "contoso", api.WorkloadSpec{Name: "urgent", GPUs: 8000, Replicas: 2, Priority: "high", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}, Command: cmd}); err != nil {
		t.Fatal(err)
	}
	f.s.Cycle(f.ctx)
	if st := f.stored("urgent").State; st != store.StateRunning {
		t.Fatalf("urgent is %s, want it running", st)
	}
	ends := map[string]time.Duration{}
	for _, r := range f.usage() {
		if !r.Open() {
			ends[r.Workload] = r.End.Sub(t0)
		}
	}
	want := map[string]time.Duration{"contoso/exits": time.Hour, "contoso/cancelled": 90 * time.Minute}
	for k, d := range want {
		if ends[k] != d {
			t.Errorf("%s: record closed at t0+%s, want t0+%s (all closed: %v)", k, ends[k], d, ends)
		}
	}

	// A run ended behind the server's back (no transaction closed its
	// record): the next cycle closes it at the cycle's time.
	clk.Advance(10 * time.Minute)
	if err := f.st.Update(f.ctx, func(tx store.WriteTx) error {
		w, err := store.Get[store.Workload](tx, "contoso/urgent")
		if err != nil {
			return err
		}
		w.End(store.StateCancelled, clk.Now(), "test")
		if err := store.Put(tx, w, w.Meta.Revision); err != nil {
			return err
		}
		// The event log says so (the reference follows it); only the
		// usage records are left open.
		return store.AppendEvent(tx, &store.Event{Time: clk.Now(), Type: store.EventWorkloadCancelled, Object: store.WorkloadObject(w.Key()), Tenant: w.Tenant})
	}); err != nil {
		t.Fatal(err)
	}
	f.s.Cycle(f.ctx)
	for _, r := range f.usage() {
		if r.Workload == "contoso/urgent" && (r.Open() || !r.End.Equal(clk.Now())) {
			t.Errorf("the orphan record %+v: want it closed at the cycle's %s", r, clk.Now())
		}
	}
	n := CheckUsageConservation(t, f.st, clk.Now().Add(time.Hour))
	if n != 4 {
		t.Errorf("%d intervals, want 4", n)
	}

	// The counters: closed records' GPU-hours by price class.
	gpuh := metricSum(t, f.s, "arbiter_gpu_hours_total", "contoso")
	if metricSum(t, f.s, "arbiter_cost_usd_total", "contoso") <= 0 {
		t.Error("arbiter_cost_usd_total of contoso is 0")
	}
	var all float64
	for _, r := range f.usage() {
		if r.Tenant == "contoso" {
			all += r.GPUHours(time.Time{}, clk.Now())
		}
	}
	if d := gpuh - all; d > 1e-6 || d < -1e-6 || all == 0 {
		t.Errorf("arbiter_gpu_hours_total sums to %.6f, the records to %.6f", gpuh, all)
	}
}

// usage returns every usage record in the store.
func (f *agentFleet) usage() []meter.Record {
	f.t.Helper()
	var out []meter.Record
	if err := f.st.View(f.ctx, func(tx store.ReadTx) error {
		return store.ScanUsage(tx, "", time.Now().Add(100*365*24*time.Hour), func(_ string, r *meter.Record) bool {
			out = append(out, *r)
			return true
		})
	}); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// metricSum sums the series of the named metric of the tenant.
func metricSum(t *testing.T, s *Server, name, tenant string) float64 {
	t.Helper()
	fams, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == tenant {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestMeteringPreemption: a plan that evicts borrowed work to give a
// tenant its guarantee closes the victims' records and opens the
// claimant's at the plan's time, in its transaction; the victims' next
// runs open new records.
func TestMeteringPreemption(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: clk.Now, RateLimit: -1})
	fab, con := h.tenant("fabrikam"), h.tenant("contoso")
	for i := range 4 {
		s := spec(fmt.Sprintf("low-%d", i), 8, 1)
		s.Priority, s.Preemptible = "low", true
		if _, err := fab.Submit(h.ctx, "fabrikam", s); err != nil {
			t.Fatal(err)
		}
	}
	h.s.Cycle(h.ctx)
	t0 := clk.Now()
	clk.Advance(time.Hour)
	s := spec("claim", 8, 2)
	s.Priority = "high"
	if _, err := con.Submit(h.ctx, "contoso", s); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	var closed, claim int
	var recs []meter.Record
	if err := h.st.View(h.ctx, func(tx store.ReadTx) error {
		return store.ScanUsage(tx, "", clk.Now().Add(time.Hour), func(_ string, r *meter.Record) bool {
			recs = append(recs, *r)
			return true
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		switch {
		case r.Tenant == "fabrikam" && !r.Open():
			closed++
			if !r.Start.Equal(t0) || !r.End.Equal(clk.Now()) || r.Charge != meter.ChargeBorrowed && r.Charge != meter.ChargeGuarantee {
				t.Errorf("victim's record %+v: want [t0, t0+1h)", r)
			}
		case r.Workload == "contoso/claim":
			claim++
			if !r.Open() || !r.Start.Equal(clk.Now()) || r.Charge != meter.ChargeGuarantee {
				t.Errorf("claimant's record %+v: want open from t0+1h, within its guarantee", r)
			}
		}
	}
	if closed != 2 || claim != 2 {
		t.Fatalf("%d victims' records closed and %d claimant's open, want 2 and 2: %+v", closed, claim, recs)
	}
	CheckUsageConservation(t, h.st, clk.Now().Add(time.Hour))
}

// TestUsageRecordsTenantScope: a tenant reads its own records only; a
// tenant deleted and created again under its name reads none of its
// predecessor's (the admin still reads them); a window that misses a
// record leaves it out.
func TestUsageRecordsTenantScope(t *testing.T) {
	clk := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: clk.Now, RateLimit: -1})
	if _, err := h.admin.CreateTenant(h.ctx, api.Tenant{Name: "temp", Parent: "customers"}); err != nil {
		t.Fatal(err)
	}
	con, temp := h.tenant("contoso"), h.tenant("temp")
	if _, err := con.Submit(h.ctx, "contoso", spec("c1", 8, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := temp.Submit(h.ctx, "temp", spec("t1", 1, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	clk.Advance(time.Hour)
	window := func(c *client.Client) []meter.Record {
		t.Helper()
		recs, err := c.UsageRecords(h.ctx, clk.Now().Add(-2*time.Hour), clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	tenants := func(recs []meter.Record) string {
		var out []string
		for _, r := range recs {
			out = append(out, r.Workload)
		}
		return strings.Join(out, ",")
	}
	if got := tenants(window(con)); got != "contoso/c1" {
		t.Errorf("contoso reads %q, want its own contoso/c1", got)
	}
	if got := tenants(window(temp)); got != "temp/t1" {
		t.Errorf("temp reads %q, want temp/t1", got)
	}
	if got := tenants(window(h.admin)); got != "contoso/c1,temp/t1" && got != "temp/t1,contoso/c1" {
		t.Errorf("the admin reads %q, want both", got)
	}
	if recs, err := con.UsageRecords(h.ctx, clk.Now().Add(-30*time.Hour), clk.Now().Add(-20*time.Hour)); err != nil || len(recs) != 0 {
		t.Errorf("a window before the runs: %v %v, want none", recs, err)
	}
	if _, err := temp.Cancel(h.ctx, "temp", "t1"); err != nil {
		t.Fatal(err)
	}
	if err := h.admin.DeleteTenant(h.ctx, "temp"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.CreateTenant(h.ctx, api.Tenant{Name: "temp", Parent: "customers"}); err != nil {
		t.Fatal(err)
	}
	if got := tenants(window(h.tenant("temp"))); got != "" {
		t.Errorf("the new tenant temp reads %q, want none of its predecessor's", got)
	}
	if got := tenants(window(h.admin)); !strings.Contains(got, "temp/t1") {
		t.Errorf("the admin reads %q, want the old temp/t1 kept", got)
	}
}
