package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Dimension is what a quantity measures; each metric has one, and a
// threshold must be written in its metric's dimension.
type Dimension int

const (
	// DimNone is an unset quantity.
	DimNone Dimension = iota
	// DimFraction is a share written as a percentage ("85%"), held as a
	// fraction (0.85).
	DimFraction
	// DimDuration is a time written with a unit ("150ms", "5m"), held in seconds.
	DimDuration
	// DimCount is a plain number ("64" GPUs).
	DimCount
	// DimPrice is a price in dollars per GPU-hour ("$2.50" or "$2.50/h").
	DimPrice
)

var dimensionNames = [...]string{"none", "fraction", "duration", "count", "price"}

func (d Dimension) String() string {
	if d >= 0 && int(d) < len(dimensionNames) {
		return dimensionNames[d]
	}
	return fmt.Sprintf("Dimension(%d)", int(d))
}

// example returns how a value of this dimension is written, for hints.
func (d Dimension) example() string {
	switch d {
	case DimFraction:
		return "a percentage such as 85%"
	case DimDuration:
		return "a time with a unit such as 150ms, 30s or 5m"
	case DimCount:
		return "a plain number such as 64"
	case DimPrice:
		return "a price per GPU-hour such as $2.50"
	}
	return "a value"
}

// Quantity is a number with its dimension, as written in a policy file.
// Value is in base units: a fraction for percentages, seconds for times,
// dollars per GPU-hour for prices.
type Quantity struct {
	Value float64
	Dim   Dimension
	Text  string // as written, for messages and explanations
}

// IsZero reports whether the quantity was not written.
func (q Quantity) IsZero() bool { return q.Dim == DimNone }

// String returns the quantity as written, or formatted from its value.
func (q Quantity) String() string {
	if q.Text != "" {
		return q.Text
	}
	return formatValue(q.Value, q.Dim)
}

// UnmarshalYAMLScalar parses "85%", "150ms", "5m", "$2.50", "$2.50/h" or a
// plain number. Whether the dimension fits the field is checked later.
func (q *Quantity) UnmarshalYAMLScalar(s string) error {
	v, err := ParseQuantity(s)
	if err != nil {
		return err
	}
	*q = v
	return nil
}

// ParseQuantity parses a quantity as people write it in a policy.
func ParseQuantity(s string) (Quantity, error) {
	text := strings.TrimSpace(s)
	compact := strings.ReplaceAll(text, " ", "")
	if compact == "" {
		return Quantity{}, fmt.Errorf("empty value: write %s, %s or %s", DimFraction.example(), DimDuration.example(), DimPrice.example())
	}
	if num, ok := strings.CutSuffix(compact, "%"); ok {
		f, err := parseNumber(num)
		if err != nil {
			return Quantity{}, fmt.Errorf("invalid percentage %q: write %s", text, DimFraction.example())
		}
		return Quantity{Value: f / 100, Dim: DimFraction, Text: text}, nil
	}
	if num, ok := strings.CutPrefix(compact, "$"); ok {
		num = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(num, "/hour"), "/hr"), "/h")
		f, err := parseNumber(num)
		if err != nil {
			return Quantity{}, fmt.Errorf("invalid price %q: write %s", text, DimPrice.example())
		}
		return Quantity{Value: f, Dim: DimPrice, Text: text}, nil
	}
	if f, err := parseNumber(compact); err == nil {
		return Quantity{Value: f, Dim: DimCount, Text: text}, nil
	}
	d, err := ParseDuration(text)
	if err != nil {
		if wordDurationHint(text) != "" {
			return Quantity{}, err
		}
		return Quantity{}, fmt.Errorf("invalid value %q: write %s, %s, %s or %s", text,
			DimFraction.example(), DimDuration.example(), DimPrice.example(), DimCount.example())
	}
	return Quantity{Value: d.Seconds(), Dim: DimDuration, Text: text}, nil
}

func parseNumber(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a finite number")
	}
	return f, nil
}

// unitHint says how to write a bare number in dimension d.
func unitHint(q Quantity, d Dimension) string {
	switch d {
	case DimFraction:
		v := q.Value
		if v <= 1 && v >= 0 {
			v *= 100
		}
		return fmt.Sprintf("write %s%%", strconv.FormatFloat(v, 'f', -1, 64))
	case DimDuration:
		return fmt.Sprintf("write %sms, %ss or %sm", q.Text, q.Text, q.Text)
	case DimPrice:
		return fmt.Sprintf("write $%s", q.Text)
	}
	return "write " + d.example()
}

// checkDim reports a problem when q is not of dimension want.
func checkDim(q Quantity, want Dimension, what string) string {
	if q.Dim == want {
		return ""
	}
	if q.Dim == DimCount {
		return fmt.Sprintf("%s %q has no unit: %s", what, q.Text, unitHint(q, want))
	}
	return fmt.Sprintf("%s %q is a %s, but it needs %s", what, q.Text, q.Dim, want.example())
}

// formatValue writes v (in base units of d) the way a person would.
func formatValue(v float64, d Dimension) string {
	switch d {
	case DimFraction:
		return strconv.FormatFloat(math.Round(v*1000)/10, 'f', -1, 64) + "%"
	case DimDuration:
		return time.Duration(v * float64(time.Second)).Round(time.Millisecond).String()
	case DimPrice:
		return "$" + strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Duration is a time.Duration that parses as people write it ("5m", "150ms",
// "2h", "7d") and, for a spelled-out unit such as "5 minutes", says what to
// write instead ("write 5m").
type Duration time.Duration

// UnmarshalYAMLScalar implements yamlfile.Unmarshaler.
func (d *Duration) UnmarshalYAMLScalar(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration is yamlfile.ParseDuration with a precise hint for durations
// written in words: "5 minutes" → "write 5m".
func ParseDuration(s string) (time.Duration, error) {
	d, err := yamlfile.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if hint := wordDurationHint(s); hint != "" {
		if _, short := goUnits[strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(s), "0123456789."))]; short {
			return yamlfile.ParseDuration(hint) // "150 ms" is clear enough
		}
		return 0, fmt.Errorf("duration %q is not understood: write %s", strings.TrimSpace(s), hint)
	}
	return 0, err
}

var goUnits = map[string]bool{"ms": true, "s": true, "m": true, "h": true, "d": true}

var wordUnits = map[string]string{
	"ms": "ms", "msec": "ms", "msecs": "ms", "millisecond": "ms", "milliseconds": "ms",
	"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
	"m": "m", "min": "m", "mins": "m", "minute": "m", "minutes": "m",
	"h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h",
	"d": "d", "day": "d", "days": "d",
}

// wordDurationHint turns "5 minutes" into "5m"; it returns "" when s does not
// look like a number followed by a unit word.
func wordDurationHint(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return ""
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	if _, err := strconv.ParseFloat(num, 64); err != nil {
		return ""
	}
	u, ok := wordUnits[unit]
	if !ok {
		return ""
	}
	return num + u
}
