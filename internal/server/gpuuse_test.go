package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// gpuReadingAt is a well-formed reading of one GPU.
func gpuReadingAt(i, util int) api.GPUInfo {
	return api.GPUInfo{Index: i, UUID: "GPU-" + strings.Repeat("a", 8), Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, MemoryUsedMiB: 1024, UtilizationPct: util}
}

// TestHeartbeatGPUReadingsChecked: a node cannot poison the metrics with
// readings out of range: the heartbeat is refused, naming the field, and
// nothing of it is kept.
func TestHeartbeatGPUReadingsChecked(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	nodes, err := h.admin.Nodes(h.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	id := nodes[0].ID
	edit := func(f func(*api.GPUInfo)) []api.GPUInfo {
		g := []api.GPUInfo{gpuReadingAt(0, 10), gpuReadingAt(1, 20)}
		f(&g[1])
		return g
	}
	for _, tc := range []struct {
		name  string
		gpus  []api.GPUInfo
		field string
	}{
		{"utilization over 100", edit(func(g *api.GPUInfo) { g.UtilizationPct = 101 }), "gpus[1].utilization_pct"},
		{"negative utilization", edit(func(g *api.GPUInfo) { g.UtilizationPct = -1 }), "gpus[1].utilization_pct"},
		{"used over total", edit(func(g *api.GPUInfo) { g.MemoryUsedMiB = g.MemoryMiB + 1 }), "gpus[1].memory_used_mib"},
		{"negative used", edit(func(g *api.GPUInfo) { g.MemoryUsedMiB = -5 }), "gpus[1].memory_used_mib"},
		{"huge memory", edit(func(g *api.GPUInfo) { g.MemoryMiB = 1 << 40 }), "gpus[1].memory_mib"},
		{"index twice", edit(func(g *api.GPUInfo) { g.Index = 0 }), "gpus[1].index"},
		{"index out of range", edit(func(g *api.GPUInfo) { g.Index = 5000 }), "gpus[1].index"},
		{"long UUID", edit(func(g *api.GPUInfo) { g.UUID = strings.Repeat("u", 129) }), "gpus[1].uuid"},
		{"control bytes in the model", edit(func(g *api.GPUInfo) { g.Model = "H100\n# HELP fake" }), "gpus[1].model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.admin.Heartbeat(h.ctx, id, api.Heartbeat{GPUs: tc.gpus})
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Field != tc.field {
				t.Fatalf("heartbeat answered %v, want a 400 naming %s", err, tc.field)
			}
			if got := named(series(t, h.s.metrics), "arbiter_gpu_utilization_ratio"); len(got) != 0 {
				t.Fatalf("refused readings kept: %v", got)
			}
		})
	}
	if _, err := h.admin.Heartbeat(h.ctx, id, api.Heartbeat{GPUs: []api.GPUInfo{gpuReadingAt(0, 0), gpuReadingAt(1, 100)}}); err != nil {
		t.Fatalf("the bounds themselves refused: %v", err)
	}
}

