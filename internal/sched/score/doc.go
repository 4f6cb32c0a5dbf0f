// Package score holds node-level placement scorers: given one node and one
// request that fits on it, a scorer says how good the placement is and which
// GPUs of the node it would use.
//
// The paper scorers follow "Beware of Fragmentation: Scheduling GPU-Sharing
// Workloads with Fragmentation Gradient Descent" (Weng et al., USENIX ATC '23)
// and its simulator exactly, integer truncations and floating-point order
// included, so that a replay reproduces the published numbers:
//
//	random         one uniformly chosen feasible node (see Chooser)
//	dotprod        Tetris-style dot product of free and requested CPU/GPU
//	gpuclustering  keep pods of one GPU shape together
//	gpupacking     prefer shared GPUs, then used nodes, then empty nodes
//	bestfit        least CPU/GPU left over
//	fgd            fragmentation gradient descent over typical pods
//	arbiter        Arbiter's default (see NewArbiter)
//
// Select one by name:
//
//	s, err := score.New("fgd", score.WithTypicalPods(score.TypicalPods(reqs, 95)))
//	v, gpus := s.Score(&node, &req, gpus[:0])
//
// Callers must
//
//   - call Score only for nodes where Fits(node, req) holds (the filter is
//     the caller's job, so that it can be indexed);
//   - break ties between equal scores themselves (the replay uses node rank);
//   - for a Chooser (random), pick the node with Choose and call Score only
//     for the chosen node, since Score may draw from the random source.
//
// The package is pure: no clocks, no global random source (random scorers
// take a *rand.Rand), no I/O, no goroutines. Score does not allocate when the
// gpus buffer has room for the request's GPU count. A Scorer keeps no state
// between calls other than its random source, so the same inputs give the
// same answer; it is not safe for concurrent use when it holds a random
// source.
package score
