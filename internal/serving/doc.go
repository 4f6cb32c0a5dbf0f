// Package serving models an LLM inference service (the coding-assistant
// case) cheaply enough to run every simulated minute for many services over
// a month: per-GPU speed profiles, a per-time-step queueing model with
// percentiles, a per-request simulation that validates it, a load generator,
// an autoscaler and a multi-region router.
//
// # The model
//
// A Profile gives a replica's prefill and decode token rates on one GPU
// model (Derive computes them from datasheets and stated efficiencies;
// DefaultProfiles covers T4, A10, A100-40G/80G, H100, H200 and MI300X for a
// 7B coding model). A request of c prompt and g generated tokens occupies
// its replica for c/prefill + g/(batch·decode) — prefill is compute-bound
// and serial, decode steps are shared by the batch — and keeps its user
// waiting overhead + c/prefill + g/decode once it starts. Each replica is
// one server of an FCFS M/G/c queue whose service time is the occupancy;
// the response time is the wait plus the in-service latency.
//
// Time to first token: ProfileFirstTokenDist has the same occupancy (so the
// same queue) with the in-service time to the first token (overhead plus
// prefill of the prompt tokens not in the context cache, ContextCacheHit);
// stepped with the same input, its response time is the TTFT. TPOT is
// Profile.TPOT: one decode step at the batch Little's law gives. Hist
// accumulates a run's latencies over requests (each step's exact mixture
// weighted by its requests), for percentiles over a whole run.
//
// ServiceDist.Step evaluates one step (for example one minute): Erlang C
// with the Allen–Cunneen correction and an exponential conditional wait
// while the queue is stable; a fluid backlog that grows, is capped by
// MaxWait and drains over later steps when it is not. It returns mean wait,
// p50/p95/p99, utilisation and the backlog to carry into the next step, in
// about 3 µs without allocating (6 µs with a backlog). Simulate is the per-request reference; the
// tests hold the two within a few percent of each other and of the M/M/c
// closed forms.
//
// # Usage
//
//	reqs, _ := trace.ReadAzureFile("AzureLLMInferenceTrace_code.csv")
//	sizes, _ := trace.NewTokenDist(reqs)
//	prof, _ := serving.LookupProfile(serving.H100_80G)
//	dist, _ := serving.ProfileDist(prof, sizes) // once per (profile, trace)
//
//	load, _ := serving.NewLoad(serving.CodingAssistantLoad(15), seed, 30*24*time.Hour, time.Monday)
//	as, _ := serving.NewAutoscaler(dist, serving.AutoscalerConfig{SLO: 6 * time.Second, TargetUtilization: 0.8,
//		MinReplicas: 2, MaxScaleDown: 4, DownStabilization: 5})
//	replicas, backlog := 2, 0.0
//	for t := time.Duration(0); t < 30*24*time.Hour; t += time.Minute {
//		rate := load.Rate(t)
//		res := dist.Step(serving.StepInput{Rate: rate, Replicas: replicas, Step: time.Minute, Backlog: backlog, MaxWait: 30 * time.Second})
//		backlog = res.Backlog
//		// record res.P99, res.Response.Within(slo), res.Utilization ...
//		replicas = as.Decide(replicas, rate, backlog).Replicas // ask the scheduler for GPUs
//	}
//
// Several regions: route the user regions' demand with a Router (its
// Endpoints' Healthy flags from Probe on the previous step), step each
// endpoint with its rate from EndpointRates, then MixQuantile and MixExceed
// over UserLatency(flows, results) give what users see, round trips
// included.
//
// # What callers must do
//
// Keep the Backlog between steps; build a ServiceDist once and share it
// (it is immutable); keep one Autoscaler per deployment (it remembers its
// recent recommendations). Everything here is pure and deterministic: no
// clock, no global random source, no goroutines, no I/O; randomness comes
// from seeds (NewLoad) or a caller's *rand.Rand (Simulate).
package serving
