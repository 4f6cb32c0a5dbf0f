// Package trace reads public cluster traces into plain Go values that the
// simulator and the benchmarks replay.
//
// # Alibaba openb (cluster-trace-gpu-v2023)
//
// The openb files describe a GPU cluster and the pods submitted to it, as used
// by the FGD paper (Weng et al., USENIX ATC '23):
//
//   - a node list (openb_node_list_*.csv): sn, cpu_milli, memory_mib, gpu, model;
//   - pod lists (openb_pod_list_*.csv): name, cpu_milli, memory_mib, num_gpu,
//     gpu_milli, and optionally gpu_spec, qos, pod_phase, creation_time,
//     deletion_time, scheduled_time (the multigpu variants stop after gpu_milli).
//
// Columns are found by their header name, so their order does not matter and
// unknown columns are ignored. A bad row yields a *ParseError that names the
// file, the line and the column; test for the kind of problem with errors.Is
// (ErrMissingColumn, ErrBadValue, ErrDuplicateName).
//
// Usage:
//
//	nodes, err := trace.ReadOpenBNodesFile("openb_node_list_gpu_node.csv")
//	pods, err := trace.ReadOpenBPodsFile("openb_pod_list_default.csv")
//	events, err := trace.OpenBTimeline(pods) // arrivals and departures by time
//
// The readers keep the values as written (gpu_milli is not clamped, no pod is
// filtered): how a replay interprets them is the replay's business (see
// internal/openb for the paper-compatible interpretation).
//
// Other traces (the Azure LLM inference trace, ...) live in their own files of
// this package.
package trace
