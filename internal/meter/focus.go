package meter

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"time"
)

// FOCUSVersion is the version of the FinOps FOCUS specification whose
// column names the exports use.
const FOCUSVersion = "1.0"

// FOCUS is one usage record as a FOCUS 1.0 cost and usage row, clipped to
// the export's window. Quantities are GPU-hours; costs USD. Columns FOCUS
// has no place for (the tenant path, kind, class, charge, GPU model and
// node) go in Tags.
type FOCUS struct {
	BillingPeriodStart  string            `json:"BillingPeriodStart"`
	BillingPeriodEnd    string            `json:"BillingPeriodEnd"`
	ChargePeriodStart   string            `json:"ChargePeriodStart"`
	ChargePeriodEnd     string            `json:"ChargePeriodEnd"`
	ChargeCategory      string            `json:"ChargeCategory"`
	ChargeDescription   string            `json:"ChargeDescription"`
	PricingCategory     string            `json:"PricingCategory"`
	BilledCost          float64           `json:"BilledCost"`
	EffectiveCost       float64           `json:"EffectiveCost"`
	ListCost            float64           `json:"ListCost"`
	ListUnitPrice       float64           `json:"ListUnitPrice"`
	ContractedCost      float64           `json:"ContractedCost"`
	ContractedUnitPrice float64           `json:"ContractedUnitPrice"`
	PricingQuantity     float64           `json:"PricingQuantity"`
	PricingUnit         string            `json:"PricingUnit"`
	ConsumedQuantity    float64           `json:"ConsumedQuantity"`
	ConsumedUnit        string            `json:"ConsumedUnit"`
	BillingCurrency     string            `json:"BillingCurrency"`
	ProviderName        string            `json:"ProviderName"`
	ResourceId          string            `json:"ResourceId"`
	ResourceName        string            `json:"ResourceName"`
	ResourceType        string            `json:"ResourceType"`
	RegionId            string            `json:"RegionId"`
	SkuId               string            `json:"SkuId"`
	SubAccountId        string            `json:"SubAccountId"`
	SubAccountName      string            `json:"SubAccountName"`
	Tags                map[string]string `json:"Tags"`
}

// focusColumns is the CSV header, in FOCUSRow's field order.
var focusColumns = []string{"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeDescription",
	"PricingCategory", "BilledCost", "EffectiveCost", "ListCost", "ListUnitPrice", "ContractedCost", "ContractedUnitPrice", "PricingQuantity", "PricingUnit", "ConsumedQuantity", "ConsumedUnit",
	"BillingCurrency", "ProviderName", "ResourceId", "ResourceName", "ResourceType", "RegionId", "SkuId", "SubAccountId", "SubAccountName", "Tags"}

// FOCUSColumns returns the export's column names.
func FOCUSColumns() []string { return append([]string(nil), focusColumns...) }

const stamp = "2006-01-02T15:04:05Z"

// ToFOCUS converts r clipped to [since, until); ok false when r has no
// part in it. Costs are rounded to a millionth of a dollar, quantities to
// a billionth of a GPU-hour. The billing period is the calendar month (UTC) of the
// charge period's start.
func ToFOCUS(r *Record, since, until time.Time) (FOCUS, bool) {
	from, to, ok := r.Span(since, until)
	if !ok {
		return FOCUS{}, false
	}
	gpuh := math.Round(r.GPUHours(since, until)*1e9) / 1e9
	fu := from.UTC()
	bp := time.Date(fu.Year(), fu.Month(), 1, 0, 0, 0, 0, time.UTC)
	_, name, _ := splitKey(r.Workload)
	tags := map[string]string{"arbiter.kind": r.Kind, "arbiter.charge": r.Charge.String(), "arbiter.model": string(r.Model),
		"arbiter.node": string(r.Node), "arbiter.tenant_path": joinPath(r.Path)}
	if r.Class != "" {
		tags["arbiter.class"] = r.Class
	}
	if r.Open() || r.End.After(until) {
		tags["arbiter.open"] = "true"
	}
	return FOCUS{
		BillingPeriodStart: bp.Format(stamp), BillingPeriodEnd: bp.AddDate(0, 1, 0).Format(stamp),
		ChargePeriodStart: fu.Format(stamp), ChargePeriodEnd: to.UTC().Format(stamp),
		ChargeCategory: "Usage", ChargeDescription: r.Charge.String() + " GPU use of " + r.Workload,
		PricingCategory: r.Charge.PricingCategory(),
		BilledCost:      round6(gpuh * r.UnitPrice), EffectiveCost: round6(gpuh * r.UnitPrice), ListCost: round6(gpuh * r.ListPrice), ListUnitPrice: round6(r.ListPrice),
		ContractedCost: round6(gpuh * r.Contracted()), ContractedUnitPrice: round6(r.Contracted()),
		PricingQuantity: gpuh, PricingUnit: "GPU-Hours", ConsumedQuantity: gpuh, ConsumedUnit: "GPU-Hours",
		BillingCurrency: "USD", ProviderName: "Arbiter",
		ResourceId: r.Workload + "/" + strconv.Itoa(r.Replica), ResourceName: name, ResourceType: "GPU",
		RegionId: r.Region, SkuId: string(r.SKU), SubAccountId: r.Tenant, SubAccountName: r.Tenant, Tags: tags,
	}, true
}

func splitKey(k string) (tenant, name string, ok bool) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return "", k, false
}

func joinPath(p []string) string {
	out := ""
	for i, s := range p {
		if i > 0 {
			out += "/"
		}
		out += s
	}
	return out
}

// WriteFOCUSCSV writes the records inside [since, until) as FOCUS CSV
// (Tags as a JSON object, as FOCUS defines it).
func WriteFOCUSCSV(w io.Writer, recs []Record, since, until time.Time) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(focusColumns); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	for i := range recs {
		x, ok := ToFOCUS(&recs[i], since, until)
		if !ok {
			continue
		}
		tags, _ := json.Marshal(x.Tags) // map keys sorted: deterministic
		if err := cw.Write([]string{x.BillingPeriodStart, x.BillingPeriodEnd, x.ChargePeriodStart, x.ChargePeriodEnd, x.ChargeCategory, x.ChargeDescription,
			x.PricingCategory, f(x.BilledCost), f(x.EffectiveCost), f(x.ListCost), f(x.ListUnitPrice), f(x.ContractedCost), f(x.ContractedUnitPrice), f(x.PricingQuantity), x.PricingUnit,
			f(x.ConsumedQuantity), x.ConsumedUnit, x.BillingCurrency, x.ProviderName, x.ResourceId, x.ResourceName, x.ResourceType, x.RegionId,
			x.SkuId, x.SubAccountId, x.SubAccountName, string(tags)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteFOCUSJSON writes the records inside [since, until) as a JSON
// array of FOCUS rows.
func WriteFOCUSJSON(w io.Writer, recs []Record, since, until time.Time) error {
	rows := []FOCUS{}
	for i := range recs {
		if x, ok := ToFOCUS(&recs[i], since, until); ok {
			rows = append(rows, x)
		}
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(rows)
}
