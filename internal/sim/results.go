package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Results is results.json: one scenario, one seed, every strategy run.
type Results struct {
	Scenario   string            `json:"scenario"`
	Seed       uint64            `json:"seed"`
	Days       float64           `json:"days"`
	GPUs       int               `json:"gpus"`
	Strategies []*StrategyResult `json:"strategies"`
}

// WriteJSON writes results.json.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one strategy's time series: one row per SampleEvery,
// the columns of SeriesColumns.
func (sr *StrategyResult) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	se := &sr.Series
	var head []string
	for _, d := range SeriesColumns {
		if d.Names == nil {
			head = append(head, d.Column)
			continue
		}
		for _, n := range d.Names(se) {
			head = append(head, d.Column+n)
		}
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for i := range se.Times {
		var row []string
		for _, d := range SeriesColumns {
			row = append(row, d.Cells(se, i)...)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func roundTo(x float64, d int) float64 { round(&x, d); return x }

// Column is one row of the comparison table as a strategy's cell.
type Column struct {
	Label  string
	Get    func(*StrategyResult) string
	Better int // +1 higher is better, -1 lower is better, 0 neither
}

// Columns are the headline rows of Metrics (the strategy-level rows of
// Results.Rows), for callers that format one strategy at a time.
var Columns = columns()

func columns() []Column {
	var out []Column
	for i := range Metrics {
		d := &Metrics[i]
		if d.Headline && d.Value != nil {
			out = append(out, Column{Label: d.Label, Get: d.Cell, Better: d.Better})
		}
	}
	return out
}

// namedRuns says how each named training run ended ("n/a" without any).
func namedRuns(r *StrategyResult) string {
	if len(r.TrainingJobs) == 0 {
		return "n/a"
	}
	var out []string
	for _, t := range r.TrainingJobs {
		out = append(out, t.String())
	}
	return strings.Join(out, "; ")
}

// latencyRow formats one latency's p50/p95/p99 per service, in ms ("n/a"
// without services).
func latencyRow(get func(ServiceLatency) Percentiles, format string) func(*StrategyResult) string {
	return func(r *StrategyResult) string {
		if len(r.Inference) == 0 {
			return "n/a (no services)"
		}
		var out []string
		for _, name := range slices.Sorted(maps.Keys(r.Inference)) {
			p := get(r.Inference[name])
			v := fmt.Sprintf(format+" / "+format+" / "+format+" ms", p.P50, p.P95, p.P99)
			if len(r.Inference) > 1 {
				v = name + ": " + v
			}
			out = append(out, v)
		}
		return strings.Join(out, "; ")
	}
}

func usd(x float64) string { return fmt.Sprintf("$%.0f", x) }

func pct(x float64) string { return fmt.Sprintf("%.2f%%", 100*x) }

func dur(s float64) string {
	d := time.Duration(s) * time.Second
	switch {
	case d == 0:
		return "0s"
	case d < time.Hour:
		return fmt.Sprintf("%.0f min", d.Minutes())
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}
