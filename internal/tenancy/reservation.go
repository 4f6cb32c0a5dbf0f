package tenancy

import (
	"errors"
	"fmt"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// ErrInsufficientCapacity is returned when a reservation cannot be met whole.
var ErrInsufficientCapacity = errors.New("tenancy: insufficient capacity for reservation")

// NodeUse tells Bind how a node is used today.
type NodeUse struct {
	Reserved    bool // already bound to another reservation
	Partitioned bool // in a partition the owner may not use
	Down        bool
	// Blocking is true when work that cannot be evicted for the owner runs
	// there (non-preemptible work of other tenants).
	Blocking bool
	Busy     bool // anything runs there
}

// Bind chooses r.Count machines for r, all or nothing: idle machines first,
// then machines running only evictable work, in fleet order. It returns
// ErrInsufficientCapacity (wrapped, with numbers) when it cannot.
func Bind(r *Reservation, f *fleet.Fleet, use func(*fleet.Node) NodeUse) ([]fleet.NodeID, error) {
	if r.Count < 1 {
		return nil, fmt.Errorf("tenancy: reservation %q: count must be at least 1", r.Name)
	}
	var idle, busy []fleet.NodeID
	for _, n := range f.Nodes {
		if !r.Matches(n) {
			continue
		}
		u := use(n)
		if u.Reserved || u.Partitioned || u.Down || u.Blocking {
			continue
		}
		if u.Busy {
			busy = append(busy, n.ID)
		} else {
			idle = append(idle, n.ID)
		}
	}
	all := append(idle, busy...)
	if len(all) < r.Count {
		where := r.Region
		if r.Zone != "" {
			where += " zone " + r.Zone
		}
		return nil, fmt.Errorf("%w %q: %d × %s wanted in %s, %d available", ErrInsufficientCapacity, r.Name, r.Count, r.SKU, where, len(all))
	}
	return all[:r.Count], nil
}
