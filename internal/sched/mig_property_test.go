package sched

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// migWorld is a random fleet of A100-80G, H100 and A100-40G nodes, some
// in MIG mode, with two tenants (one guaranteed a share).
func migWorld(rng *rand.Rand) Input {
	skus := []fleet.SKUName{"Standard_NC96ads_A100_v4", "Standard_ND96isr_H100_v5", "Standard_ND96asr_v4", "Standard_NC24ads_A100_v4"}
	var spec fleet.Spec
	rs := fleet.RegionSpec{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1"}}}
	for b := 0; b < 1+rng.IntN(3); b++ {
		bs := fleet.BlockSpec{Name: fleet.BlockID(fmt.Sprintf("b%d", b))}
		for g := 0; g < 1+rng.IntN(3); g++ {
			var labels map[string]string
			if rng.IntN(3) > 0 {
				labels = map[string]string{fleet.MIGLabel: fleet.MIGEnabled}
			}
			bs.Nodes = append(bs.Nodes, fleet.GroupSpec{SKU: skus[rng.IntN(len(skus))], Count: 1 + rng.IntN(3), Labels: labels})
		}
		rs.Zones[0].Blocks = append(rs.Zones[0].Blocks, bs)
	}
	spec.Regions = []fleet.RegionSpec{rs}
	f, err := fleet.Build(spec, fleet.Builtin())
	if err != nil {
		panic(err)
	}
	tree, err := tenancy.NewTree([]tenancy.TenantSpec{{Name: "root"},
		{Name: "a", Parent: "root", Quota: []tenancy.QuotaSpec{{Flavor: "A100-80G", Region: "eastus", Guaranteed: resource.GPUs(2), Weight: 1}}},
		{Name: "b", Parent: "root"}})
	if err != nil {
		panic(err)
	}
	return Input{Now: t0, Seed: rng.Uint64(), Fleet: f, Tenants: tree}
}

// migWorkloads are random MIG, whole-GPU and shared workloads.
func migWorkloads(rng *rand.Rand, n, from int) []*workload.Workload {
	profiles := map[fleet.ModelID][]string{
		"A100-80G": {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"H100-80G": {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"A100-40G": {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
	}
	var out []*workload.Workload
	for k := 0; k < n; k++ {
		s := workload.Spec{Name: workload.ID("w" + strconv.Itoa(from+k)), Tenant: []string{"a", "b"}[rng.IntN(2)],
			Priority: workload.Priority(rng.IntN(5)), Preemptible: rng.IntN(2) == 0, Regions: []string{"eastus"}}
		switch rng.IntN(4) {
		case 0:
			s.GPUs = resource.GPUs(1 + rng.IntN(2))
			s.Flavors = []fleet.ModelID{"A100-80G", "H100-80G"}
		case 1:
			s.GPUs = 250
			s.Flavors = []fleet.ModelID{"A100-40G"}
		default:
			m := []fleet.ModelID{"A100-80G", "H100-80G", "A100-40G"}[rng.IntN(3)]
			s.MIG = profiles[m][rng.IntN(len(profiles[m]))]
			s.Flavors = []fleet.ModelID{m}
			if m != "A100-40G" && rng.IntN(2) == 0 {
				s.Flavors = []fleet.ModelID{"H100-80G", "A100-80G"}
			}
			if rng.IntN(4) == 0 {
				s.Topology = workload.TopologySameBlock
			}
		}
		s.Replicas = 1 + rng.IntN(4)
		s.Defaults(true)
		if errs := s.Validate(); len(errs) > 0 {
			panic(fmt.Sprint(s, errs))
		}
		out = append(out, &workload.Workload{Spec: s, SubmittedAt: t0})
	}
	return out
}

// checkMIGLayouts checks where running work sits: every replica on a
// MIG-mode node has a MIG instance and every MIG instance is on one, of
// the node's model, and each GPU's instances form a layout NVIDIA
// accepts (mig.GPU.Check: allowed starts, no overlap, at most 7 compute
// slices), whose shares fit the GPU.
func checkMIGLayouts(in Input, ws []*workload.Workload) error {
	type gpuKey struct {
		node fleet.NodeID
		gpu  int
	}
	insts := map[gpuKey][]mig.Instance{}
	var keys []gpuKey
	for _, w := range ws {
		if w.Running == nil {
			continue
		}
		for _, r := range w.Running.Replicas {
			n, _ := in.Fleet.Node(r.Node)
			switch {
			case n.MIGMode() && (r.MIG == nil || w.MIG == ""):
				return fmt.Errorf("%s: a replica without a MIG instance on MIG-mode node %s", w.Name, n.ID)
			case !n.MIGMode() && (r.MIG != nil || w.MIG != ""):
				return fmt.Errorf("%s: MIG instance on node %s, not in MIG mode", w.Name, n.ID)
			case r.MIG == nil:
				continue
			case r.MIG.Profile != w.MIG || len(r.GPUs) != 1:
				return fmt.Errorf("%s: instance %v on GPUs %v for profile %s", w.Name, *r.MIG, r.GPUs, w.MIG)
			}
			k := gpuKey{n.ID, r.GPUs[0]}
			if _, ok := insts[k]; !ok {
				keys = append(keys, k)
			}
			insts[k] = append(insts[k], mig.Instance{Profile: r.MIG.Profile, Start: r.MIG.Start})
		}
	}
	for _, k := range keys {
		n, _ := in.Fleet.Node(k.node)
		g, ok := mig.For(string(n.Model))
		if !ok {
			return fmt.Errorf("node %s: %s has no MIG", n.ID, n.Model)
		}
		if _, err := g.Check(insts[k]); err != nil {
			return fmt.Errorf("node %s GPU %d: %v: %v", n.ID, k.gpu, insts[k], err)
		}
	}
	return nil
}

// TestMIGProperties is the property "no MIG layout is ever invalid for
// its GPU model; same input, same plan": over random fleets with nodes in
// MIG mode and random MIG, whole-GPU and shared work, cycle after cycle
// (work arriving, some ending), the plan of every cycle leaves every GPU
// with a valid MIG layout and MIG work only on MIG-mode nodes (and other
// work never there); the same input gives the same plan, with or without
// a Cache carried across the cycles, and with the repeat memo off.
func TestMIGProperties(t *testing.T) {
	seeds := 60
	if v, err := strconv.Atoi(os.Getenv("ARBITER_PROPERTY_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	placedMIG := 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		rng := rand.New(rand.NewPCG(seed, 18))
		in := migWorld(rng)
		ws := migWorkloads(rng, 10+rng.IntN(20), 0)
		cache := &Cache{}
		next := len(ws)
		for cycle := 0; cycle < 6; cycle++ {
			in.Now = t0.Add(10 * time.Duration(cycle) * time.Minute)
			in.Workloads = ws
			plan := Schedule(in)
			again := Schedule(in)
			cached := in
			cached.Cache = cache
			withCache := Schedule(cached)
			noRep := in
			noRep.Options.noRepeat = true
			a, _ := json.Marshal(plan)
			for name, other := range map[string]Plan{"again": again, "cache": withCache, "no repeat": Schedule(noRep)} {
				if b, _ := json.Marshal(other); string(a) != string(b) {
					t.Fatalf("seed %d cycle %d: plan %s differs:\n%s\n%s", seed, cycle, name, a, b)
				}
			}
			if err := Check(&Input{Now: in.Now, Fleet: in.Fleet, Tenants: in.Tenants, Workloads: Apply(ws, plan, in.Now)}); err != nil {
				t.Fatalf("seed %d cycle %d: %v", seed, cycle, err)
			}
			ws = Apply(ws, plan, in.Now)
			if err := checkMIGLayouts(in, ws); err != nil {
				t.Fatalf("seed %d cycle %d: %v", seed, cycle, err)
			}
			for _, x := range plan.Placements {
				if !x.MIG.IsZero() {
					placedMIG++
				}
			}
			// Some work ends, some arrives.
			ws = slices.DeleteFunc(ws, func(w *workload.Workload) bool { return w.Running != nil && rng.IntN(4) == 0 })
			more := migWorkloads(rng, rng.IntN(6), next)
			next += len(more)
			ws = append(ws, more...)
		}
	}
	if placedMIG == 0 {
		t.Fatal("no MIG instance placed: the property checked nothing")
	}
}

// TestMIGCostsNoBytes: the MIG fields live in padding, so that plans and
// snapshots of work without MIG are no bigger (a plan holds a Placement
// per replica, a snapshot a nodeState per node, copied every cycle).
func TestMIGCostsNoBytes(t *testing.T) {
	type placementWithout struct {
		Workload        workload.ID
		Replica         int
		Node            fleet.NodeID
		GPUs            []int
		Milli           int64
		Flavor          fleet.ModelID
		Region          string
		OnReservation   bool
		AfterPreemption bool
		Within          bool
	}
	if a, b := reflect.TypeOf(Placement{}).Size(), reflect.TypeOf(placementWithout{}).Size(); a != b {
		t.Errorf("Placement is %d bytes, %d without its MIG instance", a, b)
	}
	type nodeWithout struct {
		node           *fleet.Node
		free           []int32
		whole, partial int
		cpu            resource.MilliCPU
		mem            resource.MiB
		pool, pos      int
		down           bool
		running        []int
	}
	if a, b := reflect.TypeOf(nodeState{}).Size(), reflect.TypeOf(nodeWithout{}).Size(); a != b {
		t.Errorf("nodeState is %d bytes, %d without migAt", a, b)
	}
	// A Blocker without the MIG and GPU-memory fields is as big.
	var without []reflect.StructField
	bt := reflect.TypeOf(Blocker{})
	for i := 0; i < bt.NumField(); i++ {
		switch f := bt.Field(i); f.Name {
		case "NoMIGMode", "MIG", "ModelMemoryGiB", "GPUMemory":
		default:
			without = append(without, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
		}
	}
	if a, b := bt.Size(), reflect.StructOf(without).Size(); a != b || len(without) != bt.NumField()-4 {
		t.Errorf("Blocker is %d bytes, %d without its MIG fields", a, b)
	}
	bl := Blocker{Code: ReasonNoFlavor, MIG: migName("3g.40gb"), GPUMemory: 20 << 10}
	if b, err := json.Marshal(bl); err != nil || !strings.Contains(string(b), `"mig":"3g.40gb"`) {
		t.Errorf("Blocker JSON %s %v", b, err)
	} else {
		var back Blocker
		if err := json.Unmarshal(b, &back); err != nil || back.MIG != bl.MIG {
			t.Errorf("Blocker back %v %v", back.MIG, err)
		}
	}
	if b, _ := json.Marshal(Blocker{Code: ReasonNoCapacity}); strings.Contains(string(b), "mig") {
		t.Errorf("Blocker without MIG shows it: %s", b)
	}
	for _, m := range []PlacedMIG{{}, placedMIG("3g.40gb", 4), placedMIG("7g.141gb", 0)} {
		b, err := json.Marshal(Placement{MIG: m})
		if err != nil {
			t.Fatal(err)
		}
		var back Placement
		if err := json.Unmarshal(b, &back); err != nil || back.MIG != m {
			t.Errorf("%s: back %+v, %v", b, back.MIG, err)
		}
		if m.IsZero() == strings.Contains(string(b), `"mig"`) {
			t.Errorf("%s: mig shown %v for zero %v", b, strings.Contains(string(b), `"mig"`), m.IsZero())
		}
	}
	if inst := placedMIG("3g.40gb", 4).Instance(); inst == nil || *inst != (workload.MIGInstance{Profile: "3g.40gb", Start: 4}) {
		t.Errorf("Instance() = %v", inst)
	}
	var p Placement
	if err := json.Unmarshal([]byte(`{"mig":{"profile":"9g.99gb","start":4}}`), &p); err == nil {
		t.Error("an unknown profile read back")
	}
}
