package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxSeeds bounds a --seeds list: each seed is a full run per strategy.
const MaxSeeds = 100

// ErrSeeds is the sentinel of every --seeds parse error (errors.Is).
var ErrSeeds = errors.New("bad --seeds")

// SeedsError says which part of a --seeds list is wrong.
type SeedsError struct {
	Flag string // the flag the list came from ("" reads as --seeds)
	Part string // the offending comma-separated part ("" for the whole list)
	Msg  string
}

func (e *SeedsError) Error() string {
	flag := e.Flag
	if flag == "" {
		flag = "--seeds"
	}
	if e.Part == "" {
		return fmt.Sprintf("%s: %s", flag, e.Msg)
	}
	return fmt.Sprintf("%s: %q: %s", flag, e.Part, e.Msg)
}

// Is makes errors.Is(err, ErrSeeds) true.
func (e *SeedsError) Is(target error) bool { return target == ErrSeeds }

// ParseSeedsFlag is ParseSeeds for a list given by another flag (errors
// name it).
func ParseSeedsFlag(flag, s string) ([]uint64, error) {
	seeds, err := ParseSeeds(s)
	var se *SeedsError
	if errors.As(err, &se) {
		se.Flag = flag
	}
	return seeds, err
}

// ParseSeeds parses a seed list: comma-separated seeds and inclusive
// ranges ("1-10", "1,3,5", "1-3,7"), in the order given. A seed may appear
// once; at most MaxSeeds seeds in all.
func ParseSeeds(s string) ([]uint64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, &SeedsError{Msg: `empty: want seeds such as "1-10", "1,3,5" or "1-3,7"`}
	}
	var out []uint64
	seen := map[uint64]bool{}
	for _, part := range strings.Split(s, ",") {
		p := strings.TrimSpace(part)
		lo, hi, err := seedRange(p)
		if err != nil {
			return nil, err
		}
		if hi-lo >= MaxSeeds || len(out)+int(hi-lo+1) > MaxSeeds {
			return nil, &SeedsError{Part: p, Msg: fmt.Sprintf("more than %d seeds", MaxSeeds)}
		}
		for x := lo; ; x++ {
			if seen[x] {
				return nil, &SeedsError{Part: p, Msg: fmt.Sprintf("seed %d given twice", x)}
			}
			seen[x] = true
			out = append(out, x)
			if x == hi {
				break
			}
		}
	}
	return out, nil
}

// seedRange parses "N" or "A-B" (A ≤ B).
func seedRange(p string) (lo, hi uint64, err error) {
	if p == "" {
		return 0, 0, &SeedsError{Part: p, Msg: "empty part (a stray comma?)"}
	}
	a, b, isRange := strings.Cut(p, "-")
	if lo, err = parseSeed(p, strings.TrimSpace(a)); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseSeed(p, strings.TrimSpace(b)); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, &SeedsError{Part: p, Msg: "range ends before it starts"}
	}
	return lo, hi, nil
}

func parseSeed(part, s string) (uint64, error) {
	x, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &SeedsError{Part: part, Msg: fmt.Sprintf("%q is not a seed (a non-negative integer)", s)}
	}
	return x, nil
}

// SeedMetric is one number a run is judged by across seeds: its
// results.json key, the table's label, its unit, which way is better
// (+1 higher, -1 lower, 0 neither) and its value in a run (false: it does
// not apply to that run, e.g. no reservation claims).
type SeedMetric struct {
	Key    string
	Label  string
	Unit   string // as MetricDef.Unit: "%" (a share 0..1), "s", "ms", "h", "GPU-h", "USD", "count"
	Better int
	Value  func(*StrategyResult) (float64, bool)
}

// SeedMetrics are the metrics aggregated over seeds: every metric of the
// definition table (Metrics) that is a number, and the named training
// runs' mean progress.
var SeedMetrics = seedMetrics()

