package sched

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/sched/score"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// world is a random fleet, tenant tree and reservation for property tests.
type world struct {
	in    Input
	owner string // reservation owner, "" when none
	res   string
}

func gpuPtr(n int) *resource.MilliGPU { m := resource.GPUs(n); return &m }

func randomWorld(rng *rand.Rand) *world {
	skus := []fleet.SKUName{"Standard_ND96amsr_A100_v4", "Standard_NC64as_T4_v3", "Standard_NC24ads_A100_v4"}
	regions := []string{"eastus", "westus2"}[:1+rng.IntN(2)]
	var spec fleet.Spec
	for _, r := range regions {
		rs := fleet.RegionSpec{Name: r}
		z := fleet.ZoneSpec{Name: "1"}
		for b := 0; b < 1+rng.IntN(3); b++ {
			bs := fleet.BlockSpec{Name: fleet.BlockID(fmt.Sprintf("%s-b%d", r, b))}
			for g := 0; g < 1+rng.IntN(2); g++ {
				// Node pools by block parity (no draw, so that the random
				// stream is what it was before pools existed).
				bs.Nodes = append(bs.Nodes, fleet.GroupSpec{SKU: skus[rng.IntN(len(skus))], Count: 1 + rng.IntN(6),
					Labels: map[string]string{PoolLabel: fmt.Sprintf("p%d", b%2)}})
			}
			z.Blocks = append(z.Blocks, bs)
		}
		rs.Zones = []fleet.ZoneSpec{z}
		spec.Regions = append(spec.Regions, rs)
	}
	f, err := fleet.Build(spec, fleet.Builtin())
	if err != nil {
		panic(err)
	}
	models := []fleet.ModelID{"A100-80G", "T4"}
	tenants := []tenancy.TenantSpec{{Name: "root"}}
	nLeaves := 2 + rng.IntN(4)
	for i := 0; i < nLeaves; i++ {
		ts := tenancy.TenantSpec{Name: fmt.Sprintf("t%d", i), Parent: "root"}
		for _, m := range models {
			for _, r := range regions {
				if rng.IntN(3) == 0 {
					continue
				}
				cap := f.Capacity(m, r).WholeGPUs()
				g := rng.IntN(cap/nLeaves + 1)
				q := tenancy.QuotaSpec{Flavor: m, Region: r, Guaranteed: resource.GPUs(g), Weight: 1}
				if rng.IntN(2) == 0 {
					q.Limit = gpuPtr(g + rng.IntN(cap+1))
				}
				if rng.IntN(3) == 0 {
					q.Lendable = gpuPtr(rng.IntN(g + 1))
				}
				ts.Quota = append(ts.Quota, q)
			}
		}
		tenants = append(tenants, ts)
	}
	tree, err := tenancy.NewTree(tenants)
	if err != nil {
		panic(err)
	}
	w := &world{in: Input{Now: t0, Seed: rng.Uint64(), Fleet: f, Tenants: tree}}
	// Maybe one reservation of an 8-GPU SKU.
	if rng.IntN(2) == 0 {
		r := tenancy.Reservation{Name: "r1", Owner: "t0", Region: regions[0], SKU: "Standard_ND96amsr_A100_v4", Count: 1 + rng.IntN(2)}
		ids, err := tenancy.Bind(&r, f, func(*fleet.Node) tenancy.NodeUse { return tenancy.NodeUse{} })
		if err == nil {
			r.Nodes = ids
			w.in.Reservations = []tenancy.Reservation{r}
			w.owner, w.res = "t0", "r1"
		}
	}
	return w
}

