package schedbench_test

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/sched/schedbench"
)

// TestMixedConfig: the mixed world written as a config loads back to the
// same fleet (nodes, their regions, models and pool labels) and tenant
// tree (names, parents, quota entries with guarantees and limits).
func TestMixedConfig(t *testing.T) {
	m, err := schedbench.NewMixed(300, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse("mixed.yaml", []byte(m.Config()))
	if err != nil {
		t.Fatalf("%v\n%s", err, m.Config())
	}
	if len(c.Fleet.Nodes) != len(m.Fleet.Nodes) {
		t.Fatalf("%d nodes, want %d", len(c.Fleet.Nodes), len(m.Fleet.Nodes))
	}
	for i, n := range c.Fleet.Nodes {
		o := m.Fleet.Nodes[i]
		if n.ID != o.ID || n.Region != o.Region || n.Model != o.Model || n.Labels["pool"] != o.Labels["pool"] {
			t.Fatalf("node %d: %s %s %s pool %q, want %s %s %s pool %q", i, n.ID, n.Region, n.Model, n.Labels["pool"], o.ID, o.Region, o.Model, o.Labels["pool"])
		}
	}
	if len(c.Tree.Tenants) != len(m.Tenants.Tenants) {
		t.Fatalf("%d tenants, want %d", len(c.Tree.Tenants), len(m.Tenants.Tenants))
	}
	for i, tn := range c.Tree.Tenants {
		o := m.Tenants.Tenants[i]
		if tn.Name != o.Name || tn.Parent != o.Parent || len(tn.Quotas) != len(o.Quotas) {
			t.Fatalf("tenant %d: %+v, want %+v", i, tn, o)
		}
		for j, q := range tn.Quotas {
			if oq := o.Quotas[j]; q.Key != oq.Key || q.Guaranteed != oq.Guaranteed || q.Limit != oq.Limit {
				t.Errorf("tenant %s quota %d: %+v, want %+v", tn.Name, j, q, oq)
			}
		}
	}
}
