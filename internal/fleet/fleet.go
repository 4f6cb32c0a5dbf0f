package fleet

import (
	"fmt"

	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// NodeID names one machine.
type NodeID string

// BlockID names an InfiniBand/NVLink domain. Block names are unique in a fleet.
type BlockID string

// Spec is the fleet as a config file writes it: regions, zones, blocks, and
// per block how many machines of which SKU.
type Spec struct {
	Regions []RegionSpec `yaml:"regions"`
}

// RegionSpec is one region of the fleet.
type RegionSpec struct {
	Pos   yamlfile.Pos
	Name  string     `yaml:"name"`
	Zones []ZoneSpec `yaml:"zones"`
}

// ZoneSpec is one availability zone.
type ZoneSpec struct {
	Pos    yamlfile.Pos
	Name   string      `yaml:"name"`
	Blocks []BlockSpec `yaml:"blocks"`
}

// BlockSpec is one InfiniBand/NVLink domain holding machines.
type BlockSpec struct {
	Pos   yamlfile.Pos
	Name  BlockID     `yaml:"name"`
	Nodes []GroupSpec `yaml:"nodes"`
}

// GroupSpec is count machines of one SKU.
type GroupSpec struct {
	Pos    yamlfile.Pos
	SKU    SKUName           `yaml:"sku"`
	Count  int               `yaml:"count"`
	Labels map[string]string `yaml:"labels"`
}

// Node is one machine of the fleet.
type Node struct {
	ID     NodeID
	Index  int // position in Fleet.Nodes
	Region string
	Zone   string
	Block  BlockID
	SKU    *SKU
	Model  ModelID
	GPUs   int
	CPU    resource.MilliCPU
	Memory resource.MiB
	Labels map[string]string
}

// Fleet is the expanded fleet: every node, in a fixed order (region, zone,
// block, group, index), which all indexes and plans follow.
type Fleet struct {
	Catalog *Catalog
	Nodes   []*Node
	Regions []string
	Blocks  []BlockID

	byID    map[NodeID]*Node
	byBlock map[BlockID][]*Node
}

// MaxNodes bounds the size of a fleet built from a config.
const MaxNodes = 1_000_000

// Build expands a fleet spec against a catalog, reporting every problem.
func Build(spec Spec, cat *Catalog) (*Fleet, error) {
	f, err := BuildPartial(spec, cat)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// BuildPartial is Build that, when there are problems, also returns the
// fleet of the node groups that had none, so that a config's checks can
// go on and report every problem of the file in one run. Such a fleet is
// for those checks only, never for scheduling.
func BuildPartial(spec Spec, cat *Catalog) (*Fleet, error) {
	var errs yamlfile.Errors
	f := &Fleet{Catalog: cat, byID: map[NodeID]*Node{}, byBlock: map[BlockID][]*Node{}}
	regions := map[string]bool{}
	for ri, r := range spec.Regions {
		rf := fmt.Sprintf("fleet.regions[%d]", ri)
		if r.Name == "" {
			errs.Add(r.Pos, rf+".name", "a region needs a name")
		}
		if regions[r.Name] {
			errs.Add(r.Pos, rf+".name", "region %q listed twice", r.Name)
		}
		regions[r.Name] = true
		f.Regions = append(f.Regions, r.Name)
		for zi, z := range r.Zones {
			zf := fmt.Sprintf("%s.zones[%d]", rf, zi)
			for bi, b := range z.Blocks {
				bf := fmt.Sprintf("%s.blocks[%d]", zf, bi)
				if b.Name == "" {
					errs.Add(b.Pos, bf+".name", "a block needs a name")
				}
				if _, dup := f.byBlock[b.Name]; dup {
					errs.Add(b.Pos, bf+".name", "block %q listed twice (block names are unique in a fleet)", b.Name)
				}
				f.byBlock[b.Name] = nil
				f.Blocks = append(f.Blocks, b.Name)
				for gi, g := range b.Nodes {
					gf := fmt.Sprintf("%s.nodes[%d]", bf, gi)
					sku, ok := cat.SKU(g.SKU)
					if !ok {
						errs.Add(g.Pos, gf+".sku", "unknown SKU %q", g.SKU)
						continue
					}
					if g.Count < 1 {
						errs.Add(g.Pos, gf+".count", "count must be at least 1, got %d", g.Count)
						continue
					}
					if len(f.Nodes)+g.Count > MaxNodes {
						errs.Add(g.Pos, gf+".count", "fleet larger than %d nodes", MaxNodes)
						return f, errs.Err()
					}
					for i := 0; i < g.Count; i++ {
						n := &Node{
							ID:     NodeID(fmt.Sprintf("%s-n%04d", b.Name, len(f.byBlock[b.Name]))),
							Index:  len(f.Nodes),
							Region: r.Name, Zone: z.Name, Block: b.Name,
							SKU: sku, Model: sku.Model, GPUs: sku.GPUs,
							CPU:    resource.MilliCPU(sku.VCPUs) * 1000,
							Memory: resource.MiB(sku.MemoryGiB) * 1024,
							Labels: g.Labels,
						}
						f.Nodes = append(f.Nodes, n)
						f.byID[n.ID] = n
						f.byBlock[b.Name] = append(f.byBlock[b.Name], n)
					}
				}
			}
		}
	}
	return f, errs.Err()
}

// FromNodes builds a fleet from explicit nodes (traces, tests, the server's
// registered machines). Nodes keep their order; Index is set here.
func FromNodes(cat *Catalog, nodes []*Node) (*Fleet, error) {
	f := &Fleet{Catalog: cat, byID: map[NodeID]*Node{}, byBlock: map[BlockID][]*Node{}}
	regions := map[string]bool{}
	for i, n := range nodes {
		if _, dup := f.byID[n.ID]; dup {
			return nil, fmt.Errorf("fleet: node %q listed twice", n.ID)
		}
		if n.GPUs < 0 {
			return nil, fmt.Errorf("fleet: node %q has %d GPUs", n.ID, n.GPUs)
		}
		n.Index = i
		f.Nodes = append(f.Nodes, n)
		f.byID[n.ID] = n
		if _, ok := f.byBlock[n.Block]; !ok {
			f.Blocks = append(f.Blocks, n.Block)
		}
		f.byBlock[n.Block] = append(f.byBlock[n.Block], n)
		if !regions[n.Region] {
			regions[n.Region] = true
			f.Regions = append(f.Regions, n.Region)
		}
	}
	return f, nil
}

// Node returns the node with the given ID.
func (f *Fleet) Node(id NodeID) (*Node, bool) { n, ok := f.byID[id]; return n, ok }

// BlockNodes returns the nodes of block b in fleet order.
func (f *Fleet) BlockNodes(b BlockID) []*Node { return f.byBlock[b] }

// HasRegion reports whether the fleet has a region of that name.
func (f *Fleet) HasRegion(r string) bool {
	for _, x := range f.Regions {
		if x == r {
			return true
		}
	}
	return false
}

// Capacity returns the GPUs of model m in region r ("" = all regions).
func (f *Fleet) Capacity(m ModelID, r string) resource.MilliGPU {
	var total resource.MilliGPU
	for _, n := range f.Nodes {
		if n.Model == m && (r == "" || n.Region == r) {
			total = total.Add(resource.GPUs(n.GPUs))
		}
	}
	return total
}

// MIGLabel is the node label that puts a node's GPUs in MIG mode
// (value MIGEnabled): its GPUs then run only MIG instances (workloads
// with a MIG profile), and whole-GPU and shared work goes elsewhere. A
// fleet group sets it in its labels; a node agent that reads MIG mode
// from NVML reports it (docs/gpus.md).
const MIGLabel = "mig"

// MIGEnabled is MIGLabel's value for a node in MIG mode.
const MIGEnabled = "enabled"

// MIGMode reports whether the node's GPUs are in MIG mode (its MIGLabel
// says so; internal/mig says which models can be).
func (n *Node) MIGMode() bool { return n.Labels[MIGLabel] == MIGEnabled }
