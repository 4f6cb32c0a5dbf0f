package fleet

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

func TestBuiltinCatalog(t *testing.T) {
	c := Builtin()
	for _, tc := range []struct {
		sku   SKUName
		model ModelID
		gpus  int
	}{
		{"Standard_NC4as_T4_v3", "T4", 1}, {"Standard_NC64as_T4_v3", "T4", 4},
		{"Standard_NC24ads_A100_v4", "A100-80G", 1}, {"Standard_NC96ads_A100_v4", "A100-80G", 4},
		{"Standard_ND96asr_v4", "A100-40G", 8}, {"Standard_ND96amsr_A100_v4", "A100-80G", 8},
		{"Standard_ND96isr_H100_v5", "H100-80G", 8}, {"Standard_ND96isr_H200_v5", "H200-141G", 8},
		{"Standard_ND96isr_MI300X_v5", "MI300X-192G", 8},
	} {
		s, ok := c.SKU(tc.sku)
		if !ok || s.Model != tc.model || s.GPUs != tc.gpus {
			t.Errorf("SKU %s = %+v", tc.sku, s)
			continue
		}
		p := c.PriceIn(s, "westeurope")
		if p.OnDemand <= 0 || p.Spot <= 0 || p.Spot >= p.OnDemand || p.Reserved3Y >= p.Reserved1Y {
			t.Errorf("%s prices = %+v", tc.sku, p)
		}
	}
	s, _ := c.SKU("Standard_ND96asr_v4")
	if !s.NVLink || s.InfiniBandGbps != 1600 {
		t.Errorf("ND96asr_v4 interconnect = %v, %d", s.NVLink, s.InfiniBandGbps)
	}
}

func TestCatalogOverride(t *testing.T) {
	c := Builtin()
	var o Catalog
	src := "skus:\n  - {name: Standard_ND96isr_H100_v5, model: H100-80G, gpus: 8, vcpus: 96, memory_gib: 1900, prices: {eastus: {on_demand: 50}}}\n"
	if err := yamlfile.Decode("o.yaml", []byte(src), &o); err != nil {
		t.Fatal(err)
	}
	if err := c.Merge(&o); err != nil {
		t.Fatal(err)
	}
	s, _ := c.SKU("Standard_ND96isr_H100_v5")
	if got := c.PriceIn(s, "eastus").OnDemand; got != 50 {
		t.Errorf("overridden price = %v", got)
	}
}

func TestBuildErrors(t *testing.T) {
	var spec Spec
	src := "regions:\n  - name: eastus\n    zones:\n      - name: '1'\n        blocks:\n          - name: b1\n            nodes:\n              - {sku: Standard_Nope, count: 2}\n              - {sku: Standard_ND96isr_H100_v5, count: 0}\n"
	if err := yamlfile.Decode("f.yaml", []byte(src), &spec); err != nil {
		t.Fatal(err)
	}
	_, err := Build(spec, Builtin())
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"f.yaml:8:17: fleet.regions[0].zones[0].blocks[0].nodes[0].sku: unknown SKU", "f.yaml:9:17: fleet.regions[0].zones[0].blocks[0].nodes[1].count: count must be at least 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestBuildOrder(t *testing.T) {
	spec := Spec{Regions: []RegionSpec{{Name: "eastus", Zones: []ZoneSpec{{Name: "1", Blocks: []BlockSpec{
		{Name: "a", Nodes: []GroupSpec{{SKU: "Standard_ND96isr_H100_v5", Count: 2}, {SKU: "Standard_NC4as_T4_v3", Count: 1}}},
		{Name: "b", Nodes: []GroupSpec{{SKU: "Standard_ND96isr_H100_v5", Count: 1}}},
	}}}}}}
	f, err := Build(spec, Builtin())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range f.Nodes {
		ids = append(ids, string(n.ID))
	}
	if got := strings.Join(ids, ","); got != "a-n0000,a-n0001,a-n0002,b-n0000" {
		t.Errorf("node order = %s", got)
	}
	if got := f.Capacity("H100-80G", "eastus"); got.WholeGPUs() != 24 {
		t.Errorf("capacity = %v", got)
	}
}
