// Package resource holds the quantities Arbiter schedules: GPUs in
// thousandths (milli-GPU), CPU in milli-cores and memory in MiB. They are
// value types with saturating arithmetic so that no overflow or negative
// amount can leak out of a bookkeeping bug into a plan.
//
//	need := resource.GPUs(8)          // 8000 milli-GPU
//	half := resource.MilliGPU(500)    // half of one GPU
//	free := capacity.Sub(used)        // never below zero
package resource

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// PerGPU is the number of milli-GPU in one whole GPU.
const PerGPU = 1000

// MilliGPU is an amount of GPU in thousandths of one device.
type MilliGPU int64

// GPUs returns n whole GPUs.
func GPUs(n int) MilliGPU { return MilliGPU(n) * PerGPU }

// Add returns m+o, saturating at the int64 range.
func (m MilliGPU) Add(o MilliGPU) MilliGPU { return MilliGPU(satAdd(int64(m), int64(o))) }

// Sub returns m-o, never below zero.
func (m MilliGPU) Sub(o MilliGPU) MilliGPU { return MilliGPU(satSubFloor(int64(m), int64(o))) }

// Mul returns m*n, saturating.
func (m MilliGPU) Mul(n int) MilliGPU { return MilliGPU(satMul(int64(m), int64(n))) }

// Whole reports whether m is a whole number of GPUs.
func (m MilliGPU) Whole() bool { return m%PerGPU == 0 }

// WholeGPUs returns the number of whole GPUs in m, rounded down.
func (m MilliGPU) WholeGPUs() int { return int(m / PerGPU) }

// String formats m as GPUs: "8", "0.5", "12.25".
func (m MilliGPU) String() string {
	if m.Whole() {
		return strconv.FormatInt(int64(m/PerGPU), 10)
	}
	s := strconv.FormatFloat(float64(m)/PerGPU, 'f', 3, 64)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}

// ParseGPUs parses a GPU amount as users write it: "8" (whole GPUs),
// "0.5" or "500m" (half a GPU).
func ParseGPUs(s string) (MilliGPU, error) {
	s = strings.TrimSpace(s)
	if milli, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(milli, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("resource: invalid milli-GPU amount %q: write e.g. 250m", s)
		}
		return MilliGPU(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f > 1e12 {
		return 0, fmt.Errorf("resource: invalid GPU amount %q: write whole GPUs (8), a fraction (0.5) or milli-GPU (500m)", s)
	}
	m := math.Round(f * PerGPU)
	if m != f*PerGPU && math.Abs(m-f*PerGPU) > 1e-6 {
		return 0, fmt.Errorf("resource: GPU amount %q is finer than 1/1000 of a GPU", s)
	}
	return MilliGPU(m), nil
}

// UnmarshalYAMLScalar lets configs write GPU amounts as "8", "0.5" or "500m".
func (m *MilliGPU) UnmarshalYAMLScalar(s string) error {
	v, err := ParseGPUs(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "resource: "))
	}
	*m = v
	return nil
}

// MilliCPU is an amount of CPU in thousandths of a core.
type MilliCPU int64

// Add returns c+o, saturating.
func (c MilliCPU) Add(o MilliCPU) MilliCPU { return MilliCPU(satAdd(int64(c), int64(o))) }

// Sub returns c-o, never below zero.
func (c MilliCPU) Sub(o MilliCPU) MilliCPU { return MilliCPU(satSubFloor(int64(c), int64(o))) }

// MiB is an amount of memory in mebibytes.
type MiB int64

// Add returns b+o, saturating.
func (b MiB) Add(o MiB) MiB { return MiB(satAdd(int64(b), int64(o))) }

// Sub returns b-o, never below zero.
func (b MiB) Sub(o MiB) MiB { return MiB(satSubFloor(int64(b), int64(o))) }

func satAdd(a, b int64) int64 {
	s := a + b
	if a > 0 && b > 0 && s < 0 {
		return math.MaxInt64
	}
	if a < 0 && b < 0 && s >= 0 {
		return math.MinInt64
	}
	return s
}

func satSubFloor(a, b int64) int64 {
	if b >= a {
		return 0
	}
	return satAdd(a, -b)
}

func satMul(a, b int64) int64 {
	const small = 1 << 31 // |a|, |b| < 2^31: |a·b| < 2^62 fits
	if -small < a && a < small && -small < b && b < small {
		return a * b // the common case, without the division below
	}
	if a == 0 || b == 0 {
		return 0
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		if (a > 0) == (b > 0) {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return p
}

// MaxGPUMemory bounds a GPU memory amount (1 TiB: more than any GPU has).
const MaxGPUMemory = MiB(1 << 20)

// ParseGPUMemory parses a GPU memory amount as users write it: a whole
// number with a binary unit, "20GiB", "512MiB", "1TiB" (Gi, Mi, Ti
// also). At most MaxGPUMemory.
func ParseGPUMemory(s string) (MiB, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mib    int64
	}{{"TiB", 1 << 20}, {"GiB", 1 << 10}, {"MiB", 1}, {"Ti", 1 << 20}, {"Gi", 1 << 10}, {"Mi", 1}}
	for _, u := range units {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err != nil || n <= 0 || n > int64(MaxGPUMemory)/u.mib {
			break
		}
		return MiB(n * u.mib), nil
	}
	return 0, fmt.Errorf("invalid GPU memory %q: write a whole amount from 1MiB to 1TiB, e.g. 20GiB or 512MiB", s)
}

// GPUMemory is a GPU memory amount in a spec (gpu_memory: 20GiB).
type GPUMemory MiB

// UnmarshalYAMLScalar parses a GPU memory amount (ParseGPUMemory).
func (m *GPUMemory) UnmarshalYAMLScalar(s string) error {
	v, err := ParseGPUMemory(s)
	if err != nil {
		return err
	}
	*m = GPUMemory(v)
	return nil
}

// String formats m as its largest whole binary unit: "20GiB", "512MiB".
func (m GPUMemory) String() string {
	switch {
	case m > 0 && m%(1<<20) == 0:
		return strconv.FormatInt(int64(m>>20), 10) + "TiB"
	case m > 0 && m%(1<<10) == 0:
		return strconv.FormatInt(int64(m>>10), 10) + "GiB"
	}
	return strconv.FormatInt(int64(m), 10) + "MiB"
}
