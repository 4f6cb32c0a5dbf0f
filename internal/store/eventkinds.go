package store

import "strings"

// EventKind is what an event reports (its Type): one of the constants
// below, or one built by WorkloadStateEvent or AlertEvent. Writers use
// these instead of spelling the strings, and readers compare with them
// instead of parsing.
type EventKind string

// String is the kind as events carry it (Event.Type).
func (k EventKind) String() string { return string(k) }

// The kinds of event the server writes.
const (
	EventConfigSeeded EventKind = "ConfigSeeded" // objects added from the config file: everything may have changed

	EventTenantCreated            EventKind = "TenantCreated"
	EventTenantDeleted            EventKind = "TenantDeleted"
	EventQuotasChanged            EventKind = "QuotasChanged"
	EventAllowedPrioritiesChanged EventKind = "AllowedPrioritiesChanged"

	EventNodeRegistered EventKind = "NodeRegistered"
	EventNodeUpdated    EventKind = "NodeUpdated"
	EventNodeRemoved    EventKind = "NodeRemoved"
	EventNodeLost       EventKind = "NodeLost"
	EventNodeRecovered  EventKind = "NodeRecovered"

	EventReservationCreated EventKind = "ReservationCreated"
	EventReservationResized EventKind = "ReservationResized"
	EventReservationDeleted EventKind = "ReservationDeleted"
	// EventReservationBound: a future reservation's machines were chosen as
	// its window approached (tenancy.BindLead).
	EventReservationBound EventKind = "ReservationBound"

	EventPartitionSet     EventKind = "PartitionSet"
	EventPartitionDeleted EventKind = "PartitionDeleted"

	EventWorkloadSubmitted EventKind = "WorkloadSubmitted"
	EventWorkloadPlaced    EventKind = "WorkloadPlaced"
	EventWorkloadPreempted EventKind = "WorkloadPreempted"
	EventWorkloadResized   EventKind = "WorkloadResized" // an elastic workload grew or shrank
	EventWorkloadCancelled EventKind = "WorkloadCancelled"

	EventReplicaStarted EventKind = "ReplicaStarted"
	EventReplicaStopped EventKind = "ReplicaStopped"
	EventReplicaExited  EventKind = "ReplicaExited"

	EventPolicyApplied      EventKind = "PolicyApplied"
	EventPolicyDeleted      EventKind = "PolicyDeleted"
	EventPolicyFiring       EventKind = "PolicyFiring"
	EventPolicyNotification EventKind = "PolicyNotification"

	EventAlertRulesApplied EventKind = "AlertRulesApplied"

	EventProbesApplied EventKind = "ProbesApplied"
)

// WorkloadStateEvent is the event of a workload ending in state s
// (WorkloadSucceeded, WorkloadFailed, ...).
func WorkloadStateEvent(s State) EventKind { return EventKind("Workload" + string(s)) }

// AlertEvent is the event of an alert rule's condition changing
// (AlertFired, AlertResolved).
func AlertEvent(condition string) EventKind { return EventKind("Alert" + condition) }

// Is reports whether e is of kind k.
func (e *Event) Is(k EventKind) bool { return e.Type == k }

// Event objects that are no stored object.
const (
	ConfigObject = "config" // the config file (ConfigSeeded)
	AlertsObject = "alerts" // the alert rules as a whole
	ProbesObject = "probes" // the probes as a whole
)

// ObjectOf is an event's Object naming the stored object of kind k and
// key: "kind/key".
func ObjectOf(k Kind, key string) string { return string(k) + "/" + key }

// WorkloadObject names a workload by its key (tenant/name).
func WorkloadObject(key string) string { return ObjectOf(KindWorkload, key) }

// NodeObject names a node.
func NodeObject[ID ~string](id ID) string { return ObjectOf(KindNode, string(id)) }

// TenantObject names a tenant.
func TenantObject(name string) string { return ObjectOf(KindTenant, name) }

// ReservationObject names a reservation by its key (tenant/name).
func ReservationObject(key string) string { return ObjectOf(KindReservation, key) }

// PartitionObject names a partition.
func PartitionObject(name string) string { return ObjectOf(KindPartition, name) }

// PolicyObject names a policy.
func PolicyObject(name string) string { return ObjectOf(KindPolicy, name) }

// AlertObject names one alert rule.
func AlertObject(rule string) string { return AlertsObject + "/" + rule }

// ParseObject splits an event's Object into the kind and key of the
// stored object it names; ok is false for objects that name none
// ("config", "alerts", "alerts/rule").
func ParseObject(obj string) (k Kind, key string, ok bool) {
	kind, key, found := strings.Cut(obj, "/")
	if !found || key == "" {
		return "", "", false
	}
	switch k := Kind(kind); k {
	case KindTenant, KindNode, KindReservation, KindWorkload, KindPolicy, KindPartition, KindToken:
		return k, key, true
	}
	return "", "", false
}
