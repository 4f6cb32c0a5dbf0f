package sim

import (
	"testing"
)

// BenchmarkContention30Days runs each strategy over the 30-day contention
// scenario. Report with:
//
//	GOGC=800 go test ./internal/sim -run '^$' -bench Contention -benchtime 1x
//
// (GOGC as arbiter sim sets it; -bench Contention30Days/dynamic for one).
func BenchmarkContention30Days(b *testing.B) {
	for _, name := range []string{"static", "dynamic", "hybrid"} {
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
