package meter

import (
	"fmt"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

// PriceOverride replaces the catalog's hourly price of one machine of a
// SKU (as the catalog's prices are written) in a region, or in every
// region when Region is empty, for each price class it sets. An override
// of the region wins over one of every region.
type PriceOverride struct {
	SKU                                    fleet.SKUName
	Region                                 string
	OnDemand, Spot, Reserved1Y, Reserved3Y *float64
}

// PlanKind is how a tenant's plan prices its use.
type PlanKind int

// Plan kinds.
const (
	// PlanList charges the charge's own price: on-demand, spot or
	// reserved, as the catalog (and the spot market) price it.
	PlanList PlanKind = iota + 1
	// PlanDiscount charges the charge's price less a share.
	PlanDiscount
	// PlanTransfer charges a fixed internal price per GPU-hour, whatever
	// the charge.
	PlanTransfer
)

var planNames = [...]string{"", "list", "discount", "transfer"}

func (k PlanKind) String() string {
	if k <= 0 || int(k) >= len(planNames) {
		return fmt.Sprintf("PlanKind(%d)", int(k))
	}
	return planNames[k]
}

// Plan is a tenant's price plan.
type Plan struct {
	Kind PlanKind
	// Discount is the share off (0 to below 1) of a PlanDiscount.
	Discount float64
	// Transfer is a PlanTransfer's USD per GPU-hour, by GPU model
	// (ByModel) or else flat (Transfer; 0 with no model's price: the
	// list price).
	Transfer float64
	ByModel  map[fleet.ModelID]float64
}

// Pricing is what a server's config adds to the catalog's prices: price
// overrides and the tenants' price plans (by tenant name; a tenant
// without one takes its nearest ancestor's, list at the root).
type Pricing struct {
	Overrides []PriceOverride
	Plans     map[string]Plan
}

// machine is the hourly price of one machine of sku in region: the
// catalog's, with the overrides applied.
func (p Prices) machine(sku *fleet.SKU, region string) fleet.Price {
	pr := p.Catalog.PriceIn(sku, region)
	if p.Pricing == nil {
		return pr
	}
	apply := func(o *PriceOverride) {
		for _, f := range [...]struct {
			v   *float64
			dst *float64
		}{{o.OnDemand, &pr.OnDemand}, {o.Spot, &pr.Spot}, {o.Reserved1Y, &pr.Reserved1Y}, {o.Reserved3Y, &pr.Reserved3Y}} {
			if f.v != nil {
				*f.dst = *f.v
			}
		}
	}
	for i := range p.Pricing.Overrides { // every region's first, the region's over them
		if o := &p.Pricing.Overrides[i]; o.SKU == sku.Name && o.Region == "" {
			apply(o)
		}
	}
	for i := range p.Pricing.Overrides {
		if o := &p.Pricing.Overrides[i]; o.SKU == sku.Name && o.Region == region && region != "" {
			apply(o)
		}
	}
	return pr
}

// Machine is the hourly price of one machine of sku in region, the
// overrides applied (zero without a catalog).
func (p Prices) Machine(sku *fleet.SKU, region string) fleet.Price {
	if sku == nil || p.Catalog == nil {
		return fleet.Price{}
	}
	return p.machine(sku, region)
}

// PlanOf is the plan of the tenant whose path (root first, the tenant
// last) is path: its own, or its nearest ancestor's, or list.
func (p Prices) PlanOf(path []string) Plan {
	if p.Pricing != nil {
		for i := len(path) - 1; i >= 0; i-- {
			if pl, ok := p.Pricing.Plans[path[i]]; ok {
				return pl
			}
		}
	}
	return Plan{Kind: PlanList}
}

// Quote prices a charge on a machine of sku in region for the tenant of
// path: the unit price charged (the charge's price under the tenant's
// plan), the list price (on-demand, overrides applied) and the contracted
// price (on-demand under the plan: no spot or reserved rate), per
// GPU-hour.
func (p Prices) Quote(sku *fleet.SKU, region string, c Charge, path []string) (unit, list, contracted float64) {
	rate, list := p.Unit(sku, region, c)
	if sku == nil {
		return 0, 0, 0
	}
	switch pl := p.PlanOf(path); pl.Kind {
	case PlanDiscount:
		return rate * (1 - pl.Discount), list, list * (1 - pl.Discount)
	case PlanTransfer:
		v, ok := pl.ByModel[sku.Model]
		if !ok {
			v = pl.Transfer
		}
		if v > 0 {
			return v, list, v
		}
	}
	return rate, list, list
}

// spotOverridden reports whether an override sets the spot price of sku
// in region (or in every region).
func (p Prices) spotOverridden(sku fleet.SKUName, region string) bool {
	if p.Pricing == nil {
		return false
	}
	for _, o := range p.Pricing.Overrides {
		if o.SKU == sku && (o.Region == "" || o.Region == region) && o.Spot != nil {
			return true
		}
	}
	return false
}
