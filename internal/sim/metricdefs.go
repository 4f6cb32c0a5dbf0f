package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

//go:generate go test -run TestMetricsDoc -update-metrics-doc .

// MetricDef defines one metric of a strategy's results, once: the CLI
// table, results.json (a metric that does not apply is null there and
// "n/a" in the tables), the report's glossary and docs/metrics.md all come
// from Metrics. Adding a metric is one row (and its StrategyResult field).
type MetricDef struct {
	// Key is the results.json key of the strategy's object.
	Key   string
	Label string // the table's row label
	// Unit: "%" (a share, stored 0..1), "s", "ms", "h", "GPU-h", "USD",
	// "count", or "" for structured values.
	Unit string
	// Better: +1 higher is better, -1 lower is better, 0 neither.
	Better     int
	Definition string // exactly how it is computed
	Covers     string // which workloads it counts
	// Headline: a row of the CLI table and the report's comparison.
	Headline bool
	// Value is the number (ok false: the metric does not apply to this
	// run, "n/a"); nil for structured values.
	Value func(*StrategyResult) (float64, bool)
	// Format writes the cell (nil: by Unit).
	Format func(*StrategyResult, float64) string
}

// ClassMetricDef defines one metric of a class (see ClassResult): the
// key of the class's object in results.json.
type ClassMetricDef struct {
	Key        string
	Label      string
	Unit       string
	Better     int
	Definition string
	Headline   bool
	Value      func(*ClassResult) (float64, bool)
	Format     func(*ClassResult, float64) string
}

// SeriesDef defines one column (or a family of columns, one per name) of
// a strategy's CSV time series; WriteCSV writes exactly these.
type SeriesDef struct {
	// Column is the header; with Names, the prefix of one column per name.
	Column     string
	Unit       string
	Definition string
	Names      func(*Series) []string
	// Cells are the row's values (one, or one per name).
	Cells func(se *Series, row int) []string
}

// always is a Value's ok for metrics that apply to every run.
func always(x float64) (float64, bool) { return x, true }

// latencyValue is the p99 of one latency of the first service by name.
func latencyValue(get func(ServiceLatency) Percentiles) func(*StrategyResult) (float64, bool) {
	return func(r *StrategyResult) (float64, bool) {
		if len(r.Inference) == 0 {
			return 0, false
		}
		return get(r.Inference[slices.Sorted(maps.Keys(r.Inference))[0]]).P99, true
	}
}

// formatLatency writes every service's p50/p95/p99 of one latency.
func formatLatency(get func(ServiceLatency) Percentiles, format string) func(*StrategyResult, float64) string {
	row := latencyRow(get, format)
	return func(r *StrategyResult, _ float64) string { return row(r) }
}

func hasServices(r *StrategyResult) bool { return len(r.Series.Services) > 0 || r.InferenceP99Ms > 0 }

// submittedKind reports whether work of a kind was submitted in the run.
func submittedKind(r *StrategyResult, kind string) bool {
	for _, c := range r.Classes {
		if c.Requests > 0 && slices.Contains(c.Kinds, kind) {
			return true
		}
	}
	return false
}

const customerVMs = "customers' VMs that are not spot (generators with customer: true and kind vm): enterprise, reserved, T4 and dev/test VMs alike"