func randomWorkloads(rng *rand.Rand, w *world, n int, prefix string, at time.Time) []*workload.Workload {
	var out []*workload.Workload
	regions := w.in.Fleet.Regions
	for i := 0; i < n; i++ {
		s := workload.Spec{
			Name:               workload.ID(fmt.Sprintf("%s%03d", prefix, i)),
			Tenant:             fmt.Sprintf("t%d", rng.IntN(len(w.in.Tenants.Tenants)-1)),
			Priority:           workload.Priority(rng.IntN(5)),
			Preemptible:        rng.IntN(2) == 0,
			Replicas:           1,
			Flavors:            []fleet.ModelID{"A100-80G"},
			Regions:            []string{regions[rng.IntN(len(regions))]},
			CheckpointInterval: time.Duration(rng.IntN(3)) * time.Hour,
		}
		// Every fifth workload is confined to pool p0 (no draw: see
		// randomWorld).
		if i%5 == 0 {
			s.Pools = []string{"p0"}
		}
		switch rng.IntN(6) {
		case 0:
			s.GPUs = resource.MilliGPU(100 * (1 + rng.IntN(9)))
		case 1:
			s.GPUs = resource.GPUs(8)
			s.Replicas = 1 + rng.IntN(4)
			s.Topology = workload.TopologySameBlock
		case 2:
			s.GPUs = resource.GPUs(1 + rng.IntN(4))
			s.Replicas = 1 + rng.IntN(3)
		default:
			s.GPUs = resource.GPUs(1 + rng.IntN(2))
		}
		if rng.IntN(3) == 0 {
			s.Flavors = []fleet.ModelID{"T4", "A100-80G"}
			if s.GPUs > resource.GPUs(4) {
				s.GPUs = resource.GPUs(4)
			}
		}
		if rng.IntN(3) == 0 && len(regions) > 1 {
			s.Regions = append(s.Regions, regions[0])
		}
		if w.res != "" && s.Tenant == w.owner && rng.IntN(2) == 0 {
			s.Reservation = w.res
			s.GPUs, s.Replicas, s.Topology = resource.GPUs(8), 1, workload.TopologyAny
			s.Flavors, s.Regions = []fleet.ModelID{"A100-80G"}, []string{w.in.Reservations[0].Region}
		}
		out = append(out, &workload.Workload{Spec: s, SubmittedAt: at.Add(time.Duration(i) * time.Second)})
	}
	return out
}

// propertyCase builds a world with running work (from one cycle over a
// first batch) and a second batch pending.
func propertyCase(seed uint64) (Input, Plan) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	w := randomWorld(rng)
	in := w.in
	// A third of the cases use one of the named scorers.
	if names := ScorerNames(); seed%3 == 0 {
		in.Options.Scorer = names[int(seed/3)%len(names)]
	}
	in.Workloads = randomWorkloads(rng, w, 10+rng.IntN(30), "a", t0)
	p := Schedule(in)
	in.Now = t0.Add(3 * time.Hour)
	running := Apply(in.Workloads, p, t0)
	var next []*workload.Workload
	for _, x := range running {
		if x.Running != nil {
			next = append(next, x)
		}
	}
	in.Workloads = append(next, randomWorkloads(rng, w, 5+rng.IntN(25), "b", in.Now)...)
	// Half of the cases plan starts, most work with expected runtimes
	// (the order's work is decided the same either way before planning).
	if seed%2 == 1 {
		in.Options.Planning = DefaultPlanning()
		in.Options.Planning.PreemptOverrun = seed%4 == 1
		for i, x := range in.Workloads {
			if i%3 != 2 {
				x.ExpectedRuntime = time.Duration(1+(i*7)%20) * 20 * time.Minute
			}
		}
	}
	if rng.IntN(5) == 0 && len(in.Fleet.Nodes) > 0 {
		in.Down = []fleet.NodeID{in.Fleet.Nodes[rng.IntN(len(in.Fleet.Nodes))].ID}
	}
	return in, Schedule(in)
}

// property is a check of one cycle's plan.
type property struct {
	name string
	fn   func(Input, Plan) error
}

// coreProps hold for every world: TestProperties and the tree's test run
// them with their own.
var coreProps = []property{
	{"capacity", propCapacity},
	{"gangs", propGangs},
	{"constraints", propConstraints},
	{"limits", propLimits},
	{"deterministic", propDeterministic},
	{"no-ping-pong", propNoPingPong},
	{"terse-same-plan", propTerse},
	{"cache-same-plan", propCache},
	{"repeat-same-plan", propRepeat},
	{"blockfit-same-plan", propBlockFit},
	{"searchmemo-same-plan", propSearchMemo},
	{"tenant-bound", propTenantBound},
}

