package workload

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
)

func migSpec(profile string, flavors ...fleet.ModelID) Spec {
	s := Spec{Name: "m", Tenant: "t", MIG: profile, Flavors: flavors, Regions: []string{"eastus"}}
	s.Defaults(false)
	return s
}

func problems(s Spec) map[string]string {
	out := map[string]string{}
	for _, e := range s.Validate() {
		out[e.Field] += e.Msg
	}
	return out
}

func TestMIGSpec(t *testing.T) {
	s := migSpec("3g.40gb", "A100-80G", "H100-80G")
	if s.GPUs != 500 {
		t.Errorf("3g.40gb GPUs = %v, want 0.5", s.GPUs)
	}
	if p := problems(s); len(p) != 0 {
		t.Errorf("valid spec refused: %v", p)
	}
	if s := migSpec("7g.141gb", "H200-141G"); s.GPUs != resource.PerGPU || len(problems(s)) != 0 {
		t.Errorf("7g.141gb: %v %v", s.GPUs, problems(s))
	}
	for _, tc := range []struct {
		spec  Spec
		field string
		says  string
	}{
		{migSpec("9g.99gb", "A100-80G"), "mig", "unknown MIG profile \"9g.99gb\": write one of 1g.10gb"},
		{migSpec(strings.Repeat("x", 100), "A100-80G"), "mig", "unknown MIG profile"},
		{migSpec("3g.40gb", "A100-80G", "A10"), "flavors[1]", "A10 has no MIG"},
		{migSpec("3g.40gb", "A100-40G"), "flavors[0]", "A100-40G has no MIG profile 3g.40gb (its profiles: 1g.5gb"},
		{migSpec("1g.10gb", "A100-40G", "A100-80G"), "flavors[1]", "is 0.25 GPU on A100-40G but 0.125 on A100-80G"},
		{func() Spec { s := migSpec("3g.40gb", "A100-80G"); s.GPUs = resource.PerGPU; return s }(), "gpus", "leave gpus out"},
		{func() Spec { s := migSpec("3g.40gb", "A100-80G"); s.GPUMemory = 20 << 10; return s }(), "gpu_memory", "fixes the memory"},
	} {
		p := problems(tc.spec)
		if !strings.Contains(p[tc.field], tc.says) {
			t.Errorf("mig %q flavors %v: %s says %q, want %q (all: %v)", tc.spec.MIG, tc.spec.Flavors, tc.field, p[tc.field], tc.says, p)
		}
	}
}

func TestGPUMemoryCheckFleet(t *testing.T) {
	cat := fleet.Builtin()
	sh := &FleetShape{Regions: []string{"eastus"}, MaxGPUs: map[fleet.ModelID]int{"A10": 1, "A100-80G": 8}}
	s := Spec{Name: "g", Tenant: "t", GPUs: 1000, Replicas: 1, Flavors: []fleet.ModelID{"A10", "A100-80G"}, Regions: []string{"eastus"}, GPUMemory: 40 << 10}
	if ps := CheckFleet(&s, cat, sh); len(ps) != 0 {
		t.Errorf("40GiB with an A100-80G accepted flavor refused: %v", ps)
	}
	s.GPUMemory = 100 << 10
	ps := CheckFleet(&s, cat, sh)
	if len(ps) != 1 || ps[0].Field != "gpu_memory" || !strings.Contains(ps[0].Msg, "100GiB per GPU, but no GPU of the flavors in the fleet has that much (A10 has 24GiB, A100-80G has 80GiB)") {
		t.Errorf("100GiB: %v", ps)
	}
}

// FuzzMIGSpec: any profile name and flavor list is validated without a
// panic, and a spec Validate accepts has a share that is its GPUs on
// every flavor.
func FuzzMIGSpec(f *testing.F) {
	f.Add("3g.40gb", "A100-80G", "H100-80G", int64(0))
	f.Add("1g.10gb", "A100-40G", "A100-80G", int64(250))
	f.Add("9g.99gb", "A10", "", int64(-1))
	f.Add("7g.141gb", "H200-141G", "", int64(20<<10))
	f.Fuzz(func(t *testing.T, profile, f1, f2 string, mem int64) {
		flavors := []fleet.ModelID{fleet.ModelID(f1)}
		if f2 != "" {
			flavors = append(flavors, fleet.ModelID(f2))
		}
		s := Spec{Name: "x", Tenant: "t", MIG: profile, Flavors: flavors, Regions: []string{"r"}, GPUMemory: resource.GPUMemory(mem)}
		s.Defaults(false)
		if len(s.Validate()) > 0 {
			return
		}
		for _, m := range flavors {
			if s.MIG != "" && s.MIGShare(m) != s.GPUs {
				t.Fatalf("accepted %q on %v with GPUs %v, share on %s %v", profile, flavors, s.GPUs, m, s.MIGShare(m))
			}
			// gpu_memory alone resolved to a profile with that much.
			if profile == "" && mem > 0 {
				g, _ := mig.For(string(m))
				if i := g.Index(s.MIG); i < 0 || int64(g.Profiles[i].MemoryGiB)<<10 < mem {
					t.Fatalf("gpu_memory %d MiB on %v resolved to %q", mem, flavors, s.MIG)
				}
			}
		}
	})
}

