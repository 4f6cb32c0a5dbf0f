package tenancy

import (
	"slices"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// The capacity calendar at one instant is a matching problem: every claim
// (a reservation by count, a booking) wants some number of machines, each
// from the machines it matches, and each machine serves one claim. Zones,
// blocks, SKUs and GPU models cut the region into sets that need not nest
// (a booking by GPU model spans SKUs; a block may hold several SKUs), so
// the check is a maximum flow: source → claim (its count) → machine class
// (the machines alike for every claim: same zone, block, SKU and model) →
// sink (the class's size). The flow is found by augmenting paths, which
// never lower a claim's flow from the source.

// claimant is one claim on the machines at an instant.
type claimant struct {
	want    int
	matches func(*fleet.Node) bool
}

// machineClass is a set of machines that every claim either matches all
// of or none of.
type machineClass struct {
	node *fleet.Node // one of them
	size int
}

// classesOf groups nodes into machine classes (in the nodes' order) and
// returns each node's class.
func classesOf(nodes []*fleet.Node) ([]machineClass, map[fleet.NodeID]int) {
	type key struct {
		zone  string
		block fleet.BlockID
		sku   fleet.SKUName
		model fleet.ModelID
	}
	var classes []machineClass
	index := map[key]int{}
	of := make(map[fleet.NodeID]int, len(nodes))
	for _, n := range nodes {
		k := key{n.Zone, n.Block, n.SKU.Name, n.Model}
		i, ok := index[k]
		if !ok {
			i = len(classes)
			index[k] = i
			classes = append(classes, machineClass{node: n})
		}
		classes[i].size++
		of[n.ID] = i
	}
	return classes, of
}

// adjOf lists the classes whose machines matches accepts.
func adjOf(classes []machineClass, matches func(*fleet.Node) bool) []int {
	var adj []int
	for k, mc := range classes {
		if matches(mc.node) {
			adj = append(adj, k)
		}
	}
	return adj
}

// calendarFlow is the flow network of one instant.
type calendarFlow struct {
	classes []machineClass // their sizes at the instant
	want    []int          // per claim: its count
	served  []int          // per claim: flow from the source
	adj     [][]int        // per claim: the classes it matches
	flow    [][]int        // per claim, aligned with adj: flow to that class (in flat)
	flat    []int
	used    []int   // per class: flow to the sink
	users   [][]use // per class: the claims with an edge to it
	// augment's buffers.
	viaClaim []int
	viaClass []hop
	seen     []bool
	queue    []int
}

// use is claim c's edge i (into some class).
type use struct{ c, i int }

// hop is how augment reached a claim: back along its edge (into class).
type hop struct{ class, edge int }

// newCalendarFlow builds the network of the classes, with no claims.
func newCalendarFlow(classes []machineClass) *calendarFlow {
	fl := &calendarFlow{}
	fl.reset(classes)
	return fl
}

// reset empties the network for classes (of the same number as before,
// or a first use), keeping the memory: one calendar checks many instants.
func (fl *calendarFlow) reset(classes []machineClass) {
	fl.classes = classes
	fl.want, fl.served, fl.adj, fl.flow, fl.flat = fl.want[:0], fl.served[:0], fl.adj[:0], fl.flow[:0], fl.flat[:0]
	if len(fl.users) != len(classes) {
		fl.users, fl.used, fl.viaClaim = make([][]use, len(classes)), make([]int, len(classes)), make([]int, len(classes))
	}
	for k := range fl.users {
		fl.users[k] = fl.users[k][:0]
	}
	clear(fl.used)
}

// add adds a claim of want machines from the classes adj (read only),
// with no flow, and returns its index.
func (fl *calendarFlow) add(want int, adj []int) int {
	ci := len(fl.want)
	fl.want = append(fl.want, want)
	fl.served = append(fl.served, 0)
	for i, k := range adj {
		fl.users[k] = append(fl.users[k], use{ci, i})
	}
	fl.adj = append(fl.adj, adj)
	// The claims' flows share one backing array; growing it moves the
	// earlier ones, so they are sliced again from it.
	from := len(fl.flat)
	if cap(fl.flat)-from < len(adj) {
		grown := make([]int, from, 2*cap(fl.flat)+len(adj))
		copy(grown, fl.flat)
		fl.flat = grown
		at := 0
		for c := range fl.flow {
			fl.flow[c] = fl.flat[at : at+len(fl.adj[c]) : at+len(fl.adj[c])]
			at += len(fl.adj[c])
		}
	}
	fl.flat = fl.flat[:from+len(adj)]
	clear(fl.flat[from:])
	fl.flow = append(fl.flow, fl.flat[from:from+len(adj):from+len(adj)])
	return ci
}

// serve augments the flow until no claim short of its count can get
// another machine, even by moving others to machines they also match.
func (fl *calendarFlow) serve() {
	for fl.augment() {
	}
}

// augment finds one augmenting path (breadth first, from every claim
// short of its count) and pushes as much as it can take; it reports
// whether it found one.
func (fl *calendarFlow) augment() bool {
	// Claims are reached from the source, or from a class through an
	// edge carrying flow (moving that claim); classes through an edge
	// from a reached claim.
	// viaClaim: class ← claim (claim index + 1); viaClass: claim ← class
	// (the edge carrying flow; class -1: from the source).
	clear(fl.viaClaim)
	fl.viaClass = slices.Grow(fl.viaClass[:0], len(fl.want))[:len(fl.want)]
	fl.seen = slices.Grow(fl.seen[:0], len(fl.want))[:len(fl.want)]
	clear(fl.seen)
	viaClaim, viaClass, seen, queue := fl.viaClaim, fl.viaClass, fl.seen, fl.queue[:0]
	defer func() { fl.queue = queue[:0] }()
	for c := range fl.want {
		if fl.served[c] < fl.want[c] {
			seen[c], viaClass[c] = true, hop{-1, -1}
			queue = append(queue, c)
		}
	}
	for qi := 0; qi < len(queue); qi++ {
		c := queue[qi]
		for _, k := range fl.adj[c] {
			if viaClaim[k] != 0 {
				continue
			}
			viaClaim[k] = c + 1
			if fl.used[k] < fl.classes[k].size {
				fl.push(k, viaClaim, viaClass)
				return true
			}
			for _, u := range fl.users[k] {
				if !seen[u.c] && fl.flow[u.c][u.i] > 0 {
					seen[u.c], viaClass[u.c] = true, hop{k, u.i}
					queue = append(queue, u.c)
				}
			}
		}
	}
	return false
}

// push sends flow along the path that ends at class k (see augment):
// as much as the source edge, the moved claims' edges and k's room take.
func (fl *calendarFlow) push(k int, viaClaim []int, viaClass []hop) {
	amount := fl.classes[k].size - fl.used[k]
	// First pass: the bottleneck; second: apply it.
	for pass := 0; pass < 2; pass++ {
		for kk := k; ; {
			c := viaClaim[kk] - 1
			i := indexOf(fl.adj[c], kk)
			if pass == 1 {
				fl.flow[c][i] += amount
			}
			from := viaClass[c]
			if from.class == -1 {
				if pass == 0 {
					amount = min(amount, fl.want[c]-fl.served[c])
				} else {
					fl.served[c] += amount
				}
				break
			}
			// c moves amount off class from.class (its edge from.edge).
			if pass == 0 {
				amount = min(amount, fl.flow[c][from.edge])
			} else {
				fl.flow[c][from.edge] -= amount
			}
			kk = from.class
		}
	}
	fl.used[k] += amount
}

// indexOf is the position of k in adj (present by construction).
func indexOf(adj []int, k int) int {
	for i, x := range adj {
		if x == k {
			return i
		}
	}
	panic("tenancy: calendar flow edge missing")
}

// shortfall describes why the flow is short (call it after serve): the
// claims still reachable from the source, and the machines they could use
// (all taken by them), which are fewer. zone is their zone when they all
// lie in one, "" for the region.
func (fl *calendarFlow) shortfall() (wanted, available int, zone string) {
	seenClaim := make([]bool, len(fl.want))
	seenClass := make([]bool, len(fl.classes))
	var queue []int
	for c := range fl.want {
		if fl.served[c] < fl.want[c] {
			seenClaim[c] = true
			queue = append(queue, c)
		}
	}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		wanted += fl.want[c]
		for _, k := range fl.adj[c] {
			if seenClass[k] {
				continue
			}
			seenClass[k] = true
			available += fl.classes[k].size
			for _, u := range fl.users[k] {
				if !seenClaim[u.c] && fl.flow[u.c][u.i] > 0 {
					seenClaim[u.c] = true
					queue = append(queue, u.c)
				}
			}
		}
	}
	zones := map[string]bool{}
	for k, ok := range seenClass {
		if ok {
			zones[fl.classes[k].node.Zone] = true
			zone = fl.classes[k].node.Zone
		}
	}
	if len(zones) != 1 {
		zone = ""
	}
	return wanted, available, zone
}
