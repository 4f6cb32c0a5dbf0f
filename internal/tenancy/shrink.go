package tenancy

import (
	"sort"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// Shrink chooses which of a reservation's machines it keeps when it
// shrinks to capacity machines: the ones its owner uses most (by GPUs in
// use, from use), ties in the reservation's own order; the rest are
// released, in the same order. Shrinking always succeeds. With capacity
// at least len(nodes) nothing is released; a negative capacity counts as
// 0. nodes is not modified.
func Shrink(nodes []fleet.NodeID, use map[fleet.NodeID]int, capacity int) (kept, released []fleet.NodeID) {
	capacity = max(0, min(capacity, len(nodes)))
	order := append([]fleet.NodeID(nil), nodes...)
	sort.SliceStable(order, func(i, j int) bool { return use[order[i]] > use[order[j]] })
	return order[:capacity:capacity], order[capacity:]
}
