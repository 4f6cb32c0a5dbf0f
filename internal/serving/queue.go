package serving

import (
	"math"
	"time"
)

// Rate is a request rate in requests per second.
type Rate float64

// Unbounded is the latency reported when no request can be served (no
// replica and no limit on waiting).
const Unbounded = time.Duration(math.MaxInt64)

// StepInput is one time step of one deployment (one service in one region).
type StepInput struct {
	Rate     Rate          // mean arrival rate over the step (Poisson within it)
	Replicas int           // servers during the step
	Step     time.Duration // length of the step
	Backlog  float64       // requests waiting at the start (the previous step's Backlog)
	// MaxWait, when > 0, rejects requests that would wait longer than it
	// (a client timeout or an admission limit); the backlog then never
	// exceeds MaxWait·capacity.
	MaxWait time.Duration
	// Erlang, when set, memoises the step's probability of waiting (the
	// same for distributions of the same occupancy at the same input);
	// results are bit for bit those without it.
	Erlang *ErlangTable
}

// StepResult is what a step did. Latencies are response times (wait plus
// in-service latency) of the requests that arrived during the step and were
// accepted, wherever their service ends.
type StepResult struct {
	Arrivals    float64 // expected arrivals: Rate·Step
	Served      float64 // requests that entered service during the step
	Rejected    float64 // requests turned away by MaxWait (or with no replica and MaxWait > 0)
	Backlog     float64 // requests still waiting at the end: the next step's Backlog
	Utilization float64 // fraction of replica time busy
	Overloaded  bool    // a backlog existed during some of the step

	MeanWait     time.Duration
	MeanResponse time.Duration
	P50          time.Duration
	P95          time.Duration
	P99          time.Duration

	// Response is the whole response-time distribution, for other
	// quantiles, SLO attainment and mixing across regions.
	Response Response
}

// Response is the response-time distribution of the requests of one step.
// It is a mixture of up to three phases, weighted by accepted arrivals:
//
//   - a stationary phase, where the M/G/c wait is 0 with probability 1−C and
//     otherwise exponential with rate θ (see Step);
//   - up to two fluid phases, where a backlog makes every arrival wait
//     deterministically, the wait moving linearly from A to B over the phase.
//
// The response time is the wait plus an independent in-service latency
// drawn from the ServiceDist.
type Response struct {
	d     *ServiceDist
	never bool // nothing is served: every quantile is Unbounded

	ws, c, theta float64 // stationary phase: weight, P(wait > 0), rate of the conditional wait
	maxW, dtr    float64 // MaxWait truncation of the stationary wait (0: none) and C·e^{−θ·maxW}
	nf           int
	f            [2]fluidPhase
	// s[k] = Σ_{i≤k} w_i·exp(−θ(lat_k − lat_i)): the stationary tail at the
	// latency points, computed once per step so that Exceed costs O(log n).
	s [maxPoints]float64
}

type fluidPhase struct{ w, a, b float64 }

