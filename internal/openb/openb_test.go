package openb

import (
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

const testTraceDir = "../../../shared/traces/alibaba-gpu-v2023"

var (
	loadOnce   sync.Once
	testClust  *Cluster
	testLoads  = map[string]*Workload{}
	testPub    PublishedSet
	testLoadMu sync.Mutex
)

// load returns the shared cluster and published results, skipping the test
// when the trace folder is absent.
func load(t testing.TB) (*Cluster, PublishedSet) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(testTraceDir, NodeFile)); err != nil {
		t.Skipf("trace folder not present: %v", err)
	}
	loadOnce.Do(func() {
		var err error
		if testClust, err = LoadCluster(testTraceDir); err != nil {
			panic(err)
		}
		if testPub, err = ReadPublished(ExpectedDir(testTraceDir)); err != nil {
			panic(err)
		}
	})
	return testClust, testPub
}

func workload(t testing.TB, name string) *Workload {
	t.Helper()
	testLoadMu.Lock()
	defer testLoadMu.Unlock()
	if w, ok := testLoads[name]; ok {
		return w
	}
	w, err := LoadWorkload(testTraceDir, name)
	if err != nil {
		t.Fatal(err)
	}
	testLoads[name] = w
	return w
}

func TestCheckpointsDefaultSeed42(t *testing.T) {
	c, _ := load(t)
	if len(c.Nodes) != 1213 || c.GPUs != 6212 {
		t.Fatalf("cluster: %d nodes, %d GPUs", len(c.Nodes), c.GPUs)
	}
	w := workload(t, "default")
	if len(w.Typical) != 35 {
		t.Errorf("typical pods: %d, want 35", len(w.Typical))
	}
	a := NewArrivals(c, w, 42)
	if len(a.Order) != 10866 || a.Demand != 8075080 {
		t.Errorf("arrivals: %d pods, S = %d; want 10866, 8075080", len(a.Order), a.Demand)
	}
	first := []string{"openb-pod-0255", "openb-pod-1685", "openb-pod-6784"}
	for i, name := range first {
		if got := w.Pods[a.Order[i]].Name; got != name {
			t.Errorf("pod %d = %s, want %s", i, got, name)
		}
	}
	ranks := map[string]int{"openb-node-0260": 0, "openb-node-0858": 1, "openb-node-1073": 1130}
	for i, n := range c.Nodes {
		if want, ok := ranks[n.Name]; ok && a.Rank[i] != want {
			t.Errorf("rank of %s = %d, want %d", n.Name, a.Rank[i], want)
		}
	}
}

func TestColumn130DefaultSeed42(t *testing.T) {
	c, _ := load(t)
	w := workload(t, "default")
	want := map[string]float64{"dotprod": 90.54, "gpuclustering": 91.53, "gpupacking": 91.57,
		"bestfit": 93.13, "fgd": 95.29}
	for policy, v := range want {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			res, err := Run(c, w, policy, 42)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Curve[130]; math.Abs(got-v) > 1e-9 {
				t.Errorf("column 130 = %.2f, want %.2f", got, v)
			}
			if policy == "fgd" && (res.Used != 5919410 || res.Failed != 2532) {
				t.Errorf("fgd: used %d, failed %d; want 5919410, 2532", res.Used, res.Failed)
			}
		})
	}
}
