package meter

import (
	"math"
	"testing"

	"github.com/arbiterhq/arbiter/internal/fleet"
)

func ptr(v float64) *float64 { return &v }

// TestPricingOverridesAndPlans: overrides replace the catalog's price of
// a SKU per region and class (the region's over every region's, a spot
// override over the market); plans price the charge for a tenant and its
// subtree (discount off the charge's price, a transfer price per model or
// flat, list again below a discounted parent), keeping the list and the
// contracted price apart.
func TestPricingOverridesAndPlans(t *testing.T) {
	cat := fleet.Builtin()
	sku, ok := cat.SKU("Standard_ND96amsr_A100_v4")
	if !ok {
		t.Fatal("no A100 SKU in the builtin catalog")
	}
	n := float64(sku.GPUs)
	east := cat.PriceIn(sku, "eastus")
	west := cat.PriceIn(sku, "westus2")
	spotKey := SpotKey{Model: sku.Model, Region: "eastus"}
	base := Prices{Catalog: cat, Spot: map[SpotKey]float64{spotKey: 0.77}}
	pricing := &Pricing{
		Overrides: []PriceOverride{
			{SKU: sku.Name, OnDemand: ptr(80)},                                        // every region
			{SKU: sku.Name, Region: "eastus", OnDemand: ptr(40), Reserved1Y: ptr(24)}, // eastus wins
		},
		Plans: map[string]Plan{
			"org":      {Kind: PlanDiscount, Discount: 0.2},
			"lab":      {Kind: PlanList},
			"research": {Kind: PlanTransfer, Transfer: 2, ByModel: map[fleet.ModelID]float64{sku.Model: 3}},
			"flat":     {Kind: PlanTransfer, Transfer: 1.5},
			"none":     {Kind: PlanTransfer, ByModel: map[fleet.ModelID]float64{"H100-80G": 9}},
		},
	}
	over := base
	over.Pricing = pricing
	spotOver := Prices{Catalog: cat, Spot: base.Spot, Pricing: &Pricing{Overrides: []PriceOverride{{SKU: sku.Name, Spot: ptr(8)}}}}
	for _, c := range []struct {
		name                   string
		p                      Prices
		region                 string
		charge                 Charge
		path                   []string
		unit, list, contracted float64
	}{
		{"catalog on demand", base, "eastus", ChargeGuarantee, nil, east.OnDemand / n, east.OnDemand / n, east.OnDemand / n},
		{"catalog reserved", base, "eastus", ChargeReservation, nil, east.Reserved1Y / n, east.OnDemand / n, east.OnDemand / n},
		{"market spot", base, "eastus", ChargeSpot, nil, 0.77, east.OnDemand / n, east.OnDemand / n},
		{"catalog spot where no market", base, "westus2", ChargeSpot, nil, west.Spot / n, west.OnDemand / n, west.OnDemand / n},
		{"region override", over, "eastus", ChargeBorrowed, []string{"x"}, 5, 5, 5},
		{"region override of reserved", over, "eastus", ChargeReservation, []string{"x"}, 3, 5, 5},
		{"every region's override", over, "westus2", ChargeGuarantee, []string{"x"}, 10, 10, 10},
		{"spot override over the market", spotOver, "eastus", ChargeSpot, nil, 1, east.OnDemand / n, east.OnDemand / n},
		{"discount", over, "eastus", ChargeGuarantee, []string{"org"}, 4, 5, 4},
		{"discount inherited, off the spot rate", over, "eastus", ChargeSpot, []string{"org", "acme", "team"}, 0.77 * 0.8, 5, 4},
		{"list below a discount", over, "eastus", ChargeReservation, []string{"org", "lab", "team"}, 3, 5, 5},
		{"transfer by model", over, "eastus", ChargeSpot, []string{"org", "research"}, 3, 5, 3},
		{"transfer flat", over, "westus2", ChargeGuarantee, []string{"flat"}, 1.5, 10, 1.5},
		{"transfer without the model's price: list", over, "eastus", ChargeGuarantee, []string{"none"}, 5, 5, 5},
	} {
		unit, list, contracted := c.p.Quote(sku, c.region, c.charge, c.path)
		if math.Abs(unit-c.unit) > 1e-9 || math.Abs(list-c.list) > 1e-9 || math.Abs(contracted-c.contracted) > 1e-9 {
			t.Errorf("%s: unit %v list %v contracted %v, want %v %v %v", c.name, unit, list, contracted, c.unit, c.list, c.contracted)
		}
	}
	if got := over.PlanOf([]string{"org", "acme"}); got.Kind != PlanDiscount {
		t.Errorf("acme's plan %v, want org's discount", got.Kind)
	}
	if got := over.PlanOf([]string{"elsewhere"}); got.Kind != PlanList {
		t.Errorf("a tenant without a plan: %v, want list", got.Kind)
	}
}
