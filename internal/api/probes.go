package api

import "time"

// ProbesApply replaces the probes with a probes file (YAML source, see
// internal/probe).
type ProbesApply struct {
	File   string `json:"file,omitempty"`
	Source string `json:"source"`
}

// Probes are the applied probes with what they measured.
type Probes struct {
	File      string     `json:"file,omitempty"`
	AppliedAt *time.Time `json:"applied_at,omitempty"`
	Items     []Probe    `json:"items"`
}

// Probe is one probe with what it measured over the policy window.
type Probe struct {
	Name         string   `json:"name"`
	URL          string   `json:"url"`
	Method       string   `json:"method"`
	HeadersFile  string   `json:"headers_file,omitempty"`
	Interval     Duration `json:"interval"`
	Timeout      Duration `json:"timeout"`
	ExpectStatus int      `json:"expect_status,omitempty"`
	From         string   `json:"from"`
	Target       string   `json:"target"`
	// Samples, P50, P95, P99 and SuccessRatio are over the policy window
	// (5 minutes): what a policy on this probe's target reads.
	Samples      int           `json:"samples"`
	P50          *Duration     `json:"p50,omitempty"`
	P95          *Duration     `json:"p95,omitempty"`
	P99          *Duration     `json:"p99,omitempty"`
	SuccessRatio *float64      `json:"success_ratio,omitempty"`
	Last         *ProbeAttempt `json:"last,omitempty"`
}

// ProbeAttempt is one attempt of a probe.
type ProbeAttempt struct {
	At      time.Time `json:"at"`
	Latency Duration  `json:"latency"`
	OK      bool      `json:"ok"`
	Status  int       `json:"status,omitempty"`
	Error   string    `json:"error,omitempty"`
	// Node is the agent that ran it; empty for the server.
	Node string `json:"node,omitempty"`
}

// ProbeTask is a probe an agent runs (in its heartbeat's reply). The
// headers file, if any, is read on the agent's machine: the server never
// sends a probe's secrets.
type ProbeTask struct {
	Name         string   `json:"name"`
	URL          string   `json:"url"`
	Method       string   `json:"method"`
	Body         string   `json:"body,omitempty"`
	HeadersFile  string   `json:"headers_file,omitempty"`
	Interval     Duration `json:"interval"`
	Timeout      Duration `json:"timeout"`
	ExpectStatus int      `json:"expect_status,omitempty"`
}

// ProbeResult is an attempt an agent reports in its heartbeat.
type ProbeResult struct {
	Probe   string    `json:"probe"`
	At      time.Time `json:"at"`
	Latency Duration  `json:"latency"`
	OK      bool      `json:"ok"`
	Status  int       `json:"status,omitempty"`
	Error   string    `json:"error,omitempty"`
}
