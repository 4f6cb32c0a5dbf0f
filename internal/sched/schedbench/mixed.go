package schedbench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The mixed world (issue 19): a heterogeneous queue, as tenants send it.
//
//   - Fleet: n nodes over 3 regions (eastus, westus2, centralus) and 4
//     flavors, in blocks of 32 nodes of one SKU: 40% A100-80G (8 GPUs),
//     30% H100-80G (8), 20% T4 (4), 10% A100-40G (8); a fifth of the
//     blocks carry the pool label "reserved-pool".
//   - Tenants: 5 orgs of 10 leaves (50 tenants); each leaf is guaranteed a
//     share of every flavor in one or two regions, with a limit of twice
//     its guarantee plus a tenth of the flavor in some entries.
//   - Running: about 70% of the GPUs run work like the queue's.
//   - Pending: the queue's distribution, per workload: tenant uniform;
//     priority spot 10%, low 20%, normal 50%, high 15%, critical 5%;
//     size: 45% 1 GPU, 15% milli-GPU (100–900), 15% 2 or 4 GPUs, 10% 8 GPUs,
//     10% 2–8 replicas of 1–8 GPUs, 5% same-block gangs of 16–256 GPUs
//     (8 per replica); one to two flavors, one to three regions; labels
//     team=<org>; 10% constrained to pool reserved-pool; expected
//     runtimes 30 min to 2 days; preemptible: spot and low.
//
// Mixed draws it from seed; the same seed, the same world.
type Mixed struct {
	Fleet   *fleet.Fleet
	Tenants *tenancy.Tree
	Running []*workload.Workload
	Pending []*workload.Workload
	rng     *rand.Rand
	leaves  []string
	seq     int
	// spec and tenants are what Fleet and Tenants were built from
	// (Config writes them).
	spec    fleet.Spec
	tenants []tenancy.TenantSpec
}

var (
	mixedRegions = []string{"eastus", "westus2", "centralus"}
	mixedSKUs    = []struct {
		sku   fleet.SKUName
		model fleet.ModelID
		share int // in tenths
	}{
		{"Standard_ND96amsr_A100_v4", "A100-80G", 4},
		{"Standard_ND96isr_H100_v5", "H100-80G", 3},
		{"Standard_NC64as_T4_v3", "T4", 2},
		{"Standard_ND96asr_v4", "A100-40G", 1},
	}
)

// NewMixed builds the mixed world: n nodes, pending workloads queued.
func NewMixed(n, pending int, seed uint64) (*Mixed, error) {
	m := &Mixed{rng: rand.New(rand.NewPCG(seed, 0x313))}
	var spec fleet.Spec
	per := n / len(mixedRegions)
	for ri, r := range mixedRegions {
		z := fleet.ZoneSpec{Name: "1"}
		count := per
		if ri == len(mixedRegions)-1 {
			count = n - per*(len(mixedRegions)-1)
		}
		b := 0
		for _, s := range mixedSKUs {
			nodes := count * s.share / 10
			for i := 0; i < nodes; i += 32 {
				g := fleet.GroupSpec{SKU: s.sku, Count: min(32, nodes-i)}
				if b%5 == 0 {
					g.Labels = map[string]string{"pool": "reserved-pool"}
				}
				z.Blocks = append(z.Blocks, fleet.BlockSpec{Name: fleet.BlockID(fmt.Sprintf("%s-b%04d", r, b)), Nodes: []fleet.GroupSpec{g}})
				b++
			}
		}
		spec.Regions = append(spec.Regions, fleet.RegionSpec{Name: r, Zones: []fleet.ZoneSpec{z}})
	}
	f, err := fleet.Build(spec, fleet.Builtin())
	if err != nil {
		return nil, err
	}
	m.Fleet, m.spec = f, spec
	var specs []tenancy.TenantSpec
	for o := range 5 {
		org := fmt.Sprintf("org%d", o)
		specs = append(specs, tenancy.TenantSpec{Name: org})
		for l := range 10 {
			t := tenancy.TenantSpec{Name: fmt.Sprintf("%s-t%d", org, l), Parent: org}
			for _, s := range mixedSKUs {
				for ri, r := range mixedRegions {
					if (o+l+ri)%3 == 2 {
						continue // one or two regions per flavor
					}
					c := f.Capacity(s.model, r).WholeGPUs()
					g := c / 80
					lim := resource.GPUs(2*g + c/10)
					t.Quota = append(t.Quota, tenancy.QuotaSpec{Flavor: s.model, Region: r, Guaranteed: resource.GPUs(g), Limit: &lim, Weight: 1})
				}
			}
			specs = append(specs, t)
			m.leaves = append(m.leaves, t.Name)
		}
	}
	if m.Tenants, err = tenancy.NewTree(specs); err != nil {
		return nil, err
	}
	m.tenants = specs
	m.fill()
	m.Pending = m.Draw(pending)
	return m, nil
}

// Draw returns n new pending workloads of the queue's distribution.
func (m *Mixed) Draw(n int) []*workload.Workload {
	out := make([]*workload.Workload, n)
	for i := range out {
		out[i] = m.draw()
	}
	return out
}