// Step advances one deployment by one time step. It is O(replicas + 180)
// and does not allocate.
//
// Model. A replica is a server whose service time is a request's occupancy
// (mean 1/μ, squared coefficient of variation cs²); c = Replicas servers,
// capacity κ = cμ, arrival rate λ.
//
//   - With no backlog and λ < κ the step is stationary M/G/c: the
//     probability of waiting is Erlang C(c, λ/μ), the mean wait is the
//     Allen–Cunneen approximation E[Wq] = C/(κ−λ)·(1+cs²)/2 (exact for
//     M/M/c), and the wait given that it is positive is taken exponential
//     with that mean, i.e. rate θ = (κ−λ)·2/(1+cs²). For M/M/c this is the
//     exact law P(W > t) = C·e^{−(κ−λ)t}.
//   - With a backlog Q0 or λ ≥ κ the queue is a fluid: Q(t) = Q0 + (λ−κ)t,
//     clipped at 0 (where the stationary regime takes over for the rest of
//     the step) and at MaxWait·κ (above which arrivals are rejected). An
//     arrival at t waits Q(t)/κ. The end-of-step queue is the next step's
//     Backlog: it grows while λ ≥ κ and drains later.
//
// The response time is the wait plus the request's in-service latency,
// independent of its wait under FCFS; percentiles come from the exact
// mixture of the phases with the discretised latency distribution
// (closed form in the stationary case, bisection to 1 µs otherwise).
//
// Near saturation the two regimes meet unevenly: a stable step within a few
// percent of capacity reports the stationary wait (long: it assumes the
// load has lasted), while a step just over capacity that starts with no
// backlog reports only the fluid wait built during the step; under
// sustained overload the carried backlog catches up within a few steps.
//
// Negative or NaN rates and backlogs count as 0; a Step ≤ 0 is an instant
// with no arrival.
func (d *ServiceDist) Step(in StepInput) StepResult {
	lambda := clampPos(float64(in.Rate))
	q0 := clampPos(in.Backlog)
	T := max(0, in.Step.Seconds())
	c := max(0, in.Replicas)
	mu := 1 / d.occMean
	kappa := float64(c) * mu
	qmax := math.Inf(1)
	if in.MaxWait > 0 {
		qmax = in.MaxWait.Seconds() * kappa
	}

	res := StepResult{Arrivals: lambda * T}
	r := &res.Response
	r.d = d

	if c == 0 {
		r.never = true
		res.P50, res.P95, res.P99, res.MeanWait, res.MeanResponse = Unbounded, Unbounded, Unbounded, Unbounded, Unbounded
		res.Overloaded = res.Arrivals+q0 > 0
		if in.MaxWait > 0 {
			res.Rejected = q0 + res.Arrivals
		} else {
			res.Backlog = q0 + res.Arrivals
		}
		return res
	}

	if q0 > qmax {
		res.Rejected += q0 - qmax
		q0 = qmax
	}
	var busy float64      // replica-seconds of service, divided by c
	var tStat float64     // duration of the stationary phase
	var meanWait float64  // Σ weight·mean wait, weights in requests
	var weightAll float64 // accepted arrivals
	// arr is the weight of a phase: its accepted arrivals, or its duration
	// when nothing arrives (what a probe request would see).
	arr := func(rate, dt float64) float64 {
		if lambda == 0 {
			return dt
		}
		return rate * dt
	}
	addFluid := func(w, a, b float64) {
		if w <= 0 {
			return
		}
		r.f[r.nf] = fluidPhase{w: w, a: a, b: b}
		r.nf++
		meanWait += w * (a + b) / 2
		weightAll += w
	}
	switch {
	case q0 == 0 && lambda < kappa:
		tStat = T
		res.Served = lambda * T
	case lambda < kappa: // a backlog that drains
		res.Overloaded = true
		drain := q0 / (kappa - lambda)
		if drain >= T {
			q1 := q0 - (kappa-lambda)*T
			addFluid(arr(lambda, T), q0/kappa, q1/kappa)
			res.Backlog = q1
			res.Served = kappa * T
			busy = T
		} else {
			addFluid(arr(lambda, drain), q0/kappa, 0)
			tStat = T - drain
			res.Served = q0 + lambda*T
			busy = drain
		}
	default: // λ ≥ κ: the backlog grows, up to the cap
		res.Overloaded = true
		res.Served = kappa * T
		busy = T
		q1 := q0 + (lambda-kappa)*T
		if q1 <= qmax {
			addFluid(arr(lambda, T), q0/kappa, q1/kappa)
			res.Backlog = q1
		} else {
			tc := (qmax - q0) / (lambda - kappa) // time to reach the cap
			addFluid(arr(lambda, tc), q0/kappa, qmax/kappa)
			addFluid(kappa*(T-tc), qmax/kappa, qmax/kappa)
			res.Rejected += (lambda - kappa) * (T - tc)
			res.Backlog = qmax
		}
	}

	// The stationary phase; it also describes the step when no request
	// arrives (what a probe would see).
	if tStat > 0 || weightAll == 0 {
		ws := arr(lambda, tStat)
		if ws == 0 {
			ws = 1
		}
		r.c = in.Erlang.C(c, lambda/mu)
		var ew, rej float64
		if r.c > 0 {
			r.theta = (kappa - lambda) * 2 / (1 + d.occSCV)
			ew = r.c / r.theta
			// With MaxWait M, the arrivals that would wait longer than M
			// (C·e^{−θM} of them) are rejected; the others' wait is the
			// exponential truncated at M.
			if m := in.MaxWait.Seconds(); m > 0 {
				if dm := r.c * math.Exp(-r.theta*m); dm > 1e-12 {
					r.maxW, r.dtr = m, dm
					ew = (r.c*(1-math.Exp(-r.theta*m))/r.theta - dm*m) / (1 - dm)
					rej = dm
				}
			}
		}
		res.Rejected += lambda * tStat * rej
		res.Served -= lambda * tStat * rej
		ws *= 1 - rej
		r.ws = ws
		meanWait += ws * ew
		weightAll += ws
		busy += tStat * lambda / kappa * (1 - rej)
		r.fillTail()
	}
	for i := 0; i < r.nf; i++ {
		r.f[i].w /= weightAll
	}
	r.ws /= weightAll
	res.MeanWait = seconds(meanWait / weightAll)
	res.MeanResponse = seconds(meanWait/weightAll + d.latMean)
	if T > 0 {
		res.Utilization = busy / T
	} else {
		res.Utilization = min(1, lambda/kappa)
	}
	if r.nf == 0 && r.maxW == 0 {
		res.P50, res.P95, res.P99 = r.statQuantile(0.50), r.statQuantile(0.95), r.statQuantile(0.99)
	} else {
		res.P50, res.P95, res.P99 = r.Quantile(0.50), r.Quantile(0.95), r.Quantile(0.99)
	}
	return res
}

