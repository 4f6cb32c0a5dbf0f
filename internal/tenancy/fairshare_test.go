package tenancy

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

func fairTree(t *testing.T) *Tree {
	t.Helper()
	tree, err := NewTree([]TenantSpec{
		{Name: "org"},
		{Name: "a", Parent: "org", Quota: []QuotaSpec{{Flavor: "A100-80G", Region: "eastus", Guaranteed: resource.GPUs(8), Weight: 1}}},
		{Name: "b", Parent: "org", Quota: []QuotaSpec{{Flavor: "A100-80G", Region: "eastus", Guaranteed: resource.GPUs(8), Weight: 3}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// Decayed usage does not depend on how often it is advanced: one step of
// a day equals 1440 steps of a minute at the same usage, and both equal
// the closed form u·H/ln2·(1−2^(−T/H)).
func TestDecayStepIndependent(t *testing.T) {
	tree := fairTree(t)
	a, _ := tree.Lookup("a")
	use := NewLedger(tree)
	use[a][0] = resource.GPUs(8)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hl := 12 * time.Hour
	_, one := tree.Decay(&History{At: t0}, use, t0.Add(24*time.Hour), hl)
	h := &History{At: t0}
	for m := 1; m <= 1440; m++ {
		_, h = tree.Decay(h, use, t0.Add(time.Duration(m)*time.Minute), hl)
	}
	want := 8 * 12 / math.Ln2 * (1 - 0.25)
	for _, got := range []*History{one, h} {
		if len(got.Entries) != 1 || math.Abs(got.Entries[0].GPUHours-want) > 1e-9*want {
			t.Fatalf("decayed usage %+v, want a: %.9f GPU-h", got.Entries, want)
		}
		if !got.At.Equal(t0.Add(24 * time.Hour)) {
			t.Fatalf("history at %v", got.At)
		}
	}
	// Idle for two half-lives: a quarter is left.
	dec, later := tree.Decay(one, NewLedger(tree), t0.Add(48*time.Hour), hl)
	if got := dec[a][0]; math.Abs(got-want/4) > 1e-9 {
		t.Fatalf("after two half-lives idle: %v, want %v", got, want/4)
	}
	if later.Entries[0].GPUHours != dec[a][0] {
		t.Fatalf("history %v and decayed %v differ", later.Entries, dec[a][0])
	}
}

// A clock set back counts as no time passed; a nil history starts from
// nothing (the first cycle adds nothing: no interval yet); entries of
// tenants no longer in the tree are dropped.
func TestDecayEdges(t *testing.T) {
	tree := fairTree(t)
	a, _ := tree.Lookup("a")
	use := NewLedger(tree)
	use[a][0] = resource.GPUs(4)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dec, h := tree.Decay(nil, use, t0, time.Hour)
	if dec[a][0] != 0 || len(h.Entries) != 0 || !h.At.Equal(t0) {
		t.Fatalf("from nothing: %v %+v", dec, h)
	}
	old := &History{At: t0, Entries: []HistoryEntry{{Tenant: "a", Flavor: "A100-80G", Region: "eastus", GPUHours: 10}, {Tenant: "gone", Flavor: "A100-80G", GPUHours: 5}}}
	dec, h = tree.Decay(old, use, t0.Add(-time.Hour), time.Hour)
	if dec[a][0] != 10 || len(h.Entries) != 1 || !h.At.Equal(t0) {
		t.Fatalf("clock set back: %v %+v", dec, h)
	}
}

// The factor is 1 for an entry that used nothing and 0.5 for one that
// used exactly its share; shares follow guarantee × weight among siblings.
func TestFairShares(t *testing.T) {
	tree := fairTree(t)
	a, _ := tree.Lookup("a")
	b, _ := tree.Lookup("b")
	dec := Decayed{{}, {25}, {75}}
	for _, c := range []struct {
		i             int
		share, factor float64
	}{{a, 0.25, 0.5}, {b, 0.75, 0.5}} {
		fs := tree.FairShares(c.i, dec)
		if len(fs) != 1 || math.Abs(fs[0].Share-c.share) > 1e-12 || math.Abs(fs[0].Factor-c.factor) > 1e-12 {
			t.Fatalf("%s: %+v, want share %v factor %v", tree.Tenants[c.i].Name, fs, c.share, c.factor)
		}
	}
	dec = Decayed{{}, {0}, {10}}
	if fs := tree.FairShares(a, dec); fs[0].Factor != 1 || fs[0].Usage != 0 {
		t.Fatalf("unused: %+v", fs)
	}
	if fs := tree.FairShares(b, dec); math.Abs(fs[0].Factor-math.Exp2(-1/0.75)) > 1e-12 {
		t.Fatalf("all the use: %+v", fs)
	}
}

// A parent's guarantee is for its whole subtree: below its children's
// sum, it is refused naming the entry and the children.
func TestParentGuaranteeCoversChildren(t *testing.T) {
	q := func(g int) []QuotaSpec {
		return []QuotaSpec{{Pos: yamlPos(7), Flavor: "A100-80G", Region: "eastus", Guaranteed: resource.GPUs(g)}}
	}
	_, err := NewTree([]TenantSpec{{Name: "org", Quota: q(10)}, {Name: "a", Parent: "org", Quota: q(8)}, {Name: "b", Parent: "org", Quota: q(4)}})
	if err == nil || !strings.Contains(err.Error(), "tenants[0].quota[0].guaranteed") || !strings.Contains(err.Error(), "a 8, b 4") || !strings.Contains(err.Error(), "t.yaml:7") {
		t.Fatalf("parent below its children: %v", err)
	}
	if _, err := NewTree([]TenantSpec{{Name: "org", Quota: q(12)}, {Name: "a", Parent: "org", Quota: q(8)}, {Name: "b", Parent: "org", Quota: q(4)}}); err != nil {
		t.Fatalf("parent equal to its children: %v", err)
	}
	if _, err := NewTree([]TenantSpec{{Name: "org"}, {Name: "a", Parent: "org", Quota: q(8)}}); err != nil {
		t.Fatalf("no guarantee on the parent: %v", err)
	}
}

func yamlPos(line int) yamlfile.Pos { return yamlfile.Pos{File: "t.yaml", Line: line, Col: 3} }
