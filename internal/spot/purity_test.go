package spot

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/purity"
)

// TestPurity: the market reads no clock, no randomness and no I/O.
func TestPurity(t *testing.T) { purity.Check(t, ".") }
