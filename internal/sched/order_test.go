package sched

import (
	"cmp"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/workload"
)

// The order's name prefixes never contradict the names: where two
// prefixes differ they order as the names do (ties fall back to the
// names). Names are drawn short and long, with shared stems, NUL bytes
// and high bytes, where zero padding and byte order could go wrong.
func TestNamePrefixOrdersAsNames(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, '-', '0', '9', 'a', 'z', 0x7f, 0x80, 0xff}
	name := func() string {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteString("devtest-00")
		}
		for n := r.IntN(20); n > 0; n-- {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := 0; i < 200_000; i++ {
		a, b := name(), name()
		pa, pb := namePrefix(workload.ID(a)), namePrefix(workload.ID(b))
		if pa == pb {
			continue
		}
		got := cmp.Compare(pa[0], pb[0])*2 + cmp.Compare(pa[1], pb[1])
		if sign(got) != strings.Compare(a, b) {
			t.Fatalf("%q vs %q: prefixes order %d, names %d", a, b, sign(got), strings.Compare(a, b))
		}
	}
}

func sign(x int) int { return cmp.Compare(x, 0) }
