package mig

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// TestNVMLIDs checks the profile IDs against go-nvml's constants.
func TestNVMLIDs(t *testing.T) {
	for id, want := range map[int]int{
		nvml1Slice: nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml2Slice: nvml.GPU_INSTANCE_PROFILE_2_SLICE,
		nvml3Slice: nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml4Slice: nvml.GPU_INSTANCE_PROFILE_4_SLICE,
		nvml7Slice: nvml.GPU_INSTANCE_PROFILE_7_SLICE, nvml1SliceRev2: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2,
	} {
		if id != want {
			t.Errorf("profile id %d, nvml says %d", id, want)
		}
	}
}

// TestTablesMatchNVIDIA checks every model's profiles — compute slices,
// memory, start positions and size — against go-nvml's mock GPUs, which
// carry NVIDIA's GPU-instance profiles and placements (nvidia-smi mig
// -lgipp). The H200 mock's placements are known to differ from the
// hardware (see the h200 case).
func TestTablesMatchNVIDIA(t *testing.T) {
	cases := []struct {
		model      string
		cfg        gpus.Config
		placements bool
	}{
		{"A100-40G", gpus.A100_SXM4_40GB, true},
		{"A100-80G", gpus.A100_SXM4_80GB, true},
		// go-nvml's Hopper mocks (H100, H200) give placements sized in
		// compute slices — 1g.20gb size 1 at 0–6, 3g.40gb size 3, 7g.80gb
		// size 7 — which contradict their own memory sizes (a 10 GB slice
		// each: 40 GB is 4 slices, not 3). NVIDIA's MIG user guide lists
		// the same memory-slice placements for H100 and H200 as for A100
		// (nvidia-smi mig -lgipp), so for these two the compute slices,
		// instance counts and memory are compared with the mock, and the
		// memory slices with the mock's memory sizes.
		{"H100-80G", gpus.H100_SXM5_80GB, false},
		{"H200-141G", gpus.H200_SXM5_141GB, false},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			g, ok := For(c.model)
			if !ok {
				t.Fatalf("no table for %s", c.model)
			}
			mp := c.cfg.MIGProfiles
			for _, p := range g.Profiles {
				info, ok := mp.GpuInstanceProfiles[p.NVMLID]
				if !ok {
					t.Errorf("%s: mock has no profile %d", p.Name, p.NVMLID)
					continue
				}
				if int(info.SliceCount) != p.Compute {
					t.Errorf("%s: %d compute slices, NVIDIA %d", p.Name, p.Compute, info.SliceCount)
				}
				// Memory as the profile name rounds it: within 2 GiB
				// (NVIDIA's names round 4864 MB to 5gb, 80384 MB to 80gb).
				gib := float64(info.MemorySizeMB) / 1024
				if d := gib - float64(p.MemoryGiB); d < -2 || d > 2 {
					t.Errorf("%s: %d GiB, NVIDIA %.1f GiB", p.Name, p.MemoryGiB, gib)
				}
				// Memory slices: the profile's memory in units of the
				// 1-slice profile's.
				one := mp.GpuInstanceProfiles[nvml.GPU_INSTANCE_PROFILE_1_SLICE].MemorySizeMB
				if n := int(float64(info.MemorySizeMB)/float64(one) + 0.5); n != p.Memory {
					t.Errorf("%s: %d memory slices, NVIDIA's memory says %d", p.Name, p.Memory, n)
				}
				if !strings.HasPrefix(p.Name, strconv.Itoa(p.Compute)+"g.") {
					t.Errorf("%s: name does not say %d compute slices", p.Name, p.Compute)
				}
				if int(info.InstanceCount) > len(p.Starts) {
					t.Errorf("%s: %d starts, NVIDIA allows %d instances", p.Name, len(p.Starts), info.InstanceCount)
				}
				if !c.placements {
					continue
				}
				var starts []int
				for _, pl := range mp.GpuInstancePlacements[p.NVMLID] {
					starts = append(starts, int(pl.Start))
					if int(pl.Size) != p.Memory {
						t.Errorf("%s at %d: size %d, NVIDIA %d", p.Name, pl.Start, p.Memory, pl.Size)
					}
				}
				if !slices.Equal(starts, p.Starts) {
					t.Errorf("%s: starts %v, NVIDIA %v", p.Name, p.Starts, starts)
				}
			}
		})
	}
}

