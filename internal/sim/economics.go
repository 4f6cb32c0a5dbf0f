package sim

import (
	"maps"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Economics is what a strategy's run is worth, in USD over the scenario,
// at the catalog's prices (the fleet's price list, per region):
//
//   - RevenueUSD: customers' work as it ran, per GPU-hour at the price of
//     the SKU and region it ran in: on-demand, spot for spot VMs, the
//     1-year reserved price on a capacity reservation; by class in
//     RevenueByClassUSD;
//   - RevenueLostUSD: what customers' capacity failures (requests placed
//     nowhere within their patience) would have paid, at the on-demand
//     (spot for spot) price of their first choice, for their runtime up
//     to the scenario's end;
//   - SLACreditsUSD: service credits owed for SLA VMs preempted or
//     refused (see slaCreditShare);
//   - OverflowPremiumUSD: for work the overflow layer placed on a flavor
//     or region its workload did not list, the price of where it ran less
//     that of its first choice, per GPU-hour run there (negative: the
//     overflow was cheaper);
//   - InternalTrainingValueUSD: internal training GPU-hours at the
//     scenario's internal price (economics.internal_gpu_hour_usd);
//   - FleetCostUSD: the fleet's own cost, every node at its 3-year reserved
//     price for the whole scenario. It is the same for every strategy.
type Economics struct {
	RevenueUSD               float64            `json:"revenue_usd"`
	RevenueByClassUSD        map[string]float64 `json:"revenue_by_class_usd"`
	RevenueLostUSD           float64            `json:"revenue_lost_usd"`
	SLACreditsUSD            float64            `json:"sla_credits_usd"`
	OverflowPremiumUSD       float64            `json:"overflow_premium_usd"`
	InternalTrainingValueUSD float64            `json:"internal_training_value_usd"`
	FleetCostUSD             float64            `json:"fleet_cost_usd"`
	// FleetCostConstant says that FleetCostUSD does not depend on the
	// strategy (always true: the fleet is bought, not rented per run).
	FleetCostConstant bool `json:"fleet_cost_constant"`
}

// EconomicsSpec is the scenario's `economics:` section.
type EconomicsSpec struct {
	// InternalGPUHourUSD is what the provider values one GPU-hour of its
	// own training at (a transfer price), USD.
	InternalGPUHourUSD float64 `yaml:"internal_gpu_hour_usd"`
}

// slaCreditShare is the service credit, as a share of the affected VM's
// monthly fee, for a monthly uptime percentage. The tiers are those of
// Microsoft's "Service Level Agreements (SLA) for Online Services",
// Virtual Machines, for VMs across two or more availability zones (the
// 99.99% commitment): uptime below 99.99% earns a 10% credit, below 99%
// 25%, below 95% 100%
// (https://www.microsoft.com/licensing/docs/view/Service-Level-Agreements-SLA-for-Online-Services).
//
// Assumptions that map a simulated VM to an uptime figure: an SLA VM is a
// customer VM that is neither preemptible nor spot; its uptime is the time
// it ran over its life, from its first placement to its end (its
// completion, or the scenario's end), so the time a preempted VM waits to
// run again is downtime; its fee is its price for that life. A refused SLA
// VM (a capacity failure) is taken as down for its whole requested term:
// 0% uptime, a 100% credit of the fee it would have paid. (The published
// SLA covers running VMs, not allocation; the issue asks for refusals to
// count, and this is the strictest reading.)
func slaCreditShare(uptime float64) float64 {
	switch {
	case uptime < 0.95:
		return 1
	case uptime < 0.99:
		return 0.25
	case uptime < 0.9999:
		return 0.10
	}
	return 0
}

// slaVM reports whether a job is a VM under the availability SLA.
func (j *job) slaVM() bool {
	return j.customer && j.w.Kind == workload.KindVM && !j.basePreempt && j.basePriority != workload.PrioritySpot
}

// econ accumulates a run's economics.
type econ struct {
	byClass  map[string]float64
	lost     float64
	credits  float64
	premium  float64
	internal float64 // internal training GPU-hours
	sla      map[*job]*slaAccount
	slaOrder []*job // the accounts in the order opened (determinism)
}

// slaAccount is one SLA VM's life: when it was first placed, how long it
// ran, when its last run ended, and its price per hour.
type slaAccount struct {
	first   time.Time
	up      time.Duration
	lastEnd time.Time
	perHour float64
}

// pricePerGPUHour is the catalog price per GPU-hour of a (model, region),
// and the price kind of the workload: spot for spot, reserved 1-year on a
// reservation, on-demand otherwise.
func (s *Sim) pricePerGPUHour(model fleet.ModelID, region string, spot, reserved bool) (float64, bool) {
	sku := s.skuOf(tenancy.Key{Model: model, Region: region})
	if sku == nil || sku.GPUs == 0 {
		return 0, false
	}
	p := s.cfg.Fleet.Catalog.PriceIn(sku, region)
	price := p.OnDemand
	switch {
	case spot:
		price = p.Spot
	case reserved:
		price = p.Reserved1Y
	}
	return price / float64(sku.GPUs), true
}

// firstChoice is the first flavor and region the workload itself lists.
func (j *job) firstChoice() (fleet.ModelID, string) {
	var m fleet.ModelID
	var r string
	if len(j.w.Flavors) > 0 {
		m = j.w.Flavors[0]
	}
	if len(j.baseRegions) > 0 {
		r = j.baseRegions[0]
	} else if len(j.w.Regions) > 0 {
		r = j.w.Regions[0]
	}
	return m, r
}

// ran books a run [from, to) of j: revenue by class, overflow premium,
// internal training value and SLA uptime.
func (e *econ) ran(s *Sim, j *job, from, to time.Time) {
	a := j.w.Running
	if a == nil {
		return
	}
	gpuH := to.Sub(from).Hours() * float64(j.gpus()) / resource.PerGPU
	spot := j.w.Priority == workload.PrioritySpot || j.basePriority == workload.PrioritySpot
	if j.customer {
		if p, ok := s.pricePerGPUHour(a.Flavor, a.Region, spot, a.OnReservation); ok {
			if e.byClass == nil {
				e.byClass = map[string]float64{}
			}
			e.byClass[j.class] += gpuH * p
		}
	} else if j.w.Kind == workload.KindTraining {
		e.internal += gpuH
	}
	if j.overflowed && !j.declared[string(a.Flavor)+"/"+a.Region] {
		fm, fr := j.firstChoice()
		here, ok1 := s.pricePerGPUHour(a.Flavor, a.Region, false, false)
		there, ok2 := s.pricePerGPUHour(fm, fr, false, false)
		if ok1 && ok2 {
			e.premium += gpuH * (here - there)
		}
	}
	if j.slaVM() {
		acc := e.account(j, from)
		acc.up += to.Sub(from)
		acc.lastEnd = to
		if p, ok := s.pricePerGPUHour(a.Flavor, a.Region, false, a.OnReservation); ok {
			acc.perHour = p * float64(j.gpus()) / resource.PerGPU
		}
	}
}

func (e *econ) account(j *job, from time.Time) *slaAccount {
	if e.sla == nil {
		e.sla = map[*job]*slaAccount{}
	}
	acc := e.sla[j]
	if acc == nil {
		acc = &slaAccount{first: from}
		e.sla[j] = acc
		e.slaOrder = append(e.slaOrder, j)
	}
	return acc
}

// refused books a customer's capacity failure: the revenue it would have
// brought until the scenario's end and, for an SLA VM, a 100% credit of
// that fee.
func (e *econ) refused(s *Sim, j *job) {
	if !j.customer {
		return
	}
	m, r := j.firstChoice()
	spot := j.basePriority == workload.PrioritySpot
	p, ok := s.pricePerGPUHour(m, r, spot, j.w.Reservation != "")
	if !ok {
		return
	}
	term := min(j.remaining, s.end.Sub(j.submitted))
	fee := term.Hours() * float64(j.gpus()) / resource.PerGPU * p
	e.lost += fee
	if j.slaVM() {
		e.credits += fee * slaCreditShare(0)
	}
}

// settle closes the SLA accounts at the scenario's end: a VM still
// waiting to run again is down until the end.
func (e *econ) settle(end time.Time) {
	for _, j := range e.slaOrder {
		acc := e.sla[j]
		if j.preempts == 0 {
			continue // never taken away: 100% uptime
		}
		lifeEnd := acc.lastEnd
		if !j.done && j.w.Running == nil {
			lifeEnd = end
		}
		life := lifeEnd.Sub(acc.first)
		if life <= 0 {
			continue
		}
		uptime := min(1, float64(acc.up)/float64(life))
		e.credits += slaCreditShare(uptime) * acc.perHour * life.Hours()
	}
}

// economics is the run's account; fleetCost is the constant fleet cost.
func (e *econ) economics(s *Sim, fleetCost float64) Economics {
	e.settle(s.end)
	out := Economics{
		RevenueByClassUSD:        map[string]float64{},
		RevenueLostUSD:           roundTo(e.lost, 0),
		SLACreditsUSD:            roundTo(e.credits, 0),
		OverflowPremiumUSD:       roundTo(e.premium, 0),
		InternalTrainingValueUSD: roundTo(e.internal*s.sc.Economics.InternalGPUHourUSD, 0),
		FleetCostUSD:             roundTo(fleetCost, 0),
		FleetCostConstant:        true,
	}
	var total float64
	for _, c := range slices.Sorted(maps.Keys(e.byClass)) { // a fixed order: sums are byte-identical
		v := e.byClass[c]
		out.RevenueByClassUSD[c] = roundTo(v, 0)
		total += v
	}
	out.RevenueUSD = roundTo(total, 0)
	return out
}
