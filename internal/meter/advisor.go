package meter

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// HoursPerMonth is the month of the advisor's monthly savings.
const HoursPerMonth = 730

// Recommendation kinds.
const (
	KindIdleReservation = "idle-reservation"
	KindUnusedGuarantee = "unused-guarantee"
	KindReserveBaseline = "reserve-baseline"
	KindUseSpot         = "use-spot"
	KindQuotaIncrease   = "quota-increase"
)

// UnitPrices are the catalog's USD per GPU-hour of a GPU model in a
// region, by price class.
type UnitPrices struct {
	OnDemand   float64 `json:"on_demand"`
	Spot       float64 `json:"spot"`
	Reserved1Y float64 `json:"reserved_1y"`
	Reserved3Y float64 `json:"reserved_3y"`
}

// PerGPU is the catalog price p of a machine of gpus GPUs per GPU-hour.
func PerGPU(p fleet.Price, gpus int) UnitPrices {
	if gpus <= 0 {
		return UnitPrices{}
	}
	n := float64(gpus)
	return UnitPrices{OnDemand: p.OnDemand / n, Spot: p.Spot / n, Reserved1Y: p.Reserved1Y / n, Reserved3Y: p.Reserved3Y / n}
}

// AdvisorReservation is a reservation the advisor weighs: its owner, the
// GPUs it holds (its nodes' GPUs), its span (zero: open on that side),
// its nodes and its reserved (1-year) price per GPU-hour.
type AdvisorReservation struct {
	Tenant, Name, Region string
	SKU                  fleet.SKUName
	Model                fleet.ModelID
	GPUs                 int
	Nodes                []fleet.NodeID
	Start, End           time.Time
	Price                float64
}

// AdvisorGuarantee is a quota entry's guarantee: the tenant, the model,
// the region ("" for all regions) and the guaranteed milli-GPUs.
type AdvisorGuarantee struct {
	Tenant     string
	Model      fleet.ModelID
	Region     string
	Guaranteed resource.MilliGPU
}

// AdvisorPending is a pending workload blocked by a quota limit now: the
// workload's tenant and key, the tenant at its limit, the flavor and
// region, and the GPUs asked, used and the limit (the QuotaLimit
// blocker's numbers).
type AdvisorPending struct {
	Tenant, Workload string
	LimitTenant      string
	Model            fleet.ModelID
	Region           string // "" when the limit spans all regions
	Requested, Used  resource.MilliGPU
	Limit            resource.MilliGPU
}

// AdvisorInput is what Advise weighs.
type AdvisorInput struct {
	// Records over [Since, Until): the window.
	Records      []Record
	Since, Until time.Time
	// IdleThreshold is the idle share (0–1) above which a reservation or
	// a guarantee is reported (0.5: used less than half).
	IdleThreshold float64
	Reservations  []AdvisorReservation
	Guarantees    []AdvisorGuarantee
	Pending       []AdvisorPending
	// Price is the catalog's prices of a GPU model in a region (ok false
	// when it has none).
	Price func(model fleet.ModelID, region string) (UnitPrices, bool)
}

// Recommendation is one thing to do: its kind, whose it is (Tenant, for
// who may see it), its target, the usage numbers it rests on and the
// estimated monthly saving in USD (none for unused-guarantee and
// quota-increase: SavingNote says why).
type Recommendation struct {
	Kind       string             `json:"kind"`
	Tenant     string             `json:"tenant"`
	Target     string             `json:"target"`
	Saving     float64            `json:"saving_usd_per_month"`
	SavingNote string             `json:"saving_note,omitempty"`
	Evidence   map[string]float64 `json:"evidence"`
	Summary    string             `json:"summary"`
}

// Advise weighs in's usage over its window and returns the
// recommendations, by saving (highest first), then kind and target.
func Advise(in AdvisorInput) []Recommendation {
	out := []Recommendation{}
	if !in.Since.Before(in.Until) {
		return out
	}
	price := in.Price
	if price == nil {
		price = func(fleet.ModelID, string) (UnitPrices, bool) { return UnitPrices{}, false }
	}
	out = append(out, idleReservations(in)...)
	out = append(out, unusedGuarantees(in)...)
	out = append(out, reserveBaselines(in, price)...)
	out = append(out, useSpot(in, price)...)
	out = append(out, quotaIncreases(in)...)
	for i := range out {
		out[i].Saving = round2(out[i].Saving)
		for k, v := range out[i].Evidence {
			out[i].Evidence[k] = round6(v)
		}
	}
	SortRecommendations(out)
	return out
}

