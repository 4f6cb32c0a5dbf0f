package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// The node's lease. Every heartbeat reply grants the node a lease (the
// server's --node-lost-after): the server marks the node lost, and
// requeues its replicas, only once the lease and the replicas' grace
// periods have passed without a heartbeat. The agent counts its lease from
// the send time of its last answered heartbeat (the server counts from
// receipt, later), less a safety margin; when that deadline passes, the
// fence stops every replica (SIGTERM, its grace, SIGKILL) so that none
// still runs when the server may start it elsewhere.
//
// The fence must act even when the agent cannot (SIGSTOP, a stuck
// process), so the agent writes its deadline to DATA/lease.json and a
// separate watchdog process (`arbiter agent fence`) enforces it, reading
// the process records of DATA/procs.

// leaseFile is DATA/lease.json.
type leaseFile struct {
	// Owner names the agent instance that writes it; a fence whose owner
	// no longer writes the file has been superseded and exits.
	Owner string `json:"owner"`
	PID   int    `json:"agent_pid"`
	// Deadline is on CLOCK_BOOTTIME (monoNow), in nanoseconds: replicas
	// may run until then. 0: they may not run; noLease: no lease ends.
	Deadline int64 `json:"deadline_boottime_ns"`
	// Lease is the lease the server granted, for messages.
	Lease time.Duration `json:"lease_ns"`
}

// noLease is the deadline when the server grants no lease (a server that
// does not send one never marks the node lost on its own clock).
const noLease = math.MaxInt64

// leaseMargin is how much earlier than the server the agent ends its
// lease: the fence's tick, the time to signal the processes, and the
// drift between the two machines' clocks over one lease.
func leaseMargin(lease time.Duration) time.Duration {
	return min(max(lease/5, 200*time.Millisecond), lease/2)
}

// leaseDeadline is when a lease granted in answer to a heartbeat sent at
// sent (monoNow) ends for the agent. No lease: it never ends.
func leaseDeadline(sent, lease time.Duration) int64 {
	if lease <= 0 {
		return noLease
	}
	return int64(sent + lease - leaseMargin(lease))
}

// leaseWait bounds how long the server may hold a heartbeat's answer:
// the next heartbeat must be sent, and answered, well within the lease.
func leaseWait(interval, lease time.Duration) time.Duration {
	if lease <= 0 {
		return interval
	}
	return min(interval, lease/5)
}

func leasePath(dataDir string) string { return filepath.Join(dataDir, "lease.json") }

// writeLease replaces DATA/lease.json atomically (write, then rename).
func writeLease(dataDir string, lf leaseFile) error {
	b, err := json.Marshal(lf)
	if err != nil {
		return err
	}
	return writeAtomic(leasePath(dataDir), b)
}

// readLease reads DATA/lease.json.
func readLease(dataDir string) (leaseFile, error) {
	var lf leaseFile
	b, err := os.ReadFile(leasePath(dataDir))
	if err != nil {
		return lf, err
	}
	if err := json.Unmarshal(b, &lf); err != nil {
		return lf, fmt.Errorf("agent: %s: %w", leasePath(dataDir), err)
	}
	if lf.Owner == "" {
		return lf, errors.New("agent: lease file without owner")
	}
	return lf, nil
}

// writeAtomic writes path through a temporary file renamed into place, so
// that a reader sees the old content or the new, never a part.
func writeAtomic(path string, b []byte) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
