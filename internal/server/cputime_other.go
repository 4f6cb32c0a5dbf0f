//go:build !linux

package server

import "time"

// cpuCost runs f and returns its wall time: a thread's CPU time is read
// only on Linux (cputime_linux.go).
func cpuCost(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