func clampPos(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 1) {
		return 0
	}
	return x
}

// erlangC is the probability that an arrival waits in M/M/c with offered
// load a = λ/μ < c, from the Erlang B recursion (stable for any c).
func erlangC(c int, a float64) float64 {
	if a <= 0 {
		return 0
	}
	if a >= float64(c) {
		return 1
	}
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	rho := a / float64(c)
	return b / (1 - rho*(1-b))
}

// ErlangC is the M/M/c probability of waiting for c servers and offered load
// λ/μ (1 when the load reaches c).
func ErlangC(c int, offered float64) float64 { return erlangC(c, offered) }

func (r *Response) fillTail() {
	d := r.d
	if r.c == 0 {
		return
	}
	r.s[0] = d.w[0]
	for k := 1; k < d.n; k++ {
		x := r.theta * (d.lat[k] - d.lat[k-1])
		if x > 64 { // e^-64 < 1e-27: the earlier points no longer count
			r.s[k] = d.w[k]
			continue
		}
		r.s[k] = r.s[k-1]*math.Exp(-x) + d.w[k]
	}
}

// statExceed is P(R > t) in the stationary phase.
func (r *Response) statExceed(t float64) float64 {
	d := r.d
	k, j := d.upTo(t), -1
	if r.c != 0 && r.maxW != 0 && k >= 0 {
		j = d.upTo(t - r.maxW)
	}
	return r.statExceedAt(t, k, j)
}

// statExceedAt is statExceed(t) given k = upTo(t) and, when the wait is
// truncated (c, maxW ≠ 0, k ≥ 0), j = upTo(t − maxW).
func (r *Response) statExceedAt(t float64, k, j int) float64 {
	d := r.d
	if k < 0 {
		return 1
	}
	g := 1 - d.cw[k]
	if r.c == 0 {
		return g
	}
	expo := r.s[k] * math.Exp(-r.theta*(t-d.lat[k]))
	if r.maxW == 0 {
		return g + r.c*expo
	}
	// Truncated wait: P(W > x) = (C·e^{−θx} − D)/(1 − D) for x < maxW, 0
	// beyond; points with lat ≤ t − maxW no longer count.
	var cwj float64
	if j >= 0 {
		expo -= r.s[j] * math.Exp(-r.theta*(t-d.lat[j]))
		cwj = d.cw[j]
	}
	return g + max(0, (r.c*expo-r.dtr*(d.cw[k]-cwj))/(1-r.dtr))
}

