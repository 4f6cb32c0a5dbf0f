package mig

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/purity"
)

// TestPurity: the scheduling core decides with these tables, so they are
// pure as it is (no clock, I/O, global random source or goroutines).
func TestPurity(t *testing.T) { purity.Check(t, ".") }