func (m *Mixed) draw() *workload.Workload {
	r := m.rng
	m.seq++
	t := m.leaves[r.IntN(len(m.leaves))]
	s := workload.Spec{Name: workload.ID(fmt.Sprintf("m%07d", m.seq)), Tenant: t, Replicas: 1,
		Labels: map[string]string{"team": t[:4]}, CheckpointInterval: time.Hour,
		ExpectedRuntime: time.Duration(1+r.IntN(96)) * 30 * time.Minute}
	switch p := r.IntN(100); {
	case p < 10:
		s.Priority = workload.PrioritySpot
	case p < 30:
		s.Priority = workload.PriorityLow
	case p < 80:
		s.Priority = workload.PriorityNormal
	case p < 95:
		s.Priority = workload.PriorityHigh
	default:
		s.Priority = workload.PriorityCritical
	}
	s.Preemptible = s.Priority <= workload.PriorityLow
	switch p := r.IntN(100); {
	case p < 45:
		s.GPUs = resource.GPUs(1)
	case p < 60:
		s.GPUs = resource.MilliGPU(100 * (1 + r.IntN(9)))
	case p < 75:
		s.GPUs = resource.GPUs(2 << r.IntN(2))
	case p < 85:
		s.GPUs = resource.GPUs(8)
	case p < 95:
		s.GPUs, s.Replicas = resource.GPUs(1+r.IntN(8)), 2+r.IntN(7)
	default:
		s.GPUs, s.Replicas, s.Topology = resource.GPUs(8), 2+r.IntN(31), workload.TopologySameBlock
	}
	first := r.IntN(len(mixedSKUs))
	s.Flavors = []fleet.ModelID{mixedSKUs[first].model}
	if r.IntN(3) == 0 {
		s.Flavors = append(s.Flavors, mixedSKUs[(first+1)%len(mixedSKUs)].model)
	}
	if mixedSKUs[first].model == "T4" && s.GPUs > resource.GPUs(4) {
		s.GPUs = resource.GPUs(4)
	}
	start := r.IntN(len(mixedRegions))
	for k := range 1 + r.IntN(3) {
		s.Regions = append(s.Regions, mixedRegions[(start+k)%len(mixedRegions)])
	}
	if r.IntN(10) == 0 {
		s.Pools = []string{"reserved-pool"}
	}
	return &workload.Workload{Spec: s, SubmittedAt: T0.Add(-time.Duration(r.IntN(3600)) * time.Second)}
}

// fill runs work on about 70% of the GPUs: single-replica jobs, node by
// node, each taking a node's GPUs in one piece or two.
func (m *Mixed) fill() {
	for _, n := range m.Fleet.Nodes {
		if m.rng.IntN(10) >= 7 {
			continue
		}
		free := n.GPUs
		for free > 0 {
			g := free
			if free > 1 && m.rng.IntN(2) == 0 {
				g = free / 2
			}
			w := m.draw()
			w.GPUs, w.Replicas, w.Topology, w.Pools = resource.GPUs(g), 1, workload.TopologyAny, nil
			w.Flavors, w.Regions = []fleet.ModelID{n.Model}, []string{n.Region}
			gpus := make([]int, g)
			for i := range gpus {
				gpus[i] = n.GPUs - free + i
			}
			w.Running = &workload.Assignment{Flavor: n.Model, Region: n.Region, StartedAt: T0.Add(-time.Duration(m.rng.IntN(48*60)) * time.Minute),
				Replicas: []workload.Replica{{Node: n.ID, GPUs: gpus, Milli: 1000}}}
			m.Running = append(m.Running, w)
			free -= g
		}
	}
}

// Config is the mixed world's fleet and tenants as an Arbiter config file
// (every tenant may submit every priority class), for a server to serve:
// the server-level benchmarks submit Draw's workloads to it.
func (m *Mixed) Config() string {
	var b strings.Builder
	b.WriteString("fleet:\n  regions:\n")
	for _, r := range m.spec.Regions {
		fmt.Fprintf(&b, "    - name: %s\n      zones:\n", r.Name)
		for _, z := range r.Zones {
			fmt.Fprintf(&b, "        - name: %q\n          blocks:\n", z.Name)
			for _, bl := range z.Blocks {
				fmt.Fprintf(&b, "            - name: %s\n              nodes:\n", bl.Name)
				for _, g := range bl.Nodes {
					fmt.Fprintf(&b, "                - {sku: %s, count: %d", g.SKU, g.Count)
					if v, ok := g.Labels["pool"]; ok {
						fmt.Fprintf(&b, ", labels: {pool: %s}", v)
					}
					b.WriteString("}\n")
				}
			}
		}
	}
	b.WriteString("tenants:\n")
	for _, t := range m.tenants {
		fmt.Fprintf(&b, "  - name: %s\n    allowed_priorities: [critical, high, normal, low, spot]\n", t.Name)
		if t.Parent != "" {
			fmt.Fprintf(&b, "    parent: %s\n", t.Parent)
		}
		if len(t.Quota) > 0 {
			b.WriteString("    quota:\n")
		}
		for _, q := range t.Quota {
			fmt.Fprintf(&b, "      - {flavor: %s, region: %s, guaranteed: %d", q.Flavor, q.Region, q.Guaranteed.WholeGPUs())
			if q.Limit != nil {
				fmt.Fprintf(&b, ", limit: %d", q.Limit.WholeGPUs())
			}
			b.WriteString("}\n")
		}
	}
	return b.String()
}

// Submission is w's spec as a tenant submits it to the API.
func Submission(w *workload.Workload) api.WorkloadSpec {
	s := api.WorkloadSpec{Name: string(w.Name), Priority: w.Priority.String(), Preemptible: w.Preemptible, GPUs: api.GPUs(w.GPUs),
		Replicas: w.Replicas, Pools: w.Pools, Labels: w.Labels,
		ExpectedRuntime: api.Duration(w.ExpectedRuntime), CheckpointInterval: api.Duration(w.CheckpointInterval)}
	if w.Topology == workload.TopologySameBlock {
		s.Topology = w.Topology.String()
	}
	for _, f := range w.Flavors {
		s.Flavors = append(s.Flavors, string(f))
	}
	s.Regions = w.Regions
	return s
}