func TestProperties(t *testing.T) {
	n := 400
	if s := os.Getenv("ARBITER_PROPERTY_SEEDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		n = 50
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		in, plan := propertyCase(seed)
		if err := Check(&in); err != nil {
			t.Fatalf("seed %d: first cycle produced an inconsistent state: %v", seed, err)
		}
		for _, prop := range append(slices.Clip(coreProps), []property{
			{"guarantee-protected", propGuaranteeProtected},
			{"reclaim", propReclaim},
			{"reservation", propReservation},
			{"settled", propSettled},
		}...) {
			if err := prop.fn(in, plan); err != nil {
				t.Errorf("seed %d: %s: %v", seed, prop.name, err)
			}
		}
	}
}

func propCapacity(in Input, p Plan) error {
	after := Apply(in.Workloads, p, in.Now)
	used := map[fleet.NodeID][]int64{}
	for _, w := range after {
		if w.Running == nil {
			continue
		}
		for _, r := range w.Running.Replicas {
			n, ok := in.Fleet.Node(r.Node)
			if !ok {
				return fmt.Errorf("%s on unknown node %s", w.Name, r.Node)
			}
			if used[r.Node] == nil {
				used[r.Node] = make([]int64, n.GPUs)
			}
			for _, g := range r.GPUs {
				if g < 0 || g >= n.GPUs {
					return fmt.Errorf("%s on GPU %d of %s which has %d", w.Name, g, n.ID, n.GPUs)
				}
				used[r.Node][g] += int64(r.Milli)
				if used[r.Node][g] > resource.PerGPU {
					return fmt.Errorf("GPU %d of %s given %d milli", g, n.ID, used[r.Node][g])
				}
			}
		}
	}
	for _, x := range p.Placements {
		for _, d := range in.Down {
			if x.Node == d {
				return fmt.Errorf("%s placed on down node %s", x.Workload, d)
			}
		}
	}
	return nil
}

func propGangs(in Input, p Plan) error {
	byW := map[workload.ID][]Placement{}
	for _, x := range p.Placements {
		byW[x.Workload] = append(byW[x.Workload], x)
	}
	for _, w := range in.Workloads {
		ps := byW[w.Name]
		if len(ps) == 0 {
			continue
		}
		if w.Running != nil {
			return fmt.Errorf("running workload %s placed again", w.Name)
		}
		if len(ps) != w.Replicas {
			return fmt.Errorf("%s: %d of %d replicas placed", w.Name, len(ps), w.Replicas)
		}
		if w.Gang() {
			b0, _ := in.Fleet.Node(ps[0].Node)
			for _, x := range ps {
				if b, _ := in.Fleet.Node(x.Node); b.Block != b0.Block {
					return fmt.Errorf("gang %s split over blocks %s and %s", w.Name, b0.Block, b.Block)
				}
			}
		}
	}
	return nil
}

// propConstraints: every replica placed is on a node of a flavor, region
// and (when the workload names pools) pool the workload accepts.
func propConstraints(in Input, p Plan) error {
	byName := map[workload.ID]*workload.Workload{}
	for _, w := range in.Workloads {
		byName[w.Name] = w
	}
	for _, x := range p.Placements {
		w, n := byName[x.Workload], (*fleet.Node)(nil)
		if w != nil {
			n, _ = in.Fleet.Node(x.Node)
		}
		if w == nil || n == nil {
			return fmt.Errorf("placement %+v of an unknown workload or node", x)
		}
		if !slices.Contains(w.Flavors, n.Model) || !slices.Contains(w.Regions, n.Region) ||
			(len(w.Pools) > 0 && !slices.Contains(w.Pools, n.Labels[PoolLabel])) {
			return fmt.Errorf("%s placed on %s (%s, %s, pool %q), outside flavors %v, regions %v, pools %v",
				w.Name, n.ID, n.Model, n.Region, n.Labels[PoolLabel], w.Flavors, w.Regions, w.Pools)
		}
	}
	return nil
}

