package api

// Workload states as the API shows them (Workload.State). Pending,
// Running, Cancelled, Succeeded and Failed are stored; Starting and
// WaitingForGPUs are shown for a Running workload whose node agents have
// not started all its replicas of the current run yet: WaitingForGPUs
// when a node of one of them still runs a replica evicted from those GPUs
// (in its grace period), Starting otherwise. List endpoints filter
// (`state=`) on the state shown.
const (
	StatePending        = "Pending"
	StateStarting       = "Starting"
	StateWaitingForGPUs = "WaitingForGPUs"
	StateRunning        = "Running"
	StateCancelled      = "Cancelled"
	StateSucceeded      = "Succeeded"
	StateFailed         = "Failed"
)

// WorkloadStates are the states a workload may be shown in.
var WorkloadStates = []string{StatePending, StateStarting, StateWaitingForGPUs, StateRunning, StateCancelled, StateSucceeded, StateFailed}
