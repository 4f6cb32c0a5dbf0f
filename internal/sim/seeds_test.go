package sim

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint64
		err  string // substring of the error, "" for none
	}{
		{"1-10", []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, ""},
		{"1,3,5", []uint64{1, 3, 5}, ""},
		{"1-3,7", []uint64{1, 2, 3, 7}, ""},
		{" 4 , 2-3 ", []uint64{4, 2, 3}, ""},
		{"0", []uint64{0}, ""},
		{"5-5", []uint64{5}, ""},
		{"18446744073709551615", []uint64{math.MaxUint64}, ""},
		{"18446744073709551614-18446744073709551615", []uint64{math.MaxUint64 - 1, math.MaxUint64}, ""},
		{"1-100", nil, ""},
		{"", nil, "empty"},
		{"1,,2", nil, "stray comma"},
		{"1,", nil, "stray comma"},
		{"a", nil, `"a" is not a seed`},
		{"-1", nil, `"" is not a seed`},
		{"1-", nil, `"" is not a seed`},
		{"1-2-3", nil, `"2-3" is not a seed`},
		{"10-1", nil, "ends before it starts"},
		{"1-101", nil, "more than 100 seeds"},
		{"0-18446744073709551615", nil, "more than 100 seeds"},
		{"1-60,61-120", nil, "more than 100 seeds"},
		{"1-3,2", nil, "seed 2 given twice"},
		{"18446744073709551616", nil, "is not a seed"},
	} {
		got, err := ParseSeeds(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrSeeds) {
				t.Errorf("ParseSeeds(%q) = %v, %v; want error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSeeds(%q): %v", tc.in, err)
			continue
		}
		if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSeeds(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseSeeds(f *testing.F) {
	for _, s := range []string{"1-10", "1,3,5", "1-3,7", "", ",", "-", "1-", "99999999999999999999", "0-18446744073709551615", "1-3,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seeds, err := ParseSeeds(s)
		if err != nil {
			if !errors.Is(err, ErrSeeds) {
				t.Fatalf("error %v is not ErrSeeds", err)
			}
			return
		}
		if len(seeds) == 0 || len(seeds) > MaxSeeds {
			t.Fatalf("%q: %d seeds", s, len(seeds))
		}
		seen := map[uint64]bool{}
		for _, x := range seeds {
			if seen[x] {
				t.Fatalf("%q: seed %d twice", s, x)
			}
			seen[x] = true
		}
	})
}

func TestTQuantile(t *testing.T) {
	// Published two-sided 95% critical values of Student's t.
	for df, want := range map[int]float64{1: 12.706, 2: 4.303, 4: 2.776, 9: 2.262, 29: 2.045, 1000: 1.962} {
		if got := TQuantile975(df); math.Abs(got-want) > 0.001 {
			t.Errorf("t_{0.975,%d} = %.4f, want %.3f", df, got, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	st := Summarize([]float64{1, 2, 3, 4, 5})
	// mean 3, s = 1.5811, t_{0.975,4} = 2.7764: 2.7764 × 1.5811 / √5 = 1.9632.
	if st.Mean != 3 || math.Abs(st.CI95-1.9632) > 1e-3 || st.N != 5 {
		t.Errorf("Summarize = %+v, want mean 3, ci95 1.963, n 5", st)
	}
	if one := Summarize([]float64{7}); one.Mean != 7 || one.CI95 != 0 || one.N != 1 {
		t.Errorf("one seed: %+v, want mean 7, ci95 0", one)
	}
}

func TestWelchP(t *testing.T) {
	// Wikipedia's Welch example; p = 0.021378 by numeric integration of the t density (t = -2.4554, df = 24.99).
	a := []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4}
	b := []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4}
	if p := WelchP(a, b); math.Abs(p-0.021378) > 1e-5 {
		t.Errorf("WelchP = %.5f, want 0.021378", p)
	}
	if p := WelchP([]float64{1, 1, 1}, []float64{1, 1, 1}); p != 1 {
		t.Errorf("equal constants: p = %v, want 1", p)
	}
	if p := WelchP([]float64{1, 1}, []float64{2, 2}); p != 0 {
		t.Errorf("unequal constants: p = %v, want 0", p)
	}
	if p := WelchP([]float64{1}, []float64{2, 3}); p != 1 {
		t.Errorf("one value: p = %v, want 1", p)
	}
}

// TestCompareMarksOnlySignificant: the best strategy per metric is marked
// only where it differs significantly from every other; otherwise "tie".
func TestCompareMarksOnlySignificant(t *testing.T) {
	util := func(xs ...float64) []*StrategyResult {
		var rs []*StrategyResult
		for _, x := range xs {
			rs = append(rs, &StrategyResult{GPUUtilization: x, Preemptions: 3, CapacityGPUHours: 100})
		}
		return rs
	}
	m, _ := SeedMetricByKey("gpu_utilization")
	pre, _ := SeedMetricByKey("preemptions")
	res := &SeedResults{Seeds: []uint64{1, 2, 3, 4}}
	res.Strategies = []*SeedStrategy{
		Aggregate("a", util(0.80, 0.81, 0.79, 0.80), SeedMetrics),
		Aggregate("b", util(0.90, 0.91, 0.89, 0.90), SeedMetrics),
		Aggregate("c", util(0.70, 0.95, 0.60, 0.99), SeedMetrics),
	}
	// b's mean (0.90) beats c's (0.81) only by noise: a tie of b and c.
	rows := res.Table([]SeedMetric{m, pre})
	if rows[0].Best != "tie (b, c)" || strings.Contains(strings.Join(rows[0].Values, ""), "*") {
		t.Errorf("utilization row %+v: want a tie of b and c, nobody marked", rows[0])
	}
	res.Strategies = res.Strategies[:2]
	rows = res.Table([]SeedMetric{m, pre})
	if rows[0].Best != "b" || !strings.HasSuffix(rows[0].Values[1], " *") || strings.HasSuffix(rows[0].Values[0], "*") {
		t.Errorf("utilization row %+v: want b marked", rows[0])
	}
	if want := "90.00% ± 1.30% *"; rows[0].Values[1] != want {
		t.Errorf("cell %q, want %q", rows[0].Values[1], want)
	}
	if rows[1].Best != "tie (a, b)" {
		t.Errorf("equal preemptions: %+v, want a tie", rows[1])
	}
}
