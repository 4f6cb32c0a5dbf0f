package resource

import (
	"math"
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
