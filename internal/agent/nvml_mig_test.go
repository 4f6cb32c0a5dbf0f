//go:build cgo

package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// withMIGDevices adds to go-nvml's mock device what the driver does and
// the mock does not: a MIG device per GPU instance that has a compute
// instance, with a UUID, at indices in GPU-instance ID order.
func withMIGDevices(dev *server.Device) {
	devices := func() []*server.GpuInstance {
		dev.RLock()
		defer dev.RUnlock()
		var out []*server.GpuInstance
		for gi := range dev.GpuInstances {
			gi.RLock()
			n := len(gi.ComputeInstances)
			gi.RUnlock()
			if n > 0 {
				out = append(out, gi)
			}
		}
		slices.SortFunc(out, func(a, b *server.GpuInstance) int { return int(a.Info.Id) - int(b.Info.Id) })
		return out
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		gis := devices()
		if i < 0 || i >= len(gis) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		gi := gis[i]
		return &mock.Device{
			GetGpuInstanceIdFunc: func() (int, nvml.Return) { return int(gi.Info.Id), nvml.SUCCESS },
			GetUUIDFunc: func() (string, nvml.Return) {
				return fmt.Sprintf("MIG-%s-gi%d", strings.TrimPrefix(dev.UUID, "GPU-"), gi.Info.Id), nvml.SUCCESS
			},
		}, nvml.SUCCESS
	}
}

// TestNVMLMIG runs the agent's MIG path on go-nvml's mock DGX H100: it
// reports MIG mode per GPU, creates the GPU instance the scheduler placed
// at its placement (and its compute instance) when absent, finds it when
// present, and gives its MIG device's UUID; it refuses profiles and starts
// the model does not have and GPUs not in MIG mode.
func TestNVMLMIG(t *testing.T) {
	lib := dgxh100.New()
	lib.ErrorStringFunc = func(r nvml.Return) string { return fmt.Sprintf("NVML error %d", int(r)) }
	for i, d := range lib.Devices {
		dev := d.(*server.Device)
		if i < 2 {
			dev.SetMigMode(nvml.DEVICE_MIG_ENABLE)
		}
		withMIGDevices(dev)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.SUCCESS }
	}
	inv, err := NewNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := inv.GPUs()
	if err != nil {
		t.Fatal(err)
	}
	if !gpus[0].MIG || !gpus[1].MIG || gpus[2].MIG || allMIG(gpus) {
		t.Fatalf("MIG mode read as %v %v %v (all %v)", gpus[0].MIG, gpus[1].MIG, gpus[2].MIG, allMIG(gpus))
	}
	u1, err := inv.MIGDevice(0, "3g.40gb", 4)
	if err != nil || !strings.HasPrefix(u1, "MIG-") {
		t.Fatalf("MIGDevice(0, 3g.40gb, 4) = %q, %v", u1, err)
	}
	u2, err := inv.MIGDevice(0, "1g.10gb", 0)
	if err != nil || u2 == u1 {
		t.Fatalf("MIGDevice(0, 1g.10gb, 0) = %q, %v (the 3g's is %q)", u2, err, u1)
	}
	again, err := inv.MIGDevice(0, "3g.40gb", 4)
	if err != nil || again != u1 {
		t.Fatalf("MIGDevice again = %q, %v; want the same instance %q", again, err, u1)
	}
	dev := lib.Devices[0].(*server.Device)
	if n := len(dev.GpuInstances); n != 2 {
		t.Fatalf("%d GPU instances on GPU 0, want 2 (found, not created again)", n)
	}
	for gi := range dev.GpuInstances {
		want := map[uint32]uint32{nvml.GPU_INSTANCE_PROFILE_3_SLICE: 4, nvml.GPU_INSTANCE_PROFILE_1_SLICE: 0}
		if st, ok := want[gi.Info.ProfileId]; !ok || gi.Info.Placement.Start != st || len(gi.ComputeInstances) != 1 {
			t.Errorf("GPU instance %+v with %d compute instances", gi.Info.Placement, len(gi.ComputeInstances))
		}
	}
	for _, tc := range []struct {
		gpu     int
		profile string
		start   int
		says    string
	}{
		{0, "3g.20gb", 0, "no MIG profile 3g.20gb"}, // an A100-40G profile
		{0, "3g.40gb", 2, "at slice 2"},
		{2, "1g.10gb", 0, "not in MIG mode"},
		{99, "1g.10gb", 0, "NVML device 99"},
	} {
		if _, err := inv.MIGDevice(tc.gpu, tc.profile, tc.start); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("MIGDevice(%d, %s, %d) = %v, want %q", tc.gpu, tc.profile, tc.start, err, tc.says)
		}
	}
}

func TestFakeMIG(t *testing.T) {
	inv, err := ParseInventory("fake:2xA100-80G:mig", "n1")
	if err != nil {
		t.Fatal(err)
	}
	gpus, _ := inv.GPUs()
	if len(gpus) != 2 || !allMIG(gpus) || gpus[0].Model != "A100-80G" {
		t.Fatalf("fake MIG GPUs %+v", gpus)
	}
	u, err := inv.(MIGResolver).MIGDevice(1, "3g.40gb", 4)
	if err != nil || u != "MIG-fake-n1-1-3g.40gb-4" {
		t.Fatalf("fake MIG device %q %v", u, err)
	}
	if _, err := inv.(MIGResolver).MIGDevice(1, "3g.40gb;rm -rf", 4); err == nil {
		t.Fatal("fake MIG device for an unknown profile")
	}
	if _, err := inv.(MIGResolver).MIGDevice(1, "3g.40gb", 3); err == nil {
		t.Fatal("fake MIG device at a start NVIDIA does not allow")
	}
	plain, _ := ParseInventory("fake:2xA100-80G", "n1")
	if _, err := plain.(MIGResolver).MIGDevice(0, "3g.40gb", 4); err == nil {
		t.Fatal("fake GPU not in MIG mode gave a MIG device")
	}
}
