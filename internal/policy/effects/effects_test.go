package effects

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/purity"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestPurity: the runtime gives the same effects for the same inputs, in
// the simulator and in the server.
func TestPurity(t *testing.T) { purity.Check(t, ".") }

// testWorld: two nodes (pool p1 in eastus, H100; pool p2 in westus, A100)
// and one running, preemptible, multi-region workload of tenant acme,
// class batch, service svc, label team=ml, confined to pool p1.
func testWorld() World {
	now := time.Unix(1000, 0)
	w := &workload.Workload{Spec: workload.Spec{Name: "acme/w", Tenant: "acme", Priority: workload.PriorityNormal, Preemptible: true,
		GPUs: 8 * resource.PerGPU, Replicas: 1, Regions: []string{"eastus", "westus"}, Pools: []string{"p1"},
		Labels: map[string]string{"class": "batch", "service": "svc", "team": "ml"}},
		Running: &workload.Assignment{Flavor: "H100-80G", Region: "eastus", StartedAt: now, Replicas: []workload.Replica{{Node: "n1", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Milli: resource.PerGPU}}}}
	return World{
		Nodes: []Node{
			{ID: "n1", Model: "H100-80G", Region: "eastus", Pool: "p1", GPUs: 8},
			{ID: "n2", Model: "A100-80G", Region: "westus", Pool: "p2", GPUs: 8},
		},
		Workloads: []*workload.Workload{w},
	}
}

// targetOf names, for each kind, a target that testWorld has.
var targetOf = map[policy.TargetKind]policy.Target{
	policy.TargetCluster:  policy.Cluster,
	policy.TargetTenant:   {Kind: policy.TargetTenant, Name: "acme"},
	policy.TargetClass:    {Kind: policy.TargetClass, Name: "batch"},
	policy.TargetPool:     {Kind: policy.TargetPool, Name: "p1"},
	policy.TargetService:  {Kind: policy.TargetService, Name: "svc"},
	policy.TargetFlavor:   {Kind: policy.TargetFlavor, Name: "H100-80G"},
	policy.TargetRegion:   {Kind: policy.TargetRegion, Name: "eastus"},
	policy.TargetSelector: {Kind: policy.TargetSelector, Name: "team=ml"},
}

