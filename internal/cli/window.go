package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxWhenLen bounds a --start/--end value before any parsing.
const maxWhenLen = 64

// errWhen is wrapped by every parseWhen error.
var errWhen = errors.New("want an RFC 3339 time (2030-01-02T15:04:05Z) or a duration from now (+2h, +90m, +3d)")

// parseWhen reads a reservation window bound: an RFC 3339 time, or a
// positive duration from now, "+" then a Go duration (+2h, +1h30m) or a
// whole number of days (+3d). "" is the zero time (unset).
func parseWhen(s string, now time.Time) (time.Time, error) {
	switch {
	case s == "":
		return time.Time{}, nil
	case len(s) > maxWhenLen:
		return time.Time{}, fmt.Errorf("%d characters, too long: %w", len(s), errWhen)
	case strings.HasPrefix(s, "+"):
		d, err := parseAhead(s[1:])
		if err != nil {
			return time.Time{}, fmt.Errorf("%q: %w", s, errWhen)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: %w", s, errWhen)
	}
	return t, nil
}

// maxAhead bounds a relative bound (the server bounds the window itself).
const maxAhead = 100 * 366 * 24 * time.Hour

// parseAhead reads a positive duration: a Go duration or N days.
func parseAhead(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > int(maxAhead/(24*time.Hour)) {
			return 0, errWhen
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, err
		}
	}
	if d <= 0 || d > maxAhead {
		return 0, errWhen
	}
	return d, nil
}

// windowFlags parses --start and --end, naming the flag in errors.
func windowFlags(start, end string, now time.Time) (time.Time, time.Time, error) {
	s, err := parseWhen(start, now)
	if err != nil {
		return s, time.Time{}, fmt.Errorf("--start: %w", err)
	}
	e, err := parseWhen(end, now)
	if err != nil {
		return s, e, fmt.Errorf("--end: %w", err)
	}
	if !e.IsZero() && !s.IsZero() && !e.After(s) {
		return s, e, fmt.Errorf("--end: %s is not after --start %s", e.UTC().Format(time.RFC3339), s.UTC().Format(time.RFC3339))
	}
	return s, e, nil
}

// windowCell shows a reservation's window bound ("-" when unset).
func windowCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
