package config

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/meter"
)

const meteringFleet = `fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: b1
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 1}]
tenants:
  - name: org
  - name: acme
    parent: org
`

// TestMeteringSection: a good metering section resolves to its
// retention, overrides and plans; every bad field is reported with its
// line and field path.
func TestMeteringSection(t *testing.T) {
	good := meteringFleet + `metering:
  retention: 400d
  prices:
    - {sku: Standard_ND96amsr_A100_v4, region: eastus, on_demand: 30, spot: 9}
    - {sku: Standard_ND96amsr_A100_v4, reserved_1y: 20}
  plans:
    - {tenant: org, discount: 20%}
    - {tenant: acme, transfer_price: 2.5, transfer_prices: {A100-80G: 3}}
    - {tenant: made-over-the-api, list: true}
`
	c, err := Parse("good.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Metering
	if m.Retention != 400*24*time.Hour || m.Pricing == nil || len(m.Pricing.Overrides) != 2 || len(m.Pricing.Plans) != 3 {
		t.Fatalf("resolved %+v", m)
	}
	if p := m.Pricing.Plans["org"]; p.Kind != meter.PlanDiscount || p.Discount != 0.2 {
		t.Errorf("org's plan %+v", p)
	}
	if p := m.Pricing.Plans["acme"]; p.Kind != meter.PlanTransfer || p.Transfer != 2.5 || p.ByModel[fleet.ModelID("A100-80G")] != 3 {
		t.Errorf("acme's plan %+v", p)
	}
	if o := m.Pricing.Overrides[0]; *o.OnDemand != 30 || *o.Spot != 9 || o.Reserved1Y != nil || o.Region != "eastus" {
		t.Errorf("override %+v", o)
	}

	bad := meteringFleet + `metering:
  retention: 1h
  prices:
    - {sku: Standard_NoSuch, on_demand: 3}
    - {sku: Standard_ND96amsr_A100_v4, region: mars, spot: 1}
    - {sku: Standard_ND96amsr_A100_v4, on_demand: -1}
    - {sku: Standard_ND96isr_H100_v5}
    - {sku: Standard_ND96amsr_A100_v4, region: eastus, on_demand: 1}
    - {sku: Standard_ND96amsr_A100_v4, region: eastus, on_demand: 2}
    - {sku: Standard_ND96amsr_A100_v4, on_demand: 1, colour: red}
  plans:
    - {tenant: org, discount: 120%}
    - {tenant: org, list: true}
    - {tenant: acme, list: true, discount: 10%}
    - {tenant: "a/b", list: true}
    - {tenant: x, transfer_price: 0}
    - {tenant: y, transfer_prices: {Z80: 1}}
    - {tenant: z, discount: "twenty"}
    - {discount: 5%}
`
	_, err = Parse("bad.yaml", []byte(bad))
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{
		`bad.yaml:14:3: metering.retention: retention must be between 1d and 36500d`,
		`bad.yaml:16:7: metering.prices[0].sku: unknown SKU "Standard_NoSuch"`,
		`bad.yaml:17:7: metering.prices[1].region: region "mars" is not in the fleet`,
		`bad.yaml:18:7: metering.prices[2].on_demand: a price must be from 0 to`,
		`bad.yaml:19:7: metering.prices[3]: sets no price`,
		`bad.yaml:22:7: metering.prices[6]: SKU Standard_ND96amsr_A100_v4 in every region is already priced by metering.prices[2]`,
		`bad.yaml:21:7: metering.prices[5]: SKU Standard_ND96amsr_A100_v4 in eastus is already priced by metering.prices[4]`,
		`metering.prices[6].colour: unknown field`,
		`bad.yaml:24:7: metering.plans[0].discount: "120%" is not a percentage`,
		`bad.yaml:25:7: metering.plans[1].tenant: tenant "org" already has a plan`,
		`bad.yaml:26:7: metering.plans[2]: give exactly one of`,
		`bad.yaml:27:7: metering.plans[3].tenant:`,
		`bad.yaml:28:7: metering.plans[4].transfer_price: a transfer price must be above 0`,
		`bad.yaml:29:7: metering.plans[5].transfer_prices.Z80: unknown GPU model "Z80"`,
		`bad.yaml:30:7: metering.plans[6].discount: "twenty" is not a percentage`,
		`bad.yaml:31:7: metering.plans[7].tenant: missing`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

// FuzzMeteringSection: any metering section is refused with its problems
// or resolves to bounded values (discounts from 0 to below 1, prices from
// 0 to maxPrice, retention 0 or within its bounds).
func FuzzMeteringSection(f *testing.F) {
	for _, s := range []string{
		"  retention: 400d\n  plans:\n    - {tenant: org, discount: 20%}\n",
		"  prices:\n    - {sku: Standard_ND96amsr_A100_v4, region: eastus, on_demand: 30, spot: 9}\n",
		"  plans:\n    - {tenant: acme, transfer_price: 2.5, transfer_prices: {A100-80G: 3}}\n    - {tenant: x, list: true}\n",
		"  plans:\n    - {tenant: org, discount: NaN%}\n", "  retention: -1d\n", "  prices: [{sku: Standard_ND96amsr_A100_v4, on_demand: .inf}]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, section string) {
		c, err := Parse("fuzz.yaml", []byte(meteringFleet+"metering:\n"+section))
		if err != nil {
			return
		}
		m := c.Metering
		if m.Retention != 0 && (m.Retention < minRetention || m.Retention > maxRetention) {
			t.Fatalf("retention %v", m.Retention)
		}
		if m.Pricing == nil {
			return
		}
		for name, p := range m.Pricing.Plans {
			if !(p.Discount >= 0 && p.Discount < 1) || !validPrice(p.Transfer) {
				t.Fatalf("%s: plan %+v", name, p)
			}
			for _, v := range p.ByModel {
				if !validPrice(v) || v == 0 {
					t.Fatalf("%s: plan %+v", name, p)
				}
			}
		}
		for _, o := range m.Pricing.Overrides {
			for _, v := range []*float64{o.OnDemand, o.Spot, o.Reserved1Y, o.Reserved3Y} {
				if v != nil && !validPrice(*v) {
					t.Fatalf("override %+v", o)
				}
			}
		}
	})
}
