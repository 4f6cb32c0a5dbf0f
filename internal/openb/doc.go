// Package openb is the paper-compatible replay of the FGD experiment
// ("openb mode"): it rebuilds, seed by seed, exactly the pod sequences and
// node orders of the reference simulator of "Beware of Fragmentation"
// (USENIX ATC '23), places them with a scorer of internal/sched/score, and
// turns the placements into the published allocation curves, so that our
// numbers can be compared with the published ones cell by cell.
//
// Everything here that looks odd is deliberate and documented in
// ../shared/design/OPENB-METHOD.md: the thrown-away draws, the sampling
// stop test that adds the per-GPU milli instead of the pod's total, the
// tie-break by a random node rank, the metric record after failed pods, the
// Python rounding of the discrete curve. These quirks belong to the
// benchmark, not to Arbiter's scheduler, and stay in this package.
//
// Usage:
//
//	c, _ := openb.LoadCluster(traceDir)
//	w, _ := openb.LoadWorkload(traceDir, "default")
//	res, _ := openb.Run(c, w, "fgd", 42)
//	curve := res.Curve // allocation % at 0..130 % arrived demand
//
// Run is deterministic and single-threaded; callers run seeds and policies
// in parallel (the Cluster and Workload are read-only and may be shared).
package openb
