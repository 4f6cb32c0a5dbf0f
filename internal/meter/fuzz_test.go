package meter

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseGroupBy: any input is refused with ErrInvalid naming the flag,
// or accepted as distinct known dimensions that print back to it.
func FuzzParseGroupBy(f *testing.F) {
	for _, s := range []string{"tenant", "tenant,kind,region,sku", "", "a,,b", "tenant,tenant", " sku , model"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		by, err := ParseGroupBy("--group-by", s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--group-by") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		seen := map[Dim]bool{}
		for _, d := range by {
			if seen[d] || d <= 0 || int(d) >= len(dimNames) {
				t.Fatalf("%q: %v", s, by)
			}
			seen[d] = true
		}
	})
}

// FuzzParseTime: any input is refused with ErrInvalid naming the flag,
// or accepted.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"30d", "1w", "12h", "2026-01-01", "2026-01-01T00:00:00Z", "-1d", "1e400d", "NaNd", "d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := ParseTime("--since", s, t0); err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--since")) {
			t.Fatalf("%q: %v", s, err)
		}
	})
}
