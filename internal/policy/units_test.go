package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseQuantity(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Quantity
		wantErr string
	}{
		{in: "85%", want: Quantity{0.85, DimFraction, "85%"}},
		{in: " 2.5 % ", want: Quantity{0.025, DimFraction, "2.5 %"}},
		{in: "150ms", want: Quantity{0.150, DimDuration, "150ms"}},
		{in: "150 ms", want: Quantity{0.150, DimDuration, "150 ms"}},
		{in: "5m", want: Quantity{300, DimDuration, "5m"}},
		{in: "1d", want: Quantity{86400, DimDuration, "1d"}},
		{in: "$2.50", want: Quantity{2.5, DimPrice, "$2.50"}},
		{in: "$2.50/h", want: Quantity{2.5, DimPrice, "$2.50/h"}},
		{in: "64", want: Quantity{64, DimCount, "64"}},
		{in: "1_000", want: Quantity{1000, DimCount, "1_000"}},
		{in: "", wantErr: "empty value"},
		{in: "lots%", wantErr: `invalid percentage "lots%": write a percentage such as 85%`},
		{in: "$cheap", wantErr: `invalid price "$cheap"`},
		{in: "5 minutes", wantErr: `duration "5 minutes" is not understood: write 5m`},
		{in: "fast", wantErr: `invalid value "fast"`},
		{in: "NaN", wantErr: `invalid value "NaN"`},
	} {
		got, err := ParseQuantity(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseQuantity(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseQuantity(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 })); diff != "" {
			t.Errorf("ParseQuantity(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseDurationHints(t *testing.T) {
	for in, want := range map[string]string{
		"5 minutes":       "write 5m",
		"30 seconds":      "write 30s",
		"2 hours":         "write 2h",
		"1.5 hrs":         "write 1.5h",
		"7 days":          "write 7d",
		"150 millisecond": "write 150ms",
		"150":             `has no unit`,
		"soon":            "write a number with a unit",
	} {
		_, err := ParseDuration(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDuration(%q) = %v, want %q", in, err, want)
		}
	}
	if d, err := ParseDuration("10 m"); err != nil || d != 10*time.Minute {
		t.Errorf(`ParseDuration("10 m") = %v, %v`, d, err)
	}
}

func TestCheckDimHints(t *testing.T) {
	for _, tc := range []struct {
		in   string
		dim  Dimension
		want string
	}{
		{"0.85", DimFraction, "write 85%"},
		{"85", DimFraction, "write 85%"},
		{"150", DimDuration, "write 150ms"},
		{"2.5", DimPrice, "write $2.5"},
		{"85%", DimDuration, `is a fraction, but it needs a time`},
		{"64", DimCount, ""},
	} {
		q, err := ParseQuantity(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got := checkDim(q, tc.dim, "threshold")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("checkDim(%q, %v) = %q, want %q", tc.in, tc.dim, got, tc.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Target
		wantErr string
	}{
		{in: "developer_instances", want: Target{TargetUnresolved, "developer_instances"}},
		{in: "gpu_cluster", want: Cluster},
		{in: "cluster", want: Cluster},
		{in: "pool:low_priority_pool", want: Target{TargetPool, "low_priority_pool"}},
		{in: "flavor:H100-80G", want: Target{TargetFlavor, "H100-80G"}},
		{in: "selector:tier=dev, team=ml", want: Target{TargetSelector, "team=ml,tier=dev"}},
		{in: "pol:x", wantErr: `invalid target kind "pol" in "pol:x" (did you mean "pool"?)`},
		{in: "selector:team", wantErr: "write selector:key=value"},
		{in: "selector:a=1,a=2", wantErr: `label "a" appears twice`},
		{in: "two words", wantErr: "invalid target"},
		{in: "", wantErr: "empty target"},
	} {
		got, err := ParseTarget(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseTarget(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseTarget(got.String()); err != nil || back != got {
			t.Errorf("ParseTarget(%q.String()=%q) = %v, %v", tc.in, got.String(), back, err)
		}
	}
	if l := (Target{TargetSelector, "team=ml,tier=dev"}).Labels(); l["team"] != "ml" || l["tier"] != "dev" || len(l) != 2 {
		t.Errorf("Labels = %v", l)
	}
}

func TestEnumStrings(t *testing.T) {
	for _, m := range AllMetrics() {
		if back, err := ParseMetric(m.String()); err != nil || back != m {
			t.Errorf("metric %v does not round-trip", m)
		}
		if m.Dim() == DimNone {
			t.Errorf("metric %v has no dimension", m)
		}
		if name, _, _ := m.Series(); name == "" {
			t.Errorf("metric %v has no series", m)
		}
	}
	for a := ActionNone + 1; a < actionCount; a++ {
		if back, err := ParseActionType(a.String()); err != nil || back != a {
			t.Errorf("action %v does not round-trip", a)
		}
		if _, ok := actionFields[a]; !ok {
			t.Errorf("action %v has no field list", a)
		}
	}
	for p := PriorityNone + 1; p < priorityCount; p++ {
		if back, err := ParsePriority(p.String()); err != nil || back != p {
			t.Errorf("priority %v does not round-trip", p)
		}
	}
	for _, s := range []string{Metric(99).String(), ActionType(99).String(), Event(9).String(), Op(9).String(), CondKind(9).String(), Format(9).String(), Dimension(9).String(), TargetKind(99).String(), Priority(99).String(), Aggregation(9).String()} {
		if !strings.Contains(s, "(") {
			t.Errorf("out-of-range enum String = %q", s)
		}
	}
}
