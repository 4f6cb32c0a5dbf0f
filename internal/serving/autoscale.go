package serving

import (
	"fmt"
	"math"
	"time"
)

// AutoscalerConfig sets what an Autoscaler aims for and how fast it moves.
type AutoscalerConfig struct {
	SLO      time.Duration // target for the Quantile of the response time
	Quantile float64       // 0.99 when 0
	Headroom float64       // plan for Rate·(1+Headroom), ≥ 0
	// TargetUtilization, when > 0, also keeps replicas at most this busy
	// (like an HPA utilisation target): with many replicas the SLO alone
	// allows running within a percent of saturation, where one burst
	// builds a backlog.
	TargetUtilization float64
	// DrainTime, when > 0, adds the capacity to clear a backlog within it.
	DrainTime   time.Duration
	MinReplicas int
	MaxReplicas int // 0: no limit
	// MaxScaleUp and MaxScaleDown bound the change per decision (0: no
	// limit).
	MaxScaleUp   int
	MaxScaleDown int
	// DownStabilization is the number of decisions whose largest
	// recommendation a scale-down may not go below (like the Kubernetes
	// HPA's stabilisation window); 0 or 1 means the current one only.
	DownStabilization int
}

// Autoscaler recommends replica counts for one deployment so that the
// stationary p99 (or the configured quantile) of the response time stays
// under the SLO, with rate limits on its moves. It keeps the recent
// recommendations for down-scaling stabilisation, so it is a small state
// machine: one per deployment, not safe for concurrent use.
type Autoscaler struct {
	cfg    AutoscalerConfig
	d      *ServiceDist
	window []int
	next   int
	filled int
	last   int // last Needed answer: where the next search starts
	// erlang memoises the probability of waiting over one search's
	// replica counts (one load): exact, see ErlangTable.
	erlang ErlangTable
}

// Decision is one autoscaling decision.
type Decision struct {
	Replicas int  // what to run now, after the rate limits
	Needed   int  // what the model asks for at this load
	Feasible bool // false when no replica count meets the SLO (see Needed)
	Limited  bool // Replicas ≠ the stabilised target because of a rate limit
}

// NewAutoscaler checks the configuration.
func NewAutoscaler(d *ServiceDist, cfg AutoscalerConfig) (*Autoscaler, error) {
	if cfg.Quantile == 0 {
		cfg.Quantile = 0.99
	}
	switch {
	case d == nil:
		return nil, fmt.Errorf("serving: autoscaler: nil service distribution")
	case cfg.SLO <= 0:
		return nil, fmt.Errorf("serving: autoscaler: SLO %v must be > 0", cfg.SLO)
	case !(cfg.Quantile > 0 && cfg.Quantile < 1):
		return nil, fmt.Errorf("serving: autoscaler: quantile %v not in (0, 1)", cfg.Quantile)
	case !(cfg.Headroom >= 0) || math.IsInf(cfg.Headroom, 0):
		return nil, fmt.Errorf("serving: autoscaler: headroom %v must be ≥ 0", cfg.Headroom)
	case cfg.MinReplicas < 0 || cfg.MaxReplicas < 0 || (cfg.MaxReplicas > 0 && cfg.MaxReplicas < cfg.MinReplicas):
		return nil, fmt.Errorf("serving: autoscaler: bad replica range [%d, %d]", cfg.MinReplicas, cfg.MaxReplicas)
	case !(cfg.TargetUtilization >= 0 && cfg.TargetUtilization <= 1):
		return nil, fmt.Errorf("serving: autoscaler: target utilisation %v not in [0, 1]", cfg.TargetUtilization)
	case cfg.MaxScaleUp < 0 || cfg.MaxScaleDown < 0 || cfg.DownStabilization < 0 || cfg.DrainTime < 0:
		return nil, fmt.Errorf("serving: autoscaler: negative rate limit, window or drain time")
	}
	return &Autoscaler{cfg: cfg, d: d, window: make([]int, max(1, cfg.DownStabilization))}, nil
}

