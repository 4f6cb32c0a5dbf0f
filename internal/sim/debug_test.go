package sim

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"testing"
)

// TestDebugRun prints who preempted whom and why customer requests failed:
//
//	DEBUG_STRATEGY=hybrid DEBUG_DAYS=12 go test ./internal/sim -run TestDebugRun -v
func TestDebugRun(t *testing.T) {
	name := os.Getenv("DEBUG_STRATEGY")
	if name == "" {
		t.Skip()
	}
	days, _ := strconv.Atoi(os.Getenv("DEBUG_DAYS"))
	pre, fail := map[string]int{}, map[string]int{}
	re := regexp.MustCompile(`[0-9.]+`)
	debugPreempt = func(st, victim, by, reason string) {
		pre[victim+" <- "+re.ReplaceAllString(by, "")+" | "+re.ReplaceAllString(reason, "N")]++
	}
	debugFailures = func(st, class, reason string) {
		fail[class+" | "+re.ReplaceAllString(reason, "N")]++
	}
	r := runShort(t, name, days, 1)
	for _, m := range []map[string]int{pre, fail} {
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
		for _, k := range keys[:min(12, len(keys))] {
			fmt.Println(m[k], k)
		}
		fmt.Println("--")
	}
	fmt.Printf("failures %d/%d, SLO %.4f, training %.0f GPU-h, preemptions %d\n", r.CustomerCapacityFailures, r.CustomerRequests, r.InferenceSLOAttainment, r.TrainingGPUHours, r.Preemptions)
}
