package tenancy

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/resource"
)

// Fair share over time: each quota entry's decayed usage, in GPU-hours
// where an hour of use t ago weighs 2^(-t/half-life) (Slurm's
// PriorityDecayHalfLife). A tenant that ran the whole fleet all week so
// ranks behind one that ran nothing, until its use has decayed.
//
// The usage counted is what the scheduler charges against guarantees:
// running work charged to every entry on its tenant's path (Charged),
// outside its own reservations. Between two cycles the usage is taken as
// constant at the later cycle's value (the running work the cycle sees),
// and the decayed sum advances by the exact integral over the interval:
//
//	U(now) = U(at)·d + u·H/ln2·(1 − d),  d = 2^(−(now−at)/H)
//
// so the result does not depend on how often cycles run, and a server
// that was down for an hour integrates that hour at its next cycle.

// History is the decayed usage of every quota entry as of At: the state
// the scheduler carries from one cycle to the next (the server stores it,
// the simulator keeps it). Entries are sorted by tenant, then key, and
// hold only non-zero usage.
type History struct {
	At      time.Time      `json:"at"`
	Entries []HistoryEntry `json:"entries"`
}

// HistoryEntry is one quota entry's decayed usage.
type HistoryEntry struct {
	Tenant   string  `json:"tenant"`
	Flavor   string  `json:"flavor"`
	Region   string  `json:"region,omitempty"`
	GPUHours float64 `json:"gpu_hours"`
}

// minHistory is the decayed usage below which an entry is dropped: a
// thousandth of a GPU-second.
const minHistory = 1e-3 / 3600

// Decayed is decayed usage per quota entry, shaped like the tree:
// Decayed[tenant][entry] in GPU-hours.
type Decayed [][]float64

// Decay advances h to now: each entry's decayed usage at h.At, decayed
// over the interval, plus usage (the running work charged to each entry,
// held constant over the interval). It returns the decayed usage per entry
// of t and the history as of now. A nil h starts from nothing; entries of
// tenants or keys no longer in the tree are dropped. A now before h.At
// (a clock set back) counts as no time passed.
func (t *Tree) Decay(h *History, usage Ledger, now time.Time, halfLife time.Duration) (Decayed, *History) {
	out := make(Decayed, len(t.Tenants))
	for i, ten := range t.Tenants {
		out[i] = make([]float64, len(ten.Quotas))
	}
	dt := 0.0
	if h != nil && now.After(h.At) {
		dt = now.Sub(h.At).Hours()
	}
	hl := halfLife.Hours()
	d := math.Exp2(-dt / hl)
	if h != nil {
		for _, e := range h.Entries {
			i, ok := t.Lookup(e.Tenant)
			if !ok {
				continue
			}
			for j, q := range t.Tenants[i].Quotas {
				if string(q.Key.Model) == e.Flavor && q.Key.Region == e.Region {
					out[i][j] = e.GPUHours * d
				}
			}
		}
	}
	if h != nil && dt > 0 {
		gain := hl / math.Ln2 * (1 - d) // GPU-hours per GPU used over the interval
		for i := range out {
			for j := range out[i] {
				out[i][j] += float64(usage[i][j]) / resource.PerGPU * gain
			}
		}
	}
	next := &History{At: now}
	if h != nil && h.At.After(now) {
		next.At = h.At
	}
	for i, ten := range t.Tenants {
		for j, q := range ten.Quotas {
			if out[i][j] >= minHistory {
				next.Entries = append(next.Entries, HistoryEntry{Tenant: ten.Name, Flavor: string(q.Key.Model), Region: q.Key.Region, GPUHours: out[i][j]})
			}
		}
	}
	slices.SortFunc(next.Entries, func(a, b HistoryEntry) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Flavor, b.Flavor), cmp.Compare(a.Region, b.Region))
	})
	return out, next
}

// FairShare is one quota entry's place in fair sharing, as `tenant show`
// prints it.
type FairShare struct {
	Key Key
	// Share is the entry's guarantee × weight over the sum of its
	// siblings' (tenants with the same parent) entries of the same key,
	// its own included: the part of the key its level promises it.
	Share float64
	// GPUHours is its decayed usage.
	GPUHours float64
	// Usage is GPUHours over the siblings' sum (0 when they used nothing).
	Usage float64
	// Factor is Slurm's classic fair-share factor 2^(−Usage/Share): 1 for
	// an entry that used nothing, 0.5 for one that used exactly its share,
	// towards 0 for one far above it. The scheduler orders tenants at the
	// same priority by decayed usage over guarantee × weight, which ranks
	// siblings as this factor does (higher first).
	Factor float64
}

// FairShares returns tenant i's fair-share state per quota entry, from
// the decayed usage dec (Decay's first result).
func (t *Tree) FairShares(i int, dec Decayed) []FairShare {
	var out []FairShare
	parent := t.Tenants[i].Parent
	for j, q := range t.Tenants[i].Quotas {
		var shares, used float64
		for _, sib := range t.Tenants {
			if sib.Parent != parent {
				continue
			}
			for k, sq := range sib.Quotas {
				if sq.Key == q.Key {
					shares += shareOf(sq)
					used += dec[sib.Index][k]
				}
			}
		}
		fs := FairShare{Key: q.Key, Share: shareOf(q) / shares, GPUHours: dec[i][j]}
		if used > 0 {
			fs.Usage = dec[i][j] / used
		}
		fs.Factor = math.Exp2(-fs.Usage / fs.Share)
		out = append(out, fs)
	}
	return out
}

// shareOf is an entry's guarantee × weight, with a guarantee of less than
// one GPU counted as one (as the scheduler's ordering does), in GPUs.
func shareOf(q Quota) float64 {
	return max(float64(q.Guaranteed), resource.PerGPU) / resource.PerGPU * q.Weight
}

// OrderShare is what the scheduler orders tenants by, lowest first:
// value (current or decayed usage, in the ledger's or Decayed's unit) over
// the entry's guarantee × weight.
func OrderShare(value float64, q Quota) float64 {
	return value / (max(float64(q.Guaranteed), resource.PerGPU) * q.Weight)
}
