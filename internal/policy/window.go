package policy

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Window is a sliding window over time-stamped samples: it keeps the samples
// of the last Width and answers mean, quantiles, min, max and last.
//
// Samples live in a ring buffer (adding is O(1) amortised, and never
// allocates once the buffers have grown to the window's size). Quantiles
// read a sorted copy of the live samples that is kept up to date lazily: a
// query after k samples came and went sorts just those k and merges them in,
// O(n + k log k), and every further quantile until the next change is O(1).
// So a policy tick that reads p50, p95 and p99 of a window costs about one
// linear pass. A Window is not safe for concurrent use.
type Window struct {
	width int64 // ns
	ts    []int64
	vs    []float64
	head  int // index of the oldest sample
	n     int
	last  int64 // time of the newest sample

	// sorted holds the live values as of the last sort; when synced,
	// sorted + added − gone is the live multiset.
	sorted []float64
	synced bool
	added  []float64
	gone   []float64
	tmp    []float64

	sum   float64
	sumOK bool
}

// NewWindow returns an empty window keeping samples for width.
func NewWindow(width time.Duration) *Window {
	if width <= 0 {
		width = time.Nanosecond
	}
	return &Window{width: int64(width)}
}

// Width returns the window's length.
func (w *Window) Width() time.Duration { return time.Duration(w.width) }

// Len returns the number of live samples.
func (w *Window) Len() int { return w.n }

// Add records value v at time t. A sample older than the newest one is
// recorded at the newest one's time, so the window stays ordered. NaN and
// infinite values are ignored.
func (w *Window) Add(t time.Time, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	ns := t.UnixNano()
	if w.n > 0 && ns < w.last {
		ns = w.last
	}
	w.last = ns
	w.evict(ns)
	if w.n == len(w.ts) {
		w.grow()
	}
	i := (w.head + w.n) & (len(w.ts) - 1)
	w.ts[i], w.vs[i] = ns, v
	w.n++
	w.sumOK = false
	if w.synced {
		w.added = append(w.added, v)
		w.checkPending()
	}
}

// checkPending gives up incremental upkeep when more changed than a full
// sort would cost, which also bounds the pending buffers.
func (w *Window) checkPending() {
	if len(w.added)+len(w.gone) > max(64, w.n) {
		w.synced = false
		w.added, w.gone = w.added[:0], w.gone[:0]
	}
}

func (w *Window) grow() {
	size := max(8, 2*len(w.ts))
	ts, vs := make([]int64, size), make([]float64, size)
	for k := 0; k < w.n; k++ {
		j := (w.head + k) & (len(w.ts) - 1)
		ts[k], vs[k] = w.ts[j], w.vs[j]
	}
	w.ts, w.vs, w.head = ts, vs, 0
}

// Advance drops the samples that are Width or more older than now: a sample
// at time s is live while now-Width < s.
func (w *Window) Advance(now time.Time) { w.evict(now.UnixNano()) }

func (w *Window) evict(now int64) {
	cut := now - w.width
	for w.n > 0 && w.ts[w.head] <= cut {
		if w.synced {
			w.gone = append(w.gone, w.vs[w.head])
		}
		w.head = (w.head + 1) & (len(w.ts) - 1)
		w.n--
		w.sumOK = false
	}
	if w.synced {
		w.checkPending()
	}
}

// Last returns the newest live sample.
func (w *Window) Last() (float64, bool) {
	if w.n == 0 {
		return 0, false
	}
	return w.vs[(w.head+w.n-1)&(len(w.ts)-1)], true
}

