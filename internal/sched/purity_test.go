package sched

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/purity"
)

// TestPurity fails if the scheduling core (this package and its
// subpackages) reaches for the clock, the global random source, the network,
// the disk or goroutines. Schedule must be a pure function of its Input.
func TestPurity(t *testing.T) { purity.Check(t, ".") }