// TestShares: a profile's share of a GPU is its memory slices out of 8;
// one name, 1g.10gb, is a quarter of an A100-40G but an eighth of the
// 80 GB models (workload.Validate refuses flavors that disagree).
func TestShares(t *testing.T) {
	a40, _ := For("A100-40G")
	a80, _ := For("A100-80G")
	if a40.Profiles[a40.Index("1g.10gb")].Share() != 250 || a80.Profiles[a80.Index("1g.10gb")].Share() != 125 {
		t.Error("1g.10gb shares")
	}
	if s, on, ok := Lookup("3g.40gb"); !ok || s != 500 || !slices.Equal(on, []string{"A100-80G", "H100-80G"}) {
		t.Errorf("Lookup(3g.40gb) = %d %v %v", s, on, ok)
	}
	if err := ParseProfile("9g.99gb"); err == nil || !strings.Contains(err.Error(), "3g.40gb") {
		t.Errorf("ParseProfile(9g.99gb) = %v, want an error listing the valid ones", err)
	}
}

// TestKnownLayouts checks combinations NVIDIA documents as valid and
// some it refuses.
func TestKnownLayouts(t *testing.T) {
	g, _ := For("A100-80G")
	good := [][]Instance{
		{{"7g.80gb", 0}},
		{{"4g.40gb", 0}, {"3g.40gb", 4}},
		{{"3g.40gb", 0}, {"3g.40gb", 4}},
		{{"4g.40gb", 0}, {"2g.20gb", 4}, {"1g.10gb", 6}},
		{{"2g.20gb", 0}, {"2g.20gb", 2}, {"2g.20gb", 4}, {"1g.20gb", 6}},
		{{"1g.10gb", 0}, {"1g.10gb", 1}, {"1g.10gb", 2}, {"1g.10gb", 3}, {"1g.10gb", 4}, {"1g.10gb", 5}, {"1g.10gb", 6}},
	}
	for _, l := range good {
		if _, err := g.Check(l); err != nil {
			t.Errorf("%v: %v", l, err)
		}
	}
	bad := [][]Instance{
		{{"4g.40gb", 4}},                 // 4g only at 0
		{{"3g.40gb", 2}},                 // 3g at 0 or 4
		{{"1g.10gb", 7}},                 // 1g at 0..6
		{{"2g.20gb", 6}},                 // 2g at 0, 2, 4
		{{"4g.40gb", 0}, {"3g.40gb", 0}}, // overlap
		{{"7g.80gb", 0}, {"1g.10gb", 6}}, // overlap
		{{"3g.20gb", 0}},                 // an A100-40G profile
		{{"3g.40gb", 4}, {"2g.20gb", 4}}, // overlap
		{{"1g.20gb", 6}, {"1g.10gb", 6}}, // overlap
		{{"4g.40gb", 0}, {"4g.40gb", 0}}, // twice
	}
	for _, l := range bad {
		if _, err := g.Check(l); err == nil {
			t.Errorf("%v accepted", l)
		}
	}
}

// TestBestPrefersPacking: FGD's choice adds the least fragmentation. A
// 1-slice instance on an empty GPU goes to slice 6 (where it blocks only
// the 7g and one 3g), and onto a GPU partly used rather than an empty
// one; a second 3g fills a GPU's other half rather than an empty GPU.
func TestBestPrefersPacking(t *testing.T) {
	g, _ := For("H100-80G")
	p := g.Index("1g.10gb")
	st, lossEmpty, ok := g.Best(0, p)
	if !ok || st != 6 {
		t.Errorf("1g.10gb on an empty GPU at %d (ok %v), want 6", st, ok)
	}
	half := g.Mask(g.Index("4g.40gb"), 0)
	_, lossHalf, _ := g.Best(half, p)
	if lossHalf >= lossEmpty {
		t.Errorf("loss %d on a half-used GPU, %d on an empty one: packing should cost less", lossHalf, lossEmpty)
	}
	if _, _, ok := g.Best(0xff, p); ok {
		t.Error("placed on a full GPU")
	}
	p3 := g.Index("3g.40gb")
	st, lossFill, _ := g.Best(g.Mask(p3, 4), p3)
	_, lossNew, _ := g.Best(0, p3)
	if st != 0 || lossFill >= lossNew {
		t.Errorf("second 3g.40gb: at %d, loss %d beside the first, %d on an empty GPU", st, lossFill, lossNew)
	}
	if g.Frag(0xff) != 0 || g.Frag(0) <= 0 || g.Frag(0b01010101) <= g.Frag(0b00001111) {
		t.Errorf("Frag: full %d, empty %d, scattered %d, half %d", g.Frag(0xff), g.Frag(0), g.Frag(0b01010101), g.Frag(0b00001111))
	}
}