// Metrics are the strategy-level metrics, in table order.
var Metrics = []MetricDef{
	{Key: "strategy", Label: "strategy", Definition: "The strategy's name (its file's name).", Covers: "the run"},
	{Key: "description", Label: "description", Definition: "The strategy file's description: what the strategy does, in its author's words.", Covers: "the run"},
	{Key: "gpu_utilization", Label: "GPU utilization", Unit: "%", Better: +1, Headline: true,
		Definition: "Allocated GPU-hours divided by the fleet's GPU-hours (GPUs × simulated time).",
		Covers:     "all workloads",
		Value:      func(r *StrategyResult) (float64, bool) { return r.GPUUtilization, r.CapacityGPUHours > 0 }},
	{Key: "customer_requests", Label: "customer requests", Unit: "count",
		Definition: "Customer VM requests submitted.", Covers: customerVMs,
		Value: func(r *StrategyResult) (float64, bool) { return float64(r.CustomerRequests), true }},
	{Key: "customer_capacity_failures", Label: "customer capacity failures (count)", Unit: "count", Better: -1,
		Definition: "Customer VM requests still pending when their patience ran out (each is a failure with a reason; see the classes).",
		Covers:     customerVMs,
		Value: func(r *StrategyResult) (float64, bool) {
			return float64(r.CustomerCapacityFailures), r.CustomerRequests > 0
		}},
	{Key: "customer_capacity_failure_rate", Label: "customer capacity failures (all VM classes)", Unit: "%", Better: -1, Headline: true,
		Definition: "customer_capacity_failures divided by customer_requests.", Covers: customerVMs,
		Value: func(r *StrategyResult) (float64, bool) { return r.CustomerCapacityFailureRate, r.CustomerRequests > 0 },
		Format: func(r *StrategyResult, v float64) string {
			return fmt.Sprintf("%s (%d/%d)", pct(v), r.CustomerCapacityFailures, r.CustomerRequests)
		}},
	{Key: "customer_time_to_capacity_p95_s", Label: "customer time to capacity p95 (all VM classes)", Unit: "s", Better: -1, Headline: true,
		Definition: "95th percentile of the time from a request's submission to its first placement, over the requests that were placed (failures are not in it). Placements happen at scheduling cycles (the scenario's cycle, 5 min in contention), so short waits read in whole minutes.",
		Covers:     customerVMs,
		Value: func(r *StrategyResult) (float64, bool) {
			return r.CustomerTimeToCapacityP95S, r.CustomerRequests > r.CustomerCapacityFailures
		}},
	{Key: "reservation_honour_rate", Label: "reservation claims honoured", Unit: "%", Better: +1, Headline: true,
		Definition: "Claims placed on their reservation within reservations.window_s of submission, divided by the claims: workloads naming a reservation, submitted while it had room for them.",
		Covers:     "workloads that name a reservation",
		Value:      func(r *StrategyResult) (float64, bool) { return r.ReservationHonourRate, r.Reservations.Claims > 0 },
		Format: func(r *StrategyResult, v float64) string {
			c := r.Reservations
			return fmt.Sprintf("%s (%d of %d within %s)", pct(v), c.Honoured, c.Claims, dur(c.WindowS))
		}},
	{Key: "reservations", Label: "reservation claims", Definition: "The claims behind reservation_honour_rate: claims, honoured, and window_s (seconds).",
		Covers: "workloads that name a reservation"},
	{Key: "inference_slo_attainment", Label: "inference SLO attainment (TTFT)", Unit: "%", Better: +1, Headline: true,
		Definition: "Share of inference requests whose time to first token met their service's slo_ttft_p99 (requests turned away miss it), over every request of the run.",
		Covers:     "the scenario's inference services",
		Value:      func(r *StrategyResult) (float64, bool) { return r.InferenceSLOAttainment, hasServices(r) }},
	{Key: "inference_p99_ms", Label: "inference TTFT p99 (all services)", Unit: "ms", Better: -1,
		Definition: "99th percentile of time to first token over every request of every service (a request turned away counts as 60 s).",
		Covers:     "the scenario's inference services",
		Value:      func(r *StrategyResult) (float64, bool) { return r.InferenceP99Ms, hasServices(r) }},
	{Key: "inference", Label: "inference latency per service",
		Definition: "Per service: requests, rejected, slo_ttft_p99_ms, and ttft_ms, tpot_ms, e2e_ms, each with p50/p95/p99 over the service's requests (docs/sim-latency-economics.md).",
		Covers:     "the scenario's inference services"},
	{Key: "inference.SERVICE.ttft_ms", Label: "inference TTFT p50/p95/p99", Unit: "ms", Better: -1, Headline: true,
		Definition: "Time to first token: network round trip + queue wait + overhead + prefill of the uncached prompt, percentiles over requests (turned away: 60 s). The value compared is the p99 of the first service by name.",
		Covers:     "the scenario's inference services",
		Value:      latencyValue(func(l ServiceLatency) Percentiles { return l.TTFTMs }),
		Format:     formatLatency(func(l ServiceLatency) Percentiles { return l.TTFTMs }, "%.0f")},
	{Key: "inference.SERVICE.tpot_ms", Label: "inference TPOT p50/p95/p99", Unit: "ms", Better: -1, Headline: true,
		Definition: "Time per output token: one decode step at the minute's batch of active streams, percentiles over requests. The value compared is the p99 of the first service by name.",
		Covers:     "the scenario's inference services",
		Value:      latencyValue(func(l ServiceLatency) Percentiles { return l.TPOTMs }),
		Format:     formatLatency(func(l ServiceLatency) Percentiles { return l.TPOTMs }, "%.1f")},
	{Key: "inference.SERVICE.e2e_ms", Label: "inference end-to-end p50/p95/p99", Unit: "ms", Better: -1, Headline: true,
		Definition: "Time to the last token: TTFT plus one TPOT per further output token, percentiles over requests. The value compared is the p99 of the first service by name.",
		Covers:     "the scenario's inference services",
		Value:      latencyValue(func(l ServiceLatency) Percentiles { return l.E2EMs }),
		Format:     formatLatency(func(l ServiceLatency) Percentiles { return l.E2EMs }, "%.0f")},
	{Key: "training_gpu_hours", Label: "training GPU-hours", Unit: "GPU-h", Better: +1, Headline: true,
		Definition: "GPU-hours allocated to training workloads, work later lost to preemption included.",
		Covers:     "workloads of kind training",
		Value:      func(r *StrategyResult) (float64, bool) { return r.TrainingGPUHours, submittedKind(r, "training") }},
	{Key: "training_jobs_completed", Label: "training jobs completed", Unit: "count", Better: +1,
		Definition: "Training workloads that completed within the run.", Covers: "workloads of kind training",
		Value: func(r *StrategyResult) (float64, bool) {
			return float64(r.TrainingJobsCompleted), submittedKind(r, "training")
		}},
	{Key: "training_jct_p50_h", Label: "training JCT p50", Unit: "h", Better: -1, Headline: true,
		Definition: "Median time from submission to completion of the training workloads that completed (unfinished ones are not in it; see training_jobs).",
		Covers:     "workloads of kind training that completed",
		Value:      func(r *StrategyResult) (float64, bool) { return r.TrainingJCTP50H, r.TrainingJobsCompleted > 0 }},
	{Key: "training_jobs", Label: "named training runs", Headline: true,
		Definition: "Each named training run (a training generator with a fixed count, such as the flagship): finished with completion_h, or progress (share of its runtime done; lost work is not progress), preemptions, lost_to_preemption_gpu_hours, longest_wait_h, and preempted_by: its first preemptions (hour, by: the claimant, class: its class, reason), so that the table says why a run did not finish.",
		Covers:     "training generators with a count",
		Value:      func(r *StrategyResult) (float64, bool) { return float64(len(r.TrainingJobs)), len(r.TrainingJobs) > 0 },
		Format:     func(r *StrategyResult, _ float64) string { return namedRuns(r) }},
	{Key: "work_lost_to_preemption_gpu_hours", Label: "work lost to preemption", Unit: "GPU-h", Better: -1, Headline: true,
		Definition: "GPU-hours of progress since the last checkpoint (all of it without checkpoints) that preemptions and spot evictions threw away.",
		Covers:     "all workloads", Value: func(r *StrategyResult) (float64, bool) { return always(r.WorkLostGPUHours) }},
	{Key: "preemptions", Label: "preemptions", Unit: "count", Better: -1, Headline: true,
		Definition: "Running workloads the scheduler preempted (spot evictions for price are not in it).",
		Covers:     "all workloads", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.Preemptions)) }},
	{Key: "customer_vm_preemptions", Label: "customer VMs preempted (all VM classes)", Unit: "count", Better: -1, Headline: true,
		Definition: "Preemptions of customer VMs that are not spot.", Covers: customerVMs,
		Value: func(r *StrategyResult) (float64, bool) {
			return float64(r.CustomerVMPreemptions), r.CustomerRequests > 0
		}},
	{Key: "spot_evictions", Label: "spot evictions", Unit: "count", Better: -1, Headline: true,
		Definition: "Spot workloads preempted by the scheduler or evicted because the spot price passed their max price.",
		Covers:     "workloads of priority spot", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.SpotEvictions)) }},
	{Key: "overflows", Label: "overflowed (overflow layer)", Unit: "count", Headline: true,
		Definition: "Workloads placed on a flavor/region pair the strategy's classes added to those the workload lists (overflow_by_destination: by MODEL/REGION). A placement elsewhere on the workload's own list is not overflow.",
		Covers:     "all workloads", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.Overflows)) }},
	{Key: "overflow_by_destination", Label: "overflow by destination", Definition: "overflows counted by MODEL/REGION of the placement.", Covers: "all workloads"},
	{Key: "planned_starts", Label: "planned starts (backfill)", Unit: "count", Headline: true,
		Definition: "Waits (after submission or a preemption) in which the core gave the workload a planned start: the earliest time and place it would fit, held for it (sched.Planning).",
		Covers:     "all workloads", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.PlannedStarts)) }},
	{Key: "planned_starts_started", Label: "planned workloads started", Unit: "count",
		Definition: "Of the waits with a planned start, those that ended with the workload placed.",
		Covers:     "all workloads", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.PlannedStartsStarted)) }},
	{Key: "planned_starts_kept", Label: "planned starts kept", Unit: "%", Better: +1, Headline: true,
		Definition: "Of the planned workloads that started, the share placed by their first planned start (within one scheduling cycle). A later start means work ahead of it in the order took its capacity, or a plan moved.",
		Covers:     "all workloads", Value: func(r *StrategyResult) (float64, bool) {
			return r.PlannedStartsKept, r.PlannedStartsStarted > 0
		}},
	{Key: "fragmentation", Label: "fragmentation", Unit: "%", Better: -1, Headline: true,
		Definition: "Free GPU capacity on partly used nodes divided by all free GPU capacity, summed over samples every 10 minutes.",
		Covers:     "the fleet", Value: func(r *StrategyResult) (float64, bool) { return always(r.Fragmentation) }},
	{Key: "economics", Label: "economics", Definition: "The run's money: revenue_usd, revenue_by_class_usd, revenue_lost_usd, sla_credits_usd, overflow_premium_usd, internal_training_value_usd, fleet_cost_usd (constant) (docs/sim-latency-economics.md).",
		Covers: "all workloads"},
	{Key: "economics.revenue_lost_usd", Label: "revenue lost to capacity failures", Unit: "USD", Better: -1, Headline: true,
		Definition: "What customer requests that failed for capacity would have paid at catalog prices for their asked runtime.",
		Covers:     "customer workloads", Value: func(r *StrategyResult) (float64, bool) { return always(r.Economics.RevenueLostUSD) }},
	{Key: "economics.sla_credits_usd", Label: "SLA credits owed", Unit: "USD", Better: -1, Headline: true,
		Definition: "Azure VM SLA service credits (below 99.99% monthly uptime 10%, below 99% 25%, below 95% 100% of the VM's charge) for SLA VMs preempted (uptime: time run over life) or refused (0% uptime).",
		Covers:     "customer VMs that are neither preemptible nor spot", Value: func(r *StrategyResult) (float64, bool) { return always(r.Economics.SLACreditsUSD) }},
	{Key: "economics.overflow_premium_usd", Label: "overflow premium", Unit: "USD", Better: -1, Headline: true,
		Definition: "For placements the overflow layer made: (destination's catalog price − first choice's) × GPU-hours run there; negative when the overflow was cheaper.",
		Covers:     "overflow-layer placements", Value: func(r *StrategyResult) (float64, bool) { return always(r.Economics.OverflowPremiumUSD) }},
	{Key: "economics.internal_training_value_usd", Label: "internal training value", Unit: "USD", Better: +1, Headline: true,
		Definition: "Internal training GPU-hours that were not lost to preemption × the scenario's economics.internal_gpu_hour_usd.",
		Covers:     "internal training workloads", Value: func(r *StrategyResult) (float64, bool) { return always(r.Economics.InternalTrainingValueUSD) }},
	{Key: "cost_usd", Label: "fleet cost (constant)", Unit: "USD", Headline: true,
		Definition: "The fleet's 3-year reserved list price per hour × simulated hours: a constant of the fleet, the same under every strategy.",
		Covers:     "the fleet", Value: func(r *StrategyResult) (float64, bool) { return always(r.CostUSD) }},
	{Key: "revenue_usd", Label: "revenue (customer work)", Unit: "USD", Better: +1, Headline: true,
		Definition: "Customer workloads' GPU-hours × catalog price per GPU-hour: on-demand, spot for spot work, 1-year reserved on a reservation. Internal work earns nothing here.",
		Covers:     "workloads of generators with customer: true", Value: func(r *StrategyResult) (float64, bool) { return always(r.RevenueUSD) }},
	{Key: "classes", Label: "classes", Definition: "Per class of the scenario's classes section (see the class metrics below), keyed by class name.", Covers: "all workloads"},
	{Key: "scheduling_cycles", Label: "scheduling cycles", Unit: "count", Definition: "Scheduler runs (one per cycle in which something changed).",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.SchedulingCycles)) }},
	{Key: "policy_firings", Label: "policy firings", Unit: "count", Definition: "Times a policy rule's actions came into force.",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.PolicyFirings)) }},
	{Key: "events", Label: "events", Unit: "count", Definition: "Arrivals, placements, preemptions and run ends the event loop processed.",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.Events)) }},
	{Key: "capacity_gpu_hours", Label: "capacity", Unit: "GPU-h", Definition: "The fleet's GPUs × simulated hours (= allocated + idle).",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(r.CapacityGPUHours) }},
	{Key: "allocated_gpu_hours", Label: "allocated", Unit: "GPU-h", Definition: "GPU-hours of every run, from its start to its end.",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(r.AllocatedGPUHours) }},
	{Key: "idle_gpu_hours", Label: "idle", Unit: "GPU-h", Definition: "Free GPU capacity summed over every minute.",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(r.IdleGPUHours) }},
	{Key: "jobs_submitted", Label: "workloads submitted", Unit: "count", Definition: "Workloads submitted (service replicas included).",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.JobsSubmitted)) }},
	{Key: "jobs_ended", Label: "workloads ended", Unit: "count", Definition: "Workloads that completed, failed or were cancelled.",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.JobsEnded)) }},
	{Key: "jobs_active_at_end", Label: "workloads active at the end", Unit: "count", Definition: "Workloads pending or running when the run ended (submitted = ended + active).",
		Covers: "diagnostic", Value: func(r *StrategyResult) (float64, bool) { return always(float64(r.JobsActiveAtEnd)) }},
}