// statQuantile inverts the stationary tail in closed form: the tail is a
// step function of the latency points plus decaying exponentials between
// them, so the crossing is at a point or solves one exponential equation.
func (r *Response) statQuantile(p float64) time.Duration {
	d := r.d
	tau := 1 - p
	if tau <= 0 {
		return Unbounded
	}
	at := func(k int) float64 { return 1 - d.cw[k] + r.c*r.s[k] } // tail at lat[k]
	// First k whose tail at lat[k] is ≤ τ (the tail decreases with k).
	lo, hi := 0, d.n
	for lo < hi {
		m := (lo + hi) / 2
		if at(m) <= tau {
			hi = m
		} else {
			lo = m + 1
		}
	}
	k := lo
	solve := func(j int) time.Duration { // within (lat[j], next point)
		rest := tau - (1 - d.cw[j])
		return seconds(d.lat[j] + math.Log(r.c*r.s[j]/rest)/r.theta)
	}
	if k == d.n {
		return solve(d.n - 1)
	}
	if k > 0 && r.c > 0 {
		before := 1 - d.cw[k-1] + r.c*r.s[k-1]*math.Exp(-r.theta*(d.lat[k]-d.lat[k-1]))
		if before <= tau {
			return solve(k - 1)
		}
	}
	return seconds(d.lat[k])
}

// Exceed is the probability that a response takes longer than t.
func (r *Response) Exceed(t time.Duration) float64 { return r.exceed(t.Seconds()) }

func (r *Response) exceed(t float64) float64 {
	if r.never {
		return 1
	}
	var g float64
	if r.ws > 0 {
		g = r.ws * r.statExceed(t)
	}
	for i := 0; i < r.nf; i++ {
		f := &r.f[i]
		if math.Abs(f.b-f.a) < 1e-9 {
			g += f.w * r.d.tail(t-f.a)
		} else {
			g += f.w * (r.d.meanMin(t-f.a) - r.d.meanMin(t-f.b)) / (f.b - f.a)
		}
	}
	return g
}

// walk holds, for one Response, the latency-point indices exceed's binary
// searches would find at the last t it was evaluated at (see
// ServiceDist.advance); a new walk starts at newWalk.
type walk struct {
	k, j   int    // upTo(t), upTo(t − maxW)
	fa, fb [2]int // upTo(t − a), upTo(t − b) of each fluid phase
}

var newWalk = walk{k: -1, j: -1, fa: [2]int{-1, -1}, fb: [2]int{-1, -1}}

// exceedWalk is exceed(t) for t no smaller than at w's previous call: the
// same terms in the same order, with the indices found by walking forward.
func (r *Response) exceedWalk(t float64, w *walk) float64 {
	if r.never {
		return 1
	}
	d := r.d
	var g float64
	if r.ws > 0 {
		w.k = d.advance(w.k, t)
		j := -1
		if r.c != 0 && r.maxW != 0 && w.k >= 0 {
			w.j = d.advance(w.j, t-r.maxW)
			j = w.j
		}
		g = r.ws * r.statExceedAt(t, w.k, j)
	}
	for i := 0; i < r.nf; i++ {
		f := &r.f[i]
		if math.Abs(f.b-f.a) < 1e-9 {
			w.fa[i] = d.advance(w.fa[i], t-f.a)
			g += f.w * d.tailAt(w.fa[i])
		} else {
			x, y := t-f.a, t-f.b
			w.fa[i], w.fb[i] = d.advance(w.fa[i], x), d.advance(w.fb[i], y)
			g += f.w * (d.meanMinAt(x, w.fa[i]) - d.meanMinAt(y, w.fb[i])) / (f.b - f.a)
		}
	}
	return g
}

