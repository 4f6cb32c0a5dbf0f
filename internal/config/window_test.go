package config

import (
	"strings"
	"testing"
)

const windowFleet = `
now: 2026-03-02T00:00:00Z
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: h1
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
tenants:
  - name: a
  - name: b
reservations:
`

// TestReservationWindowsInConfig (issue 17 item 4): a reservation far in
// the future gets no machines at load and blocks no reservation now; one
// whose window opens within the lead time is bound; overlapping windows
// beyond the machines are refused, naming the reservation.
func TestReservationWindowsInConfig(t *testing.T) {
	for _, tc := range []struct {
		name, reservations string
		err                string // "" when it loads
		nodes              []int  // per reservation, machines bound at load
	}{
		{"2030 beside now", `
  - {name: later, owner: a, region: eastus, sku: Standard_ND96isr_H100_v5, count: 2, start: 2030-01-06T08:00:00Z, end: 2030-01-13T08:00:00Z}
  - {name: now, owner: b, region: eastus, sku: Standard_ND96isr_H100_v5, count: 2, end: 2026-03-03T00:00:00Z}
`, "", []int{0, 2}},
		{"soon is bound", `
  - {name: soon, owner: a, region: eastus, sku: Standard_ND96isr_H100_v5, count: 1, start: 2026-03-02T00:30:00Z, end: 2026-03-02T02:00:00Z}
`, "", []int{1}},
		{"back to back", `
  - {name: first, owner: a, region: eastus, sku: Standard_ND96isr_H100_v5, count: 2, end: 2026-03-02T05:00:00Z}
  - {name: second, owner: b, region: eastus, sku: Standard_ND96isr_H100_v5, count: 2, start: 2026-03-02T05:00:00Z, end: 2026-03-02T07:00:00Z}
`, "", []int{2, 0}},
		{"overlapping futures", `
  - {name: x, owner: a, region: eastus, sku: Standard_ND96isr_H100_v5, count: 2, start: 2026-04-01T00:00:00Z, end: 2026-04-03T00:00:00Z}
  - {name: y, owner: b, region: eastus, sku: Standard_ND96isr_H100_v5, count: 1, start: 2026-04-02T00:00:00Z, end: 2026-04-04T00:00:00Z}
`, `reservations[1]: tenancy: capacity calendar full`, nil},
		{"open-ended now overlaps a future one", `
  - {name: x, owner: a, region: eastus, sku: Standard_ND96isr_H100_v5, count: 2, start: 2026-04-01T00:00:00Z, end: 2026-04-03T00:00:00Z}
  - {name: y, owner: b, region: eastus, sku: Standard_ND96isr_H100_v5, count: 1}
`, `reservations[1]: tenancy: capacity calendar full`, nil},
	} {
		c, err := Parse("w.yaml", []byte(windowFleet+strings.TrimPrefix(tc.reservations, "\n")))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for i, want := range tc.nodes {
			if got := len(c.File.Reservations[i].Nodes); got != want {
				t.Errorf("%s: reservations[%d] bound to %d machines, want %d", tc.name, i, got, want)
			}
		}
	}
}
