package resource

import (
	"math"
	"math/big"
	"testing"
)

func TestSaturating(t *testing.T) {
	if got := MilliGPU(math.MaxInt64).Add(5); got != math.MaxInt64 {
		t.Errorf("Add overflow = %d", got)
	}
	if got := GPUs(1).Sub(GPUs(2)); got != 0 {
		t.Errorf("Sub below zero = %d", got)
	}
	if got := MilliGPU(math.MaxInt64 / 2).Mul(3); got != math.MaxInt64 {
		t.Errorf("Mul overflow = %d", got)
	}
	if got := GPUs(3).Mul(4); got != GPUs(12) {
		t.Errorf("Mul = %d", got)
	}
}

func TestParseGPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want MilliGPU
		ok   bool
	}{
		{"8", 8000, true}, {"0.5", 500, true}, {"250m", 250, true}, {"1.25", 1250, true},
		{"-1", 0, false}, {"x", 0, false}, {"0.0001", 0, false}, {"5 GPUs", 0, false},
	} {
		got, err := ParseGPUs(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseGPUs(%q) = %d, %v", tc.in, got, err)
		}
	}
	for _, m := range []MilliGPU{8000, 500, 1250, 1} {
		back, err := ParseGPUs(m.String())
		if err != nil || back != m {
			t.Errorf("round trip %d -> %q -> %d, %v", m, m.String(), back, err)
		}
	}
}

// TestSatMulExact: satMul is the exact product where it fits in int64 and
// saturates to the sign's bound where it does not, on both sides of its
// fast path (|a|, |b| < 2^31).
func TestSatMulExact(t *testing.T) {
	vals := []int64{0, 1, -1, 2, -2, 1000, -1000, 1<<31 - 1, -(1<<31 - 1), 1 << 31, -(1 << 31), 1<<32 + 7, -(1 << 40),
		math.MaxInt64, math.MinInt64, math.MaxInt64 / 2, math.MinInt64 / 3, 3037000499, 3037000500, -3037000500}
	for _, a := range vals {
		for _, b := range vals {
			want := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
			switch {
			case want.Cmp(big.NewInt(math.MaxInt64)) > 0:
				want = big.NewInt(math.MaxInt64)
			case want.Cmp(big.NewInt(math.MinInt64)) < 0:
				want = big.NewInt(math.MinInt64)
			}
			if got := satMul(a, b); got != want.Int64() {
				t.Errorf("satMul(%d, %d) = %d, want %d", a, b, got, want.Int64())
			}
		}
	}
}

func TestParseGPUMemory(t *testing.T) {
	for in, want := range map[string]MiB{"20GiB": 20 << 10, "512MiB": 512, "1TiB": 1 << 20, "40Gi": 40 << 10, " 8 GiB ": 8 << 10} {
		if got, err := ParseGPUMemory(in); err != nil || got != want {
			t.Errorf("ParseGPUMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "20", "20GB", "-1GiB", "0GiB", "2TiB", "1.5GiB", "GiB", "9223372036854775807GiB"} {
		if _, err := ParseGPUMemory(in); err == nil {
			t.Errorf("ParseGPUMemory(%q) accepted", in)
		}
	}
	if s := GPUMemory(20 << 10).String(); s != "20GiB" {
		t.Errorf("String = %s", s)
	}
}

func FuzzParseGPUMemory(f *testing.F) {
	for _, s := range []string{"20GiB", "512MiB", "1TiB", "20GB", "-5Gi", "99999999999999999999GiB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseGPUMemory(s)
		if err != nil {
			return
		}
		if m <= 0 || m > MaxGPUMemory {
			t.Fatalf("%q gave %d MiB", s, m)
		}
		if back, err := ParseGPUMemory(GPUMemory(m).String()); err != nil || back != m {
			t.Fatalf("%q: %d MiB does not round-trip: %v %v", s, m, back, err)
		}
	})
}
