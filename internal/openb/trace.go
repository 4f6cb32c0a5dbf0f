package openb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/arbiterhq/arbiter/internal/sched/score"
	"github.com/arbiterhq/arbiter/internal/trace"
)

// File names inside a trace folder.
const (
	NodeFile      = "openb_node_list_gpu_node.csv"
	PodFilePrefix = "openb_pod_list_"
	podFileSuffix = ".csv"
)

// ErrUnknownWorkload is returned for a workload with no pod list.
var ErrUnknownWorkload = errors.New("openb: unknown workload")

// MaxPodsPerNode is the kube pod limit per node in the reference (never binds).
const MaxPodsPerNode = 1001

// Cluster is the openb cluster: its nodes sorted by name.
type Cluster struct {
	Nodes     []trace.OpenBNode // sorted by name (byte-wise)
	GPUs      int               // total GPUs
	GPUMilli  int64             // total GPU milli (GPUs × 1000)
	Models    []string          // distinct GPU models, sorted
	modelOf   []int             // node index -> index into Models (-1 without GPUs)
	maxGPUsOn int               // most GPUs on one node
}

// NewCluster builds a Cluster from node rows.
func NewCluster(nodes []trace.OpenBNode) (*Cluster, error) {
	if len(nodes) == 0 {
		return nil, errors.New("openb: empty node list")
	}
	c := &Cluster{Nodes: append([]trace.OpenBNode(nil), nodes...)}
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })
	seen := map[string]bool{}
	for _, n := range c.Nodes {
		c.GPUs += n.GPUs
		c.maxGPUsOn = max(c.maxGPUsOn, n.GPUs)
		if n.GPUs > 0 && !seen[n.Model] {
			seen[n.Model] = true
			c.Models = append(c.Models, n.Model)
		}
	}
	if c.maxGPUsOn > 64 {
		return nil, fmt.Errorf("openb: a node has %d GPUs; at most 64 are supported", c.maxGPUsOn)
	}
	if len(c.Models) > 63 {
		return nil, fmt.Errorf("openb: %d GPU models; at most 63 are supported", len(c.Models))
	}
	sort.Strings(c.Models)
	c.modelOf = make([]int, len(c.Nodes))
	for i, n := range c.Nodes {
		c.modelOf[i] = -1
		if n.GPUs > 0 {
			c.modelOf[i] = sort.SearchStrings(c.Models, n.Model)
		}
	}
	c.GPUMilli = int64(c.GPUs) * score.MilliPerGPU
	return c, nil
}

// LoadCluster reads the GPU node list of a trace folder.
func LoadCluster(dir string) (*Cluster, error) {
	nodes, err := trace.ReadOpenBNodesFile(filepath.Join(dir, NodeFile))
	if err != nil {
		return nil, err
	}
	return NewCluster(nodes)
}

// Pod is one trace pod as the replay sees it.
type Pod struct {
	Name  string
	Req   score.Request
	Class int32 // index of the pod's request class in its Workload
}

// Workload is one pod list: its pods sorted by name, the request classes
// (pods with identical requests share a class), and FGD's typical pods.
type Workload struct {
	Name    string // e.g. "default" for openb_pod_list_default.csv
	Pods    []Pod  // sorted by name (byte-wise)
	Classes []score.Request
	Typical []score.TypicalPod // computed from all pods, 95 % coverage
	Demand  int64              // Σ k·m over the pods
}

// PublishedName is the workload's name in the published results.
func (w *Workload) PublishedName() string { return PodFilePrefix + w.Name }

// NewWorkload converts pod rows as the reference does: every pod is kept
// (CPU-only and every phase), gpu_milli counts only when num_gpu > 0 and is
// clamped to 0..1000, gpu_spec gives the allowed models.
func NewWorkload(name string, rows []trace.OpenBPod) *Workload {
	w := &Workload{Name: name, Pods: make([]Pod, len(rows))}
	for i := range rows {
		r := &rows[i]
		m := int64(0)
		if r.NumGPU > 0 {
			m = min(max(r.GPUMilli, 0), score.MilliPerGPU)
		}
		w.Pods[i] = Pod{Name: r.Name, Req: score.Request{
			CPU: r.CPUMilli, Mem: r.MemoryMiB, GPUs: r.NumGPU, Milli: m, Models: r.AllowedModels(),
		}}
	}
	sort.Slice(w.Pods, func(i, j int) bool { return w.Pods[i].Name < w.Pods[j].Name })
	type key struct {
		cpu, mem, m int64
		k           int
		spec        string
	}
	classes := map[key]int32{}
	reqs := make([]score.Request, len(w.Pods))
	for i := range w.Pods {
		p := &w.Pods[i]
		k := key{p.Req.CPU, p.Req.Mem, p.Req.Milli, p.Req.GPUs, strings.Join(p.Req.Models, "|")}
		id, ok := classes[k]
		if !ok {
			id = int32(len(w.Classes))
			classes[k] = id
			w.Classes = append(w.Classes, p.Req)
		}
		p.Class = id
		reqs[i] = p.Req
		w.Demand += p.Req.GPUDemand()
	}
	w.Typical = score.TypicalPods(reqs, 95)
	return w
}

// LoadWorkload reads openb_pod_list_<name>.csv of a trace folder. name may
// also be given with the prefix ("openb_pod_list_default").
func LoadWorkload(dir, name string) (*Workload, error) {
	name = strings.TrimSuffix(strings.TrimPrefix(name, PodFilePrefix), podFileSuffix)
	path := filepath.Join(dir, PodFilePrefix+name+podFileSuffix)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrUnknownWorkload, name, err)
	}
	rows, err := trace.ReadOpenBPodsFile(path)
	if err != nil {
		return nil, err
	}
	return NewWorkload(name, rows), nil
}

// Workloads lists the workload names of a trace folder, sorted.
func Workloads(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, PodFilePrefix+"*"+podFileSuffix))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), PodFilePrefix), podFileSuffix))
	}
	sort.Strings(names)
	return names, nil
}