// TestGPUUse: the readings of an agent's heartbeat show per GPU on
// /metrics, per tenant after a policy tick (over the GPUs its replicas
// hold), drive a busy utilization rule, count allocated GPUs that stay
// idle, and go when the node's readings are stale or the node is lost.
func TestGPUUse(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1, NodeLostAfter: 30 * time.Second})
	// An agent-run node of its own (the config's nodes are not agent-run).
	if _, err := h.admin.RegisterNode(h.ctx, api.NodeRegistration{ID: "gpu-a", Region: "westus2", Block: "wus-a",
		SKU: "Standard_ND96amsr_A100_v4", Labels: map[string]string{LabelAgent: "true"}}); err != nil {
		t.Fatal(err)
	}
	c := h.tenant("contoso")
	// Four GPUs on one node: westus2 holds the config's 2 nodes and gpu-a;
	// pin it to gpu-a's block by filling the others first.
	if _, err := c.Submit(h.ctx, "contoso", spec("w", 4, 1, "westus2")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	w, err := c.Workload(h.ctx, "contoso", "w")
	if err != nil || w.Running == nil {
		t.Fatalf("w not running: %v %+v", err, w)
	}
	node, held := w.Running.Replicas[0].Node, w.Running.Replicas[0].GPUs
	// The node w runs on reports: w's GPUs at 2%, the others at 90%.
	readings := func(heldPct, otherPct int) []api.GPUInfo {
		var gs []api.GPUInfo
		for i := range 8 {
			u := otherPct
			for _, g := range held {
				if g == i {
					u = heldPct
				}
			}
			gs = append(gs, gpuReadingAt(i, u))
		}
		return gs
	}
	beat := func(heldPct, otherPct int) {
		t.Helper()
		if _, err := h.admin.Heartbeat(h.ctx, node, api.Heartbeat{GPUs: readings(heldPct, otherPct)}); err != nil {
			t.Fatal(err)
		}
	}
	beat(2, 90)
	got := named(series(t, h.s.metrics), "arbiter_gpu_utilization_ratio")
	if len(got) != 8 || got[`arbiter_gpu_utilization_ratio{gpu="`+itoa(int64(held[0]))+`",node="`+node+`"}`] != 0.02 {
		t.Fatalf("per-GPU utilization %v, want 8 series with GPU %d at 0.02", got, held[0])
	}
	if v := series(t, h.s.metrics)[`arbiter_gpu_memory_used_bytes{gpu="0",node="`+node+`"}`]; v != 1024*(1<<20) {
		t.Errorf("memory used %v bytes, want 1 GiB", v)
	}
	rules := `policies:
  - name: idle_contoso
    when: {metric: utilization, utilization: busy, of: tenant:contoso, below: 5%}
    then: [{type: notify, message: contoso's GPUs are idle}]
  - name: cluster_busy
    when: {metric: busy_utilization, above: 50%}
    then: [{type: notify, message: busy}]
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "busy", Source: rules}); err != nil {
		t.Fatal(err)
	}
	// An alert reads busy_utilization through the same table.
	hookURL, hook := webhookSink(t)
	alerts := `webhook: ` + hookURL + `
rules:
  - name: idle_contoso
    metric: busy_utilization
    of: tenant:contoso
    aggregation: avg
    window: 1m
    frequency: 1m
    operator: "<"
    threshold: 0.05
`
	if _, err := h.admin.ApplyAlerts(h.ctx, api.AlertsApply{File: "alerts.yaml", Source: alerts}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	h.s.TickAlerts(h.ctx)
	if v := alertValue(t, h, "busy_utilization"); v == nil || *v != 0.02 {
		t.Errorf("the alert reads busy_utilization %v, want 0.02", v)
	}
	fired := false
	for _, st := range h.s.alerts.out().Items {
		fired = fired || st.Name == "idle_contoso" && st.State == "Fired"
	}
	if !fired {
		t.Errorf("the busy_utilization alert did not fire: %+v", h.s.alerts.out().Items)
	} else {
		<-hook
	}
	tenant := func() map[string]float64 {
		all := series(t, h.s.metrics)
		return map[string]float64{"util": all[`arbiter_tenant_gpu_utilization_ratio{tenant="contoso"}`], "idle": all[`arbiter_allocated_idle_gpus{tenant="contoso"}`]}
	}
	if d := cmp.Diff(map[string]float64{"util": 0.02, "idle": 0}, tenant()); d != "" {
		t.Errorf("tenant gauges (-want +got):\n%s", d)
	}
	// Busy over the node's GPUs: (4×0.02 + 4×0.90)/8 = 0.46 — the rule
	// for above 50% holds not; contoso's below 5% does.
	firings := func() map[string]string {
		fs, err := h.admin.Firings(h.ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range fs {
			out[f.Rule] = f.Event
		}
		return out
	}
	if d := cmp.Diff(map[string]string{"idle_contoso": "fired"}, firings()); d != "" {
		t.Errorf("firings (-want +got):\n%s", d)
	}
	// Five minutes later, still idle: the GPUs count as allocated idle.
	tc.Advance(idleFor)
	beat(1, 90)
	h.s.TickPolicies(h.ctx)
	if d := cmp.Diff(map[string]float64{"util": 0.01, "idle": 4}, tenant()); d != "" {
		t.Errorf("tenant gauges after 5 idle minutes (-want +got):\n%s", d)
	}
	w, _ = c.Workload(h.ctx, "contoso", "w")
	if d := cmp.Diff(held, w.Running.Replicas[0].IdleGPUs); d != "" {
		t.Errorf("workload show's idle GPUs (-want +got):\n%s", d)
	}
	// Busy again: not idle any more, and the cluster rule fires.
	tc.Advance(time.Minute)
	beat(100, 90)
	h.s.TickPolicies(h.ctx)
	if got := tenant()["idle"]; got != 0 {
		t.Errorf("%v idle GPUs after they got busy, want 0", got)
	}
	w, _ = c.Workload(h.ctx, "contoso", "w")
	if len(w.Running.Replicas[0].IdleGPUs) != 0 {
		t.Errorf("workload show still shows idle GPUs %v", w.Running.Replicas[0].IdleGPUs)
	}
	// Stale readings (older than the lease) are not shown nor sampled.
	tc.Advance(31 * time.Second)
	if got := named(series(t, h.s.metrics), "arbiter_gpu_utilization_ratio"); len(got) != 0 {
		t.Errorf("stale readings exported: %v", got)
	}
	if obs := h.s.busySample(mustWorld(t, h), tc.Now()); len(obs) != 0 {
		t.Errorf("stale readings sampled: %v", obs)
	}
	// An agent-run node marked lost drops its readings at once.
	if _, err := h.admin.Heartbeat(h.ctx, "gpu-a", api.Heartbeat{GPUs: readings(50, 50)}); err != nil {
		t.Fatal(err)
	}
	start := tc.Now()
	h.s.checkLeases(h.ctx, start)
	if got := named(series(t, h.s.metrics), "arbiter_gpu_utilization_ratio"); len(got) != 8 {
		t.Fatalf("gpu-a's fresh readings: %v, want 8 series", got)
	}
	tc.Advance(time.Hour) // past its lease and any grace
	h.s.checkLeases(h.ctx, start)
	if nodes, err := h.admin.Nodes(h.ctx, "westus2"); err != nil || !lost(nodes, "gpu-a") {
		t.Fatalf("gpu-a not lost: %v %+v", err, nodes)
	}
	h.s.agents.mu.Lock()
	_, kept := h.s.agents.gpus["gpu-a"]
	h.s.agents.mu.Unlock()
	if kept {
		t.Errorf("a lost node's readings kept")
	}
}

func mustWorld(t *testing.T, h *harness) *world {
	t.Helper()
	var wd *world
	err := h.s.st.View(h.ctx, func(tx store.ReadTx) (err error) {
		wd, err = loadWorld(tx, h.s.cat.Load(), true)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

func lost(ns []api.Node, id string) bool {
	for _, n := range ns {
		if n.ID == id {
			return n.Down
		}
	}
	return false
}

// TestGPUUsePerTenant: a tenant's busy ratio is the mean over the GPUs
// its replicas hold, wherever they run (a gang over two nodes); GPUs of
// a drained node, or without a reading, count for no one; a replica's
// term ending forgets it all.
func TestGPUUsePerTenant(t *testing.T) {
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1})
	if _, err := h.tenant("contoso").Submit(h.ctx, "contoso", spec("gang", 8, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.tenant("fabrikam").Submit(h.ctx, "fabrikam", spec("one", 4, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	where := map[string][]api.Replica{}
	for _, x := range []struct{ tenant, name string }{{"contoso", "gang"}, {"fabrikam", "one"}} {
		w, err := h.admin.Workload(h.ctx, x.tenant, x.name)
		if err != nil || w.Running == nil {
			t.Fatalf("%s not running: %v", x.name, err)
		}
		where[x.name] = w.Running.Replicas
	}
	gang, one := where["gang"], where["one"]
	if gang[0].Node == gang[1].Node {
		t.Fatalf("the gang's replicas share node %s", gang[0].Node)
	}
	// Every GPU of a node reads the same: gang's first node 80%, its
	// second 40%; fabrikam's node 10% unless it is one of the gang's.
	pct := map[string]int{gang[0].Node: 80, gang[1].Node: 40}
	if _, ok := pct[one[0].Node]; !ok {
		pct[one[0].Node] = 10
	}
	for node, p := range pct {
		gs := make([]api.GPUInfo, 8)
		for i := range gs {
			gs[i] = gpuReadingAt(i, p)
		}
		if _, err := h.admin.Heartbeat(h.ctx, node, api.Heartbeat{GPUs: gs}); err != nil {
			t.Fatal(err)
		}
	}
	tenants := func() map[string]float64 {
		out := named(series(t, h.s.metrics), "arbiter_tenant_gpu_utilization_ratio")
		for k, v := range out {
			out[k] = float64(int(v*1000+0.5)) / 1000 // to the per mille
		}
		return out
	}
	h.s.TickPolicies(h.ctx)
	want := map[string]float64{
		`arbiter_tenant_gpu_utilization_ratio{tenant="contoso"}`:  0.6, // (8×0.8 + 8×0.4)/16
		`arbiter_tenant_gpu_utilization_ratio{tenant="fabrikam"}`: float64(pct[one[0].Node]) / 100,
	}
	if d := cmp.Diff(want, tenants()); d != "" {
		t.Errorf("per tenant (-want +got):\n%s", d)
	}
	// Drain the gang's second node: its GPUs are out of service and
	// count for no one, even before the gang is moved.
	drained := true
	if _, err := h.admin.UpdateNode(h.ctx, gang[1].Node, api.NodeUpdate{Drained: &drained}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	want[`arbiter_tenant_gpu_utilization_ratio{tenant="contoso"}`] = 0.8
	if one[0].Node == gang[1].Node {
		delete(want, `arbiter_tenant_gpu_utilization_ratio{tenant="fabrikam"}`)
	}
	if d := cmp.Diff(want, tenants()); d != "" {
		t.Errorf("per tenant with %s drained (-want +got):\n%s", gang[1].Node, d)
	}
	h.s.stepDownGPUs()
	for _, name := range []string{"arbiter_tenant_gpu_utilization_ratio", "arbiter_gpu_utilization_ratio", "arbiter_allocated_idle_gpus"} {
		if got := named(series(t, h.s.metrics), name); len(got) != 0 {
			t.Errorf("%s after the term ended: %v", name, got)
		}
	}
}
