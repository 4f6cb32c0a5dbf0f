package workload

import (
	"fmt"
	"slices"
	"strings"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// FleetShape is what a spec is checked against besides the catalog: the
// fleet's regions and its largest machine per GPU model. It is cheap to
// keep between submissions (the server recomputes it when nodes change).
type FleetShape struct {
	Regions []string
	MaxGPUs map[fleet.ModelID]int
}

// ShapeOf summarizes f for CheckFleet.
func ShapeOf(f *fleet.Fleet) *FleetShape {
	sh := &FleetShape{Regions: slices.Clone(f.Regions), MaxGPUs: map[fleet.ModelID]int{}}
	for _, n := range f.Nodes {
		sh.MaxGPUs[n.Model] = max(sh.MaxGPUs[n.Model], n.GPUs)
	}
	return sh
}

// Problem is one reason a spec cannot run on a fleet: the field, as a path
// relative to the spec ("flavors[1]", "gpus"), and what is wrong with it.
type Problem struct {
	Field string
	Msg   string
}

func (p Problem) String() string { return p.Field + ": " + p.Msg }

// CheckFleet is the one workload-vs-fleet check (the config loader and the
// submission API both call it): every flavor is a catalog model, every
// region is in the fleet, and one replica fits on the largest machine of
// the accepted models. It reports every problem, in field order; none
// means the spec may run on this fleet.
func CheckFleet(s *Spec, cat *fleet.Catalog, sh *FleetShape) []Problem {
	var out []Problem
	largest := 0
	for i, m := range s.Flavors {
		if _, ok := cat.Model(m); !ok {
			out = append(out, Problem{fmt.Sprintf("flavors[%d]", i), fmt.Sprintf("unknown GPU model %q (known: %v)", m, cat.ModelNames())})
		}
		largest = max(largest, sh.MaxGPUs[m])
	}
	for i, r := range s.Regions {
		if !slices.Contains(sh.Regions, r) {
			out = append(out, Problem{fmt.Sprintf("regions[%d]", i), fmt.Sprintf("region %q is not in the fleet (regions: %v)", r, sh.Regions)})
		}
	}
	if s.GPUMemory > 0 {
		var have []string
		enough := false
		for _, m := range s.Flavors {
			model, ok := cat.Model(m)
			if !ok || sh.MaxGPUs[m] == 0 {
				continue // unknown (reported above) or not in the fleet
			}
			have = append(have, fmt.Sprintf("%s has %dGiB", m, model.MemoryGiB))
			enough = enough || resource.MiB(model.MemoryGiB)*1024 >= resource.MiB(s.GPUMemory)
		}
		if !enough {
			msg := fmt.Sprintf("%v per GPU, but no GPU of the flavors in the fleet has that much", s.GPUMemory)
			if len(have) > 0 {
				msg += " (" + strings.Join(have, ", ") + ")"
			}
			out = append(out, Problem{"gpu_memory", msg})
		}
	}
	if largest > 0 && s.GPUs > resource.GPUs(largest) {
		out = append(out, Problem{"gpus", fmt.Sprintf("%v GPUs per replica, but the largest machine of %v has %d; split the work into replicas", s.GPUs, s.Flavors, largest)})
	}
	return out
}
