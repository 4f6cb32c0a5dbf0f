package trace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const traceDir = "../../../shared/traces/alibaba-gpu-v2023"

func TestReadOpenBNodes(t *testing.T) {
	in := "sn,cpu_milli,memory_mib,gpu,model\n" +
		"openb-node-0000,64000,262144,2,P100\n" +
		"openb-node-0001,32000,131072,0,\n"
	got, err := ReadOpenBNodes(strings.NewReader(in), "nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []OpenBNode{
		{Name: "openb-node-0000", CPUMilli: 64000, MemoryMiB: 262144, GPUs: 2, Model: "P100"},
		{Name: "openb-node-0001", CPUMilli: 32000, MemoryMiB: 131072},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestReadOpenBPodsColumnsByName(t *testing.T) {
	// Reordered columns, an unknown column, a float-written integer and
	// a pod list without the optional columns.
	in := "gpu_milli,name,extra,num_gpu,memory_mib,cpu_milli,gpu_spec,creation_time,deletion_time\n" +
		"460.0,p1,x,1,12288,6000,V100M16|V100M32,5,90\n" +
		"1000,p2,y,2,16384,12000,,7,\n"
	got, err := ReadOpenBPods(strings.NewReader(in), "pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []OpenBPod{
		{Name: "p1", CPUMilli: 6000, MemoryMiB: 12288, NumGPU: 1, GPUMilli: 460, GPUSpec: "V100M16|V100M32",
			CreationTime: 5, DeletionTime: 90, ScheduledTime: NoTime},
		{Name: "p2", CPUMilli: 12000, MemoryMiB: 16384, NumGPU: 2, GPUMilli: 1000,
			CreationTime: 7, DeletionTime: NoTime, ScheduledTime: NoTime},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if m := got[0].AllowedModels(); !reflect.DeepEqual(m, []string{"V100M16", "V100M32"}) {
		t.Errorf("AllowedModels = %q", m)
	}
	if m := got[1].AllowedModels(); m != nil {
		t.Errorf("AllowedModels of empty spec = %q, want nil", m)
	}
}

func TestReadOpenBErrors(t *testing.T) {
	const hdr = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	const ok = "p0,1000,1024,1,500,,LS,Running,0,10,0\n"
	tests := []struct {
		name, in string
		sentinel error
		line     int
		column   string
	}{
		{"empty", "", ErrEmpty, 1, ""},
		{"missing column", "name,cpu_milli,memory_mib,num_gpu\n", ErrMissingColumn, 1, "gpu_milli"},
		{"not an integer", hdr + ok + "p1,abc,1024,1,500,,LS,Running,0,10,0\n", ErrBadValue, 3, "cpu_milli"},
		{"negative gpus", hdr + ok + ok[:0] + "p1,1,1024,-1,500,,LS,Running,0,10,0\n", ErrBadValue, 3, "num_gpu"},
		{"empty cell", hdr + "p1,1,,1,500,,LS,Running,0,10,0\n", ErrBadValue, 2, "memory_mib"},
		{"bad time", hdr + ok + ok[:0] + "p1,1,1,1,500,,LS,Running,soon,10,0\n", ErrBadValue, 3, "creation_time"},
		{"deleted before created", hdr + "p1,1,1,1,500,,LS,Running,20,10,0\n", ErrBadValue, 2, "deletion_time"},
		{"duplicate", hdr + ok + ok, ErrDuplicateName, 3, "name"},
		{"short row", hdr + ok + "p1,1,1\n", ErrBadValue, 3, ""},
		{"empty name", hdr + ",1,1,1,500,,LS,Running,0,10,0\n", ErrBadValue, 2, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadOpenBPods(strings.NewReader(tt.in), "pods.csv")
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("err = %v, want %v", err, tt.sentinel)
			}
			if pe.File != "pods.csv" || pe.Line != tt.line || pe.Column != tt.column {
				t.Errorf("at %s:%d column %q, want pods.csv:%d column %q (%v)",
					pe.File, pe.Line, pe.Column, tt.line, tt.column, err)
			}
			if !strings.Contains(err.Error(), "pods.csv") {
				t.Errorf("message %q does not name the file", err)
			}
		})
	}
	_, err := ReadOpenBNodes(strings.NewReader("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,2,\n"), "nodes.csv")
	if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), "nodes.csv:2: column model") {
		t.Errorf("node without model: %v", err)
	}
}

func TestOpenBTimeline(t *testing.T) {
	pods := []OpenBPod{
		{Name: "a", CreationTime: 0, DeletionTime: 10},
		{Name: "b", CreationTime: 10, DeletionTime: 10}, // zero length
		{Name: "c", CreationTime: 5, DeletionTime: NoTime},
		{Name: "d", CreationTime: NoTime, DeletionTime: NoTime},
		{Name: "e", CreationTime: 10, DeletionTime: 20},
	}
	got, err := OpenBTimeline(pods)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{0, Arrival, 0}, {5, Arrival, 2},
		{10, Departure, 0}, {10, Arrival, 1}, {10, Arrival, 4}, {10, Departure, 1},
		{20, Departure, 4},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if _, err := OpenBTimeline([]OpenBPod{{Name: "x", CreationTime: NoTime, DeletionTime: NoTime}}); !errors.Is(err, ErrNoTimes) {
		t.Errorf("err = %v, want ErrNoTimes", err)
	}
}

// TestRealOpenBFiles reads every file of the shared trace folder.
func TestRealOpenBFiles(t *testing.T) {
	if _, err := os.Stat(traceDir); err != nil {
		t.Skipf("trace folder not present: %v", err)
	}
	nodes, err := ReadOpenBNodesFile(filepath.Join(traceDir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var gpus int
	for _, n := range nodes {
		gpus += n.GPUs
	}
	if len(nodes) != 1213 || gpus != 6212 {
		t.Errorf("gpu node list: %d nodes, %d GPUs; want 1213, 6212", len(nodes), gpus)
	}
	files, _ := filepath.Glob(filepath.Join(traceDir, "openb_pod_list_*.csv"))
	if len(files) == 0 {
		t.Fatal("no pod lists")
	}
	for _, f := range files {
		pods, err := ReadOpenBPodsFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) == 0 {
			t.Errorf("%s: no pods", f)
		}
		if filepath.Base(f) == "openb_pod_list_default.csv" {
			var cpuOnly, share, whole int
			for _, p := range pods {
				switch {
				case p.NumGPU == 0:
					cpuOnly++
				case p.GPUMilli < 1000:
					share++
				default:
					whole++
				}
			}
			if len(pods) != 8152 || cpuOnly != 1088 || share != 3078 || whole != 3986 {
				t.Errorf("default: %d pods, %d CPU-only, %d sharing, %d whole; want 8152, 1088, 3078, 3986",
					len(pods), cpuOnly, share, whole)
			}
			ev, err := OpenBTimeline(pods)
			if err != nil || len(ev) != 2*len(pods) {
				t.Errorf("timeline: %d events, err %v; want %d", len(ev), err, 2*len(pods))
			}
		}
	}
}
