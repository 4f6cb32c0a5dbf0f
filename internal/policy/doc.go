// Package policy is Arbiter's policy engine: rules that watch metrics and
// switch actions on and off, such as "when the GPU cluster passes 85%
// utilization, shrink developer instances to 30% and move batch jobs to the
// low-priority pool".
//
// A rule is a condition tree, a list of actions and options. The engine
// only decides which actions are in force; applying them to the scheduler's
// input is the caller's job (the simulator applies them instantly, the
// server transactionally).
//
// # Usage
//
//	p, err := policy.Load("policies.yaml", data)   // both formats; all problems at once
//	if err != nil { ... }                           // errors.Is(err, policy.ErrInvalid)
//	if err := p.Resolve(known); err != nil { ... }  // targets exist; bare names get their kind
//	eng, err := policy.NewEngine(p)
//
//	ws := policy.NewWindows(5 * time.Minute)        // or any policy.Metrics
//	for each tick (e.g. every simulated minute) {
//		ws.ObserveMetric(policy.MetricP95Latency, svc, t, 0.182) // raw samples as they come
//		ws.Advance(now)
//		step := eng.Evaluate(now, ws)
//		apply(step.Active)      // the full set of actions in force, with since-when
//		log(step.Firings)       // state changes: time, rule, values, actions
//	}
//
// The package is pure: it reads no files and no clock, starts no
// goroutines and uses no global random source (purity_test.go checks).
//
// # Callers must
//
//   - call Evaluate with non-decreasing times (a tick every simulated minute
//     is plenty); durations, cooldowns and hysteresis are measured between
//     calls, so a condition "held for 5m" holds when it was true at every
//     call across 5 minutes;
//   - provide metric values in base units (see Metrics);
//   - treat Step.Active as the desired state and apply the difference;
//   - use one Engine from one goroutine.
//
// # Semantics
//
// A metric leaf starts holding when its value passes the threshold
// (strictly: > for above, < for below), and keeps holding until the value is
// back across threshold−hysteresis (threshold+hysteresis for below). With
// `for`/`duration`, the leaf counts as true only after it has held for that
// long without a break. A metric without data is reported in Step.Errors
// and makes its leaf false, unless the leaf's no_data says true (it holds)
// or hold (it keeps its state). all/any combine leaves; every leaf is evaluated
// at every step so that durations keep counting.
//
// A rule fires when its condition becomes true; its actions are then in
// Step.Active. It reverts once the condition has been clear for the
// cooldown, and never less than a cooldown after it fired; after a revert
// it fires again no sooner than a cooldown later. So a metric oscillating
// around a threshold gives at most one firing per cooldown. With
// max_duration the actions end after that long (event "expired") and the
// rule re-arms only once its condition has cleared. Dry-run rules log
// firings but never appear in Step.Active; disabled rules are skipped.
//
// # The operators' format
//
// Accepted verbatim as operators write it (see ARCHITECTURE.md "Policies",
// examples/policies/operators.yaml):
//
//	scheduling_policies:
//	  - name: ai_training_priority
//	    conditions:                          # several conditions: all must hold
//	      - resource_type: gpu_cluster       # utilization of the whole fleet
//	        utilization_threshold: 85%       # of GPUs handed out (add utilization: busy for NVML's)
//	    actions:
//	      - type: scale_down
//	        target: developer_instances
//	        min_capacity: 30%
//	      - type: migrate
//	        target: batch_jobs
//	        destination: low_priority_pool
//	  - name: customer_sla_protection
//	    conditions:
//	      - metric: p95_latency              # of the whole cluster unless target: is given
//	        threshold: 150ms
//	        duration: 5m
//	    actions:
//	      - type: reallocate
//	        resources: [inference_gpus]
//	        priority: high
//
// resource_type may also name a pool, region, flavor or tenant
// ("pool:gpu_a100"). A metric condition may add target: and hysteresis:. A
// rule may add the options below. Targets are usually bare names; Resolve
// finds their kind among the known targets.
//
// # The native format
//
// A top-level policies: list (examples/policies/native.yaml):
//
//	policies:
//	  - name: customer_sla_protection
//	    description: free text, shown by `arbiter policy explain`
//	    when:                     # exactly one of: metric, all, any, expr
//	      metric: p95_latency     # utilization, busy_utilization, p50/p95/p99_latency,
//	                              # queue_wait, pending_gpus, spot_price, capacity_failure_rate,
//	                              # success_ratio (of probes: internal/probe)
//	      of: service:coding-assistant   # kind:name, selector:k=v,k2=v2, cluster (default) or a bare name
//	      above: 150ms            # or below:; in the metric's unit
//	      for: 5m                 # held without a break
//	      hysteresis: 20ms        # clears at 130ms or less
//	    then:
//	      - type: reallocate
//	        resources: [pool:inference_gpus, tenant:acme, flavor:H100-80G]
//	        priority: high        # critical, high, normal, low, spot
//	        guarantee: 64         # GPUs, temporary: raises acme's H100-80G quota entry (a guarantee names tenant(s) and one flavor, optionally one region)
//	    cooldown: 5m              # default 5m
//	    max_duration: 4h          # default: none
//	    enabled: true             # default true
//	    dry_run: false            # default false
//	    hysteresis: 5%            # default for leaves measured in that unit
//
// A leaf may read a Prometheus query instead of a metric, in either format
// (operators: the same keys with threshold: and duration:):
//
//	when:
//	  source: prometheus
//	  server: http://127.0.0.1:9090        # http(s), no userinfo, ≤ 2048 bytes
//	  query: histogram_quantile(0.95, sum by (le, service) (rate(request_seconds_bucket[1m])))
//	  target_label: service                # each series is service:<its label>; omit for one series (cluster)
//	  of: service:coding-assistant         # the target this leaf tests
//	  above: 150ms                         # in base units: seconds, fractions
//	  for: 5m
//	  no_data: false                       # no data, stale or failed: false (default), true, or hold (last state)
//
// The package runs no query: the caller runs each of Engine.PromQueries,
// records the samples with Windows.Observe under PromQuery.Series (for the
// targets PromQuery.TargetFor names) and drops the series on a failure;
// the leaf reads the newest sample, no older than Windows.SetMaxAge.
//
// Combinations: `all: [cond, ...]`, `any: [cond, ...]`, nested up to 8
// levels. Expressions: `expr: "<CEL>"` with one function per metric taking a
// target string ("service:chat") or nothing (the cluster); time metrics
// return a CEL duration, the others a double in base units (0.85 for 85%),
// and `now` is the evaluation time:
//
//	expr: "utilization() > 0.85 && p95_latency('service:chat') > duration('150ms')"
//
// Utilization comes in two meanings. metric: utilization (and the
// operators' utilization_threshold) is allocation by default: the share of
// the GPUs in service that is handed out to running work, what the arbiter
// controls and what the operators' 85% rule is about. A condition that
// adds utilization: busy (or names metric: busy_utilization) reads instead
// the mean busy ratio NVML reports for the GPUs (MetricSources says
// "agents": on the server, the agents' heartbeats; in the simulator, its
// model of each kind of work): an efficiency signal. busy_utilization is
// measured on the cluster, tenants (the GPUs their replicas hold), pools,
// flavors and regions; with no reading it has no value, and the condition
// does not hold (docs/signals.md).
//
//	when: {metric: utilization, utilization: busy, of: tenant:acme, below: 5%}
//
// Actions and their fields:
//
//	scale_down      target (tenant, class, selector), min_capacity (percent of its limit to keep)
//	migrate         target (tenant, class, selector), destination (pool or region)
//	reallocate      resources (list), priority and/or guarantee (GPUs)
//	set_priority    target, priority
//	set_limit       target, limit (GPUs)
//	set_spot_price  target (pool, flavor, region or cluster), price ($/GPU-hour, "$2.50")
//	drain           target (pool or region): stop admitting new work
//	notify          message, optional channel
//
// Units: percentages "85%", times "150ms", "30s", "5m", "2h", "7d", prices
// "$2.50" or "$2.50/h", counts as plain numbers. A threshold without a unit
// ("150", "0.85") or a duration in words ("5 minutes") is rejected with the
// spelling to use instead.
package policy