// ClassMetrics are the metrics of each class, in table order.
var ClassMetrics = []ClassMetricDef{
	{Key: "display", Label: "display name", Definition: "The class's display name (classes[].display; the name when not given)."},
	{Key: "promise", Label: "promise", Definition: "What the operator promises the class: sla, reservation, slo or none (classes[].promise)."},
	{Key: "labels", Label: "labels", Definition: "The workload class labels the class groups (classes[].match)."},
	{Key: "kinds", Label: "kinds", Definition: "The kinds of workload submitted in the class (vm, training, inference, batch)."},
	{Key: "requests", Label: "requests", Unit: "count",
		Definition: "Workloads of the class submitted (each autoscaled service replica counts as one).",
		Value:      func(c *ClassResult) (float64, bool) { return float64(c.Requests), true }},
	{Key: "requests_with_patience", Label: "requests with patience", Unit: "count",
		Definition: "Requests with a patience: only they can fail for capacity; the others wait.",
		Value:      func(c *ClassResult) (float64, bool) { return float64(c.Patient), true }},
	{Key: "capacity_failures", Label: "capacity failures (count)", Unit: "count", Better: -1,
		Definition: "Requests still pending when their patience ran out; n/a for a class whose requests have no patience.",
		Value:      func(c *ClassResult) (float64, bool) { return float64(c.CapacityFailures), c.Patient > 0 }},
	{Key: "capacity_failure_rate", Label: "capacity failures", Unit: "%", Better: -1, Headline: true,
		Definition: "capacity_failures divided by requests_with_patience; the cell lists the reasons.",
		Value:      func(c *ClassResult) (float64, bool) { return c.CapacityFailureRate, c.Patient > 0 },
		Format: func(c *ClassResult, v float64) string {
			s := fmt.Sprintf("%s (%d/%d)", pct(v), c.CapacityFailures, c.Patient)
			if r := reasons(c.CapacityFailuresByReason); r != "" {
				s += " " + r
			}
			return s
		}},
	{Key: "capacity_failures_by_reason", Label: "capacity failures by reason",
		Definition: "capacity_failures by why the request was pending at the last scheduling cycle before its patience ran out: the scheduler's reason code (NoCapacity, QuotaLimit, LendingLimit, ReservationFull, NoBlock, NoFlavor, SpotPrice, Invalid, Deferred), PolicyHeld when a policy's cap held it back, NoCycle when no cycle ran before its patience ran out."},
	{Key: "placed", Label: "placed", Unit: "count", Definition: "Requests that got capacity (were placed at least once).",
		Value: func(c *ClassResult) (float64, bool) { return float64(c.Placed), true }},
	{Key: "time_to_capacity_p50_s", Label: "time to capacity p50", Unit: "s", Better: -1, Headline: true,
		Definition: "Median time from submission to first placement, over the placed requests; n/a with none placed. Placements happen at scheduling cycles (the scenario's cycle, 5 min in contention), so short waits read in whole minutes.",
		Value:      func(c *ClassResult) (float64, bool) { return c.TimeToCapacityP50S, c.Placed > 0 }},
	{Key: "time_to_capacity_p95_s", Label: "time to capacity p95", Unit: "s", Better: -1, Headline: true,
		Definition: "95th percentile of the time from submission to first placement, over the placed requests; n/a with none placed. Placements happen at scheduling cycles (the scenario's cycle, 5 min in contention), so short waits read in whole minutes.",
		Value:      func(c *ClassResult) (float64, bool) { return c.TimeToCapacityP95S, c.Placed > 0 }},
	{Key: "preemptions", Label: "preemptions", Unit: "count", Better: -1, Headline: true,
		Definition: "Times the scheduler preempted a running workload of the class (spot evictions for price are not in it).",
		Value:      func(c *ClassResult) (float64, bool) { return float64(c.Preemptions), c.Requests > 0 }},
	{Key: "spot_evictions", Label: "spot evictions", Unit: "count", Better: -1,
		Definition: "Spot workloads of the class preempted by the scheduler or evicted because the spot price passed their max price.",
		Value:      func(c *ClassResult) (float64, bool) { return float64(c.SpotEvictions), c.Requests > 0 }},
	{Key: "gpu_hours", Label: "GPU-hours", Unit: "GPU-h", Headline: true,
		Definition: "GPU-hours allocated to the class's workloads, work later lost to preemption included.",
		Value:      func(c *ClassResult) (float64, bool) { return c.GPUHours, c.Requests > 0 }},
	{Key: "lost_to_preemption_gpu_hours", Label: "work lost to preemption", Unit: "GPU-h", Better: -1,
		Definition: "GPU-hours of progress since the last checkpoint that preemptions and spot evictions of the class's workloads threw away.",
		Value:      func(c *ClassResult) (float64, bool) { return c.LostGPUHours, c.Requests > 0 }},
}