func testTree(t *testing.T) *tenancy.Tree {
	l := resource.MilliGPU(16 * resource.PerGPU)
	tr, err := tenancy.NewTree([]tenancy.TenantSpec{{Name: "acme", Quota: []tenancy.QuotaSpec{{Flavor: "H100-80G", Limit: &l}}}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// changes reports whether e changes anything of testWorld's input.
func changes(t *testing.T, e *Effects, w World) bool {
	tree := testTree(t)
	if e.AdjustTree(tree) != tree || len(e.Drained) > 0 || len(e.Spot) > 0 {
		return true
	}
	ws := e.Apply(w.Workloads)
	if ws[0] != w.Workloads[0] {
		return true
	}
	_, evict, held := e.Caps(ws)
	return len(evict)+len(held) > 0
}

// TestEveryActionOnEveryKind: every action has an effect on every target
// kind the loader accepts for it (so an action or kind added to the
// loader without a runtime effect fails here).
func TestEveryActionOnEveryKind(t *testing.T) {
	for a := policy.ActionScaleDown; a <= policy.ActionDrain; a++ {
		field := "target"
		if a == policy.ActionReallocate {
			field = "resources"
		}
		for _, k := range policy.ActionTargetKinds(a, field) {
			act := policy.Action{Type: a, Target: targetOf[k], Priority: policy.PriorityHigh,
				MinCapacity: policy.Quantity{Value: 0.5}, Limit: policy.Quantity{Value: 1}, Price: policy.Quantity{Value: 2},
				Guarantee: policy.Quantity{Value: 0}}
			switch a {
			case policy.ActionMigrate:
				act.Destination = policy.Target{Kind: policy.TargetRegion, Name: "eastus"}
			case policy.ActionReallocate:
				act.Target = policy.Target{}
				act.Resources = []policy.Target{targetOf[k]}
				if k == policy.TargetFlavor || k == policy.TargetRegion {
					// A flavor or region names the quota entry of a guarantee.
					act.Resources = append(act.Resources, targetOf[policy.TargetTenant], targetOf[policy.TargetFlavor])
					act.Guarantee.Value = 20
					act.Priority = policy.PriorityNone
				}
			}
			w := testWorld()
			e := NewState().Compute(w, []Active{{Policy: "p", ActiveAction: policy.ActiveAction{Rule: "r", Action: act}}})
			if !changes(t, e, w) {
				t.Errorf("%s on %s: no effect", a, k)
			}
		}
	}
	for _, k := range policy.ActionTargetKinds(policy.ActionMigrate, "destination") {
		act := policy.Action{Type: policy.ActionMigrate, Target: targetOf[policy.TargetTenant], Destination: targetOf[k]}
		if k == policy.TargetPool {
			act.Destination = policy.Target{Kind: policy.TargetPool, Name: "p1"}
			w := testWorld()
			w.Workloads[0].Pools = nil
			e := NewState().Compute(w, []Active{{ActiveAction: policy.ActiveAction{Action: act}}})
			if !changes(t, e, w) {
				t.Errorf("migrate to %s: no effect", k)
			}
			continue
		}
		w := testWorld()
		e := NewState().Compute(w, []Active{{ActiveAction: policy.ActiveAction{Action: act}}})
		if !changes(t, e, w) {
			t.Errorf("migrate to %s: no effect", k)
		}
	}
}

// TestLowPriorityPool: a migrate to the low-priority pool demotes when no
// node carries it, and narrows pools when one does (the server and the
// simulator agree: both call this).
func TestLowPriorityPool(t *testing.T) {
	act := policy.Action{Type: policy.ActionMigrate, Target: targetOf[policy.TargetClass], Destination: policy.Target{Kind: policy.TargetPool, Name: LowPriorityPool}}
	w := testWorld()
	w.Workloads[0].Preemptible, w.Workloads[0].Pools = false, nil
	e := NewState().Compute(w, []Active{{ActiveAction: policy.ActiveAction{Action: act}}})
	got, _ := e.Override(w.Workloads[0])
	if got.Priority != workload.PriorityLow || !got.Preemptible || got.Pools != nil {
		t.Errorf("no node in the pool: got %v preemptible=%v pools=%v, want low, preemptible, pools unchanged", got.Priority, got.Preemptible, got.Pools)
	}
	w.Nodes[1].Pool = LowPriorityPool
	e = NewState().Compute(w, []Active{{ActiveAction: policy.ActiveAction{Action: act}}})
	got, _ = e.Override(w.Workloads[0])
	if got.Priority != workload.PriorityNormal || len(got.Pools) != 1 || got.Pools[0] != LowPriorityPool {
		t.Errorf("a node in the pool: got %v pools=%v, want normal, narrowed to it", got.Priority, got.Pools)
	}
}

// TestGuarantee: reallocate's temporary guarantee raises the named
// tenant's entry for the named flavor (its limit with it), and adds the
// entry when the tenant has none.
func TestGuarantee(t *testing.T) {
	act := policy.Action{Type: policy.ActionReallocate, Guarantee: policy.Quantity{Value: 20},
		Resources: []policy.Target{{Kind: policy.TargetTenant, Name: "acme"}, {Kind: policy.TargetFlavor, Name: "H100-80G"}}}
	e := NewState().Compute(testWorld(), []Active{{ActiveAction: policy.ActiveAction{Action: act}}})
	tr := testTree(t)
	got := e.AdjustTree(tr)
	q, _, _ := got.Entry(0, "H100-80G", "")
	if q.Guaranteed != 20*resource.PerGPU || q.Limit != 20*resource.PerGPU {
		t.Errorf("acme H100 entry = guaranteed %v limit %v, want 20 and 20", q.Guaranteed, q.Limit)
	}
	if q0, _, _ := tr.Entry(0, "H100-80G", ""); q0.Guaranteed != 0 {
		t.Errorf("the original tree changed: %v", q0.Guaranteed)
	}
	act.Resources[1] = policy.Target{Kind: policy.TargetFlavor, Name: "A100-80G"}
	e = NewState().Compute(testWorld(), []Active{{ActiveAction: policy.ActiveAction{Action: act}}})
	if q, _, ok := e.AdjustTree(tr).Entry(0, "A100-80G", ""); !ok || q.Guaranteed != 20*resource.PerGPU || q.Limit != 20*resource.PerGPU {
		t.Errorf("new A100 entry = %+v (found %v), want guaranteed = limit = 20", q, ok)
	}
}

// TestCapBaseKept: a scale_down's cap is a fraction of what its target
// held when it came into force, kept while it stays in force and
// forgotten when it ends.
func TestCapBaseKept(t *testing.T) {
	act := policy.ActiveAction{Rule: "r", Action: policy.Action{Type: policy.ActionScaleDown, Target: targetOf[policy.TargetClass], MinCapacity: policy.Quantity{Value: 0.5}}}
	st := NewState()
	w := testWorld()
	if e := st.Compute(w, []Active{{Policy: "p", ActiveAction: act}}); e.Limits[0].Limit != 4*resource.PerGPU {
		t.Fatalf("limit %v, want 4 GPUs", e.Limits[0].Limit)
	}
	w.Workloads[0].Running = nil
	if e := st.Compute(w, []Active{{Policy: "p", ActiveAction: act}}); e.Limits[0].Limit != 4*resource.PerGPU {
		t.Errorf("limit %v after the class shrank, want still 4 GPUs", e.Limits[0].Limit)
	}
	st.Compute(w, nil)
	if e := st.Compute(w, []Active{{Policy: "p", ActiveAction: act}}); e.Limits[0].Limit != 0 {
		t.Errorf("limit %v after it ended and came back with nothing running, want 0", e.Limits[0].Limit)
	}
}

// TestSampleCoversTable: every metric × target kind the table says the
// world gives is measured by Sample (so the loader accepts no condition
// that neither side can evaluate).
func TestSampleCoversTable(t *testing.T) {
	w := testWorld()
	pend := *w.Workloads[0]
	pend.Name, pend.Running, pend.Flavors = "acme/p", nil, []fleet.ModelID{"H100-80G"}
	w.Workloads = append(w.Workloads, &pend)
	got := map[policy.Metric]map[policy.TargetKind]bool{}
	for _, o := range Sample(w, []string{"acme"}, nil) {
		if got[o.Metric] == nil {
			got[o.Metric] = map[policy.TargetKind]bool{}
		}
		got[o.Metric][o.Target.Kind] = true
	}
	for m, ks := range Sources {
		for k, src := range ks {
			if src == FromWorld && !got[m][k] {
				t.Errorf("%s of a %s: the table says the world gives it, Sample does not", m, k)
			}
		}
	}
}
