package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Grace caps (issue 12). A workload's grace_period is how long its agent
// waits between SIGTERM and SIGKILL when it is stopped; while it waits,
// the GPUs stay taken and whoever claimed them waits too. So the server
// bounds it: Options.MaxGrace (`serve --max-grace`, default 10m) for
// every priority class, or Options.MaxGraceClass for a class
// (`serve --max-grace-class spot=30s`, repeatable; it replaces
// --max-grace for that class, higher or lower). A submission asking for
// more is refused (400, field grace_period); workloads stored before a
// cap was lowered are stopped with at most the cap (the agents are told
// the capped grace).

// DefaultMaxGrace is the grace cap when Options.MaxGrace is unset.
const DefaultMaxGrace = 10 * time.Minute

// GraceCap is the longest grace period the server allows a workload of
// priority class p.
func (s *Server) GraceCap(p workload.Priority) time.Duration {
	if d, ok := s.opts.MaxGraceClass[p]; ok && d > 0 {
		return d
	}
	if s.opts.MaxGrace > 0 {
		return s.opts.MaxGrace
	}
	return DefaultMaxGrace
}

// LongestGrace is the longest grace period any workload gets: an agent
// stops any replica within it of being told to (plus its own reaction).
func (s *Server) LongestGrace() time.Duration {
	longest := s.GraceCap(workload.PriorityNormal)
	for p := workload.PrioritySpot; p <= workload.PriorityCritical; p++ {
		longest = max(longest, s.GraceCap(p))
	}
	return longest
}

// graceFor is the grace a workload's replicas get: its own, capped.
func (s *Server) graceFor(spec workload.Spec) time.Duration {
	return min(spec.GracePeriod, s.GraceCap(spec.Priority))
}

// checkGrace refuses a submission whose grace period exceeds its cap.
func (s *Server) checkGrace(spec workload.Spec) error {
	if c := s.GraceCap(spec.Priority); spec.GracePeriod > c {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "grace_period", "grace_period %v is longer than the %v this server allows %s workloads (serve --max-grace, --max-grace-class)", spec.GracePeriod, c, spec.Priority)
	}
	return nil
}

// ParseMaxGraceClass parses a `--max-grace-class` value, CLASS=DURATION
// (e.g. spot=30s): a priority class and a positive duration.
func ParseMaxGraceClass(v string) (workload.Priority, time.Duration, error) {
	class, dur, ok := strings.Cut(v, "=")
	if !ok {
		return 0, 0, fmt.Errorf("server: max grace class %q: write CLASS=DURATION, e.g. spot=30s", clip(v, 64))
	}
	p, err := workload.ParsePriority(strings.TrimSpace(class))
	if err != nil {
		return 0, 0, fmt.Errorf("server: max grace class: %w", err)
	}
	d, err := time.ParseDuration(strings.TrimSpace(dur))
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("server: max grace class %s: want a positive duration such as 30s or 5m, got %q", p, clip(dur, 64))
	}
	return p, d, nil
}