// SeriesColumns are the CSV time series' columns, one row per SampleEvery.
var SeriesColumns = []SeriesDef{
	{Column: "time_h", Unit: "h", Definition: "Time since the scenario's start.",
		Cells: func(se *Series, i int) []string { return []string{fnum(se.Times[i].Hours())} }},
	{Column: "utilization", Unit: "share", Definition: "Allocated GPUs divided by the fleet's GPUs at that time.",
		Cells: func(se *Series, i int) []string { return []string{fnum(roundTo(se.Utilization[i], 4))} }},
	{Column: "gpus_", Unit: "GPUs", Definition: "GPUs allocated to the tenant's workloads, one column per tenant that owns work in the scenario.",
		Names: func(se *Series) []string { return se.Tenants },
		Cells: func(se *Series, i int) []string { return fnums(se.TenantGPUs[i], 3) }},
	{Column: "ttft_p99_ms_", Unit: "ms", Definition: "The service's time-to-first-token p99 that minute (a request turned away counts as 60 s), one column per service.",
		Names: func(se *Series) []string { return se.Services },
		Cells: func(se *Series, i int) []string { return fnums(se.P99Ms[i], 1) }},
	{Column: "customer_capacity_failures", Unit: "count", Definition: "Customer capacity failures so far (cumulative; see customer_capacity_failures).",
		Cells: func(se *Series, i int) []string { return []string{strconv.Itoa(se.Failures[i])} }},
	{Column: "training_gpu_hours", Unit: "GPU-h", Definition: "Training GPU-hours so far (cumulative, running work included).",
		Cells: func(se *Series, i int) []string { return []string{fnum(roundTo(se.TrainingGPU[i], 1))} }},
	{Column: "preemptions", Unit: "count", Definition: "Preemptions so far (cumulative; see preemptions).",
		Cells: func(se *Series, i int) []string { return []string{strconv.Itoa(se.Preemptions[i])} }},
	{Column: "spot_usd_per_gpu_h_", Unit: "USD per GPU-hour", Definition: "The spot price of the MODEL/REGION, one column per spot market key.",
		Names: func(se *Series) []string { return se.SpotKeys },
		Cells: func(se *Series, i int) []string { return fnums(se.SpotPrice[i], 4) }},
}