// SortRecommendations orders by saving (highest first), then kind, then
// target.
func SortRecommendations(rs []Recommendation) {
	slices.SortStableFunc(rs, func(a, b Recommendation) int {
		if c := cmp.Compare(b.Saving, a.Saving); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return cmp.Compare(a.Target, b.Target)
	})
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

func gpusOf(m resource.MilliGPU) float64 { return float64(m) / resource.PerGPU }

// monthly scales h (GPU-hours over a span of spanH hours) to a month.
func monthly(h, spanH float64) float64 {
	if spanH <= 0 {
		return 0
	}
	return h / spanH * HoursPerMonth
}

// onDemand reports whether r was charged the on-demand price.
func onDemand(r *Record) bool { return r.Charge == ChargeGuarantee || r.Charge == ChargeBorrowed }

// idleReservations: a reservation whose owner used, on it, less than
// (1 − IdleThreshold) of its GPU-hours over the part of the window it
// was active; saving = its idle GPU-hours a month × its reserved price.
// Use on it is the owner's reservation-charged records on its nodes (on
// its SKU in its region when it names no nodes).
func idleReservations(in AdvisorInput) []Recommendation {
	var out []Recommendation
	for _, res := range in.Reservations {
		from, to := in.Since, in.Until
		if !res.Start.IsZero() && res.Start.After(from) {
			from = res.Start
		}
		if !res.End.IsZero() && res.End.Before(to) {
			to = res.End
		}
		if !to.After(from) || res.GPUs <= 0 {
			continue
		}
		span := to.Sub(from).Hours()
		capH := float64(res.GPUs) * span
		used := 0.0
		for i := range in.Records {
			r := &in.Records[i]
			if r.Tenant != res.Tenant || r.Charge != ChargeReservation || r.Region != res.Region {
				continue
			}
			if len(res.Nodes) > 0 && !slices.Contains(res.Nodes, r.Node) || len(res.Nodes) == 0 && r.SKU != res.SKU {
				continue
			}
			used += r.GPUHours(from, to)
		}
		used = min(used, capH)
		idle := capH - used
		if idle/capH <= in.IdleThreshold || idle <= 0 {
			continue
		}
		idleMonth := monthly(idle, span)
		out = append(out, Recommendation{
			Kind: KindIdleReservation, Tenant: res.Tenant, Target: res.Tenant + "/" + res.Name,
			Saving: idleMonth * res.Price,
			Evidence: map[string]float64{"reserved_gpu_hours": capH, "used_gpu_hours": used, "idle_share": idle / capH,
				"idle_gpu_hours_per_month": idleMonth, "reserved_usd_per_gpu_hour": res.Price},
			Summary: fmt.Sprintf("reservation %s (%d GPUs of %s in %s) was %s idle: release or resize it", res.Name, res.GPUs, res.SKU, res.Region, pct(idle/capH)),
		})
	}
	return out
}

// unusedGuarantees: a quota entry whose tenant's (and its subtree's)
// guarantee-charged GPU-hours of the entry's model and region are below
// (1 − IdleThreshold) of guarantee × window. No USD saving: a guarantee
// is not billed until used; lowering it frees capacity others may then be
// guaranteed (the idle share is the evidence).
func unusedGuarantees(in AdvisorInput) []Recommendation {
	var out []Recommendation
	span := in.Until.Sub(in.Since).Hours()
	for _, g := range in.Guarantees {
		if g.Guaranteed <= 0 {
			continue
		}
		capH := gpusOf(g.Guaranteed) * span
		used := 0.0
		for i := range in.Records {
			r := &in.Records[i]
			if r.Charge != ChargeGuarantee || r.Model != g.Model || g.Region != "" && r.Region != g.Region {
				continue
			}
			if r.Tenant != g.Tenant && !slices.Contains(r.Path, g.Tenant) {
				continue
			}
			used += r.GPUHours(in.Since, in.Until)
		}
		used = min(used, capH)
		share := used / capH
		if 1-share <= in.IdleThreshold {
			continue
		}
		out = append(out, Recommendation{
			Kind: KindUnusedGuarantee, Tenant: g.Tenant, Target: g.Tenant + " " + flavorRegion(g.Model, g.Region),
			SavingNote: "none in USD: a guarantee is not billed until used; lowering it frees capacity for others",
			Evidence: map[string]float64{"guaranteed_gpus": gpusOf(g.Guaranteed), "guaranteed_gpu_hours": capH,
				"used_gpu_hours": used, "used_share": share},
			Summary: fmt.Sprintf("%s used %s of its guarantee of %s GPUs: lower it", g.Tenant, pct(share), num(gpusOf(g.Guaranteed))),
		})
	}
	return out
}

func flavorRegion(m fleet.ModelID, region string) string {
	if region == "" {
		return string(m) + "/*"
	}
	return string(m) + "/" + region
}

type tmr struct {
	tenant string
	model  fleet.ModelID
	region string
}

// reserveBaselines: per tenant × GPU model × region, the least GPUs held
// at once over the whole window by on-demand-charged records (the records'
// intervals as a step function); where above zero, a reservation of that
// many GPUs saves baseline × 730 × (on-demand − reserved) a month: the
// 1-year and the 3-year figures are the evidence, the better the saving.
func reserveBaselines(in AdvisorInput, price func(fleet.ModelID, string) (UnitPrices, bool)) []Recommendation {
	type step struct {
		at time.Time
		d  resource.MilliGPU
	}
	steps := map[tmr][]step{}
	for i := range in.Records {
		r := &in.Records[i]
		if !onDemand(r) {
			continue
		}
		from, to, ok := r.Span(in.Since, in.Until)
		if !ok {
			continue
		}
		k := tmr{r.Tenant, r.Model, r.Region}
		steps[k] = append(steps[k], step{from, r.GPUs}, step{to, -r.GPUs})
	}
	var out []Recommendation
	for k, ss := range steps {
		slices.SortFunc(ss, func(a, b step) int { return a.at.Compare(b.at) })
		// The held GPUs between steps; the minimum over [Since, Until).
		var held resource.MilliGPU
		base := resource.MilliGPU(math.MaxInt64)
		at := in.Since
		for i := 0; i < len(ss); {
			if ss[i].at.After(at) {
				base = min(base, held) // [at, ss[i].at) held this
			}
			at = ss[i].at
			for ; i < len(ss) && ss[i].at.Equal(at); i++ {
				held += ss[i].d
			}
		}
		if in.Until.After(at) {
			base = min(base, held)
		}
		if base <= 0 || base == resource.MilliGPU(math.MaxInt64) {
			continue
		}
		p, ok := price(k.model, k.region)
		if !ok || p.OnDemand <= 0 {
			continue
		}
		b := gpusOf(base)
		s1 := b * HoursPerMonth * (p.OnDemand - p.Reserved1Y)
		s3 := b * HoursPerMonth * (p.OnDemand - p.Reserved3Y)
		if max(s1, s3) <= 0 {
			continue
		}
		term := "1-year"
		if s3 > s1 {
			term = "3-year"
		}
		out = append(out, Recommendation{
			Kind: KindReserveBaseline, Tenant: k.tenant, Target: k.tenant + " " + flavorRegion(k.model, k.region),
			Saving: max(s1, s3),
			Evidence: map[string]float64{"baseline_gpus": b, "on_demand_usd_per_gpu_hour": p.OnDemand,
				"saving_1y_usd_per_month": s1, "saving_3y_usd_per_month": s3},
			Summary: fmt.Sprintf("%s held at least %s %s GPUs on demand in %s all window: a %s reservation saves the most", k.tenant, num(b), k.model, k.region, term),
		})
	}
	return out
}

// useSpot: preemptible work charged at on-demand prices, per tenant ×
// GPU model × region; saving = its GPU-hours a month × (on-demand −
// spot), at catalog prices.
func useSpot(in AdvisorInput, price func(fleet.ModelID, string) (UnitPrices, bool)) []Recommendation {
	type acc struct {
		h  float64
		ws map[string]bool
	}
	by := map[tmr]*acc{}
	for i := range in.Records {
		r := &in.Records[i]
		if !r.Preemptible || !onDemand(r) {
			continue
		}
		h := r.GPUHours(in.Since, in.Until)
		if h <= 0 {
			continue
		}
		k := tmr{r.Tenant, r.Model, r.Region}
		a := by[k]
		if a == nil {
			a = &acc{ws: map[string]bool{}}
			by[k] = a
		}
		a.h += h
		a.ws[r.Workload] = true
	}
	span := in.Until.Sub(in.Since).Hours()
	var out []Recommendation
	for k, a := range by {
		p, ok := price(k.model, k.region)
		if !ok || p.OnDemand <= p.Spot {
			continue
		}
		hm := monthly(a.h, span)
		out = append(out, Recommendation{
			Kind: KindUseSpot, Tenant: k.tenant, Target: k.tenant + " " + flavorRegion(k.model, k.region),
			Saving: hm * (p.OnDemand - p.Spot),
			Evidence: map[string]float64{"gpu_hours": a.h, "gpu_hours_per_month": hm, "workloads": float64(len(a.ws)),
				"on_demand_usd_per_gpu_hour": p.OnDemand, "spot_usd_per_gpu_hour": p.Spot},
			Summary: fmt.Sprintf("%d preemptible workload(s) of %s ran on demand: submit them at spot priority", len(a.ws), k.tenant),
		})
	}
	return out
}

// quotaIncreases: pending work blocked by a quota limit now, per the
// workload's tenant × the tenant at its limit × flavor × region: the GPUs
// needed beyond the limit (used + all asked − limit). No USD saving: it
// is throughput (work waiting), a request to make.
func quotaIncreases(in AdvisorInput) []Recommendation {
	type key struct {
		tenant, limitTenant string
		model               fleet.ModelID
		region              string
	}
	type acc struct {
		asked, used, limit resource.MilliGPU
		n                  int
	}
	by := map[key]*acc{}
	var keys []key
	for _, p := range in.Pending {
		k := key{p.Tenant, p.LimitTenant, p.Model, p.Region}
		a := by[k]
		if a == nil {
			a = &acc{used: p.Used, limit: p.Limit}
			by[k] = a
			keys = append(keys, k)
		}
		a.asked += p.Requested
		a.n++
	}
	var out []Recommendation
	for _, k := range keys {
		a := by[k]
		need := a.used + a.asked - a.limit
		if need <= 0 {
			continue
		}
		out = append(out, Recommendation{
			Kind: KindQuotaIncrease, Tenant: k.tenant, Target: k.limitTenant + " " + flavorRegion(k.model, k.region),
			SavingNote: "none in USD: it is throughput (work waiting on the limit), not cost",
			Evidence: map[string]float64{"pending_workloads": float64(a.n), "requested_gpus": gpusOf(a.asked),
				"used_gpus": gpusOf(a.used), "limit_gpus": gpusOf(a.limit), "needed_gpus": gpusOf(need)},
			Summary: fmt.Sprintf("raise %s's %s limit from %s to %s GPUs for %d pending workload(s) of %s", k.limitTenant,
				flavorRegion(k.model, k.region), num(gpusOf(a.limit)), num(gpusOf(a.limit+need)), a.n, k.tenant),
		})
	}
	return out
}

func pct(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" }

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// EvidenceString renders evidence as sorted key=value pairs.
func EvidenceString(ev map[string]float64) string {
	ks := make([]string, 0, len(ev))
	for k := range ev {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + strconv.FormatFloat(ev[k], 'f', -1, 64))
	}
	return b.String()
}

// ParseWindow reads the advisor's window: a positive duration ("30d",
// "12h", "1w"); flag names the field in errors.
func ParseWindow(flag, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%w: %s: empty", ErrInvalid, flag)
	}
	d, err := parseAgo(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: %s: %q is not a positive duration (30d, 12h, 1w)", ErrInvalid, flag, s)
	}
	return d, nil
}

// ParseThreshold reads an idle threshold as a percentage, "50%" or "50"
// (0 to below 100), and returns it as a share (0.5); flag names the field
// in errors.
func ParseThreshold(flag, s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || !(v >= 0 && v < 100) {
		return 0, fmt.Errorf("%w: %s: %q is not a percentage from 0 to below 100 (50%%)", ErrInvalid, flag, s)
	}
	return v / 100, nil
}
