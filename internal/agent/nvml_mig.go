//go:build cgo

package agent

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/arbiterhq/arbiter/internal/mig"
)

// computeProfile is NVML's compute-instance profile of n compute slices.
var computeProfile = map[int]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, 3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
}

// migMode reports whether device d is in MIG mode now.
func migMode(d nvml.Device) bool {
	cur, _, ret := d.GetMigMode()
	return ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE
}

// MIGDevice returns the UUID of the MIG device of the instance the
// scheduler placed: on GPU gpu, profile at memory slice start. It finds
// the GPU instance of that profile at that placement, or creates it
// (nvmlDeviceCreateGpuInstanceWithPlacement), and in it a compute
// instance spanning the whole GPU instance, found or created; then the
// MIG device whose GPU instance it is. The scheduler's layout is the
// node's truth: instances that exist at other placements are left alone
// (on a GPU the scheduler owns, they are its own, placed earlier), and
// NVML refuses an instance that would overlap one.
func (v *NVMLInventory) MIGDevice(gpu int, profile string, start int) (string, error) {
	d, ret := v.lib.DeviceGetHandleByIndex(gpu)
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("agent: NVML device %d: %s", gpu, v.lib.ErrorString(ret))
	}
	if !migMode(d) {
		return "", fmt.Errorf("agent: GPU %d is not in MIG mode", gpu)
	}
	name, _ := d.GetName()
	var memMiB int64
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		memMiB = int64(m.Total >> 20)
	}
	g, ok := mig.For(catalogModel(name, memMiB, mig.Models()))
	if !ok {
		return "", fmt.Errorf("agent: GPU %d (%s) is no MIG model Arbiter knows", gpu, name)
	}
	p := g.Index(profile)
	if p < 0 || !g.ValidStart(p, start) {
		return "", fmt.Errorf("agent: GPU %d (%s) has no MIG profile %s at slice %d", gpu, g.Model, profile, start)
	}
	prof := g.Profiles[p]
	info, ret := d.GetGpuInstanceProfileInfo(prof.NVMLID)
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("agent: GPU %d profile %s: %s", gpu, profile, v.lib.ErrorString(ret))
	}
	gis, ret := d.GetGpuInstances(&info)
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("agent: GPU %d instances of %s: %s", gpu, profile, v.lib.ErrorString(ret))
	}
	var gi nvml.GpuInstance
	var giInfo nvml.GpuInstanceInfo
	for _, x := range gis {
		if xi, ret := x.GetInfo(); ret == nvml.SUCCESS && int(xi.Placement.Start) == start {
			gi, giInfo = x, xi
			break
		}
	}
	if gi == nil {
		gi, ret = d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(prof.Memory)})
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("agent: GPU %d: creating MIG instance %s at slice %d: %s", gpu, profile, start, v.lib.ErrorString(ret))
		}
		if giInfo, ret = gi.GetInfo(); ret != nvml.SUCCESS {
			return "", fmt.Errorf("agent: GPU %d: MIG instance info: %s", gpu, v.lib.ErrorString(ret))
		}
	}
	// One compute instance over the whole GPU instance: the compute
	// profile of as many slices.
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(computeProfile[prof.Compute], nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("agent: GPU %d: compute profile of %s: %s", gpu, profile, v.lib.ErrorString(ret))
	}
	cis, ret := gi.GetComputeInstances(&ciInfo)
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("agent: GPU %d: compute instances of %s: %s", gpu, profile, v.lib.ErrorString(ret))
	}
	if len(cis) == 0 {
		if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
			return "", fmt.Errorf("agent: GPU %d: creating the compute instance of %s: %s", gpu, profile, v.lib.ErrorString(ret))
		}
	}
	n, ret := d.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("agent: GPU %d MIG devices: %s", gpu, v.lib.ErrorString(ret))
	}
	for i := range n {
		md, ret := d.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // no MIG device at this index
		}
		if id, ret := md.GetGpuInstanceId(); ret != nvml.SUCCESS || id != int(giInfo.Id) {
			continue
		}
		uuid, ret := md.GetUUID()
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("agent: GPU %d MIG device UUID: %s", gpu, v.lib.ErrorString(ret))
		}
		return uuid, nil
	}
	return "", fmt.Errorf("agent: GPU %d: no MIG device for instance %s at slice %d", gpu, profile, start)
}
