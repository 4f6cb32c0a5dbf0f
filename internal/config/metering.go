package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// MeteringSpec is the config's `metering:` (docs/cost.md, "Prices"): how
// long usage records are kept, price overrides beyond the catalog's, and
// the tenants' price plans.
//
//	metering:
//	  retention: 400d            # records that ended longer ago are deleted; left out: kept
//	  prices:                    # per machine-hour, as the catalog writes them
//	    - {sku: Standard_ND96isr_H100_v5, region: eastus, on_demand: 90, spot: 30}
//	    - {sku: Standard_ND96amsr_A100_v4, reserved_1y: 20}   # no region: every region
//	  plans:                     # a tenant's plan covers its subtree unless a descendant has one
//	    - {tenant: org, discount: 20%}
//	    - {tenant: research, transfer_price: 2.5, transfer_prices: {H100-80G: 4}}
//	    - {tenant: interns, list: true}
type MeteringSpec struct {
	Pos       yamlfile.Pos
	Retention time.Duration `yaml:"retention"`
	Prices    []PriceSpec   `yaml:"prices"`
	Plans     []PlanSpec    `yaml:"plans"`
}

// PriceSpec is one price override (meter.PriceOverride) as written.
type PriceSpec struct {
	Pos        yamlfile.Pos
	SKU        string   `yaml:"sku"`
	Region     string   `yaml:"region"`
	OnDemand   *float64 `yaml:"on_demand"`
	Spot       *float64 `yaml:"spot"`
	Reserved1Y *float64 `yaml:"reserved_1y"`
	Reserved3Y *float64 `yaml:"reserved_3y"`
}

// PlanSpec is one tenant's price plan (meter.Plan) as written: exactly
// one of list, discount and transfer_price/transfer_prices.
type PlanSpec struct {
	Pos            yamlfile.Pos
	Tenant         string             `yaml:"tenant"`
	List           bool               `yaml:"list"`
	Discount       string             `yaml:"discount"`
	TransferPrice  *float64           `yaml:"transfer_price"`
	TransferPrices map[string]float64 `yaml:"transfer_prices"`
}

// Bounds of the metering section: a price above maxPrice USD an hour is
// a typo, a retention below a day a mistake (billing data), and the lists
// are bounded.
const (
	maxPrice        = 1e6
	minRetention    = 24 * time.Hour
	maxRetention    = 100 * 365 * 24 * time.Hour
	maxPriceEntries = 10_000
	maxPlans        = 10_000
)

// Metering is a resolved metering section.
type Metering struct {
	// Retention keeps the records that ended within it (0: all).
	Retention time.Duration
	// Pricing is nil when the section sets no prices or plans.
	Pricing *meter.Pricing
}

