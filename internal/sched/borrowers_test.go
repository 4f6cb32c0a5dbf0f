package sched

import (
	"slices"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/resource"
)

// classifyBorrowersMaps is classifyBorrowers as it was before the counting
// sort: groups in a map, each sorted when above its guarantee. The test
// below checks the current version marks exactly the same borrowers.
func (s *snapshot) classifyBorrowersMaps() {
	type group struct {
		guaranteed resource.MilliGPU
		runs       []int
	}
	groups := map[[2]int]*group{}
	var order [][2]int
	for i := range s.run {
		r := &s.run[i]
		if r.w.Running.OnReservation {
			continue
		}
		q, idx, ok := s.tree.Entry(r.tenant, r.key.Model, r.key.Region)
		if !ok {
			r.borrows = true
			continue
		}
		k := [2]int{r.tenant, idx}
		g, ok := groups[k]
		if !ok {
			g = &group{guaranteed: q.Guaranteed}
			groups[k] = g
			order = append(order, k)
		}
		g.runs = append(g.runs, i)
	}
	for _, k := range order {
		g := groups[k]
		slices.SortFunc(g.runs, func(a, b int) int {
			x, y := s.run[a].w, s.run[b].w
			if x.Priority != y.Priority {
				return int(y.Priority - x.Priority)
			}
			if x.Running.Within != y.Running.Within {
				if x.Running.Within {
					return -1
				}
				return 1
			}
			if c := x.Running.StartedAt.Compare(y.Running.StartedAt); c != 0 {
				return c
			}
			return strings.Compare(string(x.Name), string(y.Name))
		})
		var cum resource.MilliGPU
		for _, i := range g.runs {
			cum = cum.Add(s.run[i].w.TotalGPUs())
			s.run[i].borrows = cum > g.guaranteed
		}
	}
}

// TestClassifyBorrowersSameAsMaps compares the borrowers newSnapshot marks
// with the map version's on the property tests' random worlds.
func TestClassifyBorrowersSameAsMaps(t *testing.T) {
	cases, borrowing := 0, 0
	for seed := uint64(1); seed <= 300; seed++ {
		in, _ := propertyCase(seed)
		s, _ := newSnapshot(&in)
		got := make([]bool, len(s.run))
		for i := range s.run {
			got[i] = s.run[i].borrows
			s.run[i].borrows = false
		}
		s.classifyBorrowersMaps()
		for i := range s.run {
			if got[i] != s.run[i].borrows {
				t.Fatalf("seed %d: %s borrows %v, map version %v", seed, s.run[i].w.Name, got[i], s.run[i].borrows)
			}
			if got[i] {
				borrowing++
			}
		}
		if len(s.run) > 0 {
			cases++
		}
	}
	if cases < 200 || borrowing < 50 {
		t.Fatalf("too few cases with running work (%d) or borrowers (%d) to compare", cases, borrowing)
	}
	t.Logf("%d cases, %d borrowing runs", cases, borrowing)
}

// TestIndexRunningSameAsAppend checks each node's list of runs against
// appending every run's index to its nodes in turn (the former build).
func TestIndexRunningSameAsAppend(t *testing.T) {
	shared := 0
	for seed := uint64(1); seed <= 300; seed++ {
		in, _ := propertyCase(seed)
		s, _ := newSnapshot(&in)
		want := make([][]int, len(s.nodes))
		for i := range s.run {
			for _, ni := range s.run[i].nodes {
				want[ni] = append(want[ni], i)
			}
		}
		for ni := range s.nodes {
			if !slices.Equal(s.nodes[ni].running, want[ni]) {
				t.Fatalf("seed %d: node %d runs %v, want %v", seed, ni, s.nodes[ni].running, want[ni])
			}
			if len(want[ni]) > 1 {
				shared++
			}
		}
	}
	if shared < 100 {
		t.Fatalf("only %d nodes with several runs", shared)
	}
}
