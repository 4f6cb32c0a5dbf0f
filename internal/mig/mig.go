// Package mig holds NVIDIA's Multi-Instance GPU rules for the GPU models
// Arbiter knows (A100 40 GB and 80 GB, H100 80 GB, H200 141 GB): each
// model's GPU-instance profiles (name, compute slices, memory slices) and
// the start positions NVIDIA allows for them, a GPU's layout as a bitmask
// of its occupied memory slices, and a fragmentation-aware choice of where
// a new instance goes (the FGD idea: the placement that adds the least
// fragmentation, free slices that the profiles can no longer use).
//
// A GPU in MIG mode has 8 memory slices (positions 0–7) and 7 compute
// slices. An instance of a profile occupies Memory consecutive memory
// slices from one of its Starts; two instances may not share a slice.
// Those placements are NVIDIA's (nvidia-smi mig -lgipp; the tables are
// checked against go-nvml's mock GPUs in the tests), so every layout this
// package builds is one the driver accepts. The media-extension profiles
// (1g.10gb+me and the like, at most one per GPU) are left out.
//
// The package is pure: no clock, no I/O, no global state but the tables.
package mig

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// Slots is the number of memory slices (placement positions) of a MIG GPU.
const Slots = 8

// Profile is one GPU-instance profile of a model.
type Profile struct {
	Name      string // "3g.40gb"
	NVMLID    int    // NVML's GPU_INSTANCE_PROFILE_* value
	Compute   int    // compute slices (the "3g")
	Memory    int    // memory slices it occupies (its placement size)
	MemoryGiB int    // usable memory, as the name says (the "40gb")
	Starts    []int  // allowed first memory slices
}

// Share is the part of a GPU the profile occupies in milli-GPU (its
// memory slices out of 8): what a MIG instance counts against quota.
func (p *Profile) Share() int64 { return int64(p.Memory) * 1000 / Slots }

// GPU is one MIG-capable GPU model.
type GPU struct {
	Model    string // the catalog's model name (fleet.ModelID)
	Profiles []Profile
	// best[mask][profile]: the start of least loss, the loss, or -1
	// (computed once per model, see init).
	best [1 << Slots][]choice
	// placeable[mask] counts the (profile, start) pairs that still fit;
	// count[mask][profile] how many more instances of one profile fit;
	// frag[mask] is the layout's fragmentation (Frag).
	placeable [1 << Slots]int
	count     [1 << Slots][]int8
	frag      [1 << Slots]int
}

type choice struct {
	start int8
	loss  int8
}

// NVML GPU-instance profile IDs (nvml.GPU_INSTANCE_PROFILE_*; the tests
// check them against go-nvml's constants).
const (
	nvml1Slice     = 0
	nvml2Slice     = 1
	nvml3Slice     = 2
	nvml4Slice     = 3
	nvml7Slice     = 4
	nvml1SliceRev2 = 9
)

// table builds a model's profiles, which on A100, H100 and H200 share one
// shape and differ in memory: m1 is the memory of a 1-slice instance, m2
// of 2 memory slices, m4 of 4, m8 of the whole GPU.
func table(model string, m1, m2, m4, m8 int) *GPU {
	name := func(c, gb int) string { return fmt.Sprintf("%dg.%dgb", c, gb) }
	g := &GPU{Model: model, Profiles: []Profile{
		{Name: name(1, m1), NVMLID: nvml1Slice, Compute: 1, Memory: 1, MemoryGiB: m1, Starts: []int{0, 1, 2, 3, 4, 5, 6}},
		{Name: name(1, m2), NVMLID: nvml1SliceRev2, Compute: 1, Memory: 2, MemoryGiB: m2, Starts: []int{0, 2, 4, 6}},
		{Name: name(2, m2), NVMLID: nvml2Slice, Compute: 2, Memory: 2, MemoryGiB: m2, Starts: []int{0, 2, 4}},
		{Name: name(3, m4), NVMLID: nvml3Slice, Compute: 3, Memory: 4, MemoryGiB: m4, Starts: []int{0, 4}},
		{Name: name(4, m4), NVMLID: nvml4Slice, Compute: 4, Memory: 4, MemoryGiB: m4, Starts: []int{0}},
		{Name: name(7, m8), NVMLID: nvml7Slice, Compute: 7, Memory: 8, MemoryGiB: m8, Starts: []int{0}},
	}}
	g.init()
	return g
}

