package serving

// ErlangTable memoises erlangC for one offered load: the Erlang B
// recursion's values b(1..k) for the last load asked, extended as larger
// server counts are asked. erlangC(c, a) reads b(c), computed by the same
// operations in the same order as erlangC's own loop, so C(c, a) is bit
// for bit erlangC(c, a) (TestErlangTableExact). A new load restarts the
// table. The zero value is ready; not safe for concurrent use.
type ErlangTable struct {
	a float64
	b []float64 // b[k] is the Erlang B value for k servers at load a
}

// C is erlangC(c, a).
func (t *ErlangTable) C(c int, a float64) float64 {
	if t == nil {
		return erlangC(c, a)
	}
	if a <= 0 {
		return 0
	}
	if a >= float64(c) {
		return 1
	}
	if len(t.b) == 0 || t.a != a {
		t.a, t.b = a, append(t.b[:0], 1.0)
	}
	for k := len(t.b); k <= c; k++ {
		b := t.b[k-1]
		t.b = append(t.b, a*b/(float64(k)+a*b))
	}
	b := t.b[c]
	rho := a / float64(c)
	return b / (1 - rho*(1-b))
}
