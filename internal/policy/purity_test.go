package policy

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/purity"
)

// TestPurity: the engine must give the same steps for the same inputs, in
// the simulator and in the server.
func TestPurity(t *testing.T) { purity.Check(t, ".") }