// usageAfter sums GPUs per (tenant, quota entry) after the plan, not
// counting work on its own reservation, charged by the one rule
// (tenancy.Tree.Charged).
func usageAfter(in Input, p Plan) map[[2]int]resource.MilliGPU {
	u := map[[2]int]resource.MilliGPU{}
	for _, w := range Apply(in.Workloads, p, in.Now) {
		if w.Running == nil || w.Running.OnReservation {
			continue
		}
		t, _ := in.Tenants.Lookup(w.Tenant)
		for _, ref := range in.Tenants.Charged(t, tenancy.Key{Model: w.Running.Flavor, Region: w.Running.Region}) {
			u[[2]int{ref.Tenant, ref.Entry}] += w.TotalGPUs()
		}
	}
	return u
}

// reservedNow is, per (tenant, quota entry), the capacity of the active
// reservations charged to it (tenancy.Tree.ChargeReservations).
func reservedNow(in Input) map[[2]int]resource.MilliGPU {
	l := tenancy.NewLedger(in.Tenants)
	in.Tenants.ChargeReservations(l, in.Reservations, in.Fleet.Catalog, in.Now)
	u := map[[2]int]resource.MilliGPU{}
	for t, entries := range l {
		for j, amt := range entries {
			if amt != 0 {
				u[[2]int{t, j}] = amt
			}
		}
	}
	return u
}

// propLimits: no placement takes a quota entry above its limit, counting
// reserved capacity (which counts whether or not work runs on it).
func propLimits(in Input, p Plan) error {
	before := usageAfter(in, Plan{})
	reserved := reservedNow(in)
	for k, used := range usageAfter(in, p) {
		q := in.Tenants.Tenants[k[0]].Quotas[k[1]]
		if used.Add(reserved[k]) > q.Limit && used > before[k] {
			return fmt.Errorf("tenant %s uses %v (+%v reserved) of %s, limit %v", in.Tenants.Tenants[k[0]].Name, used, reserved[k], q.Key, q.Limit)
		}
	}
	return nil
}

// withinGuarantee recomputes, independently of the scheduler, which running
// workloads sit inside their tenant's guarantee.
func withinGuarantee(in Input) map[workload.ID]bool {
	groups := map[[2]int][]*workload.Workload{}
	for _, w := range in.Workloads {
		if w.Running == nil || w.Running.OnReservation {
			continue
		}
		t, _ := in.Tenants.Lookup(w.Tenant)
		if _, idx, ok := in.Tenants.Entry(t, w.Running.Flavor, w.Running.Region); ok {
			groups[[2]int{t, idx}] = append(groups[[2]int{t, idx}], w)
		}
	}
	out := map[workload.ID]bool{}
	for k, ws := range groups {
		sort.Slice(ws, func(i, j int) bool {
			if ws[i].Priority != ws[j].Priority {
				return ws[i].Priority > ws[j].Priority
			}
			if !ws[i].Running.StartedAt.Equal(ws[j].Running.StartedAt) {
				return ws[i].Running.StartedAt.Before(ws[j].Running.StartedAt)
			}
			return ws[i].Name < ws[j].Name
		})
		g := in.Tenants.Tenants[k[0]].Quotas[k[1]].Guaranteed
		var cum resource.MilliGPU
		for _, w := range ws {
			cum += w.TotalGPUs()
			out[w.Name] = cum <= g
		}
	}
	return out
}

func propGuaranteeProtected(in Input, p Plan) error {
	within := withinGuarantee(in)
	byName := map[workload.ID]*workload.Workload{}
	for _, w := range in.Workloads {
		byName[w.Name] = w
	}
	for _, x := range p.Preemptions {
		w := byName[x.Workload]
		if x.By != "" && within[w.Name] && !w.Preemptible {
			return fmt.Errorf("non-preemptible %s within its guarantee preempted by %s", w.Name, x.By)
		}
	}
	return nil
}