func seedMetrics() []SeedMetric {
	var out []SeedMetric
	for _, d := range Metrics {
		if d.Value == nil {
			continue
		}
		// The table's latency rows show p50/p95/p99 of every service; over
		// seeds the number compared is the first service's p99.
		label := strings.Replace(d.Label, " p50/p95/p99", " p99", 1)
		out = append(out, SeedMetric{Key: d.Key, Label: label, Unit: d.Unit, Better: d.Better, Value: d.Value})
	}
	return append(out, SeedMetric{"named_training_runs_progress", "named training runs: progress", "%", +1, namedProgress})
}

// namedProgress is the mean progress of the named training runs (1: all
// finished); it does not apply without any.
func namedProgress(r *StrategyResult) (float64, bool) {
	if len(r.TrainingJobs) == 0 {
		return 0, false
	}
	var sum float64
	for _, t := range r.TrainingJobs {
		sum += t.Progress
	}
	return sum / float64(len(r.TrainingJobs)), true
}

// SeedMetricByKey returns the metric of that key.
func SeedMetricByKey(key string) (SeedMetric, bool) {
	for _, m := range SeedMetrics {
		if m.Key == key {
			return m, true
		}
	}
	return SeedMetric{}, false
}

// Stat is a metric over seeds: the mean, the half-width of its 95%
// confidence interval (Student's t, n-1 degrees of freedom; 0 with one
// seed) and the number of seeds it applied to.
type Stat struct {
	Mean float64 `json:"mean"`
	CI95 float64 `json:"ci95"`
	N    int     `json:"n"`
	// Values are the per-seed values, in the seeds' order (for tests).
	Values []float64 `json:"-"`
}

// Summarize computes the mean and 95% CI half-width of xs.
func Summarize(xs []float64) Stat {
	st := Stat{N: len(xs), Values: xs}
	if len(xs) == 0 {
		return st
	}
	mean, sd := meanSD(xs)
	st.Mean = mean
	if len(xs) > 1 {
		st.CI95 = TQuantile975(len(xs)-1) * sd / math.Sqrt(float64(len(xs)))
	}
	return st
}

