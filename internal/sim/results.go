package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
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

// WriteCSV writes one strategy's time series: one row per SampleEvery with
// time, utilization, GPUs per tenant, time-to-first-token p99 per service, cumulative customer
// capacity failures, training GPU-hours, preemptions, and spot prices.
func (sr *StrategyResult) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	se := &sr.Series
	head := []string{"time_h", "utilization"}
	for _, t := range se.Tenants {
		head = append(head, "gpus_"+t)
	}
	for _, s := range se.Services {
		head = append(head, "ttft_p99_ms_"+s)
	}
	head = append(head, "customer_capacity_failures", "training_gpu_hours", "preemptions")
	for _, k := range se.SpotKeys {
		head = append(head, "spot_usd_per_gpu_h_"+k)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	for i, t := range se.Times {
		row := []string{f(t.Hours()), f(roundTo(se.Utilization[i], 4))}
		for _, g := range se.TenantGPUs[i] {
			row = append(row, f(roundTo(g, 3)))
		}
		for _, p := range se.P99Ms[i] {
			row = append(row, f(roundTo(p, 1)))
		}
		row = append(row, strconv.Itoa(se.Failures[i]), f(roundTo(se.TrainingGPU[i], 1)), strconv.Itoa(se.Preemptions[i]))
		for _, p := range se.SpotPrice[i] {
			row = append(row, f(roundTo(p, 4)))
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func roundTo(x float64, d int) float64 { round(&x, d); return x }

// Columns are the comparison table's rows: a label, the JSON field, and
// whether higher is better.
var Columns = []struct {
	Label  string
	Get    func(*StrategyResult) string
	Better int // +1 higher is better, -1 lower is better, 0 neither
}{
	{"GPU utilization", func(r *StrategyResult) string { return pct(r.GPUUtilization) }, +1},
	{"customer capacity failures", func(r *StrategyResult) string {
		return fmt.Sprintf("%s (%d/%d)", pct(r.CustomerCapacityFailureRate), r.CustomerCapacityFailures, r.CustomerRequests)
	}, -1},
	{"customer time to capacity p95", func(r *StrategyResult) string { return dur(r.CustomerTimeToCapacityP95S) }, -1},
	{"reservation claims honoured", func(r *StrategyResult) string {
		c := r.Reservations
		if c.Claims == 0 {
			return "n/a (no claims)"
		}
		return fmt.Sprintf("%s (%d of %d within %s)", pct(r.ReservationHonourRate), c.Honoured, c.Claims, dur(c.WindowS))
	}, +1},
	{"inference SLO attainment (TTFT)", func(r *StrategyResult) string { return pct(r.InferenceSLOAttainment) }, +1},
	{"inference TTFT p50/p95/p99", latencyRow(func(l ServiceLatency) Percentiles { return l.TTFTMs }, "%.0f"), -1},
	{"inference TPOT p50/p95/p99", latencyRow(func(l ServiceLatency) Percentiles { return l.TPOTMs }, "%.1f"), -1},
	{"inference end-to-end p50/p95/p99", latencyRow(func(l ServiceLatency) Percentiles { return l.E2EMs }, "%.0f"), -1},
	{"training GPU-hours", func(r *StrategyResult) string { return fmt.Sprintf("%.0f", r.TrainingGPUHours) }, +1},
	{"training JCT p50", func(r *StrategyResult) string { return fmt.Sprintf("%.2f h", r.TrainingJCTP50H) }, -1},
	{"named training runs", namedRuns, 0},
	{"work lost to preemption", func(r *StrategyResult) string { return fmt.Sprintf("%.0f GPU-h", r.WorkLostGPUHours) }, -1},
	{"preemptions", func(r *StrategyResult) string { return strconv.Itoa(r.Preemptions) }, -1},
	{"customer VMs preempted", func(r *StrategyResult) string { return strconv.Itoa(r.CustomerVMPreemptions) }, -1},
	{"spot evictions", func(r *StrategyResult) string { return strconv.Itoa(r.SpotEvictions) }, -1},
	{"overflowed (overflow layer)", func(r *StrategyResult) string { return strconv.Itoa(r.Overflows) }, 0},
	{"fragmentation", func(r *StrategyResult) string { return pct(r.Fragmentation) }, -1},
	{"revenue (customers, catalog prices)", func(r *StrategyResult) string { return usd(r.RevenueUSD) }, +1},
	{"revenue lost to capacity failures", func(r *StrategyResult) string { return usd(r.Economics.RevenueLostUSD) }, -1},
	{"SLA credits owed", func(r *StrategyResult) string { return usd(r.Economics.SLACreditsUSD) }, -1},
	{"overflow premium", func(r *StrategyResult) string { return usd(r.Economics.OverflowPremiumUSD) }, -1},
	{"internal training value", func(r *StrategyResult) string { return usd(r.Economics.InternalTrainingValueUSD) }, +1},
	{"fleet cost (constant)", func(r *StrategyResult) string { return usd(r.CostUSD) + " (same for every strategy)" }, 0},
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
