package openb

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"testing"
)

var paperPolicies = []string{"dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd"}

// matrixJob is one run of the published matrix.
type matrixJob struct {
	workload, policy string
	seed             int64
}

// runMatrix runs jobs on all CPUs and returns their results in job order.
func runMatrix(t *testing.T, c *Cluster, jobs []matrixJob) []*Result {
	t.Helper()
	out := make([]*Result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				res, err := Run(c, workload(t, j.workload), j.policy, j.seed)
				if err != nil {
					t.Error(err)
					continue
				}
				out[i] = res
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func publishedWorkloads(pub PublishedSet) []string {
	seen := map[string]bool{}
	var out []string
	for k := range pub {
		if !seen[k.Workload] {
			seen[k.Workload] = true
			out = append(out, k.Workload)
		}
	}
	sort.Strings(out)
	return out
}

// TestMatchesPublished replays every published run of the deterministic
// policies and requires every column within 0.05 pp of the published row.
// With -short only the default workload is checked.
func TestMatchesPublished(t *testing.T) {
	c, pub := load(t)
	workloads := publishedWorkloads(pub)
	if testing.Short() {
		workloads = []string{"default"}
	}
	var jobs []matrixJob
	for _, w := range workloads {
		for _, p := range paperPolicies {
			for seed := int64(42); seed <= 51; seed++ {
				if pub[PublishedKey{w, p, seed}] != nil {
					jobs = append(jobs, matrixJob{w, p, seed})
				}
			}
		}
	}
	if len(jobs) == 0 {
		t.Fatal("no published runs")
	}
	results := runMatrix(t, c, jobs)
	worst := map[string]float64{}
	for i, j := range jobs {
		res := results[i]
		if res == nil {
			continue
		}
		dev, col := MaxAbsDev(res.Curve, pub[PublishedKey{j.workload, j.policy, j.seed}].Curve)
		key := j.workload + "/" + j.policy
		worst[key] = math.Max(worst[key], dev)
		if dev > 0.05+1e-9 {
			t.Errorf("%s %s seed %d: column %d off by %.2f pp", j.workload, j.policy, j.seed, col, dev)
		}
	}
	keys := make([]string, 0, len(worst))
	for k := range worst {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-28s max |dev| %.2f pp", k, worst[k])
	}
}

// TestRandomMatchesPublishedMean compares the 10-seed mean of the random
// policy at 130 % arrived demand with the published mean.
func TestRandomMatchesPublishedMean(t *testing.T) {
	c, pub := load(t)
	workloads := publishedWorkloads(pub)
	if testing.Short() {
		workloads = []string{"default"}
	}
	var jobs []matrixJob
	for _, w := range workloads {
		for seed := int64(42); seed <= 51; seed++ {
			jobs = append(jobs, matrixJob{w, "random", seed})
		}
	}
	results := runMatrix(t, c, jobs)
	for _, w := range workloads {
		var ours, theirs float64
		var n, m int
		for i, j := range jobs {
			if j.workload != w || results[i] == nil {
				continue
			}
			ours += results[i].Curve[130]
			n++
			if p := pub[PublishedKey{w, "random", j.seed}]; p != nil {
				theirs += p.Curve[130]
				m++
			}
		}
		if n == 0 || m == 0 {
			t.Errorf("%s: %d runs, %d published", w, n, m)
			continue
		}
		ours, theirs = ours/float64(n), theirs/float64(m)
		msg := fmt.Sprintf("%s random: mean at 130%% ours %.2f, published %.2f", w, ours, theirs)
		t.Log(msg)
		if math.Abs(ours-theirs) > 0.3 {
			t.Error(msg)
		}
	}
}

// TestArbiterBeatsFGD runs Arbiter's default scorer and FGD on every
// workload of the trace folder, seeds 42..51, and requires fewer unallocated
// GPUs at 130 % arrived demand on average on each of them
// (docs/benchmarks/openb.md has the table). With -short only the default
// workload is checked.
func TestArbiterBeatsFGD(t *testing.T) {
	c, _ := load(t)
	workloads, err := Workloads(testTraceDir)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		workloads = []string{"default"}
	}
	var jobs []matrixJob
	for _, w := range workloads {
		for seed := int64(42); seed <= 51; seed++ {
			jobs = append(jobs, matrixJob{w, "fgd", seed}, matrixJob{w, "arbiter", seed})
		}
	}
	results := runMatrix(t, c, jobs)
	idle := map[string]map[string]float64{}
	for _, w := range workloads {
		idle[w] = map[string]float64{}
	}
	for i, j := range jobs {
		if results[i] != nil {
			idle[j.workload][j.policy] += UnallocatedGPUs(results[i].Curve[130], c.GPUs) / 10
		}
	}
	var total [2]float64
	for _, w := range workloads {
		f, a := idle[w]["fgd"], idle[w]["arbiter"]
		total[0] += f
		total[1] += a
		t.Logf("%-12s unallocated GPUs at 130%%: fgd %6.1f, arbiter %6.1f (%+.1f)", w, f, a, a-f)
		if a >= f {
			t.Errorf("%s: arbiter leaves %.1f GPUs idle, fgd %.1f", w, a, f)
		}
	}
	t.Logf("total: fgd %.1f, arbiter %.1f", total[0], total[1])
}