// Within is the fraction of responses that take at most t (SLO attainment).
func (r *Response) Within(t time.Duration) float64 { return 1 - r.Exceed(t) }

// bound is a time beyond which at most tau of responses remain.
func (r *Response) bound(tau float64) float64 {
	d := r.d
	hi := d.lat[d.n-1]
	for i := 0; i < r.nf; i++ {
		hi = max(hi, d.lat[d.n-1]+max(r.f[i].a, r.f[i].b))
	}
	if r.ws > 0 && r.c > 0 {
		hi = max(hi, d.lat[d.n-1]+math.Log(max(1, r.c/tau))/r.theta)
		if r.maxW > 0 {
			hi = max(hi, d.lat[d.n-1]+r.maxW)
		}
	}
	return hi + 1e-6
}

// Quantile is the p-quantile of the response time (0 < p < 1).
func (r *Response) Quantile(p float64) time.Duration {
	if r.never || p >= 1 {
		return Unbounded
	}
	if r.nf == 0 && r.maxW == 0 {
		return r.statQuantile(p)
	}
	tau := 1 - p
	return seconds(bisect(0, r.bound(tau), tau, r.exceed))
}

// bisect finds the smallest t in [lo, hi] with f(t) ≤ tau, for f
// decreasing, to 1 µs.
func bisect(lo, hi, tau float64, f func(float64) float64) float64 {
	for hi-lo > 1e-6 {
		m := (lo + hi) / 2
		if f(m) <= tau {
			hi = m
		} else {
			lo = m
		}
	}
	return hi
}

// Part is one component of a mixture of response times: traffic of a given
// weight that sees r shifted by Shift (a network round trip, say).
type Part struct {
	Weight float64
	Shift  time.Duration
	Resp   *Response
}

// MixExceed is the fraction of the mixture's responses slower than t.
func MixExceed(parts []Part, t time.Duration) float64 {
	var g, w float64
	for _, p := range parts {
		if p.Weight > 0 {
			g += p.Weight * p.Resp.Exceed(t-p.Shift)
			w += p.Weight
		}
	}
	if w == 0 {
		return 0
	}
	return g / w
}

// MixQuantile is the p-quantile of a mixture of shifted response times
// (Unbounded when a part that cannot be served carries more than 1−p of
// the weight; 0 for an empty mixture).
func MixQuantile(parts []Part, p float64) time.Duration {
	if p >= 1 {
		return Unbounded
	}
	tau := 1 - p
	var w, hi, never float64
	n := 0
	for _, q := range parts {
		if q.Weight <= 0 {
			continue
		}
		w += q.Weight
		n++
		if q.Resp.never {
			never += q.Weight
			continue
		}
		hi = max(hi, q.Shift.Seconds()+q.Resp.bound(tau))
	}
	switch {
	case n == 0:
		return 0
	case never >= tau*w:
		return Unbounded
	case never > 0:
		// The other parts must leave at most this much beyond hi.
		tauRest := (tau*w - never) / (w - never)
		hi = 0
		for _, q := range parts {
			if q.Weight > 0 && !q.Resp.never {
				hi = max(hi, q.Shift.Seconds()+q.Resp.bound(tauRest))
			}
		}
	}
	f := func(t float64) float64 {
		var g float64
		for _, q := range parts {
			if q.Weight > 0 {
				g += q.Weight * q.Resp.exceed(t-q.Shift.Seconds())
			}
		}
		return g / w
	}
	return seconds(bisect(0, hi, tau, f))
}

// never is the response of requests that are never answered.
var never = Response{never: true}

// NeverPart is a mixture component of weight w for requests that were
// never answered (turned away, or with no replica): every quantile they
// reach is Unbounded, and they exceed every time.
func NeverPart(w float64) Part { return Part{Weight: w, Resp: &never} }
