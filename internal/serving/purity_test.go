package serving

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/purity"
)

// TestPurity: the service model is pure; it may use internal/trace's types
// and TokenDist but never read trace files.
func TestPurity(t *testing.T) {
	purity.Check(t, ".", "trace.ReadAzureFile", "trace.ReadOpenBNodesFile", "trace.ReadOpenBPodsFile")
}
