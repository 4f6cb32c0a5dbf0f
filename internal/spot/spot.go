// Package spot is Arbiter's spot market: the price of spare capacity of
// one GPU model in one region, and the rules spot work obeys under it.
// The simulator and the live server both run it, so that a replayed
// strategy sees the prices, admissions and evictions the server will.
//
// A market's price starts at the catalog's spot price and follows the
// utilization of its GPUs: flat at the catalog's spot price up to Knee
// used, rising linearly to the on-demand price when every GPU is used
// (Target), smoothed over about an hour (an exponential moving average of
// Smoothing per Step). A policy (set_spot_price) may set a market's price
// outright while it is in force.
//
// Spot work with a max price is placed only while the market price is
// below AdmitFraction of it, and evicted, with notice, once the price
// rises above it: the gap keeps work from flapping as its own arrival
// raises the price. A price a policy set is firm: work is placed while it
// is at most the max price and evicted above it.
//
// The package is pure: no clock, no I/O; the caller steps the market.
package spot

import (
	"fmt"
	"math"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

const (
	// Step is the market's time step: the smoothing applies once per Step.
	Step = time.Minute
	// Smoothing is the weight of the target price in each step's moving
	// average (about an hour's memory).
	Smoothing = 1.0 / 60
	// Knee is the utilization up to which the price is the catalog's spot
	// price.
	Knee = 0.7
	// AdmitFraction is the share of its max price below which the market
	// price must be for spot work to be placed.
	AdmitFraction = 0.8
	// maxCatchUp bounds the steps Advance replays at once; after it the
	// average has converged to the target within (1-Smoothing)^maxCatchUp.
	maxCatchUp = 24 * 60
)

// Key names one market: a GPU model in a region.
type Key struct {
	Model  fleet.ModelID
	Region string
}

// String is "MODEL/REGION".
func (k Key) String() string { return string(k.Model) + "/" + k.Region }

// Target is the per-GPU-hour price a market tends to at utilization util
// (0..1) for machines priced p with gpus GPUs each: p's spot price per GPU
// up to Knee, rising linearly to its on-demand price per GPU at 1.
func Target(p fleet.Price, gpus int, util float64) float64 {
	if gpus <= 0 {
		return 0
	}
	spot, od := p.Spot/float64(gpus), p.OnDemand/float64(gpus)
	if util <= Knee {
		return spot
	}
	return spot + (od-spot)*math.Min(1, (util-Knee)/(1-Knee))
}

// Bound reports whether w obeys the market: spot work with a max price.
func Bound(w *workload.Workload) bool {
	return w.Priority == workload.PrioritySpot && w.MaxPrice > 0
}

// AdmitBound is the price above which a max price refuses placement: the
// market price over AdmitFraction, or a firm (policy-set) price itself.
func AdmitBound(price float64, firm bool) float64 {
	if firm {
		return price
	}
	return price / AdmitFraction
}

// Evicts reports whether running spot work with max price maxPrice must
// leave a market at price.
func Evicts(price, maxPrice float64) bool { return maxPrice > 0 && price > maxPrice }

// Quote is one market's state.
type Quote struct {
	Key
	// PerGPUHour is the price in USD per GPU-hour.
	PerGPUHour float64
	// Catalog is the catalog's spot price per GPU-hour (the floor).
	Catalog float64
	// Utilization is the share of the market's GPUs in use (0..1) at the
	// last step.
	Utilization float64
	// Firm is true when a policy set the price.
	Firm bool
}

// Market holds the markets of a fleet, one per (model, region) in the
// order their first node appears.
type Market struct {
	keys    []Key
	index   map[Key]int
	sku     []*fleet.SKU // of the first node of each market
	catalog []fleet.Price
	cap     []int64 // milli-GPU
	smooth  []float64
	primed  []bool // smooth holds an average
	util    []float64
	quotes  []Quote
	started bool
	last    time.Time // of the last step Advance applied
}

// New returns the markets of f, priced by f's catalog.
func New(f *fleet.Fleet) *Market {
	m := &Market{index: map[Key]int{}}
	for _, n := range f.Nodes {
		k := Key{Model: n.Model, Region: n.Region}
		i, ok := m.index[k]
		if !ok {
			i = len(m.keys)
			m.index[k] = i
			m.keys = append(m.keys, k)
			m.sku = append(m.sku, n.SKU)
			var p fleet.Price
			if n.SKU != nil && f.Catalog != nil {
				p = f.Catalog.PriceIn(n.SKU, n.Region)
			}
			m.catalog = append(m.catalog, p)
			m.cap = append(m.cap, 0)
		}
		m.cap[i] += int64(n.GPUs) * resource.PerGPU
	}
	m.smooth = make([]float64, len(m.keys))
	m.primed = make([]bool, len(m.keys))
	m.util = make([]float64, len(m.keys))
	m.quotes = make([]Quote, len(m.keys))
	return m
}

// Carry takes over from old (a market of the same fleet before it
// changed; nil for none) the averages and quotes of the markets both have
// and the clock of its steps, and returns m. A market new to m starts at
// its target at the next step.
func (m *Market) Carry(old *Market) *Market {
	if old == nil {
		return m
	}
	for j, k := range old.keys {
		if i, ok := m.index[k]; ok && old.primed[j] {
			m.smooth[i], m.primed[i], m.util[i] = old.smooth[j], true, old.util[j]
			m.quotes[i] = old.quotes[j]
		}
	}
	m.started, m.last = old.started, old.last
	return m
}

// Keys are the markets, in order; Index finds one.
func (m *Market) Keys() []Key { return m.keys }

// Index returns the position of k in Keys.
func (m *Market) Index(k Key) (int, bool) {
	i, ok := m.index[k]
	return i, ok
}

// Used returns the milli-GPU allocated in each market by the running
// workloads ws (their replicas' nodes name the market), in Keys order.
// Replicas on nodes f does not know are ignored.
func (m *Market) Used(f *fleet.Fleet, ws []*workload.Workload) []int64 {
	used := make([]int64, len(m.keys))
	for _, w := range ws {
		if w.Running == nil {
			continue
		}
		for _, r := range w.Running.Replicas {
			n, ok := f.Node(r.Node)
			if !ok {
				continue
			}
			if i, ok := m.index[Key{Model: n.Model, Region: n.Region}]; ok {
				used[i] += int64(r.Milli) * int64(len(r.GPUs))
			}
		}
	}
	return used
}

// Step moves every market one Step: used is the milli-GPU allocated in
// each (Keys order); set holds the prices policies set, which replace the
// market price while present. The first step starts each average at its
// target.
func (m *Market) Step(used []int64, set map[Key]float64) {
	for i := range m.keys {
		m.step(i, used, set)
	}
	m.started = true
}

// step moves market i one Step.
func (m *Market) step(i int, used []int64, set map[Key]float64) {
	k := m.keys[i]
	frac := 0.0
	if i < len(used) && m.cap[i] > 0 {
		frac = float64(used[i]) / float64(m.cap[i])
	}
	price := 0.0
	if m.sku[i] != nil {
		price = Target(m.catalog[i], m.sku[i].GPUs, frac)
	}
	if m.primed[i] {
		price = m.smooth[i] + (price-m.smooth[i])*Smoothing
	}
	m.smooth[i], m.primed[i] = price, true
	m.util[i] = frac
	q := Quote{Key: k, PerGPUHour: price, Utilization: frac}
	if m.sku[i] != nil && m.sku[i].GPUs > 0 {
		q.Catalog = m.catalog[i].Spot / float64(m.sku[i].GPUs)
	}
	if p, ok := set[k]; ok {
		q.PerGPUHour, q.Firm = p, true
	}
	m.quotes[i] = q
}

// Advance steps the markets to now, once per whole Step since the last
// step (the first call steps once), all with the same used and set; it
// replays at most a day of steps. A clock that goes back steps nothing;
// set prices take effect at once in any case.
func (m *Market) Advance(now time.Time, used []int64, set map[Key]float64) {
	if !m.started {
		m.Step(used, set)
		m.last = now
		return
	}
	n := 0
	if d := now.Sub(m.last); d >= Step {
		n = int(d / Step)
		m.last = m.last.Add(time.Duration(n) * Step)
	}
	for i := 0; i < min(n, maxCatchUp); i++ {
		m.Step(used, set)
	}
	if n == 0 {
		m.reprice(used, set)
	}
}

// reprice applies set to the current quotes without stepping (a market
// not yet stepped is stepped).
func (m *Market) reprice(used []int64, set map[Key]float64) {
	for i, k := range m.keys {
		if !m.primed[i] {
			m.step(i, used, set) // a market new since the last step
			continue
		}
		if p, ok := set[k]; ok {
			m.quotes[i].PerGPUHour, m.quotes[i].Firm = p, true
		} else {
			m.quotes[i].PerGPUHour, m.quotes[i].Firm = m.smooth[i], false
		}
	}
}

// Quotes are the markets' current states, in Keys order (shared: do not
// change them). Before the first step every price is zero.
func (m *Market) Quotes() []Quote { return m.quotes }

// Price returns the current price of market i.
func (m *Market) Price(i int) float64 { return m.quotes[i].PerGPUHour }

// Eviction is running spot work a market's price forces out.
type Eviction struct {
	Workload *workload.Workload
	Quote    Quote
}

// Reason says why, with both prices.
func (e Eviction) Reason() string {
	return fmt.Sprintf("spot price of %s in %s rose to $%.2f/GPU-h, above max price $%.2f",
		e.Quote.Model, e.Quote.Region, e.Quote.PerGPUHour, e.Workload.MaxPrice)
}

// Evictions returns the running spot work of ws (on f's nodes) whose
// market's current price is above its max price, in ws order. A workload
// is in the market of its first replica's node.
func (m *Market) Evictions(f *fleet.Fleet, ws []*workload.Workload) []Eviction {
	var out []Eviction
	for _, w := range ws {
		if !Bound(w) || w.Running == nil || len(w.Running.Replicas) == 0 {
			continue
		}
		n, ok := f.Node(w.Running.Replicas[0].Node)
		if !ok {
			continue
		}
		i, ok := m.index[Key{Model: n.Model, Region: n.Region}]
		if ok && Evicts(m.quotes[i].PerGPUHour, w.MaxPrice) {
			out = append(out, Eviction{Workload: w, Quote: m.quotes[i]})
		}
	}
	return out
}

// Saved is the state of the markets that a restart must not lose: each
// market's moving average and the utilization of its last step, and the
// time of that step. Without it every market would start again at its
// target price.
type Saved struct {
	Last    time.Time     `json:"last"`
	Markets []SavedMarket `json:"markets"`
}

// SavedMarket is one market's saved state.
type SavedMarket struct {
	Model  fleet.ModelID `json:"model"`
	Region string        `json:"region"`
	// Price is the market's moving average, USD per GPU-hour (a price a
	// policy set is not saved: the policy sets it again).
	Price       float64 `json:"price"`
	Utilization float64 `json:"utilization"`
}

// Save returns the markets' state, and false before the first step.
func (m *Market) Save() (Saved, bool) {
	if !m.started {
		return Saved{}, false
	}
	s := Saved{Last: m.last, Markets: make([]SavedMarket, 0, len(m.keys))}
	for i, k := range m.keys {
		if m.primed[i] {
			s.Markets = append(s.Markets, SavedMarket{Model: k.Model, Region: k.Region, Price: m.smooth[i], Utilization: m.util[i]})
		}
	}
	return s, true
}

// Restore takes up the state s (from Save, before a restart) for the
// markets m has, and returns m. Saved markets m lacks are ignored, and so
// are invalid values (a price that is negative or not finite, a
// utilization outside 0..1); a market without a valid saved state starts
// at its target at the next step. The next Advance steps on from s.Last.
func (m *Market) Restore(s Saved) *Market {
	if s.Last.IsZero() {
		return m
	}
	n := 0
	for _, sm := range s.Markets {
		i, ok := m.index[Key{Model: sm.Model, Region: sm.Region}]
		if !ok || m.primed[i] || !validPrice(sm.Price) || !(sm.Utilization >= 0 && sm.Utilization <= 1) {
			continue
		}
		m.smooth[i], m.primed[i], m.util[i] = sm.Price, true, sm.Utilization
		q := Quote{Key: m.keys[i], PerGPUHour: sm.Price, Utilization: sm.Utilization}
		if m.sku[i] != nil && m.sku[i].GPUs > 0 {
			q.Catalog = m.catalog[i].Spot / float64(m.sku[i].GPUs)
		}
		m.quotes[i] = q
		n++
	}
	if n > 0 {
		m.started, m.last = true, s.Last
	}
	return m
}

func validPrice(p float64) bool { return p >= 0 && !math.IsInf(p, 0) && !math.IsNaN(p) }

// Changed reports whether a differs from b by more than tol in any
// market's price or utilization, or in which markets it holds.
func (a Saved) Changed(b Saved, tol float64) bool {
	if len(a.Markets) != len(b.Markets) {
		return true
	}
	for i, x := range a.Markets {
		y := b.Markets[i]
		if x.Model != y.Model || x.Region != y.Region || math.Abs(x.Price-y.Price) > tol || math.Abs(x.Utilization-y.Utilization) > tol {
			return true
		}
	}
	return false
}