// propReclaim: a single-replica workload whose tenant is within guarantee
// is not left pending while a node of its pool would fit it once the
// borrowers of other tenants on that node were gone.
func propReclaim(in Input, p Plan) error {
	within := withinGuarantee(in)
	after := Apply(in.Workloads, p, in.Now)
	usage := usageAfter(in, p)
	held := reservedNow(in) // counts toward limits
	down := map[fleet.NodeID]bool{}
	for _, d := range in.Down {
		down[d] = true
	}
	reserved := map[fleet.NodeID]bool{}
	for _, r := range in.Reservations {
		for _, id := range r.Nodes {
			reserved[id] = true
		}
	}
	pending := map[workload.ID]bool{}
	for _, x := range p.Pending {
		pending[x.Workload] = true
	}
	for _, w := range in.Workloads {
		if !pending[w.Name] || w.Replicas != 1 || w.Reservation != "" || w.GPUs < resource.PerGPU {
			continue
		}
		t, _ := in.Tenants.Lookup(w.Tenant)
		m, r := w.Flavors[0], w.Regions[0]
		q, idx, ok := in.Tenants.Entry(t, m, r)
		if !ok || usage[[2]int{t, idx}]+w.TotalGPUs() > q.Guaranteed {
			continue
		}
		limited := false
		for _, ref := range in.Tenants.Charged(t, tenancy.Key{Model: m, Region: r}) {
			k := [2]int{ref.Tenant, ref.Entry}
			if usage[k]+held[k]+w.TotalGPUs() > in.Tenants.Tenants[ref.Tenant].Quotas[ref.Entry].Limit {
				limited = true
			}
		}
		if limited {
			continue
		}
		// Per node: free GPUs plus GPUs of other tenants' borrowers.
		freeable := map[fleet.NodeID]int{}
		for _, n := range in.Fleet.Nodes {
			if n.Model == m && n.Region == r && !down[n.ID] && !reserved[n.ID] && (len(w.Pools) == 0 || slices.Contains(w.Pools, n.Labels[PoolLabel])) {
				freeable[n.ID] = n.GPUs
			}
		}
		for _, x := range after {
			if x.Running == nil {
				continue
			}
			borrower := !within[x.Name] && x.Tenant != w.Tenant && !x.Running.OnReservation && x.Running.StartedAt.Before(in.Now)
			for _, rep := range x.Running.Replicas {
				if _, ok := freeable[rep.Node]; !ok {
					continue
				}
				if !borrower {
					// A share of a GPU blocks that GPU.
					freeable[rep.Node] -= len(rep.GPUs)
				}
			}
		}
		for id, n := range freeable {
			if n >= w.GPUs.WholeGPUs() {
				return fmt.Errorf("%s (tenant %s within guarantee) pending: %s; node %s would fit it after reclaiming borrowers",
					w.Name, w.Tenant, reasonOf(p, w.Name), id)
			}
		}
	}
	return nil
}

func reasonOf(p Plan, id workload.ID) string {
	for _, x := range p.Pending {
		if x.Workload == id {
			return x.Reason
		}
	}
	return ""
}

// propReservation: an owner workload that fits in what is left of its
// reservation is never left pending.
func propReservation(in Input, p Plan) error {
	if len(in.Reservations) == 0 {
		return nil
	}
	r := in.Reservations[0]
	// The generator's reservation workloads take one whole 8-GPU node
	// each, so a reservation node is free when none of them runs on it.
	taken := map[fleet.NodeID]bool{}
	for _, w := range Apply(in.Workloads, p, in.Now) {
		if w.Running != nil && w.Running.OnReservation {
			for _, rep := range w.Running.Replicas {
				taken[rep.Node] = true
			}
		}
	}
	for _, x := range p.Pending {
		for _, w := range in.Workloads {
			if w.Name != x.Workload || w.Reservation != r.Name {
				continue
			}
			for _, id := range r.Nodes {
				n, _ := in.Fleet.Node(id)
				up := len(in.Down) == 0 || in.Down[0] != id
				if up && !taken[id] && (len(w.Pools) == 0 || slices.Contains(w.Pools, n.Labels[PoolLabel])) {
					return fmt.Errorf("%s pending (%s) with reservation %s's node %s free", w.Name, x.Reason, r.Name, id)
				}
			}
		}
	}
	return nil
}

func propDeterministic(in Input, p Plan) error {
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(Schedule(in))
	if !bytes.Equal(a, b) {
		return fmt.Errorf("two runs differ:\n%s\n%s", a, b)
	}
	return nil
}

