// Package agent is Arbiter's node agent: it registers a machine with the
// control plane, reports its GPUs with every heartbeat, runs the replicas
// the server assigns to it on exactly the GPUs they were given, stops them
// gracefully when they are preempted (SIGTERM, the grace period, SIGKILL),
// and reports starts, exits and stops.
package agent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/mig"
)

// Inventory reports a machine's GPUs: what they are, and their current
// utilization and memory use (read at every heartbeat).
type Inventory interface {
	GPUs() ([]api.GPUInfo, error)
}

// ParseInventory understands "auto" (NVML; needs a build with -tags nvml)
// and "fake:[N x]MODEL[:mig]", e.g. "fake:8xA100-80G", or
// "fake:2xA100-80G:mig" for GPUs in MIG mode. nodeID makes fake UUIDs
// unique per node.
func ParseInventory(spec, nodeID string) (Inventory, error) {
	if spec == "" || spec == "auto" {
		return autoInventory()
	}
	rest, ok := strings.CutPrefix(spec, "fake:")
	rest, migMode := strings.CutSuffix(rest, ":mig")
	if !ok {
		return nil, fmt.Errorf("agent: --gpus %q: use auto or fake:8xA100-80G", spec)
	}
	n := 1
	if i := strings.IndexAny(rest, "x"); i > 0 {
		if v, err := strconv.Atoi(rest[:i]); err == nil {
			n, rest = v, rest[i+1:]
		}
	}
	if n < 0 || n > 64 || rest == "" {
		return nil, fmt.Errorf("agent: --gpus %q: use fake:NxMODEL with N between 0 and 64", spec)
	}
	f := Fake(nodeID, n, rest)
	for i := range f.gpus {
		f.gpus[i].MIG = migMode
	}
	return f, nil
}

// MIGResolver is an Inventory that can run replicas on MIG instances: it
// returns the MIG device UUID ("MIG-…") of the instance of profile at
// memory slice start on GPU gpu, creating the instance when it does not
// exist (NVMLInventory.MIGDevice).
type MIGResolver interface {
	MIGDevice(gpu int, profile string, start int) (string, error)
}

// FakeInventory is a machine of identical GPUs that are always idle.
type FakeInventory struct{ gpus []api.GPUInfo }

// MIGDevice gives a fake MIG device UUID derived from the GPU's, for
// fake GPUs in MIG mode (fake:...:mig).
func (f *FakeInventory) MIGDevice(gpu int, profile string, start int) (string, error) {
	if gpu < 0 || gpu >= len(f.gpus) || !f.gpus[gpu].MIG {
		return "", fmt.Errorf("agent: fake GPU %d is not in MIG mode", gpu)
	}
	g, ok := mig.For(f.gpus[gpu].Model)
	if !ok {
		return "", fmt.Errorf("agent: fake GPU %d (%s) has no MIG", gpu, f.gpus[gpu].Model)
	}
	if p := g.Index(profile); p < 0 || !g.ValidStart(p, start) {
		return "", fmt.Errorf("agent: fake GPU %d (%s) has no MIG profile %q at slice %d", gpu, g.Model, profile, start)
	}
	return fmt.Sprintf("MIG-%s-%s-%d", strings.TrimPrefix(f.gpus[gpu].UUID, "GPU-"), profile, start), nil
}

// Fake returns n GPUs of a model with UUIDs derived from the node.
func Fake(nodeID string, n int, model string) *FakeInventory {
	mem := int64(80 * 1024)
	if i := strings.LastIndexByte(model, '-'); i >= 0 {
		if g, err := strconv.Atoi(strings.TrimSuffix(model[i+1:], "G")); err == nil {
			mem = int64(g) * 1024
		}
	}
	f := &FakeInventory{}
	for i := range n {
		f.gpus = append(f.gpus, api.GPUInfo{Index: i, UUID: fmt.Sprintf("GPU-fake-%s-%d", nodeID, i), Model: model, MemoryMiB: mem})
	}
	return f
}

// GPUs returns the fake GPUs.
func (f *FakeInventory) GPUs() ([]api.GPUInfo, error) {
	return append([]api.GPUInfo(nil), f.gpus...), nil
}

// catalogModel maps a GPU name as NVML gives it ("NVIDIA H200",
// "NVIDIA A100-SXM4-80GB") and its memory to a catalog model name
// ("H200-141G", "A100-80G") among known; "" when none fits.
func catalogModel(name string, memMiB int64, known []string) string {
	up := strings.ToUpper(name)
	best, bestDiff := "", int64(1<<62)
	for _, m := range known {
		family, gib, _ := strings.Cut(m, "-")
		if !strings.Contains(up, strings.ToUpper(family)) {
			continue
		}
		g, _ := strconv.Atoi(strings.TrimSuffix(gib, "G"))
		d := memMiB/1024 - int64(g)
		if d < 0 {
			d = -d
		}
		if d < bestDiff {
			best, bestDiff = m, d
		}
	}
	return best
}
