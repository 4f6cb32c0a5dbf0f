package server

import (
	"maps"
	"slices"
	"testing"
	"unsafe"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TestInterner: equal names, lists and label sets come back as one shared
// copy with the same values; different ones (also lists that join alike
// with a NUL) stay apart; an append to an interned list copies it.
func TestInterner(t *testing.T) {
	in := newInterner()
	mk := func(tenant string, flavors []fleet.ModelID, regions []string, labels map[string]string) *store.Workload {
		return &store.Workload{Tenant: tenant, Spec: workload.Spec{Tenant: tenant, Flavors: flavors, Regions: regions, Labels: labels}}
	}
	a := mk(string([]byte("org0-t1")), []fleet.ModelID{"A100-80G", "H100-80G"}, []string{"eastus", "westus2"}, map[string]string{"team": "ml", "class": "batch"})
	b := mk(string([]byte("org0-t1")), []fleet.ModelID{"A100-80G", "H100-80G"}, []string{"eastus", "westus2"}, map[string]string{"class": "batch", "team": "ml"})
	c := mk("org0-t2", []fleet.ModelID{"A100-80G"}, []string{"eastus\x00", "westus2"}, map[string]string{"team": "ml\x00class"})
	d := mk("org0-t2", []fleet.ModelID{"A100-80G"}, []string{"eastus", "\x00westus2"}, map[string]string{"team": "ml", "class": ""})
	want := []*store.Workload{a, b, c, d}
	var before []store.Workload
	for _, w := range want {
		cp := *w
		cp.Spec.Flavors, cp.Spec.Regions, cp.Spec.Labels = slices.Clone(w.Spec.Flavors), slices.Clone(w.Spec.Regions), maps.Clone(w.Spec.Labels)
		before = append(before, cp)
		in.workload(w)
	}
	for i, w := range want {
		if w.Tenant != before[i].Tenant || !slices.Equal(w.Spec.Flavors, before[i].Spec.Flavors) ||
			!slices.Equal(w.Spec.Regions, before[i].Spec.Regions) || !maps.Equal(w.Spec.Labels, before[i].Spec.Labels) {
			t.Errorf("workload %d changed value: %+v, was %+v", i, w.Spec, before[i].Spec)
		}
	}
	if &a.Spec.Flavors[0] != &b.Spec.Flavors[0] || &a.Spec.Regions[0] != &b.Spec.Regions[0] || !sameMap(a.Spec.Labels, b.Spec.Labels) {
		t.Error("equal lists and label sets are not shared")
	}
	if unsafeStringData(a.Tenant) != unsafeStringData(b.Tenant) {
		t.Error("equal tenant names are not shared")
	}
	if &c.Spec.Regions[0] == &d.Spec.Regions[0] || sameMap(c.Spec.Labels, d.Spec.Labels) {
		t.Error("lists or label sets that join alike but differ are shared")
	}
	grown := append(a.Spec.Regions, "northeurope")
	if &grown[0] == &b.Spec.Regions[0] || len(b.Spec.Regions) != 2 {
		t.Error("an append to an interned list wrote into the shared copy")
	}
}

func sameMap(a, b map[string]string) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	k := "interner-probe"
	a[k] = "x"
	_, shared := b[k]
	delete(a, k)
	return shared
}

func unsafeStringData(s string) *byte { return unsafe.StringData(s) }
