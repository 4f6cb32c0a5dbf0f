package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestWindowBasics(t *testing.T) {
	w := NewWindow(5 * time.Minute)
	if _, ok := w.Mean(); ok {
		t.Error("empty window has a mean")
	}
	if _, ok := w.Quantile(0.5); ok {
		t.Error("empty window has a median")
	}
	for i, v := range []float64{5, 1, 4, 2, 3} { // one per minute, 0..4
		w.Add(t0.Add(time.Duration(i)*time.Minute), v)
	}
	check := func(what string, got float64, ok bool, want float64) {
		t.Helper()
		if !ok || got != want {
			t.Errorf("%s = %v, %v; want %v", what, got, ok, want)
		}
	}
	m, ok := w.Mean()
	check("mean", m, ok, 3)
	p, ok := w.Quantile(0.5)
	check("p50", p, ok, 3)
	p, ok = w.Quantile(0.95)
	check("p95", p, ok, 5)
	p, ok = w.Min()
	check("min", p, ok, 1)
	p, ok = w.Last()
	check("last", p, ok, 3)
	// At 5m the sample at 0 (value 5) leaves the window: live is (now-5m, now].
	w.Advance(t0.Add(5 * time.Minute))
	if w.Len() != 4 {
		t.Errorf("len after advance = %d, want 4", w.Len())
	}
	p, ok = w.Max()
	check("max after advance", p, ok, 4)
	// Out-of-order samples are clamped to the newest time; NaN is ignored.
	w.Add(t0.Add(time.Minute), 100)
	w.Add(t0.Add(6*time.Minute), math.NaN())
	p, ok = w.Last()
	check("last after late sample", p, ok, 100)
	w.Advance(t0.Add(time.Hour))
	if w.Len() != 0 {
		t.Errorf("len after an hour = %d", w.Len())
	}
}

// TestWindowMatchesNaive checks the ring/sort window against a naive
// recomputation over a random sample stream.
func TestWindowMatchesNaive(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	type sample struct {
		t time.Time
		v float64
	}
	width := 3 * time.Minute
	w := NewWindow(width)
	var all []sample
	now, qnow := t0, t0
	later := func(a, b time.Time) time.Time {
		if a.After(b) {
			return a
		}
		return b
	}
	for step := 0; step < 3000; step++ {
		now = now.Add(time.Duration(rng.IntN(20)) * time.Second)
		v := math.Round(rng.NormFloat64()*100) / 10
		w.Add(now, v)
		all = append(all, sample{now, v})
		if rng.IntN(10) != 0 {
			continue
		}
		qnow = later(qnow, now.Add(time.Duration(rng.IntN(60))*time.Second))
		w.Advance(qnow)
		var live []float64
		for _, s := range all {
			if s.t.After(qnow.Add(-width)) {
				live = append(live, s.v)
			}
		}
		if w.Len() != len(live) {
			t.Fatalf("seed %d step %d: len %d, naive %d", seed, step, w.Len(), len(live))
		}
		if len(live) == 0 {
			continue
		}
		sum := 0.0
		for _, v := range live {
			sum += v
		}
		if m, _ := w.Mean(); math.Abs(m-sum/float64(len(live))) > 1e-9 {
			t.Fatalf("seed %d step %d: mean %v, naive %v", seed, step, m, sum/float64(len(live)))
		}
		slices.Sort(live)
		for _, q := range []float64{0, 0.5, 0.9, 0.95, 0.99, 1} {
			rank := int(math.Ceil(q*float64(len(live)))) - 1
			want := live[max(rank, 0)]
			if got, _ := w.Quantile(q); got != want {
				t.Fatalf("seed %d step %d: q%v = %v, naive %v", seed, step, q, got, want)
			}
		}
	}
}

