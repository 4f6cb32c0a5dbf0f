package openb

import (
	"math"
	"strconv"
)

// Columns is the number of points of a discrete curve: 0..130 % of the
// cluster's GPU capacity.
const Columns = 131

// Curve computes the discrete allocation curve as the reference's
// merge_alloc_discrete.py does (OPENB-METHOD.md §5). For each record,
// a = round_half_even(arrived/gpus/10) is the arrived demand in whole % of
// capacity and u = round(used/gpus/10, 2) the allocation in %, both from
// the same float64 operations as Python's. Column x is the mean of u over
// the records with a = x, or else over those with x−1 ≤ a ≤ x+1, or NaN
// when there are none; the mean is rounded to 2 decimals.
func Curve(records []Record, gpus int) []float64 {
	var sum [Columns + 1]int64 // Σ u in hundredths; bucket 131 feeds column 130's fallback
	var cnt [Columns + 1]int64
	g := float64(gpus)
	for _, r := range records {
		a := math.RoundToEven(float64(r.Arrived) / g / 10)
		if a < 0 || a > Columns {
			continue
		}
		u := round2(float64(r.Used) / g / 10)
		sum[int(a)] += u
		cnt[int(a)]++
	}
	out := make([]float64, Columns)
	for x := range out {
		s, c := sum[x], cnt[x]
		if c == 0 {
			for y := max(x-1, 0); y <= x+1; y++ {
				s += sum[y]
				c += cnt[y]
			}
		}
		if c == 0 {
			out[x] = math.NaN()
			continue
		}
		mean := float64(s) / 100 / float64(c)
		out[x] = float64(round2(mean)) / 100
	}
	return out
}

// round2 returns v rounded to 2 decimals as Python's round(v, 2) does
// (correctly rounded from the exact binary value), in hundredths.
func round2(v float64) int64 {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	neg := false
	if s[0] == '-' {
		neg, s = true, s[1:]
	}
	var h int64
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			h = h*10 + int64(s[i]-'0')
		}
	}
	if neg {
		return -h
	}
	return h
}
