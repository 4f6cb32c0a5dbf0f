package sim

import (
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// gpuTally keeps, as jobs come, start, stop and go, the live jobs' GPUs
// per policy target in integer milli-GPUs: what effects.TallyWorkloads
// sums each step by a scan of every live job, kept instead of rescanned.
//
// Exactness: TallyWorkloads adds float64(milli)/1000 per workload in job
// order. When every live job's milli is a multiple of 125 (an eighth of a
// GPU), every term and partial sum is a dyadic fraction far below 2^53,
// so the float sum is exact, in any order, and equals
// float64(Σ milli)/1000. Otherwise (inexact > 0) the run scans as before.
// TestTallySameAsScan checks it step by step.
type gpuTally struct {
	inexact int // live jobs whose GPUs are not a multiple of 1/8 GPU
	used    map[tallyKey]*tallyEntry
	pending map[tallyKey]*tallyEntry
	pool    map[fleet.NodeID]string // node → its pool label, where it has one
	// usedOrder and pendOrder are the targets in first-counted order.
	usedOrder, pendOrder []tallyKey
}

type tallyKey struct {
	kind policy.TargetKind
	name string
}

// tallyEntry is one target's sum and the jobs in it (a target with jobs
// but zero GPUs is still present, as in the scan).
type tallyEntry struct {
	milli int64
	n     int
}

// tallied is what a job added to the tally, to take back exactly.
type tallied struct {
	on      bool
	running bool
	milli   int64
	inexact bool
	keys    []tallyKey // the targets added to, other than the cluster
}

const dyadicMilli = resource.PerGPU / 8 // 125: milli-GPUs whose GPUs are exact in binary

func newGPUTally(nodes []effects.Node) *gpuTally {
	t := &gpuTally{used: map[tallyKey]*tallyEntry{}, pending: map[tallyKey]*tallyEntry{}, pool: map[fleet.NodeID]string{}}
	for _, n := range nodes {
		if n.Pool != "" {
			t.pool[n.ID] = n.Pool
		}
	}
	return t
}

var clusterKey = tallyKey{kind: policy.TargetCluster}

// track brings the tally up to date with a job's state: it takes back
// what the job added before and adds what it holds now (nothing once
// done). Call it after every change of a job's liveness or placement.
func (t *gpuTally) track(j *job) {
	if t == nil {
		return
	}
	c := &j.tally
	if c.on {
		m := t.pending
		if c.running {
			m = t.used
		}
		t.addTo(m, nil, clusterKey, -c.milli, -1)
		for _, k := range c.keys {
			t.addTo(m, nil, k, -c.milli, -1)
		}
		if c.inexact {
			t.inexact--
		}
		c.on = false
	}
	if j.done {
		return
	}
	x := j.w
	c.on, c.milli, c.keys = true, int64(x.TotalGPUs()), c.keys[:0]
	c.inexact = c.milli%dyadicMilli != 0
	if c.inexact {
		t.inexact++
	}
	c.running = x.Running != nil
	if !c.running {
		c.keys = append(c.keys, tallyKey{policy.TargetTenant, x.Tenant})
		for _, f := range x.Flavors {
			c.keys = append(c.keys, tallyKey{policy.TargetFlavor, string(f)})
		}
		for _, r := range x.Regions {
			c.keys = append(c.keys, tallyKey{policy.TargetRegion, r})
		}
	} else {
		c.keys = append(c.keys, tallyKey{policy.TargetTenant, x.Tenant},
			tallyKey{policy.TargetFlavor, string(x.Running.Flavor)}, tallyKey{policy.TargetRegion, x.Running.Region})
		if len(x.Running.Replicas) > 0 {
			if p := t.pool[x.Running.Replicas[0].Node]; p != "" {
				c.keys = append(c.keys, tallyKey{policy.TargetPool, p})
			}
		}
	}
	m, order := t.pending, &t.pendOrder
	if c.running {
		m, order = t.used, &t.usedOrder
	}
	t.addTo(m, order, clusterKey, c.milli, 1)
	for _, k := range c.keys {
		t.addTo(m, order, k, c.milli, 1)
	}
}

func (t *gpuTally) addTo(m map[tallyKey]*tallyEntry, order *[]tallyKey, k tallyKey, milli int64, n int) {
	e := m[k]
	if e == nil {
		e = &tallyEntry{}
		m[k] = e
		if order != nil {
			*order = append(*order, k)
		}
	}
	e.milli += milli
	e.n += n
}

// totals are the tally as effects.Totals, bit for bit what
// effects.TallyWorkloads gives for the live jobs; ok is false when some
// live job's GPUs are not exact in binary (scan instead).
func (t *gpuTally) totals() (*effects.Totals, bool) {
	if t.inexact > 0 {
		return nil, false
	}
	tot := &effects.Totals{}
	gpus := func(e *tallyEntry) float64 { return float64(e.milli) / resource.PerGPU }
	for _, k := range t.usedOrder {
		if e := t.used[k]; e.n > 0 {
			tot.SetUsed(policy.Target{Kind: k.kind, Name: k.name}, gpus(e))
		}
	}
	for _, k := range t.pendOrder {
		if e := t.pending[k]; e.n > 0 {
			tot.SetPending(policy.Target{Kind: k.kind, Name: k.name}, gpus(e))
		}
	}
	return tot, true
}
