package trace

import (
	"errors"
	"strings"
	"testing"
)

func FuzzReadOpenBPods(f *testing.F) {
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,2,8,1000\n")
	f.Add("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,\"1\n2\",2,8,1000\n")
	f.Fuzz(func(t *testing.T, in string) {
		pods, err := ReadOpenBPods(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "fuzz.csv" {
				t.Fatalf("error %v is not a *ParseError naming the file", err)
			}
			return
		}
		for _, p := range pods {
			if p.Name == "" || p.CPUMilli < 0 || p.MemoryMiB < 0 || p.NumGPU < 0 || p.NumGPU > maxGPUs {
				t.Fatalf("accepted bad pod %+v", p)
			}
		}
		if ev, err := OpenBTimeline(pods); err == nil {
			for i := 1; i < len(ev); i++ {
				if ev[i].Time < ev[i-1].Time {
					t.Fatalf("timeline out of order at %d: %v", i, ev)
				}
			}
		}
	})
}

func FuzzReadOpenBNodes(f *testing.F) {
	f.Add("sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\n")
	f.Fuzz(func(t *testing.T, in string) {
		nodes, err := ReadOpenBNodes(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "fuzz.csv" {
				t.Fatalf("error %v is not a *ParseError naming the file", err)
			}
			return
		}
		for _, n := range nodes {
			if n.Name == "" || n.GPUs < 0 || (n.GPUs > 0 && n.Model == "") {
				t.Fatalf("accepted bad node %+v", n)
			}
		}
	})
}
