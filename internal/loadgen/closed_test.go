package loadgen

import (
	"errors"
	"sync"
	"testing"
)

// TestClosedLoop: every index is submitted exactly once; the first error
// is returned and no call starts after it.
func TestClosedLoop(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	if err := ClosedLoop(1000, 8, func(i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if seen[i] != 1 {
			t.Fatalf("index %d submitted %d times", i, seen[i])
		}
	}
	bad := errors.New("refused")
	calls := 0
	err := ClosedLoop(1000, 1, func(i int) error {
		calls++
		if i == 10 {
			return bad
		}
		return nil
	})
	if !errors.Is(err, bad) || calls != 11 {
		t.Errorf("after an error at 10: %v, %d calls", err, calls)
	}
}