// Mean returns the mean of the live samples.
func (w *Window) Mean() (float64, bool) {
	if w.n == 0 {
		return 0, false
	}
	if !w.sumOK {
		s := 0.0
		for k := 0; k < w.n; k++ {
			s += w.vs[(w.head+k)&(len(w.ts)-1)]
		}
		w.sum, w.sumOK = s, true
	}
	return w.sum / float64(w.n), true
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the live samples by the
// nearest-rank method: the smallest sample with at least q of the samples at
// or below it. Quantile(0.95) is p95; Quantile(0) is the minimum.
func (w *Window) Quantile(q float64) (float64, bool) {
	if w.n == 0 || math.IsNaN(q) {
		return 0, false
	}
	w.sort()
	rank := int(math.Ceil(q*float64(w.n))) - 1
	rank = min(max(rank, 0), w.n-1)
	return w.sorted[rank], true
}

// Min returns the smallest live sample.
func (w *Window) Min() (float64, bool) { return w.Quantile(0) }

// Max returns the largest live sample.
func (w *Window) Max() (float64, bool) { return w.Quantile(1) }

func (w *Window) sort() {
	if !w.synced {
		w.sorted = w.sorted[:0]
		for k := 0; k < w.n; k++ {
			w.sorted = append(w.sorted, w.vs[(w.head+k)&(len(w.ts)-1)])
		}
		slices.Sort(w.sorted)
		w.synced = true
		w.added, w.gone = w.added[:0], w.gone[:0]
		return
	}
	if len(w.added) == 0 && len(w.gone) == 0 {
		return
	}
	slices.Sort(w.added)
	slices.Sort(w.gone)
	// Merge sorted and added, dropping gone (a sub-multiset of the two).
	out := w.tmp[:0]
	i, j, g := 0, 0, 0
	for i < len(w.sorted) || j < len(w.added) {
		var x float64
		if j >= len(w.added) || (i < len(w.sorted) && w.sorted[i] <= w.added[j]) {
			x = w.sorted[i]
			i++
		} else {
			x = w.added[j]
			j++
		}
		if g < len(w.gone) && w.gone[g] == x {
			g++
			continue
		}
		out = append(out, x)
	}
	w.tmp, w.sorted = w.sorted, out
	w.added, w.gone = w.added[:0], w.gone[:0]
}

// Windows is a set of sliding windows, one per (series, target), that
// implements Metrics: the simulator or server records raw samples with
// Observe, moves the clock with Advance, and hands the Windows to
// Engine.Evaluate. Each metric reads its series (see Metric.Series): p95
// latency of a service is the 0.95 quantile of that service's "latency"
// samples in the window; utilization is the mean of the "utilization"
// samples.
type Windows struct {
	width  time.Duration
	now    time.Time
	series map[seriesKey]*Window
	// maxAge bounds the age of the newest sample of an outside series (a
	// Query with Series): older, it counts as no data.
	maxAge time.Duration
}

type seriesKey struct {
	series string
	target Target
}

// NewWindows returns an empty set of windows of the given width.
func NewWindows(width time.Duration) *Windows {
	return &Windows{width: width, series: map[seriesKey]*Window{}}
}

// Observe records a raw sample of a series ("latency", "utilization",
// "queue_wait", "pending_gpus", "spot_price", "capacity_failure_rate") for
// a target, in base units (seconds, fractions, GPUs, dollars per GPU-hour).
func (ws *Windows) Observe(series string, target Target, t time.Time, v float64) {
	k := seriesKey{series, target}
	w := ws.series[k]
	if w == nil {
		w = NewWindow(ws.width)
		ws.series[k] = w
	}
	w.Add(t, v)
}

// ObserveMetric records a sample in the series that metric m reads.
func (ws *Windows) ObserveMetric(m Metric, target Target, t time.Time, v float64) {
	name, _, _ := m.Series()
	ws.Observe(name, target, t, v)
}

// Advance sets the time at which Value reads the windows.
func (ws *Windows) Advance(now time.Time) { ws.now = now }

// SetMaxAge sets how old the newest sample of an outside series (a
// Query with Series, such as a Prometheus leaf's) may be and still count;
// 0 (the default) is the window's width.
func (ws *Windows) SetMaxAge(d time.Duration) { ws.maxAge = d }

// Drop forgets every target's samples of a series: until the next
// Observe, its queries have no data.
func (ws *Windows) Drop(series string) {
	for k := range ws.series {
		if k.series == series {
			delete(ws.series, k)
		}
	}
}

// Targets returns the targets a series has samples for, in order.
func (ws *Windows) Targets(series string) []Target {
	var out []Target
	for k := range ws.series {
		if k.series == series {
			out = append(out, k.target)
		}
	}
	slices.SortFunc(out, func(a, b Target) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Window returns the window of a series and target, or nil.
func (ws *Windows) Window(series string, target Target) *Window {
	return ws.series[seriesKey{series, target}]
}

// Value implements Metrics.
func (ws *Windows) Value(q Query) (float64, bool) {
	if q.Series != "" {
		w := ws.series[seriesKey{q.Series, q.Target}]
		if w == nil {
			return 0, false
		}
		age := ws.maxAge
		if age <= 0 {
			age = ws.width
		}
		if !ws.now.IsZero() && ws.now.UnixNano()-w.last > int64(age) {
			return 0, false
		}
		return w.Last()
	}
	name, agg, quant := q.Metric.Series()
	w := ws.series[seriesKey{name, q.Target}]
	if w == nil {
		return 0, false
	}
	if !ws.now.IsZero() {
		w.Advance(ws.now)
	}
	switch agg {
	case AggMean:
		return w.Mean()
	case AggQuantile:
		return w.Quantile(quant)
	}
	return w.Last()
}

// Queries returns every metric × target the windows hold samples for, on
// the pairs MetricSources has (each metric reading a series that has a
// window), by metric then target: what Value can answer.
func (ws *Windows) Queries() []Query {
	var out []Query
	for k := range ws.series {
		for _, m := range AllMetrics() {
			if name, _, _ := m.Series(); name != k.series {
				continue
			}
			if _, ok := MetricSources[m][k.target.Kind]; ok {
				out = append(out, Query{Metric: m, Target: k.target})
			}
		}
	}
	slices.SortFunc(out, func(a, b Query) int {
		if a.Metric != b.Metric {
			return int(a.Metric) - int(b.Metric)
		}
		if a.Target.Kind != b.Target.Kind {
			return int(a.Target.Kind) - int(b.Target.Kind)
		}
		return strings.Compare(a.Target.Name, b.Target.Name)
	})
	return out
}
