//go:build cgo

package agent

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// TestNVMLMockH200 reads go-nvml's own mock of an 8x H200 machine through
// the same code --gpus auto uses on real hosts.
func TestNVMLMockH200(t *testing.T) {
	lib := dgxh200.New()
	for i, d := range lib.Devices {
		dev := d.(*server.Device)
		util := uint32(10 * i)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: util, Memory: util / 2}, nvml.SUCCESS
		}
	}
	inv, err := NewNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := inv.GPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 8 {
		t.Fatalf("%d GPUs, want 8", len(gpus))
	}
	uuids := map[string]bool{}
	for i, g := range gpus {
		if g.Index != i || !strings.Contains(g.Model, "H200") || g.UUID == "" || uuids[g.UUID] {
			t.Fatalf("GPU %d: %+v", i, g)
		}
		uuids[g.UUID] = true
		if g.MemoryMiB < 140*1024 || g.MemoryMiB > 145*1024 {
			t.Fatalf("GPU %d memory %d MiB, want about 141 GiB", i, g.MemoryMiB)
		}
		if g.UtilizationPct != 10*i {
			t.Fatalf("GPU %d utilization %d, want %d", i, g.UtilizationPct, 10*i)
		}
	}
	if m := catalogModel(gpus[0].Model, gpus[0].MemoryMiB, []string{"A100-80G", "H100-80G", "H200-141G"}); m != "H200-141G" {
		t.Fatalf("catalog model %q, want H200-141G (NVML name %q)", m, gpus[0].Model)
	}
}
