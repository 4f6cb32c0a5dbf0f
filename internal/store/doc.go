// Package store persists the control plane's state: tenants and quotas,
// nodes, reservations, workloads, policies and their firings, tokens and
// the event log. The server reads snapshots from it and writes every change
// through it; nothing else is the source of truth.
//
// A Store runs transactions. Objects are typed (Tenant, Node, Reservation,
// Workload, Policy, Firing, Token, Event) and carry a Meta with the
// revision that created and last changed them. Every write takes a new
// store-wide revision, strictly increasing, so revisions order all changes
// and drive optimistic concurrency: a plan computed from the state at
// revision R is applied by ApplyPlan, which fails with ErrConflict when
// anything it depends on changed after R.
//
//	st, err := store.OpenBolt(filepath.Join(dir, "arbiter.db"))
//	err = st.Update(ctx, func(tx store.WriteTx) error {
//		return store.Put(tx, &store.Workload{Tenant: "contoso", Name: "job1", ...}, store.MustNotExist)
//	})
//	err = st.View(ctx, func(tx store.ReadTx) error {
//		w, err := store.Get[store.Workload](tx, store.WorkloadKey("contoso", "job1"))
//		...
//	})
//
// Callers must: keep transactions short (one writer at a time); treat
// objects read in a transaction as copies; use Batch only with functions
// that may run more than once (Batch groups concurrent writers into one
// commit and retries them one by one when one of them fails).
//
// Every commit is durable when Update or Batch returns (the bbolt
// implementation fsyncs). The interface is small on purpose — raw keyed
// bytes per kind plus a revision counter — so that a replicated
// implementation (etcd) can follow without touching its callers.
package store
