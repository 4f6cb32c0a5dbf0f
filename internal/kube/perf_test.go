package kube

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestKubePerf measures, against the real kube-apiserver, pods bound per
// second at 1,000 Nodes (10 H100s each) and 10,000 pods of Arbiter's
// created as fast as 16 clients can, and each pod's time from its
// creation (the Create call's return) to its binding (the watch event
// showing spec.nodeName). Minutes long: run with ARBITER_KUBE_PERF=1 (or =NODES,PODS)
// (docs/perf.md, "Kubernetes mode").
func TestKubePerf(t *testing.T) {
	if os.Getenv("ARBITER_KUBE_PERF") == "" {
		t.Skip("ARBITER_KUBE_PERF=1 runs it (minutes)")
	}
	nodes, pods, workers := 1000, 10000, 16
	if _, err := fmt.Sscanf(os.Getenv("ARBITER_KUBE_PERF"), "%d,%d", &nodes, &pods); err != nil {
		nodes, pods = 1000, 10000 // ARBITER_KUBE_PERF=NODES,PODS sizes a shorter run
	}
	e := startE2E(t)
	if os.Getenv("ARBITER_KUBE_PERF_CYCLES") != "" {
		e.onCycle = func(r CycleReport) {
			if r.Result.Bound+r.Result.Conditions > 0 {
				t.Logf("cycle took %v: pending %d bound %d conditions %d errors %d", r.Took.Round(time.Millisecond), r.Pending, r.Result.Bound, r.Result.Conditions, len(r.Result.Errors))
			}
		}
	}
	setup := time.Now()
	client := e.client
	par(workers, nodes, func(i int) { e.node(fmt.Sprintf("n%04d", i), 10, fmt.Sprintf("blk%02d", i%50)) })
	e.namespace("a")
	e.create(TenantGVR, "", tenantObj("a", "10000", "", "a"))
	// Backlog mode: the pods are all created first, then the scheduler
	// starts, so the drain rate is Arbiter's and the API server's, not
	// the rate the test's clients create pods at.
	backlog := os.Getenv("ARBITER_KUBE_PERF_BACKLOG") != ""
	var cycles *atomic.Int64
	if !backlog {
		cycles, _, _ = e.run("r1")
		e.cyclesPass(cycles, 1)
	}
	t.Logf("%d nodes set up in %v", nodes, time.Since(setup).Round(time.Millisecond))

	var mu sync.Mutex
	created := map[string]time.Time{}
	boundAt := map[string]time.Time{}
	allBound := make(chan struct{})
	watches := 0
	// A watch the server ends is resumed from the last resourceVersion
	// seen, so that no binding goes unseen.
	go func() {
		rv := ""
		for e.ctx.Err() == nil {
			w, err := client.CoreV1().Pods("a").Watch(e.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				continue
			}
			mu.Lock()
			watches++
			mu.Unlock()
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type != watch.Modified || p.Spec.NodeName == "" {
					continue
				}
				mu.Lock()
				if _, seen := boundAt[p.Name]; !seen {
					boundAt[p.Name] = time.Now()
					if len(boundAt) == pods {
						close(allBound)
					}
				}
				mu.Unlock()
			}
		}
	}()
	start := time.Now()
	par(workers, pods, func(i int) {
		p := gpuPod("a", fmt.Sprintf("p%05d", i), 1, nil)
		p.UID, p.CreationTimestamp = "", metav1.Time{}
		p.Spec.Containers[0].Image = "registry.k8s.io/pause:3.10"
		if _, err := client.CoreV1().Pods("a").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		created[p.Name] = time.Now()
		mu.Unlock()
	})
	createdIn := time.Since(start)
	if backlog {
		start = time.Now()
		cycles, _, _ = e.run("r1")
	}
	select {
	case <-allBound:
	case <-time.After(9 * time.Minute):
		t.Fatalf("%d of %d pods bound", len(boundAt), pods)
	}
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	for name, b := range boundAt {
		if c, ok := created[name]; ok {
			if backlog {
				c = start // time from the scheduler's start
			}
			lat = append(lat, max(0, b.Sub(c)))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))] }
	what := "creation→binding"
	if backlog {
		what = "backlog: scheduler start→binding"
	}
	t.Logf("nodes %d pods %d: created in %v (%.0f pods/s), all bound in %v: %.0f pods/s bound; %s p50 %v p99 %v; cycles %d, watches %d",
		nodes, pods, createdIn.Round(time.Millisecond), float64(pods)/createdIn.Seconds(), took.Round(time.Millisecond), float64(pods)/took.Seconds(), what,
		q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), cycles.Load(), watches)
}

// par runs f(0..n-1) on k goroutines.
func par(k, n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < k; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
