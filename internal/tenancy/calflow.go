package tenancy

import "github.com/arbiterhq/arbiter/internal/fleet"

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

// calendarFlow is the flow network of one instant.
type calendarFlow struct {
	classes []machineClass
	claims  []claimant
	served  []int   // per claim: flow from the source
	adj     [][]int // per claim: the classes it matches
	flow    [][]int // per claim, aligned with adj: flow to that class
	used    []int   // per class: flow to the sink
	users   [][]use // per class: the claims with an edge to it
}

// use is claim c's edge i (into some class).
type use struct{ c, i int }

// hop is how augment reached a claim: back along its edge (into class).
type hop struct{ class, edge int }

// newCalendarFlow builds the network of nodes and claims, with no flow.
func newCalendarFlow(nodes []*fleet.Node, claims []claimant) *calendarFlow {
	type key struct {
		zone  string
		block fleet.BlockID
		sku   fleet.SKUName
		model fleet.ModelID
	}
	fl := &calendarFlow{}
	index := map[key]int{}
	for _, n := range nodes {
		k := key{n.Zone, n.Block, n.SKU.Name, n.Model}
		i, ok := index[k]
		if !ok {
			i = len(fl.classes)
			index[k] = i
			fl.classes = append(fl.classes, machineClass{node: n})
			fl.users = append(fl.users, nil)
		}
		fl.classes[i].size++
	}
	fl.used = make([]int, len(fl.classes))
	for _, c := range claims {
		fl.add(c)
	}
	return fl
}

// add adds a claim with no flow and returns its index.
func (fl *calendarFlow) add(c claimant) int {
	ci := len(fl.claims)
	fl.claims = append(fl.claims, c)
	fl.served = append(fl.served, 0)
	var adj []int
	for k, mc := range fl.classes {
		if c.matches(mc.node) {
			fl.users[k] = append(fl.users[k], use{ci, len(adj)})
			adj = append(adj, k)
		}
	}
	fl.adj = append(fl.adj, adj)
	fl.flow = append(fl.flow, make([]int, len(adj)))
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
	viaClaim := make([]int, len(fl.classes)) // class ← claim: claim index + 1
	viaClass := make([]hop, len(fl.claims))  // claim ← class: the edge carrying flow; class -1: from the source
	seen := make([]bool, len(fl.claims))
	var queue []int
	for c := range fl.claims {
		if fl.served[c] < fl.claims[c].want {
			seen[c], viaClass[c] = true, hop{-1, -1}
			queue = append(queue, c)
		}
	}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
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
					amount = min(amount, fl.claims[c].want-fl.served[c])
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
	seenClaim := make([]bool, len(fl.claims))
	seenClass := make([]bool, len(fl.classes))
	var queue []int
	for c := range fl.claims {
		if fl.served[c] < fl.claims[c].want {
			seenClaim[c] = true
			queue = append(queue, c)
		}
	}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		wanted += fl.claims[c].want
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