// The models, by catalog name (internal/fleet's catalog.yaml).
var models = []*GPU{
	table("A100-40G", 5, 10, 20, 40),
	table("A100-80G", 10, 20, 40, 80),
	table("H100-80G", 10, 20, 40, 80),
	table("H200-141G", 18, 35, 71, 141),
}

// For returns the MIG rules of a catalog GPU model, or false when the
// model has no MIG (T4, A10, MI300X, models a config adds).
func For(model string) (*GPU, bool) {
	for _, g := range models {
		if g.Model == model {
			return g, true
		}
	}
	return nil, false
}

// Models lists the MIG-capable catalog models.
func Models() []string {
	out := make([]string, len(models))
	for i, g := range models {
		out[i] = g.Model
	}
	return out
}

// Names lists every profile name of every model, sorted, once each.
func Names() []string { return slices.Clone(names) }

// names is Names, computed once.
var names = func() []string {
	var out []string
	for _, g := range models {
		for _, p := range g.Profiles {
			if !slices.Contains(out, p.Name) {
				out = append(out, p.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}()

// NameIndex is name's index in Names, or -1: a profile name in one byte
// (the scheduler's placements carry it so).
func NameIndex(name string) int { return slices.Index(names, name) }

// NameAt is Names()[i], "" when out of range.
func NameAt(i int) string {
	if i < 0 || i >= len(names) {
		return ""
	}
	return names[i]
}

// Lookup finds a profile name on any model: its share of a GPU on the
// first model that has it (1g.10gb is 250 on an A100-40G, 125 on the
// 80 GB models; every other name has one share) and the models that
// have it.
func Lookup(name string) (share int64, on []string, ok bool) {
	for _, g := range models {
		if i := g.Index(name); i >= 0 {
			if !ok {
				share = g.Profiles[i].Share()
			}
			ok = true
			on = append(on, g.Model)
		}
	}
	return share, on, ok
}

// ParseProfile checks a profile name as a spec writes it ("3g.40gb"),
// returning an error that lists the valid ones.
func ParseProfile(name string) error {
	if _, _, ok := Lookup(name); ok {
		return nil
	}
	return fmt.Errorf("unknown MIG profile %q: write one of %s", name, strings.Join(Names(), ", "))
}

// Index returns the index of the named profile in g.Profiles, or -1.
func (g *GPU) Index(name string) int {
	for i := range g.Profiles {
		if g.Profiles[i].Name == name {
			return i
		}
	}
	return -1
}

// Smallest returns the index in g.Profiles of the smallest profile with at
// least mib MiB of memory — fewest memory slices, then fewest compute
// slices — or -1 when none has that much.
func (g *GPU) Smallest(mib int64) int {
	best := -1
	for i := range g.Profiles {
		p := &g.Profiles[i]
		if int64(p.MemoryGiB)<<10 < mib {
			continue
		}
		if best < 0 || p.Memory < g.Profiles[best].Memory || p.Memory == g.Profiles[best].Memory && p.Compute < g.Profiles[best].Compute {
			best = i
		}
	}
	return best
}

// Layout is the occupied memory slices of one GPU: bit i set when slice i
// belongs to some instance. Instances never overlap, so a layout is also
// the sum of its instances' masks.
type Layout uint8

// Mask is the slices an instance of profile p at start occupies.
func (g *GPU) Mask(p, start int) Layout {
	return Layout(((1 << g.Profiles[p].Memory) - 1) << start)
}

// ValidStart reports whether start is one of profile p's positions.
func (g *GPU) ValidStart(p, start int) bool { return slices.Contains(g.Profiles[p].Starts, start) }

// Fits reports whether profile p can be placed at start on layout l.
func (g *GPU) Fits(l Layout, p, start int) bool {
	return g.ValidStart(p, start) && l&g.Mask(p, start) == 0
}

// Place returns l with an instance of p at start, or an error when it
// does not fit there.
func (g *GPU) Place(l Layout, p, start int) (Layout, error) {
	if p < 0 || p >= len(g.Profiles) {
		return l, fmt.Errorf("mig: %s has no profile %d", g.Model, p)
	}
	if !g.ValidStart(p, start) {
		return l, fmt.Errorf("mig: %s on %s cannot start at slice %d (starts: %v)", g.Profiles[p].Name, g.Model, start, g.Profiles[p].Starts)
	}
	if l&g.Mask(p, start) != 0 {
		return l, fmt.Errorf("mig: %s at slice %d overlaps an instance on the GPU", g.Profiles[p].Name, start)
	}
	return l | g.Mask(p, start), nil
}

// Free returns l without the instance of p at start (which must be there).
func (g *GPU) Free(l Layout, p, start int) Layout { return l &^ g.Mask(p, start) }

// Placeable counts the (profile, start) pairs that still fit on l: how
// much room for future instances the layout leaves.
func (g *GPU) Placeable(l Layout) int { return g.placeable[l] }

// Frag is the fragmentation of layout l, in the manner of FGD (Weng et
// al., "Beware of Fragmentation", ATC 2023) with every profile equally
// likely: for each profile, the free memory slices that instances of it
// could not use however many were placed, summed over the profiles. A
// full GPU and an empty one that every profile tiles have none; a GPU
// whose free slices are scattered has much.
func (g *GPU) Frag(l Layout) int { return g.frag[l] }

// Best returns where profile p goes on layout l so that it adds the least
// fragmentation: the start whose layout has the lowest Frag (the highest
// start on ties: a GPU fills from its end), and that increase (negative when the instance fills a
// gap); ok is false when p fits nowhere on l. Among GPUs, the one with
// the lowest increase is the FGD choice: it packs a GPU already in use
// before it breaks an empty one, and puts a small slice at the end of a
// GPU, where it blocks the fewest larger ones.
func (g *GPU) Best(l Layout, p int) (start, loss int, ok bool) {
	c := g.best[l][p]
	return int(c.start), int(c.loss), c.start >= 0
}

func (g *GPU) init() {
	for m := 0; m < 1<<Slots; m++ {
		l := Layout(m)
		n := 0
		for p := range g.Profiles {
			for _, st := range g.Profiles[p].Starts {
				if l&g.Mask(p, st) == 0 {
					n++
				}
			}
		}
		g.placeable[m] = n
	}
	for m := 0; m < 1<<Slots; m++ {
		l := Layout(m)
		counts := make([]int8, len(g.Profiles))
		for p := range g.Profiles {
			// Starts are aligned to the profile's size (or a 1-slice
			// profile's), so placing from the lowest free start packs
			// the most instances.
			ll := l
			for _, st := range g.Profiles[p].Starts {
				if ll&g.Mask(p, st) == 0 {
					ll |= g.Mask(p, st)
					counts[p]++
				}
			}
		}
		g.count[m] = counts
		free := Slots - l.Used()
		for p := range g.Profiles {
			g.frag[m] += free - int(counts[p])*g.Profiles[p].Memory
		}
	}
	for m := 0; m < 1<<Slots; m++ {
		l := Layout(m)
		row := make([]choice, len(g.Profiles))
		for p := range g.Profiles {
			row[p] = choice{start: -1}
			for _, st := range g.Profiles[p].Starts {
				if l&g.Mask(p, st) != 0 {
					continue
				}
				loss := g.frag[l|g.Mask(p, st)] - g.frag[l]
				if row[p].start < 0 || loss <= int(row[p].loss) { // the highest start on ties
					row[p] = choice{start: int8(st), loss: int8(loss)}
				}
			}
		}
		g.best[m] = row
	}
}

// Count is how many more instances of profile p fit on layout l.
func (g *GPU) Count(l Layout, p int) int { return int(g.count[l][p]) }

// Instance is one GPU instance on a GPU: its profile and first slice.
type Instance struct {
	Profile string
	Start   int
}

// Check reports whether instances form a valid layout of one GPU of this
// model (known profiles, allowed starts, no overlap, at most 7 compute
// slices), and returns it.
func (g *GPU) Check(instances []Instance) (Layout, error) {
	var l Layout
	compute := 0
	for _, in := range instances {
		p := g.Index(in.Profile)
		if p < 0 {
			return 0, fmt.Errorf("mig: %s has no profile %q", g.Model, in.Profile)
		}
		var err error
		if l, err = g.Place(l, p, in.Start); err != nil {
			return 0, err
		}
		compute += g.Profiles[p].Compute
	}
	if compute > 7 {
		return 0, fmt.Errorf("mig: %d compute slices on one GPU, at most 7", compute)
	}
	return l, nil
}

// Used is the number of memory slices l occupies.
func (l Layout) Used() int { return bits.OnesCount8(uint8(l)) }
