package sim

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/trace"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// TraceInput replays a real cluster trace as the scenario's fleet and
// workload: today the Alibaba openb node and pod lists (the FGD paper's
// trace), with their creation and deletion times.
type TraceInput struct {
	// Format is "openb".
	Format string `yaml:"format"`
	// Dir holds openb_node_list_gpu_node.csv and openb_pod_list_<Workload>.csv;
	// a relative path is relative to the current directory.
	Dir      string `yaml:"dir"`
	Workload string `yaml:"workload"`
	// Tenant owns every pod; Region, Zone name the trace's machines, which
	// are grouped into blocks of BlockSize nodes in file order.
	Tenant    string `yaml:"tenant"`
	Region    string `yaml:"region"`
	BlockSize int    `yaml:"block_size"`
	// Speedup divides every time and duration of the trace (2: twice as
	// fast).
	Speedup float64 `yaml:"speedup"`
	// From starts the replay at this point of the trace (trace time): pods
	// created earlier that are still alive then arrive at the start.
	From time.Duration `yaml:"from"`
}

// Files returns the trace files the replay reads: the node list, then the
// pod list.
func (ti *TraceInput) Files() []string {
	return []string{
		filepath.Join(ti.Dir, "openb_node_list_gpu_node.csv"),
		filepath.Join(ti.Dir, "openb_pod_list_"+ti.Workload+".csv"),
	}
}

// tracePod is one pod of the trace as a workload arrival.
type tracePod struct {
	at      time.Duration
	runtime time.Duration // 0: never departs
	spec    workload.Spec
}

// loadTrace reads the trace, extends the catalog with its machine shapes
// and returns the fleet spec and the pods to replay. CPU-only pods are left
// out: Arbiter schedules GPUs.
func loadTrace(ti *TraceInput, cat *fleet.Catalog) (fleet.Spec, []tracePod, error) {
	if ti.Format != "openb" {
		return fleet.Spec{}, nil, fmt.Errorf("sim: trace.format %q: only openb is supported", ti.Format)
	}
	files := ti.Files()
	nodes, err := trace.ReadOpenBNodesFile(files[0])
	if err != nil {
		return fleet.Spec{}, nil, err
	}
	pods, err := trace.ReadOpenBPodsFile(files[1])
	if err != nil {
		return fleet.Spec{}, nil, err
	}
	bs := ti.BlockSize
	if bs <= 0 {
		bs = 32
	}
	speed := ti.Speedup
	if speed <= 0 {
		speed = 1
	}
	// One SKU per machine shape, named after it.
	var extra fleet.Catalog
	seenModel, seenSKU := map[fleet.ModelID]bool{}, map[fleet.SKUName]bool{}
	var models []fleet.ModelID
	region := fleet.RegionSpec{Name: ti.Region, Zones: []fleet.ZoneSpec{{Name: "1"}}}
	zone := &region.Zones[0]
	for i, n := range nodes {
		if n.GPUs == 0 || n.Model == "" {
			continue
		}
		m := fleet.ModelID(n.Model)
		if _, ok := cat.Model(m); !ok && !seenModel[m] {
			extra.Models = append(extra.Models, fleet.Model{Name: m, TrainSpeed: 1, InferSpeed: 1})
		}
		if !seenModel[m] {
			seenModel[m] = true
			models = append(models, m)
		}
		sku := fleet.SKUName(fmt.Sprintf("openb_%s_%dgpu_%dcpu_%dgib", n.Model, n.GPUs, n.CPUMilli/1000, n.MemoryMiB/1024))
		if !seenSKU[sku] {
			seenSKU[sku] = true
			extra.SKUs = append(extra.SKUs, fleet.SKU{Name: sku, Model: m, GPUs: n.GPUs, VCPUs: int(n.CPUMilli / 1000),
				MemoryGiB: int(n.MemoryMiB / 1024), QuotaFamily: "openb"})
		}
		if i%bs == 0 || len(zone.Blocks) == 0 {
			zone.Blocks = append(zone.Blocks, fleet.BlockSpec{Name: fleet.BlockID(fmt.Sprintf("openb-b%03d", len(zone.Blocks)))})
		}
		b := &zone.Blocks[len(zone.Blocks)-1]
		if k := len(b.Nodes); k > 0 && b.Nodes[k-1].SKU == sku {
			b.Nodes[k-1].Count++
		} else {
			b.Nodes = append(b.Nodes, fleet.GroupSpec{SKU: sku, Count: 1})
		}
	}
	if err := cat.Merge(&extra); err != nil {
		return fleet.Spec{}, nil, err
	}
	var out []tracePod
	qos := map[string]map[string]string{} // one labels map per QoS, shared
	for _, p := range pods {
		if p.NumGPU == 0 || p.CreationTime == trace.NoTime {
			continue
		}
		spec := workload.Spec{
			Name: workload.ID(p.Name), Kind: workload.KindBatch, Tenant: ti.Tenant,
			Replicas: 1, CPU: resource.MilliCPU(p.CPUMilli), Memory: resource.MiB(p.MemoryMiB),
			Regions: []string{ti.Region}, Labels: qos[p.QoS],
		}
		if spec.Labels == nil {
			spec.Labels = map[string]string{"class": "qos_" + p.QoS}
			qos[p.QoS] = spec.Labels
		}
		switch p.QoS {
		case "LS", "Guaranteed":
			spec.Priority = workload.PriorityHigh
		case "BE":
			spec.Priority, spec.Preemptible = workload.PriorityLow, true
		default:
			spec.Priority = workload.PriorityNormal
		}
		milli := min(max(p.GPUMilli, 1), resource.PerGPU)
		if p.NumGPU == 1 && milli < resource.PerGPU {
			spec.GPUs = resource.MilliGPU(milli)
		} else {
			spec.GPUs = resource.GPUs(p.NumGPU)
		}
		for _, m := range p.AllowedModels() {
			if seenModel[fleet.ModelID(m)] {
				spec.Flavors = append(spec.Flavors, fleet.ModelID(m))
			}
		}
		if len(spec.Flavors) == 0 {
			spec.Flavors = slices.Clone(models)
		}
		from := int64(ti.From / time.Second)
		created, deleted := p.CreationTime, p.DeletionTime
		if deleted != trace.NoTime && deleted <= from {
			continue // gone before the replay starts
		}
		created = max(created, from)
		tp := tracePod{at: time.Duration(float64(created-from) / speed * float64(time.Second)), spec: spec}
		if deleted != trace.NoTime && deleted > created {
			tp.runtime = time.Duration(float64(deleted-created) / speed * float64(time.Second))
		}
		out = append(out, tp)
	}
	slices.SortStableFunc(out, func(a, b tracePod) int { return int(a.at - b.at) })
	return fleet.Spec{Regions: []fleet.RegionSpec{region}}, out, nil
}
