package server

import (
	"runtime"
	"syscall"
	"time"
)

// cpuCost runs f on one OS thread and returns the CPU time that thread
// spent in it, or f's wall time if the thread's usage cannot be read.
// Under contention (the API's handlers on the same cores) a cycle's wall
// time is several times its own cost, and pacing on it would wait for
// the contention rather than for the work.
func cpuCost(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	before, ok := threadCPU()
	f()
	after, ok2 := threadCPU()
	if !ok || !ok2 || after < before {
		return time.Since(start)
	}
	return after - before
}

// threadCPU is the calling thread's user and system time.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
