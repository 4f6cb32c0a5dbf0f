package sched

import (
	"fmt"

	"github.com/arbiterhq/arbiter/internal/mig"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/tenancy"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// baseState is what running work left on the nodes in a snapshot, before
// any decision, and the runs that left it. With a Cache, the next
// snapshot of the same skeleton starts from the last one's base and
// applies what changed: the runs gone give their GPUs back, the new ones
// take theirs. Between two simulator cycles a few dozen of some thousand
// runs change; the others' replicas are not read again.
type baseState struct {
	skel    *skeleton
	nodes   []nodeState // running is nil; free points into backing
	backing []int32
	layouts []uint8 // the MIG layouts, nil without MIG-mode nodes
	runs    []baseRun
	reps    []replicaAt // the runs' replicas, then the snapshot's
	nodeIdx []int       // the runs' distinct nodes
	// index finds a run by its Assignment when indexed (find); it is
	// stale once runs change.
	index   map[*workload.Assignment]int32
	indexed bool
}

// baseRun is one run of a base: its Assignment (the identity a run is
// matched by), what its holds read of its workload, and its replicas.
// A snapshot's runs and its base's are one to one, in the same order
// (classifyBorrowers reads the base's).
type baseRun struct {
	a        *workload.Assignment
	cpu      resource.MilliCPU
	mem      resource.MiB
	gpus     resource.MilliGPU
	replicas int
	total    resource.MilliGPU // the workload's TotalGPUs
	reps     []replicaAt
	nodes    []int
	// What the snapshot reads of the Assignment, so that a kept run's
	// is not read again.
	key     tenancy.Key
	started int64 // StartedAt in Unix nanoseconds, when exact
	exact   bool
	onRes   bool
	within  bool
	kept    bool // matched by a run of the snapshot being built
}

// matchWindow is how far ahead in the last base's runs a running
// workload's Assignment is looked for first (runs that ended leave gaps);
// past it, the base's index of Assignments answers (built on the first
// miss of a snapshot: the runs new since the last one miss every cycle).
// Either way a run is matched only ahead of the last one matched, as
// with an unbounded window: a base is read in its own order.
const matchWindow = 16

// find returns the index of a's run in b at or after cur, or -1, and
// moves cur past it.
func (b *baseState) find(a *workload.Assignment, cur *int) int {
	for k := *cur; k < len(b.runs) && k < *cur+matchWindow; k++ {
		if b.runs[k].a == a {
			*cur = k + 1
			return k
		}
	}
	if !b.indexed {
		if b.index == nil {
			b.index = make(map[*workload.Assignment]int32, len(b.runs))
		}
		clear(b.index)
		for k := range b.runs {
			b.index[b.runs[k].a] = int32(k)
		}
		if len(b.index) < len(b.runs) {
			// Several runs of one Assignment (a caller's mistake, which
			// the snapshot must survive): those are read in order below.
			clear(b.index)
			for k := range b.runs {
				if _, dup := b.index[b.runs[k].a]; dup {
					b.index[b.runs[k].a] = -1
				} else {
					b.index[b.runs[k].a] = int32(k)
				}
			}
		}
		b.indexed = true
	}
	k, ok := b.index[a]
	switch {
	case !ok:
		return -1
	case k < 0:
		for k := *cur + matchWindow; k < len(b.runs); k++ {
			if b.runs[k].a == a {
				*cur = k + 1
				return k
			}
		}
		return -1
	case int(k) < *cur+matchWindow:
		return -1 // behind the window: matched before, or passed
	}
	*cur = int(k) + 1
	return int(k)
}

// sameHolds reports whether run r of the last base holds what w's run
// would: the same Assignment (a Cache's contract: an Assignment is not
// changed in place between cycles) and the same per-replica request.
func (r *baseRun) sameHolds(w *workload.Workload) bool {
	return r.a == w.Running && r.cpu == w.CPU && r.mem == w.Memory && r.gpus == w.GPUs && r.replicas == w.Replicas
}

// cur is the base of the snapshot built last.
func (sc *scratch) cur() *baseState { return &sc.base[0] }

// holdRunning makes every running workload take its GPUs, CPU and memory
// and count against its quota, and returns the inconsistencies found
// (unknown tenants or nodes, GPU indices out of range, GPUs given
// twice): a run with one holds nothing. With a Cache it starts from the
// last snapshot's base when the skeleton is the same; any inconsistency
// then sends it back to the skeleton, so that which run is blamed, and
// what the others hold, is what a snapshot built afresh finds.
func (s *snapshot) holdRunning(sk *skeleton) []string {
	prev, next := &s.buf.base[0], &s.buf.base[1]
	incremental := s.in.Cache != nil && prev.skel == sk
	if incremental {
		conflicts := s.holdFrom(sk, prev, next)
		if conflicts == nil {
			s.buf.base[0], s.buf.base[1] = *next, *prev
			return nil
		}
		s.instantiate(sk)
		s.usage = tenancy.NewLedger(s.tree)
	}
	conflicts := s.holdFrom(sk, nil, next)
	if s.in.Cache != nil {
		s.buf.base[0], s.buf.base[1] = *next, *prev
	} else {
		s.buf.base[0] = *next
	}
	return conflicts
}

// holdFrom holds the running work on the skeleton's nodes (prev nil) or
// on prev's, collecting the base in next. From prev, it returns nil only
// when nothing was inconsistent.
func (s *snapshot) holdFrom(sk *skeleton, prev, next *baseState) []string {
	in, f := s.in, s.in.Fleet
	var conflicts []string
	var match []int32 // per running workload, its run in prev or -1
	// The running workloads, in order: the passes below read them alone
	// (a long queue's pending workloads are read once, here).
	running := s.buf.runningW[:0]
	for _, w := range in.Workloads {
		if w.Running != nil {
			running = append(running, w)
		}
	}
	s.buf.runningW = running
	if prev != nil {
		for k := range prev.runs {
			prev.runs[k].kept = false
		}
		match = s.buf.match[:0]
		cur := 0
		for _, w := range running {
			k := prev.find(w.Running, &cur)
			if k >= 0 && prev.runs[k].sameHolds(w) {
				prev.runs[k].kept = true
			} else {
				k = -1
			}
			match = append(match, int32(k))
		}
		s.buf.match = match
		// Start from prev's nodes; the runs that are gone give back.
		s.copyNodes(sk, prev.nodes, prev.backing, prev.layouts)
		for k := range prev.runs {
			if r := &prev.runs[k]; !r.kept {
				for _, rep := range r.reps {
					s.nodes[rep.node].hold(rep.gpus, rep.milli, -r.cpu, -r.mem)
					if rep.mask != 0 {
						s.layout(rep.node, rep.gpus, rep.milli, rep.mask)
					}
				}
			}
		}
	}
	if in.Cache == nil {
		// Size the buffers: there is no last snapshot's to reuse.
		nrun, nrep := len(running), 0
		for _, w := range running {
			nrep += len(w.Running.Replicas)
		}
		s.buf.run, s.buf.replicas = make([]runState, 0, nrun), make([][]replicaAt, 0, nrun)
		next.runs, next.reps, next.nodeIdx = make([]baseRun, 0, nrun), make([]replicaAt, 0, nrep), make([]int, 0, nrep)
	}
	// With a cache the buffers are those of the snapshot before last,
	// which fit nearly always: when one grows, the slices taken from its
	// old array stay valid (nothing writes them again).
	s.run, s.replicas = s.buf.run[:0], s.buf.replicas[:0]
	runs, repBuf, nodeBuf := next.runs[:0], next.reps[:0], next.nodeIdx[:0]
	next.indexed = false
	lastTenant, lastT := "", -1
	for j, w := range running {
		if prev != nil && conflicts != nil {
			return conflicts // built afresh instead
		}
		t, ok := lastT, lastT >= 0 && w.Tenant == lastTenant
		if !ok {
			t, ok = s.tree.Lookup(w.Tenant)
			lastTenant, lastT = w.Tenant, t
			if !ok {
				lastT = -1
			}
		}
		if !ok {
			conflicts = append(conflicts, fmt.Sprintf("running workload %s: unknown tenant %q", w.Name, w.Tenant))
			continue
		}
		br := baseRun{a: w.Running, cpu: w.CPU, mem: w.Memory, gpus: w.GPUs, replicas: w.Replicas, total: w.TotalGPUs()}
		rs := runState{w: w, tenant: t, entry: -1, workLost: -1, prio: w.Priority, preemptible: w.Preemptible, total: br.total}
		repStart, nodeStart := len(repBuf), len(nodeBuf)
		if match != nil && match[j] >= 0 {
			// Held in prev's nodes already.
			r := &prev.runs[match[j]]
			br.key, br.started, br.exact, br.onRes, br.within = r.key, r.started, r.exact, r.onRes, r.within
			repBuf = append(repBuf, r.reps...)
			nodeBuf = append(nodeBuf, r.nodes...)
		} else {
			a := w.Running
			br.key, br.onRes, br.within = tenancy.Key{Model: a.Flavor, Region: a.Region}, a.OnReservation, a.Within
			br.started, br.exact = unixNanos(a.StartedAt)
			ok = true
			for ri, r := range w.Running.Replicas {
				n, found := f.Node(r.Node)
				if !found {
					conflicts = append(conflicts, fmt.Sprintf("running workload %s replica %d: unknown node %q", w.Name, ri, r.Node))
					ok = false
					break
				}
				milli := int32(r.Milli)
				if milli <= 0 {
					milli = int32(min(w.GPUs, resource.PerGPU))
				}
				for _, g := range r.GPUs {
					if g < 0 || g >= n.GPUs {
						conflicts = append(conflicts, fmt.Sprintf("running workload %s replica %d: node %s has no GPU %d", w.Name, ri, n.ID, g))
						ok = false
					} else if s.nodes[n.Index].free[g] < milli {
						conflicts = append(conflicts, fmt.Sprintf("running workload %s replica %d: GPU %d of node %s is already allocated", w.Name, ri, g, n.ID))
						ok = false
					}
				}
				var mask uint8
				if ok && (r.MIG != nil || s.nodes[n.Index].migAt != 0) {
					mask, ok = s.heldInstance(w, ri, n.Index, r, &conflicts)
				}
				if !ok {
					break
				}
				s.nodes[n.Index].hold(r.GPUs, -milli, w.CPU, w.Memory)
				if mask != 0 {
					s.layout(n.Index, r.GPUs, -milli, mask)
				}
				repBuf = append(repBuf, replicaAt{node: n.Index, gpus: r.GPUs, milli: milli, mask: mask})
			}
			if !ok {
				for _, r := range repBuf[repStart:] {
					s.nodes[r.node].hold(r.gpus, r.milli, -w.CPU, -w.Memory)
					if r.mask != 0 {
						s.layout(r.node, r.gpus, r.milli, r.mask)
					}
				}
				repBuf = repBuf[:repStart]
				continue
			}
			for _, r := range repBuf[repStart:] {
				if !containsInt(nodeBuf[nodeStart:], r.node) {
					nodeBuf = append(nodeBuf, r.node)
				}
			}
		}
		if prev != nil && conflicts != nil {
			return conflicts
		}
		reps := repBuf[repStart:len(repBuf):len(repBuf)]
		rs.nodes = nodeBuf[nodeStart:len(nodeBuf):len(nodeBuf)]
		rs.key, rs.onRes = br.key, br.onRes
		if !rs.onRes {
			rs.entries, rs.entry = s.refsFor(t, rs.key)
			s.charge(rs.entries, br.total)
		}
		s.run = append(s.run, rs)
		s.replicas = append(s.replicas, reps)
		br.reps, br.nodes = reps, rs.nodes
		runs = append(runs, br)
	}
	if prev != nil && conflicts != nil {
		return conflicts
	}
	s.buf.run, s.buf.replicas = s.run, s.replicas
	next.runs, next.reps, next.nodeIdx = runs, repBuf, nodeBuf
	if in.Cache != nil {
		// The base: the nodes as running work left them.
		next.skel = sk
		next.nodes = append(next.nodes[:0], s.nodes...)
		next.backing = append(next.backing[:0], s.buf.backing...)
		if sk.layouts != nil {
			next.layouts = append(next.layouts[:0], s.buf.layouts...)
		} else {
			next.layouts = nil
		}
	}
	return conflicts
}

// heldInstance checks replica ri of running workload w on node i (in MIG
// mode, or with a MIG instance) and returns its instance's slices: a
// replica on a MIG-mode node has one MIG instance of a profile its model
// has, at an allowed start, on one GPU, clear of the instances held
// there; a MIG instance is only on a node in MIG mode.
func (s *snapshot) heldInstance(w *workload.Workload, ri, i int, r workload.Replica, conflicts *[]string) (uint8, bool) {
	ns := &s.nodes[i]
	bad := func(format string, args ...any) (uint8, bool) {
		*conflicts = append(*conflicts, fmt.Sprintf("running workload %s replica %d: ", w.Name, ri)+fmt.Sprintf(format, args...))
		return 0, false
	}
	ls := s.layoutsOf(i)
	switch {
	case ls == nil:
		return bad("MIG instance %s on node %s, which is not in MIG mode", r.MIG.Profile, ns.node.ID)
	case r.MIG == nil:
		return bad("node %s is in MIG mode and the replica has no MIG instance", ns.node.ID)
	case len(r.GPUs) != 1:
		return bad("a MIG instance is on one GPU, got %d", len(r.GPUs))
	}
	mg, _ := mig.For(string(ns.node.Model)) // a node in MIG mode is of a MIG model
	p := mg.Index(r.MIG.Profile)
	if p < 0 {
		return bad("%s has no MIG profile %q", ns.node.Model, r.MIG.Profile)
	}
	l, err := mg.Place(mig.Layout(ls[r.GPUs[0]]), p, r.MIG.Start)
	if err != nil {
		return bad("GPU %d of node %s: %v", r.GPUs[0], ns.node.ID, err)
	}
	return uint8(l &^ mig.Layout(ls[r.GPUs[0]])), true
}
