package sim

import (
	"strings"
	"testing"
	"time"
)

// TestHonourWindowIsTheScenarios: the scenario declares the reservations'
// honour window (5 minutes unless set); a negative one is refused naming
// the field; a strategy cannot set it (it is the promise, not a knob).
func TestHonourWindowIsTheScenarios(t *testing.T) {
	base := "name: x\nduration: 1h\n"
	sc, err := ParseScenario("s.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if sc.HonourWindow != 5*time.Minute {
		t.Errorf("default window %v, want 5m", sc.HonourWindow)
	}
	if sc, err = ParseScenario("s.yaml", []byte(base+"reservation_honour_window: 2m\n")); err != nil || sc.HonourWindow != 2*time.Minute {
		t.Errorf("window 2m: %v, %v", sc, err)
	}
	if _, err := ParseScenario("s.yaml", []byte(base+"reservation_honour_window: -1m\n")); err == nil || !strings.Contains(err.Error(), "reservation_honour_window") {
		t.Errorf("negative window: %v", err)
	}
	_, err = ParseStrategy("st.yaml", []byte("name: s\noptions:\n  reservation_honour_window: 1h\n"))
	if err == nil || !strings.Contains(err.Error(), "st.yaml:3") || !strings.Contains(err.Error(), "options.reservation_honour_window") {
		t.Errorf("strategy setting the window: %v", err)
	}
}
