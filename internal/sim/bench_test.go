package sim

import (
	"testing"
)

// BenchmarkContention30Days runs one strategy over the 30-day contention
// scenario. Report with: go test ./internal/sim -run '^$' -bench Contention -benchtime 1x
func BenchmarkContention30Days(b *testing.B) {
	for _, name := range []string{"hybrid"} {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := runShort(b, name, 30, 1)
				if r.JobsSubmitted == 0 {
					b.Fatal("nothing simulated")
				}
				b.ReportMetric(float64(r.JobsSubmitted)/b.Elapsed().Seconds()*float64(i+1), "jobs/s")
			}
		})
	}
}
