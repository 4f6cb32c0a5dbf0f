package tenancy

import (
	"slices"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// TestShrink: a shrinking reservation keeps the machines its owner uses
// most, ties in its own order, and releases the rest; the input is left
// as it was.
func TestShrink(t *testing.T) {
	ids := func(s ...string) []fleet.NodeID {
		out := []fleet.NodeID{}
		for _, x := range s {
			out = append(out, fleet.NodeID(x))
		}
		return out
	}
	cases := []struct {
		name           string
		nodes          []string
		use            map[fleet.NodeID]int
		capacity       int
		kept, released []string
	}{
		{"idle: the first ones stay", []string{"a", "b", "c"}, nil, 2, []string{"a", "b"}, []string{"c"}},
		{"the busiest stay", []string{"a", "b", "c", "d"}, map[fleet.NodeID]int{"c": 8, "d": 2}, 2, []string{"c", "d"}, []string{"a", "b"}},
		{"ties keep the reservation's order", []string{"a", "b", "c", "d"}, map[fleet.NodeID]int{"b": 4, "d": 4}, 1, []string{"b"}, []string{"d", "a", "c"}},
		{"a partly used machine beats an idle one", []string{"a", "b", "c"}, map[fleet.NodeID]int{"a": 1, "c": 8}, 2, []string{"c", "a"}, []string{"b"}},
		{"no shrink", []string{"a", "b"}, map[fleet.NodeID]int{"b": 1}, 2, []string{"b", "a"}, []string{}},
		{"capacity above the size", []string{"a"}, nil, 5, []string{"a"}, []string{}},
		{"to nothing", []string{"a", "b"}, nil, 0, []string{}, []string{"a", "b"}},
		{"negative", []string{"a"}, nil, -1, []string{}, []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := ids(c.nodes...)
			before := slices.Clone(in)
			kept, released := Shrink(in, c.use, c.capacity)
			if !slices.Equal(append([]fleet.NodeID{}, kept...), ids(c.kept...)) || !slices.Equal(append([]fleet.NodeID{}, released...), ids(c.released...)) {
				t.Fatalf("kept %v released %v, want %v and %v", kept, released, c.kept, c.released)
			}
			if !slices.Equal(in, before) {
				t.Fatalf("input changed: %v -> %v", before, in)
			}
			kept = append(kept, "x") // the kept slice has no room into the released
			if len(released) > 0 && released[0] == "x" {
				t.Fatalf("appending to kept overwrote released")
			}
		})
	}
}