// propNoPingPong: in the next cycle, no victim of this cycle evicts the
// workload that evicted it (priority preemption and reclaim must not undo
// each other).
func propNoPingPong(in Input, p Plan) error {
	next := in
	next.Workloads = Apply(in.Workloads, p, in.Now)
	next.Now = in.Now.Add(time.Minute)
	p2 := Schedule(next)
	by := map[[2]workload.ID]bool{}
	for _, x := range p.Preemptions {
		if x.By != "" {
			by[[2]workload.ID{x.Workload, x.By}] = true
		}
	}
	for _, x := range p2.Preemptions {
		if by[[2]workload.ID{x.By, x.Workload}] {
			return fmt.Errorf("%s evicted %s, then %s evicted %s back (%s)", x.Workload, x.By, x.By, x.Workload, x.Reason)
		}
	}
	return nil
}

// propTerse: TerseReasons changes only the messages, never a decision,
// and the structured Blockers it keeps render later (Pending.Render) to
// exactly the messages of a full run.
func propTerse(in Input, p Plan) error {
	in.Options.TerseReasons = true
	q := Schedule(in)
	for _, x := range q.Pending {
		if x.Reason != "" || x.Details != nil {
			return fmt.Errorf("terse plan has text for %s: %q %q", x.Workload, x.Reason, x.Details)
		}
	}
	for i := range q.Pending {
		q.Pending[i].Render()
	}
	if q.Pending == nil && p.Pending != nil {
		q.Pending = []Pending{}
	}
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(q)
	if !bytes.Equal(a, b) {
		return fmt.Errorf("terse plan, rendered, differs:\n%s\n%s", a, b)
	}
	return nil
}

// propCache: a Cache, cold or warm, never changes the plan, also warmed
// by a different world first (its skeleton and reused buffers sized for
// more or fewer workloads than this one's), with replicas moved since the
// last cycle, and kept over cycles.
func propCache(in Input, p Plan) error {
	want, _ := json.Marshal(p)
	in.Cache = &Cache{}
	for i := 0; i < 2; i++ {
		got, _ := json.Marshal(Schedule(in))
		if !bytes.Equal(want, got) {
			return fmt.Errorf("plan with cache (pass %d) differs", i)
		}
	}
	other := in
	other.Workloads = append(slices.Clone(in.Workloads[len(in.Workloads)/2:]), in.Workloads...)
	Schedule(other)
	other.Workloads = in.Workloads[:len(in.Workloads)/3]
	Schedule(other)
	for i := 0; i < 2; i++ {
		got, _ := json.Marshal(Schedule(in))
		if !bytes.Equal(want, got) {
			return fmt.Errorf("plan with cache (pass %d) differs", i)
		}
	}
	// A cache's contract: an Assignment is not changed in place between
	// cycles. Two running workloads' replicas swapped in new Assignments
	// (as Apply and the simulator make them) are decided as without a
	// cache.
	moved := slices.Clone(in.Workloads)
	var a, b int = -1, -1
	for i, w := range moved {
		if w.Running == nil || len(w.Running.Replicas) == 0 {
			continue
		}
		if a < 0 {
			a = i
		} else if w.Running.Replicas[0].Node != moved[a].Running.Replicas[0].Node {
			b = i
			break
		}
	}
	if b >= 0 {
		for _, pair := range [][2]int{{a, b}, {b, a}} {
			c := *moved[pair[0]]
			r := *c.Running
			r.Replicas = slices.Clone(r.Replicas)
			r.Replicas[0].Node = in.Workloads[pair[1]].Running.Replicas[0].Node
			c.Running = &r
			moved[pair[0]] = &c
		}
		warm, cold := in, in
		warm.Workloads, cold.Workloads, cold.Cache = moved, moved, nil
		want, _ := json.Marshal(Schedule(cold))
		got, _ := json.Marshal(Schedule(warm))
		if !bytes.Equal(want, got) {
			return fmt.Errorf("plan with cache differs after replicas moved to new Assignments")
		}
	}
	return propCacheCycles(in)
}

