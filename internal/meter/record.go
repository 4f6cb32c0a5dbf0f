package meter

import (
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Charge is how an interval is charged.
type Charge int

// Charges.
const (
	// ChargeGuarantee: placed within the tenant's guarantee (on-demand
	// price).
	ChargeGuarantee Charge = iota + 1
	// ChargeBorrowed: placed above the guarantee, on capacity borrowed
	// from others (on-demand price).
	ChargeBorrowed
	// ChargeReservation: on the tenant's own reservation (the catalog's
	// 1-year reserved price).
	ChargeReservation
	// ChargeSpot: spot-priority work (the live spot price at its start).
	ChargeSpot
)

var chargeNames = [...]string{"", "guarantee", "borrowed", "reservation", "spot"}

func (c Charge) String() string {
	if c < 0 || int(c) >= len(chargeNames) {
		return fmt.Sprintf("Charge(%d)", int(c))
	}
	return chargeNames[c]
}

// MarshalText writes the charge's name.
func (c Charge) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a charge's name.
func (c *Charge) UnmarshalText(b []byte) error {
	for i, n := range chargeNames {
		if i > 0 && n == string(b) {
			*c = Charge(i)
			return nil
		}
	}
	return fmt.Errorf("meter: unknown charge %q (want guarantee, borrowed, reservation or spot)", b)
}

// PricingCategory is the FOCUS 1.0 PricingCategory of the charge:
// Standard (on-demand), Dynamic (spot), Committed (reservation).
func (c Charge) PricingCategory() string {
	switch c {
	case ChargeSpot:
		return "Dynamic"
	case ChargeReservation:
		return "Committed"
	}
	return "Standard"
}

// ChargeOf is how a run of a workload of priority p with assignment a is
// charged: spot work at spot prices first, then work on its own
// reservation, then within the guarantee or borrowed.
func ChargeOf(p workload.Priority, a *workload.Assignment) Charge {
	switch {
	case p == workload.PrioritySpot:
		return ChargeSpot
	case a.OnReservation:
		return ChargeReservation
	case a.Within:
		return ChargeGuarantee
	}
	return ChargeBorrowed
}

// Record is one replica of one run on one node: a usage record.
type Record struct {
	// Workload is the workload's key (tenant/name); Replica its index.
	Workload string `json:"workload"`
	Replica  int    `json:"replica"`
	Tenant   string `json:"tenant"`
	// TenantRev is the revision that created the tenant: a tenant deleted
	// and created again under its name does not see its predecessor's
	// records.
	TenantRev int64 `json:"tenant_rev,omitempty"`
	// Path is the tenant and its ancestors, root first.
	Path  []string `json:"path,omitempty"`
	Kind  string   `json:"kind"`
	Class string   `json:"class,omitempty"` // the workload's "class" label
	// Preemptible is the workload's preemptible flag (fault-tolerant
	// work the advisor would move to spot).
	Preemptible bool              `json:"preemptible,omitempty"`
	SKU         fleet.SKUName     `json:"sku"`
	Model       fleet.ModelID     `json:"model"`
	Region      string            `json:"region"`
	Node        fleet.NodeID      `json:"node"`
	GPUs        resource.MilliGPU `json:"milli_gpus"`
	Start       time.Time         `json:"start"`
	End         time.Time         `json:"end,omitzero"` // zero: still running
	// RunStart is the start of the run when the record is a later part
	// of it: a spot run whose price changed is split at the change (the
	// part before closed, a new record from it at the new price); zero
	// for a run's first record (its Start is the run's).
	RunStart time.Time `json:"run_start,omitzero"`
	Charge   Charge    `json:"charge"`
	// UnitPrice is the USD per GPU-hour charged (the charge's price under
	// the tenant's price plan), ListPrice the catalog's on-demand USD per
	// GPU-hour (overrides applied), ContractedPrice the on-demand price
	// under the tenant's plan (no spot or reserved rate), all as in force
	// at Start. ContractedPrice 0 (records before price plans): the list
	// price.
	UnitPrice       float64 `json:"unit_price"`
	ListPrice       float64 `json:"list_price"`
	ContractedPrice float64 `json:"contracted_price,omitempty"`
}

// Contracted is the record's contracted price (ContractedPrice, or the
// list price for a record written before price plans).
func (r *Record) Contracted() float64 {
	if r.ContractedPrice == 0 {
		return r.ListPrice
	}
	return r.ContractedPrice
}

// Run is the start of the record's run (RunStart, or Start for its first
// record).
func (r *Record) Run() time.Time {
	if r.RunStart.IsZero() {
		return r.Start
	}
	return r.RunStart
}

// Open reports whether the record's interval has not ended.
func (r *Record) Open() bool { return r.End.IsZero() }

// Span is the part of the record's interval inside [since, until) (an
// open record runs to until); ok false when it has none.
func (r *Record) Span(since, until time.Time) (from, to time.Time, ok bool) {
	from, to = r.Start, r.End
	if to.IsZero() || to.After(until) {
		to = until
	}
	if from.Before(since) {
		from = since
	}
	return from, to, to.After(from)
}

// GPUHours is the record's GPU-hours inside [since, until).
func (r *Record) GPUHours(since, until time.Time) float64 {
	from, to, ok := r.Span(since, until)
	if !ok {
		return 0
	}
	return float64(r.GPUs) / resource.PerGPU * to.Sub(from).Hours()
}

// ReplicaGPUs is what a replica holds: milli per GPU times its GPUs, or
// for a replica recorded without milli, the spec's per-replica GPUs up to
// one whole GPU per device.
func ReplicaGPUs(rep workload.Replica, perReplica resource.MilliGPU) resource.MilliGPU {
	m := rep.Milli
	if m <= 0 {
		m = min(perReplica, resource.PerGPU)
	}
	return m.Mul(len(rep.GPUs))
}

// Prices are the prices in force: the catalog's and the live spot
// market's per GPU-hour (by model and region).
type Prices struct {
	Catalog *fleet.Catalog
	Spot    map[SpotKey]float64
	// Pricing adds price overrides and the tenants' plans (nil: none).
	Pricing *Pricing
}

// SpotKey names a spot price.
type SpotKey struct {
	Model  fleet.ModelID
	Region string
}

// Unit returns the rate and the list (on-demand) price, per GPU-hour, of
// a charge on a machine of sku in region, before any tenant's plan
// (Quote applies it): the spot market's price for spot (the catalog's
// spot price when the market has none), the catalog's 1-year reserved
// price on a reservation, on-demand otherwise; the catalog's prices with
// the overrides applied.
func (p Prices) Unit(sku *fleet.SKU, region string, c Charge) (unit, list float64) {
	if sku == nil || sku.GPUs <= 0 || p.Catalog == nil {
		return 0, 0
	}
	pr := p.machine(sku, region)
	n := float64(sku.GPUs)
	list = pr.OnDemand / n
	switch c {
	case ChargeSpot:
		if v, ok := p.Spot[SpotKey{Model: sku.Model, Region: region}]; ok && !p.spotOverridden(sku.Name, region) {
			return v, list
		}
		return pr.Spot / n, list
	case ChargeReservation:
		return pr.Reserved1Y / n, list
	}
	return list, list
}