func TestWindowsAsMetrics(t *testing.T) {
	ws := NewWindows(5 * time.Minute)
	svc := Target{TargetService, "chat"}
	for i := 1; i <= 100; i++ {
		ws.ObserveMetric(MetricP95Latency, svc, t0.Add(time.Duration(i)*time.Second), float64(i)/1000)
	}
	ws.Observe("utilization", Cluster, t0, 0.5)
	ws.Observe("utilization", Cluster, t0.Add(time.Minute), 0.7)
	ws.Advance(t0.Add(2 * time.Minute))
	for _, tc := range []struct {
		q    Query
		want float64
		ok   bool
	}{
		{Query{Metric: MetricP50Latency, Target: svc}, 0.050, true},
		{Query{Metric: MetricP95Latency, Target: svc}, 0.095, true},
		{Query{Metric: MetricP99Latency, Target: svc}, 0.099, true},
		{Query{Metric: MetricUtilization, Target: Cluster}, 0.6, true},
		{Query{Metric: MetricUtilization, Target: svc}, 0, false},
	} {
		got, ok := ws.Value(tc.q)
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Value(%v) = %v, %v; want %v, %v", tc.q, got, ok, tc.want, tc.ok)
		}
	}
	// After the window passes, the data is gone.
	ws.Advance(t0.Add(10 * time.Minute))
	if _, ok := ws.Value(Query{Metric: MetricP95Latency, Target: svc}); ok {
		t.Error("stale latency still answered")
	}
}

// BenchmarkWindowTick measures one simulated minute over many series: each
// series receives samplesPerMin samples, then p50, p95, p99 and the mean of
// every series are read, as a policy tick would.
func BenchmarkWindowTick(b *testing.B) {
	for _, bc := range []struct{ series, samplesPerMin int }{
		{100, 1}, {500, 1}, {500, 60}, {200, 600},
	} {
		b.Run(fmt.Sprintf("series=%d/samples_per_min=%d/window=5m", bc.series, bc.samplesPerMin), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			ws := make([]*Window, bc.series)
			for i := range ws {
				ws[i] = NewWindow(5 * time.Minute)
			}
			now := t0
			tick := func() float64 {
				step := time.Minute / time.Duration(bc.samplesPerMin)
				for s := 0; s < bc.samplesPerMin; s++ {
					at := now.Add(time.Duration(s) * step)
					for _, w := range ws {
						w.Add(at, rng.Float64())
					}
				}
				now = now.Add(time.Minute)
				sum := 0.0
				for _, w := range ws {
					w.Advance(now)
					p50, _ := w.Quantile(0.50)
					p95, _ := w.Quantile(0.95)
					p99, _ := w.Quantile(0.99)
					m, _ := w.Mean()
					sum += p50 + p95 + p99 + m
				}
				return sum
			}
			for range 10 { // fill the windows
				tick()
			}
			// Live is (now-5m, now]: the oldest tick's first sample sits on the edge.
			if want := 5*bc.samplesPerMin - 1; ws[0].Len() != want {
				b.Fatalf("window holds %d samples, want %d", ws[0].Len(), want)
			}
			if tick() == 0 {
				b.Fatal("no work done")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				tick()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bc.series), "ns/series")
		})
	}
}

// BenchmarkEngineEvaluate measures one policy tick of the native example
// over Windows metrics.
func BenchmarkEngineEvaluate(b *testing.B) {
	p := mustLoad(b, mustReadFile(b, "../../examples/policies/native.yaml"))
	if err := p.Resolve(known); err != nil {
		b.Fatal(err)
	}
	e, err := NewEngine(p)
	if err != nil {
		b.Fatal(err)
	}
	ws := NewWindows(5 * time.Minute)
	svc := Target{TargetService, "coding-assistant"}
	east := Target{TargetRegion, "eastus"}
	now := t0
	fill := func() {
		for s := 0; s < 60; s++ {
			at := now.Add(time.Duration(s) * time.Second)
			ws.Observe("latency", svc, at, 0.1+float64(s%7)/100)
			ws.Observe("utilization", Cluster, at, 0.9)
			ws.Observe("capacity_failure_rate", east, at, 0.03)
			ws.Observe("pending_gpus", east, at, 300)
			ws.Observe("queue_wait", Target{TargetTenant, "research"}, at, 100)
		}
		now = now.Add(time.Minute)
		ws.Advance(now)
	}
	for range 10 {
		fill()
		e.Evaluate(now, ws)
	}
	if st := e.Evaluate(now, ws); len(st.Active) == 0 || len(st.Errors) != 0 {
		b.Fatalf("benchmark does no real work: %+v", st)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(time.Minute)
		ws.Advance(now)
		e.Evaluate(now, ws)
	}
}