// propCacheCycles: over cycles that apply their plans, end some runs
// (every third, in turn), move time on and add arrivals, a cache kept
// from cycle to cycle never changes a plan.
func propCacheCycles(in Input) error {
	warm, cold := in, in
	warm.Cache, cold.Cache = &Cache{}, nil
	ws := in.Workloads
	for cycle := 0; cycle < 4; cycle++ {
		warm.Workloads, cold.Workloads = ws, ws
		p := Schedule(cold)
		want, _ := json.Marshal(p)
		got, _ := json.Marshal(Schedule(warm))
		if !bytes.Equal(want, got) {
			return fmt.Errorf("cycle %d: plan with a kept cache differs", cycle)
		}
		next := Apply(ws, p, warm.Now)[:0:0]
		for i, w := range Apply(ws, p, warm.Now) {
			if w.Running != nil && (i+cycle)%3 == 0 {
				continue // ended
			}
			next = append(next, w)
		}
		if cycle == 1 {
			// A copy of a run with another request but the same
			// Assignment (as a policy's override copies a workload)
			// holds what it asks now.
			for i, w := range next {
				if w.Running != nil {
					c := *w
					c.CPU, c.Memory = c.CPU+resource.MilliCPU(1000*(1+i%4)), c.Memory+resource.MiB(1024*(i%3))
					c.GPUs = min(c.GPUs+resource.PerGPU/2, resource.PerGPU)
					next[i] = &c
				}
			}
		}
		if len(ws) > 0 && cycle%2 == 0 {
			c := *ws[len(ws)-1]
			c.Name, c.Running, c.SubmittedAt = workload.ID(fmt.Sprintf("arrival-%d", cycle)), nil, warm.Now
			next = append(next, &c)
		}
		ws = next
		warm.Now = warm.Now.Add(time.Minute)
		cold.Now = warm.Now
	}
	return nil
}

// propRepeat: deciding alike pending workloads once (the repeat memo)
// never changes a plan. Every pending workload gets two clones submitted
// just after it, so the memo is hit in every case.
func propRepeat(in Input, _ Plan) error {
	in.Workloads = withClones(in.Workloads, "c", func(w *workload.Workload) bool { return w.Running == nil })
	got, _ := json.Marshal(Schedule(in))
	in.Options.noRepeat = true
	want, _ := json.Marshal(Schedule(in))
	if !bytes.Equal(want, got) {
		return fmt.Errorf("plan with the repeat memo differs:\nwith:    %s\nwithout: %s", got, want)
	}
	return nil
}

// withClones is ws with two clones of each workload pick selects, named
// NAME-<tag>1 and NAME-<tag>2 and submitted 1 and 2 ms after it (alike to
// it in all the core reads).
func withClones(ws []*workload.Workload, tag string, pick func(*workload.Workload) bool) []*workload.Workload {
	var clones []*workload.Workload
	for _, w := range ws {
		if !pick(w) {
			continue
		}
		for i := 1; i <= 2; i++ {
			c := *w
			c.Name = workload.ID(fmt.Sprintf("%s-%s%d", w.Name, tag, i))
			c.SubmittedAt = w.SubmittedAt.Add(time.Duration(i) * time.Millisecond)
			clones = append(clones, &c)
		}
	}
	return append(slices.Clip(ws), clones...)
}

// propBlockFit: keeping a gang's earliest fit per block for the next gang
// alike (blockFit) never changes a plan. Every pending gang gets two
// clones submitted just after it, and planning is on, so alike gangs are
// planned one after another.
func propBlockFit(in Input, _ Plan) error {
	in.Workloads = withClones(in.Workloads, "g", func(w *workload.Workload) bool { return w.Running == nil && w.Gang() && w.Replicas > 1 })
	if in.Options.Planning.Depth == 0 {
		in.Options.Planning = DefaultPlanning()
	}
	got, _ := json.Marshal(Schedule(in))
	in.Options.noBlockFit = true
	want, _ := json.Marshal(Schedule(in))
	if !bytes.Equal(want, got) {
		return fmt.Errorf("plan with the kept block fits differs:\nwith:    %s\nwithout: %s", got, want)
	}
	return nil
}

