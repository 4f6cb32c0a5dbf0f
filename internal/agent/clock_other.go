//go:build !linux

package agent

import "time"

// monoNow falls back to the wall clock where CLOCK_BOOTTIME is missing.
func monoNow() time.Duration { return time.Duration(time.Now().UnixNano()) }
