package serving

import (
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/trace"
)

func TestDefaultProfiles(t *testing.T) {
	want := []GPUModel{T4, A10, A100_40G, A100_80G, H100_80G, H200, MI300X}
	ps := DefaultProfiles()
	if len(ps) != len(want) {
		t.Fatalf("%d profiles, want %d", len(ps), len(want))
	}
	for i, p := range ps {
		if p.GPU != want[i] {
			t.Errorf("profile %d is %s, want %s", i, p.GPU, want[i])
		}
		if err := p.Validate(); err != nil {
			t.Error(err)
		}
	}
	// Faster hardware must not be slower: prefill follows FLOPS, the
	// aggregate decode throughput follows bandwidth.
	byGPU := map[GPUModel]Profile{}
	for _, p := range ps {
		byGPU[p.GPU] = p
	}
	// (The T4 runs 4-bit weights, so only FP16 GPUs are compared.)
	for _, pair := range [][2]GPUModel{{A10, A100_40G}, {A100_40G, H100_80G}, {A100_80G, H100_80G}, {A100_80G, H200}} {
		a, b := byGPU[pair[0]], byGPU[pair[1]]
		if a.PrefillTPS >= b.PrefillTPS || a.DecodeTPS*float64(a.Batch) >= b.DecodeTPS*float64(b.Batch) {
			t.Errorf("%s (%.0f, %.0f) not slower than %s (%.0f, %.0f)", a.GPU, a.PrefillTPS, a.DecodeTPS*float64(a.Batch),
				b.GPU, b.PrefillTPS, b.DecodeTPS*float64(b.Batch))
		}
	}
	// H100 by hand: 989e12·0.40/(2·6.7e9) = 29,522 prompt tokens/s.
	if h := byGPU[H100_80G]; math.Abs(h.PrefillTPS-29522) > 1 || h.Batch != 32 {
		t.Errorf("H100 prefill %.0f batch %d, want 29522 and 32", h.PrefillTPS, h.Batch)
	}
	if _, ok := LookupProfile("B200"); ok {
		t.Error("found a profile for an unknown GPU")
	}
}

func TestDeriveDoesNotFit(t *testing.T) {
	big := Reference7B
	big.Params = 70e9
	if _, err := Derive(datasheets[1], big); err == nil {
		t.Fatal("70B in FP16 fits an A10")
	}
}

func TestProfileJob(t *testing.T) {
	p := Profile{GPU: "X", GPUsPerReplica: 1, PrefillTPS: 1000, DecodeTPS: 10, Batch: 4, Overhead: 10 * time.Millisecond}
	j := p.Job(trace.TokenSizes{Context: 500, Generated: 20})
	// occupancy 0.5 + 20/40 = 1 s; latency 0.01 + 0.5 + 2 = 2.51 s.
	if j.Occupancy != time.Second || j.Latency != 2510*time.Millisecond {
		t.Fatalf("got %+v", j)
	}
}

func TestProfileValidate(t *testing.T) {
	ok := Profile{GPU: "X", GPUsPerReplica: 1, PrefillTPS: 1, DecodeTPS: 1, Batch: 1}
	bad := []func(*Profile){
		func(p *Profile) { p.GPU = "" },
		func(p *Profile) { p.GPUsPerReplica = 0 },
		func(p *Profile) { p.PrefillTPS = math.NaN() },
		func(p *Profile) { p.DecodeTPS = 0 },
		func(p *Profile) { p.Batch = 0 },
		func(p *Profile) { p.Overhead = -1 },
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for i, f := range bad {
		p := ok
		f(&p)
		if p.Validate() == nil {
			t.Errorf("case %d: invalid profile accepted", i)
		}
	}
}