// meanSD returns the mean and the sample standard deviation (n-1).
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// TQuantile975 is the 0.975 quantile of Student's t with df degrees of
// freedom (the factor of a two-sided 95% interval), found by bisection on
// the t distribution's CDF.
func TQuantile975(df int) float64 {
	if df < 1 {
		return math.NaN()
	}
	lo, hi := 0.0, 20.0 // t_{0.975,1} = 12.706 is the largest
	for i := 0; i < 100; i++ {
		mid := (lo + hi) / 2
		if tTwoSidedP(mid, float64(df)) > 0.05 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// tTwoSidedP is P(|T| > t) for Student's t with df degrees of freedom:
// I_{df/(df+t²)}(df/2, 1/2).
func tTwoSidedP(t, df float64) float64 {
	if math.IsNaN(t) {
		return 1
	}
	x := df / (df + t*t)
	return regIncBeta(df/2, 0.5, x)
}

// regIncBeta is the regularized incomplete beta function I_x(a, b)
// (continued fraction, as in Numerical Recipes' betai).
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const eps, tiny = 1e-15, 1e-300
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1-qab*x/qap
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		m2 := float64(2 * m)
		fm := float64(m)
		aa := fm * (b - fm) * x / ((qam + m2) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// WelchP is the two-sided p-value of Welch's t-test that samples a and b
// have the same mean. Fewer than two values on a side give 1 (nothing
// can be told apart); two constant, unequal samples give 0.
func WelchP(a, b []float64) float64 {
	if len(a) < 2 || len(b) < 2 {
		return 1
	}
	ma, sa := meanSD(a)
	mb, sb := meanSD(b)
	va, vb := sa*sa/float64(len(a)), sb*sb/float64(len(b))
	if va+vb == 0 {
		if ma == mb {
			return 1
		}
		return 0
	}
	t := (ma - mb) / math.Sqrt(va+vb)
	df := (va + vb) * (va + vb) / (va*va/float64(len(a)-1) + vb*vb/float64(len(b)-1))
	return tTwoSidedP(t, df)
}

// Significance is the p-value below which a difference counts.
const Significance = 0.05

// SeedStrategy is one strategy over several seeds: its per-seed runs (in
// the order of SeedResults.Seeds) and each metric's mean and CI.
type SeedStrategy struct {
	Strategy string               `json:"strategy"`
	Metrics  map[string]Stat      `json:"metrics"`
	Runs     []*StrategyResult    `json:"runs"`
	byKey    map[string][]float64 // per-seed values of each metric
}

// SeedResults is results.json of a --seeds run.
type SeedResults struct {
	Scenario   string          `json:"scenario"`
	Seeds      []uint64        `json:"seeds"`
	Days       float64         `json:"days"`
	GPUs       int             `json:"gpus"`
	Strategies []*SeedStrategy `json:"strategies"`
}

// WriteJSON writes results.json.
func (r *SeedResults) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Aggregate builds a strategy's metrics from its runs over the seeds.
func Aggregate(name string, runs []*StrategyResult, metrics []SeedMetric) *SeedStrategy {
	ss := &SeedStrategy{Strategy: name, Metrics: map[string]Stat{}, Runs: runs, byKey: map[string][]float64{}}
	for _, m := range metrics {
		var xs []float64
		for _, r := range runs {
			if v, ok := m.Value(r); ok && !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
		if len(xs) == 0 {
			continue // applies to no run: absent, read as n/a
		}
		ss.byKey[m.Key] = xs
		ss.Metrics[m.Key] = Summarize(xs)
	}
	return ss
}

// Verdict is a metric's comparison across strategies: the best strategy
// by mean, and whether it is significantly better than every other
// (Welch p < Significance); Tied lists those it cannot be told from.
type Verdict struct {
	Best        string
	Significant bool
	Tied        []string
}

// Compare judges metric m across the strategies ("" Best when the metric
// has no direction or fewer than two strategies have it).
func Compare(m SeedMetric, sts []*SeedStrategy) Verdict {
	if m.Better == 0 {
		return Verdict{}
	}
	best := -1
	for i, s := range sts {
		st, ok := s.Metrics[m.Key]
		if !ok {
			continue
		}
		if best < 0 || float64(m.Better)*(st.Mean-sts[best].Metrics[m.Key].Mean) > 0 {
			best = i
		}
	}
	if best < 0 {
		return Verdict{}
	}
	v := Verdict{Best: sts[best].Strategy, Significant: true}
	others := 0
	for i, s := range sts {
		if i == best {
			continue
		}
		if _, ok := s.Metrics[m.Key]; !ok {
			continue
		}
		others++
		if WelchP(sts[best].byKey[m.Key], s.byKey[m.Key]) >= Significance {
			v.Significant = false
			v.Tied = append(v.Tied, s.Strategy)
		}
	}
	if others == 0 {
		return Verdict{}
	}
	if !v.Significant {
		v.Tied = append([]string{v.Best}, v.Tied...)
	}
	return v
}

// FormatStat writes a metric's mean ± CI in its unit.
func FormatStat(m SeedMetric, st Stat) string {
	if st.N == 0 {
		return "n/a"
	}
	f := func(x float64) string { return formatUnit(x, m.Unit) }
	if st.N == 1 {
		return f(st.Mean)
	}
	return f(st.Mean) + " ± " + f(st.CI95)
}

// formatUnit is byUnit (the metric table's formatting), but a duration
// small enough to be a confidence interval keeps its seconds and a count
// its decimal (a mean of counts).
func formatUnit(x float64, unit string) string {
	switch {
	case unit == "s" && x < 3600:
		if x >= 60 {
			return fmt.Sprintf("%.1f min", x/60)
		}
		return fmt.Sprintf("%.0f s", x)
	case unit == "count" || unit == "":
		if x == math.Trunc(x) {
			return strconv.FormatFloat(x, 'f', 0, 64)
		}
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return byUnit(unit, x)
}

// SeedRow is one line of the seeds comparison table.
type SeedRow struct {
	Label  string
	Values []string // per strategy, the best marked with "*" where significant
	Best   string   // the winner, "tie (a, b)", or "" for a metric without direction
}

// Table is the comparison over seeds: per metric, each strategy's mean
// ± CI, the best marked only where the difference is significant.
func (r *SeedResults) Table(metrics []SeedMetric) []SeedRow {
	var rows []SeedRow
	for _, m := range metrics {
		v := Compare(m, r.Strategies)
		row := SeedRow{Label: m.Label}
		for _, s := range r.Strategies {
			cell := FormatStat(m, s.Metrics[m.Key])
			if v.Significant && s.Strategy == v.Best {
				cell += " *"
			}
			row.Values = append(row.Values, cell)
		}
		switch {
		case v.Best == "":
		case v.Significant:
			row.Best = v.Best
		default:
			row.Best = "tie (" + strings.Join(v.Tied, ", ") + ")"
		}
		rows = append(rows, row)
	}
	return rows
}

// RunSpec is what RunSeeds runs: every strategy on every seed.
type RunSpec struct {
	Scenario   *Scenario
	Strategies []*Strategy
	Seeds      []uint64
	Duration   time.Duration // 0: the scenario's
	// Jobs bounds the runs in parallel (<= 0: one).
	Jobs int
	// Progress, when set, is called every simulated hour of every run
	// (from several goroutines).
	Progress func()
}

// RunSeeds runs every strategy on every seed, at most Jobs at a time, and
// returns the results by [strategy][seed] and the fleet's GPU count. Each
// run is the same as a single-seed run with that seed.
func RunSeeds(spec RunSpec) ([][]*StrategyResult, int, error) {
	out := make([][]*StrategyResult, len(spec.Strategies))
	for i := range out {
		out[i] = make([]*StrategyResult, len(spec.Seeds))
	}
	jobs := max(spec.Jobs, 1)
	sem := make(chan struct{}, jobs)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		gpus int
	)
	for si, st := range spec.Strategies {
		for ki, seed := range spec.Seeds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				opt := Options{Seed: seed, Duration: spec.Duration}
				if spec.Progress != nil {
					opt.Progress = func(time.Duration, time.Duration) { spec.Progress() }
				}
				s, err := New(spec.Scenario, st, opt)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("strategy %s, seed %d: %w", st.Name, seed, err))
					mu.Unlock()
					return
				}
				// A copy: Run's result lies inside the run's recorder, and
				// holding it would keep the whole run (jobs, snapshot
				// cache) alive until every seed is done.
				r := *s.Run()
				mu.Lock()
				out[si][ki] = &r
				gpus = s.GPUs()
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
		return nil, 0, errors.Join(errs...)
	}
	return out, gpus, nil
}

// NewSeedResults aggregates runs by [strategy][seed] into results.json.
func NewSeedResults(sc string, days float64, gpus int, seeds []uint64, names []string, runs [][]*StrategyResult, metrics []SeedMetric) *SeedResults {
	res := &SeedResults{Scenario: sc, Seeds: seeds, Days: days, GPUs: gpus}
	for i, rs := range runs {
		res.Strategies = append(res.Strategies, Aggregate(names[i], rs, metrics))
	}
	return res
}

// SeedRun returns the single-seed Results of seed index k (the usual
// results.json, CSVs and report of that seed).
func (r *SeedResults) SeedRun(k int) *Results {
	res := &Results{Scenario: r.Scenario, Seed: r.Seeds[k], Days: r.Days, GPUs: r.GPUs}
	for _, s := range r.Strategies {
		res.Strategies = append(res.Strategies, s.Runs[k])
	}
	return res
}
