package workload

import (
	"reflect"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// TestCheckFleet: every problem is reported, in field order, with its path.
func TestCheckFleet(t *testing.T) {
	cat := fleet.Builtin()
	sh := &FleetShape{Regions: []string{"eastus"}, MaxGPUs: map[fleet.ModelID]int{"A100-80G": 8}}
	spec := func(gpus int, flavors []fleet.ModelID, regions ...string) *Spec {
		return &Spec{GPUs: resource.GPUs(gpus), Replicas: 1, Flavors: flavors, Regions: regions}
	}
	for _, c := range []struct {
		name   string
		spec   *Spec
		fields []string
		msg    string
	}{
		{"fits", spec(8, []fleet.ModelID{"A100-80G"}, "eastus"), nil, ""},
		{"unknown model", spec(1, []fleet.ModelID{"A100-80G", "Z9"}, "eastus"), []string{"flavors[1]"}, `unknown GPU model "Z9"`},
		{"model not in fleet is no size bound", spec(64, []fleet.ModelID{"H100-80G"}, "eastus"), nil, ""},
		{"unknown region", spec(1, []fleet.ModelID{"A100-80G"}, "eastus", "mars"), []string{"regions[1]"}, `region "mars" is not in the fleet (regions: [eastus])`},
		{"too big", spec(9, []fleet.ModelID{"A100-80G"}, "eastus"), []string{"gpus"}, "largest machine of [A100-80G] has 8"},
		{"all at once", spec(9, []fleet.ModelID{"Z9", "A100-80G"}, "mars", "venus"), []string{"flavors[0]", "regions[0]", "regions[1]", "gpus"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			probs := CheckFleet(c.spec, cat, sh)
			var fields []string
			for _, p := range probs {
				fields = append(fields, p.Field)
			}
			if !reflect.DeepEqual(fields, c.fields) {
				t.Fatalf("fields %v, want %v (%v)", fields, c.fields, probs)
			}
			if c.msg != "" && !strings.Contains(probs[0].Msg, c.msg) {
				t.Errorf("message %q lacks %q", probs[0].Msg, c.msg)
			}
		})
	}
}

// TestShapeOf: the regions of the fleet and the largest machine per model.
func TestShapeOf(t *testing.T) {
	f, err := fleet.Build(fleet.Spec{Regions: []fleet.RegionSpec{{Name: "eastus", Zones: []fleet.ZoneSpec{{Name: "1", Blocks: []fleet.BlockSpec{{Name: "b",
		Nodes: []fleet.GroupSpec{{SKU: "Standard_ND96amsr_A100_v4", Count: 2}}}}}}}}}, fleet.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	sh := ShapeOf(f)
	if !reflect.DeepEqual(sh.Regions, []string{"eastus"}) || sh.MaxGPUs["A100-80G"] != 8 {
		t.Errorf("shape %+v", sh)
	}
}
