package api

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/workload"
)

// Node labels an agent sets when it registers (the server's
// server.LabelAgent and server.LabelHost are these).
const (
	LabelAgent = "arbiter.io/agent" // "true": heartbeats are expected
	LabelHost  = "arbiter.io/host"  // the host other replicas reach it at
)

// Command is what node agents run for each replica of a workload: argv,
// extra environment and working directory. The agent adds
// CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES and the ARBITER_* variables
// to a clean environment (nothing of the agent's own). Dir is relative to
// the replica's working directory, which the agent makes for each replica.
type Command struct {
	Argv []string          `json:"argv" yaml:"argv"`
	Env  map[string]string `json:"env,omitempty" yaml:"env"`
	Dir  string            `json:"dir,omitempty" yaml:"dir"`
}

// Validate returns the first problem of a command, naming its field.
func (c *Command) Validate() (field, msg string) {
	if c == nil {
		return "", ""
	}
	switch {
	case len(c.Argv) == 0 || c.Argv[0] == "":
		return "command.argv", "a command needs argv, its program first"
	case len(c.Argv) > 1024:
		return "command.argv", "at most 1024 arguments"
	case len(c.Env) > 256:
		return "command.env", "at most 256 environment variables"
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return "command.env", fmt.Sprintf("invalid environment variable name %q", k)
		}
		if strings.HasPrefix(k, "ARBITER_") || k == "CUDA_VISIBLE_DEVICES" || k == "NVIDIA_VISIBLE_DEVICES" {
			return "command.env", fmt.Sprintf("%s is set by the agent", k)
		}
	}
	for _, a := range c.Argv {
		if strings.ContainsRune(a, 0) {
			return "command.argv", "arguments may not contain NUL"
		}
	}
	for k, v := range c.Env {
		if strings.ContainsRune(v, 0) {
			return "command.env", fmt.Sprintf("the value of %s contains NUL", k)
		}
	}
	if msg := checkDir(c.Dir); msg != "" {
		return "command.dir", msg
	}
	return "", ""
}

// checkDir says what is wrong with a command's dir: it must stay inside
// the replica's working directory (relative, without "..").
func checkDir(d string) string {
	switch {
	case d == "":
		return ""
	case len(d) > 4096:
		return "at most 4096 bytes"
	case strings.ContainsRune(d, 0):
		return "the directory may not contain NUL"
	case strings.HasPrefix(d, "/") || strings.HasPrefix(d, "\\"):
		return fmt.Sprintf("%q must be relative to the replica's working directory", d)
	}
	for _, el := range strings.FieldsFunc(d, func(r rune) bool { return r == '/' || r == '\\' }) {
		if el == ".." {
			return fmt.Sprintf("%q may not leave the replica's working directory (no \"..\")", d)
		}
	}
	if path.Clean(d) == ".." {
		return fmt.Sprintf("%q may not leave the replica's working directory", d)
	}
	return ""
}

// GPUInfo is one GPU of a node as its agent sees it.
type GPUInfo struct {
	Index          int    `json:"index"`
	UUID           string `json:"uuid"`
	Model          string `json:"model"`
	MemoryMiB      int64  `json:"memory_mib"`
	MemoryUsedMiB  int64  `json:"memory_used_mib"`
	UtilizationPct int    `json:"utilization_pct"`
	// MIG is set when the GPU is in MIG mode (NVML's current mode).
	MIG bool `json:"mig,omitempty"`
}

// ReplicaRef names one run of one replica: the workload's key
// (tenant/name), the replica and when the run was placed.
type ReplicaRef struct {
	Workload  string    `json:"workload"`
	Replica   int       `json:"replica"`
	StartedAt time.Time `json:"started_at"`
}

// Report kinds an agent sends about a replica.
const (
	ReportStarted = "Started" // the process started
	ReportExited  = "Exited"  // it exited on its own, with Code
	ReportStopped = "Stopped" // the agent stopped it: Signal says how
)

// ReplicaReport is one thing that happened to a replica's process.
type ReplicaReport struct {
	ReplicaRef
	Kind string    `json:"kind"`
	Time time.Time `json:"time"`
	Code int       `json:"code"`
	// Signal is SIGTERM when a stopped process exited within its grace
	// period, SIGKILL when it had to be killed.
	Signal  string `json:"signal,omitempty"`
	Message string `json:"message,omitempty"`
}

// Heartbeat is what an agent sends: its GPUs, what it runs, what
// happened since the last one. With Wait the server holds the answer
// until the node's tasks differ from Running or Wait passes.
type Heartbeat struct {
	GPUs    []GPUInfo       `json:"gpus"`
	Running []ReplicaRef    `json:"running"`
	Reports []ReplicaReport `json:"reports,omitempty"`
	Wait    Duration        `json:"wait,omitempty"`
	// LogURL is where the agent serves its replicas' logs; LogKey is the
	// bearer secret the server presents there (the agent makes one at
	// start, so that the server needs neither the agent's token nor gives
	// it the admin token).
	LogURL string `json:"log_url,omitempty"`
	LogKey string `json:"log_key,omitempty"`
	// ProbeResults are the attempts of the node's probes since the last
	// heartbeat.
	ProbeResults []ProbeResult `json:"probe_results,omitempty"`
}

// Task is one replica a node should run.
type Task struct {
	ReplicaRef
	Tenant   string `json:"tenant"`
	Name     string `json:"name"`
	GangSize int    `json:"gang_size"`
	GPUs     []int  `json:"gpus"`
	// MIG is the replica's MIG instance on GPUs[0] (profile and first
	// memory slice), nil for whole GPUs and shares: the agent runs the
	// replica on that instance's MIG device.
	MIG         *workload.MIGInstance `json:"mig,omitempty"`
	Hosts       []string              `json:"hosts"` // each replica's node host, by replica
	GracePeriod Duration              `json:"grace_period"`
	Preemptions int                   `json:"preemptions"`
	Command     *Command              `json:"command,omitempty"`
}

// HeartbeatReply tells an agent what to run. A node that is down runs
// nothing; Lost says it was marked lost (missed heartbeats). Notices are
// for running replicas that are no longer tasks because they were
// evicted with a notice (spot work): the agent tells the process, waits
// Notice.After, then stops it as it stops any replica.
//
// Lease is how long the node stays live without a heartbeat (the server's
// NodeLostAfter): an agent that has not renewed it within Lease minus a
// safety margin, counted from the send time of its last answered
// heartbeat, stops its replicas, because the server may requeue them once
// Lease and their grace periods have passed.
type HeartbeatReply struct {
	Tasks   []Task   `json:"tasks"`
	Lease   Duration `json:"lease,omitempty"`
	Down    bool     `json:"down,omitempty"`
	Lost    bool     `json:"lost,omitempty"`
	Notices []Notice `json:"notices,omitempty"`
	// Probes are the probes this node's agent runs (from: agents,
	// region: or node:), the full set each time.
	Probes []ProbeTask `json:"probes,omitempty"`
}

// Notice warns a replica of its eviction, as clouds' scheduled events
// warn spot VMs: the process sees it in $ARBITER_NOTICE_FILE and at
// $ARBITER_EVENTS_URL for After before it gets SIGTERM.
type Notice struct {
	ReplicaRef
	Reason string   `json:"reason"`
	After  Duration `json:"after"`
}