// Resolve checks the section against the catalog and the fleet's regions
// (none: any region), adding a problem per bad field to errs under field.
func (m *MeteringSpec) Resolve(field string, at yamlfile.Pos, cat *fleet.Catalog, regions []string, errs *yamlfile.Errors) Metering {
	var out Metering
	if m == nil {
		return out
	}
	if m.Pos.Line > 0 {
		at = m.Pos
	}
	if m.Retention != 0 && (m.Retention < minRetention || m.Retention > maxRetention) {
		errs.Add(at, field+".retention", "retention must be between 1d and 36500d (or left out to keep every record), got %v", m.Retention)
	} else {
		out.Retention = m.Retention
	}
	if len(m.Prices) > maxPriceEntries {
		errs.Add(at, field+".prices", "%d entries, at most %d", len(m.Prices), maxPriceEntries)
		return out
	}
	if len(m.Plans) > maxPlans {
		errs.Add(at, field+".plans", "%d entries, at most %d", len(m.Plans), maxPlans)
		return out
	}
	p := &meter.Pricing{Plans: map[string]meter.Plan{}}
	seen := map[[2]string]int{}
	for i, ps := range m.Prices {
		pf := fmt.Sprintf("%s.prices[%d]", field, i)
		pos := at
		if ps.Pos.Line > 0 {
			pos = ps.Pos
		}
		ok := true
		if _, known := cat.SKU(fleet.SKUName(ps.SKU)); !known {
			errs.Add(pos, pf+".sku", "unknown SKU %q", ps.SKU)
			ok = false
		}
		if ps.Region != "" && len(regions) > 0 && !slices.Contains(regions, ps.Region) {
			errs.Add(pos, pf+".region", "region %q is not in the fleet (regions: %v)", ps.Region, regions)
			ok = false
		}
		if j, dup := seen[[2]string{ps.SKU, ps.Region}]; dup {
			errs.Add(pos, pf, "SKU %s in %s is already priced by %s.prices[%d]", ps.SKU, cmpOr(ps.Region, "every region"), field, j)
			ok = false
		}
		seen[[2]string{ps.SKU, ps.Region}] = i
		set := 0
		for _, c := range []struct {
			name string
			v    *float64
		}{{"on_demand", ps.OnDemand}, {"spot", ps.Spot}, {"reserved_1y", ps.Reserved1Y}, {"reserved_3y", ps.Reserved3Y}} {
			if c.v == nil {
				continue
			}
			set++
			if !validPrice(*c.v) {
				errs.Add(pos, pf+"."+c.name, "a price must be from 0 to %g USD an hour, got %v", float64(maxPrice), *c.v)
				ok = false
			}
		}
		if set == 0 {
			errs.Add(pos, pf, "sets no price: give on_demand, spot, reserved_1y or reserved_3y")
			ok = false
		}
		if ok {
			p.Overrides = append(p.Overrides, meter.PriceOverride{SKU: fleet.SKUName(ps.SKU), Region: ps.Region,
				OnDemand: ps.OnDemand, Spot: ps.Spot, Reserved1Y: ps.Reserved1Y, Reserved3Y: ps.Reserved3Y})
		}
	}
	planned := map[string]int{}
	for i, ps := range m.Plans {
		pf := fmt.Sprintf("%s.plans[%d]", field, i)
		pos := at
		if ps.Pos.Line > 0 {
			pos = ps.Pos
		}
		if ps.Tenant == "" {
			errs.Add(pos, pf+".tenant", "missing: name the tenant the plan is for")
			continue
		}
		if j, ok := planned[ps.Tenant]; ok {
			errs.Add(pos, pf+".tenant", "tenant %q already has a plan (%s.plans[%d])", ps.Tenant, field, j)
			continue
		}
		planned[ps.Tenant] = i
		// Tenants are also made over the API: a plan may name one the
		// config does not define, but not a malformed name.
		if err := names.Check(ps.Tenant); err != nil {
			errs.Add(pos, pf+".tenant", "%v", err)
			continue
		}
		kinds := 0
		if ps.List {
			kinds++
		}
		if ps.Discount != "" {
			kinds++
		}
		if ps.TransferPrice != nil || ps.TransferPrices != nil {
			kinds++
		}
		if kinds != 1 {
			errs.Add(pos, pf, "give exactly one of list: true, discount, or transfer_price/transfer_prices (got %d)", kinds)
			continue
		}
		var pl meter.Plan
		switch {
		case ps.List:
			pl.Kind = meter.PlanList
		case ps.Discount != "":
			d, err := parseShare(ps.Discount)
			if err != nil {
				errs.Add(pos, pf+".discount", "%v", err)
				continue
			}
			pl = meter.Plan{Kind: meter.PlanDiscount, Discount: d}
		default:
			pl.Kind = meter.PlanTransfer
			ok := true
			if ps.TransferPrice != nil {
				if !validPrice(*ps.TransferPrice) || *ps.TransferPrice == 0 {
					errs.Add(pos, pf+".transfer_price", "a transfer price must be above 0 and at most %g USD a GPU-hour, got %v", float64(maxPrice), *ps.TransferPrice)
					ok = false
				}
				pl.Transfer = *ps.TransferPrice
			}
			models := make([]string, 0, len(ps.TransferPrices))
			for m := range ps.TransferPrices {
				models = append(models, m)
			}
			slices.Sort(models) // messages in a stable order
			pl.ByModel = map[fleet.ModelID]float64{}
			for _, m := range models {
				v := ps.TransferPrices[m]
				if _, known := cat.Model(fleet.ModelID(m)); !known {
					errs.Add(pos, pf+".transfer_prices."+m, "unknown GPU model %q (known: %v)", m, cat.ModelNames())
					ok = false
				} else if !validPrice(v) || v == 0 {
					errs.Add(pos, pf+".transfer_prices."+m, "a transfer price must be above 0 and at most %g USD a GPU-hour, got %v", float64(maxPrice), v)
					ok = false
				}
				pl.ByModel[fleet.ModelID(m)] = v
			}
			if pl.Transfer == 0 && len(pl.ByModel) == 0 && ok {
				errs.Add(pos, pf+".transfer_prices", "empty: give a transfer_price or a price per GPU model")
				ok = false
			}
			if !ok {
				continue
			}
		}
		p.Plans[ps.Tenant] = pl
	}
	if len(p.Overrides) > 0 || len(p.Plans) > 0 {
		out.Pricing = p
	}
	return out
}

func validPrice(v float64) bool { return v >= 0 && v <= maxPrice && !math.IsNaN(v) }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// parseShare reads a discount: a percentage from 0% to below 100%.
func parseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, ok := strings.CutSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || !(v >= 0 && v < 100) {
		return 0, fmt.Errorf("%q is not a percentage from 0%% to below 100%% (write 20%%)", s)
	}
	return v / 100, nil
}