// TestGPUMemoryProfile: gpu_memory without gpus or mig asks for the
// smallest MIG instance with that much memory on every flavor; a spec
// whose flavors have no such profile, or different ones, is refused by
// gpu_memory with the reason.
func TestGPUMemoryProfile(t *testing.T) {
	memSpec := func(mib int64, flavors ...fleet.ModelID) Spec {
		s := Spec{Name: "m", Tenant: "t", GPUMemory: resource.GPUMemory(mib), Flavors: flavors, Regions: []string{"eastus"}}
		s.Defaults(false)
		return s
	}
	for _, tc := range []struct {
		mib     int64
		flavors []fleet.ModelID
		profile string
		gpus    resource.MilliGPU
	}{
		{10 << 10, []fleet.ModelID{"A100-80G", "H100-80G"}, "1g.10gb", 125},
		{11 << 10, []fleet.ModelID{"A100-80G"}, "1g.20gb", 250}, // 1 compute slice, not 2g.20gb
		{20 << 10, []fleet.ModelID{"A100-80G"}, "1g.20gb", 250},
		{21 << 10, []fleet.ModelID{"H100-80G"}, "3g.40gb", 500}, // fewest compute of the 4-slice ones
		{20 << 10, []fleet.ModelID{"A100-40G"}, "3g.20gb", 500},
		{20 << 10, []fleet.ModelID{"H200-141G"}, "1g.35gb", 250},
		{512, []fleet.ModelID{"A100-40G"}, "1g.5gb", 125},
		{80 << 10, []fleet.ModelID{"H100-80G"}, "7g.80gb", 1000},
	} {
		s := memSpec(tc.mib, tc.flavors...)
		if s.MIG != tc.profile || s.GPUs != tc.gpus || s.GPUMemory != 0 || len(problems(s)) != 0 {
			t.Errorf("gpu_memory %d MiB on %v: mig %q gpus %v gpu_memory %v problems %v; want %s, %v", tc.mib, tc.flavors, s.MIG, s.GPUs, s.GPUMemory, problems(s), tc.profile, tc.gpus)
		}
	}
	for _, tc := range []struct {
		spec Spec
		says string
	}{
		{memSpec(20<<10, "A100-80G", "A10"), "A10 has no MIG"},
		{memSpec(100<<10, "A100-80G"), "no MIG profile of A100-80G has that much (the largest is 7g.80gb)"},
		{memSpec(20<<10, "A100-80G", "A100-40G"), "that is 1g.20gb on A100-80G and 3g.20gb on A100-40G"},
		{memSpec(5<<10, "A100-40G", "A100-80G"), "that is 1g.5gb on A100-40G and 1g.10gb on A100-80G"},
	} {
		p := problems(tc.spec)
		if !strings.Contains(p["gpu_memory"], tc.says) || p["gpus"] != "" || tc.spec.MIG != "" {
			t.Errorf("gpu_memory %v on %v: problems %v, mig %q; want gpu_memory to say %q", tc.spec.GPUMemory, tc.spec.Flavors, p, tc.spec.MIG, tc.says)
		}
	}
	// With gpus it stays a bound on whole GPUs or a share: no MIG.
	s := Spec{Name: "m", Tenant: "t", GPUs: 250, GPUMemory: 20 << 10, Flavors: []fleet.ModelID{"A100-80G"}, Regions: []string{"eastus"}}
	s.Defaults(false)
	if s.MIG != "" || s.GPUMemory != 20<<10 || len(problems(s)) != 0 {
		t.Errorf("gpus 0.25 with gpu_memory: mig %q gpu_memory %v problems %v", s.MIG, s.GPUMemory, problems(s))
	}
}