func fnum(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func fnums(xs []float64, d int) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fnum(roundTo(x, d))
	}
	return out
}

// reasons writes failures by reason, most first: "[NoCapacity 40, PolicyHeld 3]".
func reasons(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// byUnit formats a value by its unit.
func byUnit(unit string, v float64) string {
	switch unit {
	case "%":
		return pct(v)
	case "s":
		return dur(v)
	case "ms":
		return fmt.Sprintf("%.0f ms", v)
	case "h":
		return fmt.Sprintf("%.2f h", v)
	case "GPU-h":
		return fmt.Sprintf("%.0f GPU-h", v)
	case "USD":
		return fmt.Sprintf("$%.0f", v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// NA is the cell of a metric that does not apply.
const NA = "n/a"

// Cell is the table cell of d for r.
func (d *MetricDef) Cell(r *StrategyResult) string {
	if d.Value == nil {
		return NA
	}
	v, ok := d.Value(r)
	switch {
	case !ok:
		return NA
	case d.Format != nil:
		return d.Format(r, v)
	}
	return byUnit(d.Unit, v)
}

// Cell is the table cell of d for c (n/a when c is nil: the strategy's
// run has no such class).
func (d *ClassMetricDef) Cell(c *ClassResult) string {
	if c == nil || d.Value == nil {
		return NA
	}
	v, ok := d.Value(c)
	switch {
	case !ok:
		return NA
	case d.Format != nil:
		return d.Format(c, v)
	}
	return byUnit(d.Unit, v)
}

// Row is one row of the comparison table.
type Row struct {
	Label  string
	Better int
	Cells  []string // one per strategy
	// Best marks the cells holding the row's best value (none when the
	// row has no direction, fewer than two values apply, or all are equal).
	Best []bool
}

// Rows are the comparison table: the headline metrics, then the headline
// class metrics of the classes with a promise (of every class with all).
func (r *Results) Rows(all bool) []Row {
	return append(r.MetricRows(), r.ClassRows(all)...)
}

// MetricRows are the rows of the headline strategy-level metrics.
func (r *Results) MetricRows() []Row {
	var rows []Row
	for i := range Metrics {
		d := &Metrics[i]
		if !d.Headline || d.Value == nil {
			continue
		}
		row := Row{Label: d.Label, Better: d.Better}
		var vals []float64
		var oks []bool
		for _, sr := range r.Strategies {
			v, ok := d.Value(sr)
			vals, oks = append(vals, v), append(oks, ok)
			row.Cells = append(row.Cells, d.Cell(sr))
		}
		row.Best = bestOf(vals, oks, d.Better)
		rows = append(rows, row)
	}
	return rows
}

// ClassRows are the headline class metrics of the classes with a promise
// (of every class with all), class by class.
func (r *Results) ClassRows(all bool) []Row {
	var rows []Row
	for _, c := range r.ClassOrder() {
		if !all && !c.Promise.Promised() {
			continue
		}
		for i := range ClassMetrics {
			d := &ClassMetrics[i]
			if !d.Headline || d.Value == nil {
				continue
			}
			row := Row{Label: c.Display + ": " + d.Label, Better: d.Better}
			var vals []float64
			var oks []bool
			for _, sr := range r.Strategies {
				cr := sr.Classes.Get(c.Name)
				v, ok := 0.0, false
				if cr != nil {
					v, ok = d.Value(cr)
				}
				vals, oks = append(vals, v), append(oks, ok)
				row.Cells = append(row.Cells, d.Cell(cr))
			}
			row.Best = bestOf(vals, oks, d.Better)
			rows = append(rows, row)
		}
	}
	return rows
}

// ClassOrder returns the classes of all strategies' runs, each once, in
// the order they first appear.
func (r *Results) ClassOrder() []*ClassResult {
	var out []*ClassResult
	seen := map[string]bool{}
	for _, sr := range r.Strategies {
		for _, c := range sr.Classes {
			if !seen[c.Name] {
				seen[c.Name] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// bestOf marks the best of the values that apply.
func bestOf(vals []float64, oks []bool, better int) []bool {
	best := make([]bool, len(vals))
	if better == 0 {
		return best
	}
	n, b, allEqual := 0, 0.0, true
	for i, v := range vals {
		if !oks[i] || math.IsNaN(v) {
			continue
		}
		if n > 0 && v != b {
			allEqual = false
		}
		if n == 0 || float64(better)*v > float64(better)*b {
			b = v
		}
		n++
	}
	if n < 2 || allEqual {
		return best
	}
	for i, v := range vals {
		best[i] = oks[i] && v == b
	}
	return best
}

// MarshalJSON writes the strategy's results with the metrics that do not
// apply (Metrics' Value not ok) as null.
func (sr *StrategyResult) MarshalJSON() ([]byte, error) {
	type plain StrategyResult
	var na []string
	for i := range Metrics {
		if d := &Metrics[i]; d.Value != nil {
			if _, ok := d.Value(sr); !ok {
				na = append(na, d.Key)
			}
		}
	}
	return marshalNA((*plain)(sr), na)
}

// MetricsMarkdown is docs/metrics.md, generated from Metrics,
// ClassMetrics and SeriesColumns.
func MetricsMarkdown() string {
	var b strings.Builder
	b.WriteString("# Simulation metrics\n\n")
	b.WriteString("<!-- Generated from internal/sim/metricdefs.go by `go generate ./internal/sim`; do not edit. -->\n\n")
	b.WriteString("Every number `arbiter sim` reports is defined here, once: the CLI table, `results.json`, the CSV time series,\n")
	b.WriteString("the report's glossary and this page come from the same table. A metric that does not apply to a run (no\n")
	b.WriteString("inference services, no reservation claims, no placed requests) is `n/a` in the tables and `null` in `results.json`.\n")
	b.WriteString("Better: ↑ higher is better, ↓ lower is better, blank: neither.\n\n")
	b.WriteString("## Per strategy (`results.json`: `strategies[i].KEY`)\n\n")
	b.WriteString("| key | label | unit | better | covers | definition |\n|---|---|---|---|---|---|\n")
	for _, d := range Metrics {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", d.Key, mdEsc(d.Label), d.Unit, arrow(d.Better), mdEsc(d.Covers), mdEsc(d.Definition))
	}
	b.WriteString("\n## Per class (`results.json`: `strategies[i].classes.NAME.KEY`)\n\n")
	b.WriteString("Classes are the scenario's `classes:` section: each has a `name` (the key), a `display` name, a `promise`\n")
	b.WriteString("(`sla`, `reservation`, `slo` or `none`) and the workload `class` labels it groups (`match`). A label no class\n")
	b.WriteString("matches is a class of its own with no promise. Each class's object also carries `display`, `promise`, `labels`\n")
	b.WriteString("and `kinds` (the kinds of workload submitted in it). The CLI table shows the classes with a promise; `arbiter sim\n")
	b.WriteString("--all-classes` shows every class; the report shows every class.\n\n")
	b.WriteString("| key | label | unit | better | in the table | definition |\n|---|---|---|---|---|---|\n")
	for _, d := range ClassMetrics {
		in := ""
		if d.Headline {
			in = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", d.Key, mdEsc(d.Label), d.Unit, arrow(d.Better), in, mdEsc(d.Definition))
	}
	b.WriteString("\n## Time series (`STRATEGY.csv`, one row every " + SampleEvery.String() + ")\n\n")
	b.WriteString("| column | unit | definition |\n|---|---|---|\n")
	for _, d := range SeriesColumns {
		col := "`" + d.Column + "`"
		if d.Names != nil {
			col = "`" + d.Column + "NAME`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", col, d.Unit, mdEsc(d.Definition))
	}
	return b.String()
}

func arrow(better int) string {
	switch better {
	case +1:
		return "↑"
	case -1:
		return "↓"
	}
	return ""
}

func mdEsc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
