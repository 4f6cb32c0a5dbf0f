// Package sim is Arbiter's discrete-event simulator: it replays a scenario
// (fleet, tenants, reservations, workload generators, inference services)
// under a strategy (quotas, partitions, options, class overrides) on a
// virtual clock, calling the same sched.Schedule the server uses, and
// reports what each strategy did to customers, inference and training.
//
//	sc, _ := sim.LoadScenario("")                       // embedded contention scenario
//	st, _ := sim.LoadStrategy(examples.Strategies, "strategies/hybrid")
//	s, _ := sim.New(sc, st, sim.Options{Seed: 1})
//	res := s.Run()                                      // *StrategyResult
//
// Time advances in Steps of one minute: arrivals and completions fall on
// step boundaries; each step serves inference (internal/serving), moves
// spot prices, runs a scheduling cycle when something changed, and samples
// metrics. A preempted workload loses the work since its last checkpoint
// and is requeued; its claimant's progress starts after the victims'
// grace period (30 s notice for spot). A customer request still pending
// after its patience is a capacity failure.
//
// The same scenario, strategy and seed give the same results, byte for
// byte.
package sim
