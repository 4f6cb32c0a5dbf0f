package openb

import "testing"

// BenchmarkRun measures one full replay (workload default, seed 42) per
// policy: arrivals, scorer, placement of ~10,900 pods and the curve.
func BenchmarkRun(b *testing.B) {
	c, _ := load(b)
	w := workload(b, "default")
	for _, policy := range []string{"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd", "arbiter"} {
		b.Run(policy, func(b *testing.B) {
			res, err := Run(c, w, policy, 42)
			if err != nil || res.Placed == 0 {
				b.Fatalf("placed %v, err %v", res, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := Run(c, w, policy, 42); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(res.Records)), "pods/op")
		})
	}
}
