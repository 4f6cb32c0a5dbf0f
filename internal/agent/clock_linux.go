//go:build linux

package agent

import (
	"syscall"
	"time"
	"unsafe"
)

// clockBoottime counts from boot, including time suspended, and is the
// same for every process of the machine.
const clockBoottime = 7

// monoNow reads CLOCK_BOOTTIME: the lease deadline the agent writes and
// its fence reads are on this clock, which wall-clock steps do not move
// and a suspended machine does not stop.
func monoNow() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}
