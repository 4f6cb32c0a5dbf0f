// Package kube is Arbiter's Kubernetes mode: `arbiter kube` schedules the
// GPU pods of a cluster (those whose spec.schedulerName is Arbiter's) with
// the same core as the server (internal/sched).
//
// It keeps no store of its own: the Kubernetes API is the state. Each cycle
// a Snapshot of the informer caches (Nodes, Pods, Namespaces, and the
// ArbiterTenant, ArbiterReservation and PodGroup objects) is translated
// into a sched.Input (Translate, translate.go), the core decides a Plan,
// and the plan is applied through the API (apply.go): pods/binding for
// placements, the Eviction API (policy/v1, which enforces
// PodDisruptionBudgets) for preemptions, the PodScheduled=False condition
// and an Event for pending pods, and the status subresource of the CRDs for
// usage. A Lease (leader.go) makes sure only one replica applies plans.
//
// The translation never fails on one bad object: a pod whose annotations or
// resources cannot be understood is left pending with reason Invalid and a
// message naming the field; a node whose GPU model is unknown is left out
// of the fleet with a logged reason.
package kube