// propSearchMemo: the victim searches' memos (reachMemo) never change a
// plan. Every pending workload gets a clone one GPU larger and, where it
// has more than one, one a GPU smaller, so that claims of one class with
// other needs follow each other.
func propSearchMemo(in Input, _ Plan) error {
	var sized []*workload.Workload
	for _, w := range in.Workloads {
		if w.Running != nil {
			continue
		}
		if w.GPUs > resource.PerGPU && !w.GPUs.Whole() {
			continue
		}
		step := resource.MilliGPU(resource.PerGPU)
		if w.GPUs < step {
			step = 100 // a share of a GPU: a share a tenth larger or smaller
		}
		for _, d := range []resource.MilliGPU{step, -step} {
			if w.GPUs+d < 1 || (w.GPUs < resource.PerGPU && w.GPUs+d >= resource.PerGPU) {
				continue
			}
			c := *w
			c.Name = workload.ID(fmt.Sprintf("%s-s%d", w.Name, d))
			c.GPUs += d
			c.SubmittedAt = w.SubmittedAt.Add(time.Millisecond)
			sized = append(sized, &c)
		}
	}
	in.Workloads = append(slices.Clip(in.Workloads), sized...)
	got, _ := json.Marshal(Schedule(in))
	in.Options.noSearchMemo = true
	want, _ := json.Marshal(Schedule(in))
	if !bytes.Equal(want, got) {
		return fmt.Errorf("plan with the search memos differs:\nwith:    %s\nwithout: %s", got, want)
	}
	return nil
}

// propSettled checks the contract of Plan.Classes: run cycles until one
// places and evicts nothing, then add workloads alike to its classes'
// examples; the next cycle must place nothing, keep every old decision
// and give each new workload its class's decision.
func propSettled(in Input, p Plan) error {
	for i := 0; i < 8 && (len(p.Placements) > 0 || len(p.Preemptions) > 0); i++ {
		in.Workloads = Apply(in.Workloads, p, in.Now)
		in.Down = nil
		p = Schedule(in)
	}
	if len(p.Placements) > 0 || len(p.Preemptions) > 0 || p.shielded {
		return nil // not settled within 8 cycles, or decided with shields (rare): no classes to check
	}
	planned := slices.ContainsFunc(p.Pending, func(x Pending) bool { return x.Planned != nil }) || in.Options.Planning.PreemptOverrun
	if len(p.Pending) > 0 && len(p.Classes) == 0 && !isChooser(in.Options.Scorer) && !planned {
		return fmt.Errorf("%d pending but no classes", len(p.Pending))
	}
	want := map[workload.ID]Pending{}
	for _, x := range p.Pending {
		want[x.Workload] = x
	}
	next := in
	next.Workloads = slices.Clip(in.Workloads)
	for i, c := range p.Classes {
		for j := 0; j < 2; j++ {
			w := *c.Example
			w.Name = workload.ID(fmt.Sprintf("new-%d-%d", i, j))
			// Before and after the example, and unread fields changed.
			w.SubmittedAt = c.Example.SubmittedAt.Add(time.Duration(2*j-1) * time.Minute)
			w.Labels = map[string]string{"new": "yes"}
			w.GracePeriod += time.Second
			next.Workloads = append(next.Workloads, &w)
			pw := c.Pending
			pw.Workload = w.Name
			want[w.Name] = pw
		}
	}
	q := Schedule(next)
	if len(q.Placements) > 0 || len(q.Preemptions) > 0 || len(q.Overflow) > 0 {
		return fmt.Errorf("settled state plus alike work: %d placements, %d preemptions", len(q.Placements), len(q.Preemptions))
	}
	if len(q.Pending) != len(want) {
		return fmt.Errorf("%d pending, want %d", len(q.Pending), len(want))
	}
	for _, x := range q.Pending {
		a, _ := json.Marshal(x)
		b, _ := json.Marshal(want[x.Workload])
		if !bytes.Equal(a, b) {
			return fmt.Errorf("pending %s\n got %s\nwant %s", x.Workload, a, b)
		}
	}
	return nil
}

func isChooser(name string) bool {
	s, err := newScorer(&Input{Options: Options{Scorer: name}, Workloads: []*workload.Workload{{Spec: workload.Spec{GPUs: 1000, Replicas: 1}}}}, nil)
	if err != nil || s == nil {
		return false
	}
	_, ok := s.(score.Chooser)
	return ok
}