// TestPropertyLayouts is the property "no MIG layout is ever invalid for
// its GPU model; same input, same plan": random sequences of placements
// (by Best, and at random allowed starts) and removals keep every GPU's
// instances a layout Check accepts, whose mask is the layout kept, with at
// most 7 compute slices; Best never offers a start that does not fit; and
// the same seed gives the same sequence of layouts.
func TestPropertyLayouts(t *testing.T) {
	run := func(seed uint64) string {
		r := rand.New(rand.NewPCG(seed, 7))
		var trace strings.Builder
		for _, g := range models {
			var insts []Instance
			var l Layout
			for step := 0; step < 400; step++ {
				if len(insts) > 0 && r.IntN(3) == 0 {
					k := r.IntN(len(insts))
					l = g.Free(l, g.Index(insts[k].Profile), insts[k].Start)
					insts = slices.Delete(insts, k, k+1)
				} else {
					p := r.IntN(len(g.Profiles))
					start, _, ok := g.Best(l, p)
					if r.IntN(2) == 0 {
						start = g.Profiles[p].Starts[r.IntN(len(g.Profiles[p].Starts))]
						ok = g.Fits(l, p, start)
					}
					if ok {
						if !g.Fits(l, p, start) {
							t.Fatalf("%s: Best offered %s at %d on %08b", g.Model, g.Profiles[p].Name, start, l)
						}
						nl, err := g.Place(l, p, start)
						if err != nil {
							t.Fatal(err)
						}
						l = nl
						insts = append(insts, Instance{g.Profiles[p].Name, start})
					} else if _, err := g.Place(l, p, start); err == nil {
						t.Fatalf("%s: Place accepted %s at %d on %08b", g.Model, g.Profiles[p].Name, start, l)
					}
				}
				for q := range g.Profiles {
					// Count agrees with placing instances one by one.
					n, ll := 0, l
					for {
						st, _, ok := g.Best(ll, q)
						if !ok {
							break
						}
						ll |= g.Mask(q, st)
						n++
					}
					if c := g.Count(l, q); c < n || (c > 0) != g.Fits(l, q, func() int { st, _, _ := g.Best(l, q); return st }()) {
						t.Fatalf("%s: Count(%08b, %s) = %d, Best places %d", g.Model, l, g.Profiles[q].Name, c, n)
					}
				}
				got, err := g.Check(insts)
				if err != nil {
					t.Fatalf("%s: invalid layout %v: %v", g.Model, insts, err)
				}
				if got != l {
					t.Fatalf("%s: layout %08b, instances say %08b", g.Model, l, got)
				}
				fmt.Fprintf(&trace, "%s %08b\n", g.Model, l)
			}
		}
		return trace.String()
	}
	for seed := uint64(1); seed <= 50; seed++ {
		if a, b := run(seed), run(seed); a != b {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
}

// FuzzParseProfile: any string is either a known profile or refused with
// a message listing the valid ones; never a panic.
func FuzzParseProfile(f *testing.F) {
	for _, s := range []string{"3g.40gb", "9g.99gb", "", "1g.5gb", "7g.141gb", "1g.10gb+me", "3G.40GB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ParseProfile(s)
		if err == nil && !slices.Contains(Names(), s) {
			t.Fatalf("%q accepted", s)
		}
		if err != nil && !strings.Contains(err.Error(), "1g.10gb") {
			t.Fatalf("%q: %v does not list the profiles", s, err)
		}
	})
}