// maxSearch bounds the replica search.
const maxSearch = 1 << 20

// Needed is the smallest replica count whose stationary response-time
// quantile at this rate is within the SLO. When even unlimited replicas
// cannot meet it (the in-service latency alone exceeds the SLO too often),
// feasible is false and Needed aims instead at queueing adding at most a
// tenth of the allowed tail (P(R > SLO) ≤ P(L > SLO) + 0.1·(1−quantile)).
// With a TargetUtilization u, Needed is at least ⌈rate·E[occupancy]/u⌉.
// Needed ignores MinReplicas, MaxReplicas and the rate limits.
func (a *Autoscaler) Needed(rate Rate) (replicas int, feasible bool) {
	lambda := clampPos(float64(rate))
	if lambda == 0 {
		return 0, true
	}
	slo := a.cfg.SLO.Seconds()
	allowed := 1 - a.cfg.Quantile
	floor := a.d.tail(slo)
	feasible = floor <= allowed
	if !feasible {
		allowed = floor + 0.1*(1-a.cfg.Quantile)
	}
	mu := 1 / a.d.occMean
	ok := func(c int) bool { return a.exceedAt(c, lambda, mu, slo) <= allowed }
	lo := int(lambda/mu) + 1 // the smallest stable count
	if u := a.cfg.TargetUtilization; u > 0 {
		lo = max(lo, int(math.Ceil(lambda/mu/u-1e-9)))
	}
	if lo > maxSearch {
		return maxSearch, feasible
	}
	hi := max(lo, a.last)
	if !ok(hi) { // gallop up, then search down in (last failure, hi]
		for step := max(1, hi/8); !ok(hi); step *= 2 {
			lo = hi + 1
			hi += step
			if hi >= maxSearch {
				return maxSearch, feasible
			}
		}
	}
	for lo < hi {
		m := lo + (hi-lo)/2
		if ok(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	a.last = hi
	return hi, feasible
}

// exceedAt is the stationary P(R > t) with c replicas, summing only the
// latency points within 64/θ of t (the rest weigh less than e^-64).
func (a *Autoscaler) exceedAt(c int, lambda, mu, t float64) float64 {
	kappa := float64(c) * mu
	if lambda >= kappa {
		return 1
	}
	d := a.d
	C := a.erlang.C(c, lambda/mu)
	g := d.tail(t)
	if C == 0 {
		return g
	}
	theta := (kappa - lambda) * 2 / (1 + d.occSCV)
	var s float64
	for i := d.upTo(t); i >= 0; i-- {
		x := theta * (t - d.lat[i])
		if x > 64 {
			break
		}
		s += d.w[i] * math.Exp(-x)
	}
	return g + C*s
}

// Decide returns the replicas to run given the current count, the arrival
// rate and the backlog, and records the recommendation for stabilisation.
func (a *Autoscaler) Decide(current int, rate Rate, backlog float64) Decision {
	cfg := &a.cfg
	lambda := clampPos(float64(rate)) * (1 + cfg.Headroom)
	if cfg.DrainTime > 0 {
		lambda += clampPos(backlog) / cfg.DrainTime.Seconds()
	}
	need, feasible := a.Needed(Rate(lambda))
	rec := max(need, cfg.MinReplicas)
	if cfg.MaxReplicas > 0 {
		rec = min(rec, cfg.MaxReplicas)
	}
	a.window[a.next] = rec
	a.next = (a.next + 1) % len(a.window)
	a.filled = min(a.filled+1, len(a.window))
	target := rec
	if rec < current {
		// Scale down only as far as the largest recent recommendation.
		for _, r := range a.window[:a.filled] {
			target = max(target, r)
		}
		target = min(target, current)
	}
	out := target
	switch {
	case target > current && cfg.MaxScaleUp > 0:
		out = min(target, current+cfg.MaxScaleUp)
	case target < current && cfg.MaxScaleDown > 0:
		out = max(target, current-cfg.MaxScaleDown)
	}
	return Decision{Replicas: out, Needed: need, Feasible: feasible, Limited: out != target}
}
