package serving

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestErlangTableExact checks the memo against erlangC bit for bit over
// random sequences of server counts (up and down) and loads (repeated,
// new, zero, beyond c, NaN), as the autoscaler's search and a step's two
// distributions ask them.
func TestErlangTableExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 16))
	var tab ErlangTable
	a := 3.7
	hits := 0
	for i := 0; i < 20000; i++ {
		switch rng.IntN(10) {
		case 0:
			a = rng.Float64() * 400
		case 1:
			a = []float64{0, -1, math.NaN(), math.Inf(1), 1e-300}[rng.IntN(5)]
		}
		c := 1 + rng.IntN(500)
		got, want := tab.C(c, a), erlangC(c, a)
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("C(%d, %v) = %v, erlangC %v", c, a, got, want)
		}
		if a > 0 && a < float64(c) {
			hits++
		}
	}
	if hits < 5000 {
		t.Fatalf("only %d draws with a stable queue", hits)
	}
	var nilTab *ErlangTable
	if got, want := nilTab.C(40, 31.5), erlangC(40, 31.5); got != want {
		t.Fatalf("nil table: %v, want %v", got, want)
	}
}
