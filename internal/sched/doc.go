// Package sched is Arbiter's pure scheduling core.
//
// Schedule takes a snapshot of the world — fleet, tenant tree, partitions,
// reservations, running and pending workloads, Now and a seed — and returns
// a Plan: placements, preemptions, overflow decisions and, for every
// workload still pending, a reason a user can act on. It never reads the
// clock, never uses the global random source, never does I/O and never
// starts goroutines (TestPurity enforces this); the same Input gives the
// same Plan byte for byte.
//
//	plan := sched.Schedule(sched.Input{Now: now, Fleet: f, Tenants: tree, Workloads: ws})
//	ws = sched.Apply(ws, plan, now) // the simulator's instant applier
//
// Callers must pass reservations already bound to nodes (tenancy.Bind) and
// running workloads whose placements are consistent (Check reports
// conflicts). The server applies plans transactionally instead of with
// Apply; a placement marked AfterPreemption starts once its victims exited.
//
// See README.md in this directory for the pipeline and vocabulary.
package sched
