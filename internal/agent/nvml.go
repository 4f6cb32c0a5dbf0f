//go:build cgo

package agent

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/arbiterhq/arbiter/internal/api"
)

// NVMLInventory reads GPUs through NVML. It takes the nvml.Interface so
// that tests can pass go-nvml's mock machines; --gpus auto passes the real
// library (builds with -tags nvml).
type NVMLInventory struct{ lib nvml.Interface }

// NewNVML initialises NVML and returns the inventory.
func NewNVML(lib nvml.Interface) (*NVMLInventory, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("agent: NVML init: %s", lib.ErrorString(ret))
	}
	return &NVMLInventory{lib: lib}, nil
}

// GPUs returns each GPU's index, UUID, name, memory, memory use and
// utilization.
func (v *NVMLInventory) GPUs() ([]api.GPUInfo, error) {
	n, ret := v.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("agent: NVML device count: %s", v.lib.ErrorString(ret))
	}
	out := make([]api.GPUInfo, 0, n)
	for i := range n {
		d, ret := v.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("agent: NVML device %d: %s", i, v.lib.ErrorString(ret))
		}
		g := api.GPUInfo{Index: i}
		if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("agent: NVML device %d UUID: %s", i, v.lib.ErrorString(ret))
		}
		if g.Model, ret = d.GetName(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("agent: NVML device %d name: %s", i, v.lib.ErrorString(ret))
		}
		// The server refuses readings out of range (a hostile node must
		// not poison its metrics): a driver's quirks are clamped here.
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryMiB, g.MemoryUsedMiB = int64(min(m.Total>>20, 1<<24)), int64(min(m.Used, m.Total)>>20)
			g.MemoryUsedMiB = min(g.MemoryUsedMiB, g.MemoryMiB)
		}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			g.UtilizationPct = int(min(u.Gpu, 100))
		}
		g.MIG = migMode(d)
		out = append(out, g)
	}
	return out, nil
}
