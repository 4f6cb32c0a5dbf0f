// Package probe declares HTTP(S) endpoints to probe and probes them: each
// probe is one request every interval, timed, and checked for its status.
// The results are latency and success samples for the policy metrics
// (p50/p95/p99_latency and success_ratio of the probe's target, a service
// by default, and of the cluster), so that a rule such as the operators'
// customer_sla_protection acts on the endpoint's real latency.
//
// A probes file (or the `probes:` list of the server config):
//
//	probes:
//	  - name: coding-assistant          # also the target: service:coding-assistant
//	    url: https://assist.example.com/healthz
//	    method: GET                     # GET (default), HEAD, POST, PUT, OPTIONS
//	    body: '{"prompt":"ping"}'       # POST and PUT only; at most 64 KiB
//	    headers_file: /etc/arbiter/assist.headers # "Name: value" lines, read at each attempt
//	    interval: 1s                    # 1s to 1h, default 10s
//	    timeout: 500ms                  # 10ms to the interval, default min(interval, 5s)
//	    expect_status: 200              # default: any 2xx
//	    from: server                    # server (default), agents, region:R, node:N[,node:M]
//	    target: service:coding-assistant # optional; a service, class or selector
//
// An attempt that fails (a transport error, a timeout, an unexpected
// status) counts as taking its whole timeout: a dead endpoint raises the
// latency percentiles instead of leaving them without data, and its
// success_ratio falls.
//
// Load and Validate are pure; Runner does the I/O.
package probe

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/names"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// ErrInvalid wraps every problem of a probes file.
var ErrInvalid = errors.New("probe: invalid probes")

// Bounds on what a probe may ask for.
const (
	MaxProbes       = 2000
	MaxURLBytes     = 2048
	MaxBodyBytes    = 64 << 10
	MaxHeadersBytes = 64 << 10
	MinInterval     = time.Second
	MaxInterval     = time.Hour
	DefaultInterval = 10 * time.Second
	MinTimeout      = 10 * time.Millisecond
	MaxTimeout      = time.Minute
	DefaultTimeout  = 5 * time.Second
	// MaxFrom bounds the node list of from:.
	MaxFrom = 64
)

// Methods are the HTTP methods a probe may use.
var Methods = []string{"GET", "HEAD", "POST", "PUT", "OPTIONS"}

// File is a probes file.
type File struct {
	Pos    yamlfile.Pos
	Probes []Spec `yaml:"probes"`
}

// Spec is one probe as written.
type Spec struct {
	Pos         yamlfile.Pos  `json:"-"`
	Name        string        `yaml:"name" json:"name"`
	URL         string        `yaml:"url" json:"url"`
	Method      string        `yaml:"method" json:"method,omitempty"`
	Body        string        `yaml:"body" json:"body,omitempty"`
	HeadersFile string        `yaml:"headers_file" json:"headers_file,omitempty"`
	Interval    time.Duration `yaml:"interval" json:"interval,omitempty"`
	Timeout     time.Duration `yaml:"timeout" json:"timeout,omitempty"`
	// ExpectStatus is the status an attempt must get; 0 accepts any 2xx.
	ExpectStatus int `yaml:"expect_status" json:"expect_status,omitempty"`
	// From says who probes: "server" (default), "agents" (every agent),
	// "region:R" (the agents of region R) or "node:N[,node:M]".
	From string `yaml:"from" json:"from,omitempty"`
	// Target is what the samples measure (default service:<name>).
	Target string `yaml:"target" json:"target,omitempty"`
}

// Probe is a checked probe with its defaults filled in.
type Probe struct {
	Name         string
	URL          string
	Method       string
	Body         string
	HeadersFile  string
	Interval     time.Duration
	Timeout      time.Duration
	ExpectStatus int
	From         From
	Target       policy.Target
}

// From is who runs a probe.
type From struct {
	// Server is true for probes the server runs itself.
	Server bool
	// Agents is true for every agent; otherwise Region or Nodes choose.
	Agents bool
	Region string
	Nodes  []string
}

// String writes from: as it is written in a file.
func (f From) String() string {
	switch {
	case f.Server:
		return "server"
	case f.Agents:
		return "agents"
	case f.Region != "":
		return "region:" + f.Region
	}
	parts := make([]string, len(f.Nodes))
	for i, n := range f.Nodes {
		parts[i] = "node:" + n
	}
	return strings.Join(parts, ",")
}

// Runs reports whether an agent on node in region runs the probe.
func (f From) Runs(node, region string) bool {
	switch {
	case f.Server:
		return false
	case f.Agents:
		return true
	case f.Region != "":
		return f.Region == region
	}
	for _, n := range f.Nodes {
		if n == node {
			return true
		}
	}
	return false
}

// Load decodes and checks a probes file; every problem is reported with
// file:line:col and its field.
func Load(file string, data []byte) ([]Probe, error) {
	var f File
	err := yamlfile.Decode(file, data, &f)
	if yamlfile.Stopped(err) {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ps, errs := Check(file, "probes", f.Probes)
	if err := yamlfile.Merge(err, errs).Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return ps, nil
}

// Check validates specs (named field[i] in messages, positions in file)
// and returns the probes with their defaults.
func Check(file, field string, specs []Spec) ([]Probe, yamlfile.Errors) {
	var errs yamlfile.Errors
	if len(specs) > MaxProbes {
		errs.Add(yamlfile.Pos{File: file, Line: 1, Col: 1}, field, "at most %d probes, got %d", MaxProbes, len(specs))
		return nil, errs
	}
	seen := map[string]bool{}
	out := make([]Probe, 0, len(specs))
	for i := range specs {
		s := &specs[i]
		p := s.Pos
		if p.Line == 0 {
			p = yamlfile.Pos{File: file, Line: 1, Col: 1}
		}
		f := func(n string) string { return fmt.Sprintf("%s[%d].%s", field, i, n) }
		pr, ok := check(s, p, f, &errs)
		switch {
		case !ok:
		case seen[pr.Name]:
			errs.Add(p, f("name"), "duplicate probe name %q", pr.Name)
		default:
			seen[pr.Name] = true
			out = append(out, pr)
		}
	}
	return out, errs
}

func check(s *Spec, p yamlfile.Pos, f func(string) string, errs *yamlfile.Errors) (Probe, bool) {
	n := len(*errs)
	pr := Probe{Name: s.Name, URL: s.URL, Method: strings.ToUpper(s.Method), Body: s.Body, HeadersFile: s.HeadersFile,
		Interval: s.Interval, Timeout: s.Timeout, ExpectStatus: s.ExpectStatus}
	if err := checkName(s.Name); err != nil {
		errs.Add(p, f("name"), "%v", err)
	}
	if err := CheckURL(s.URL); err != nil {
		errs.Add(p, f("url"), "%v", err)
	}
	if pr.Method == "" {
		pr.Method = "GET"
	}
	if !slices.Contains(Methods, pr.Method) {
		errs.Add(p, f("method"), "want one of %s, got %q", strings.Join(Methods, ", "), s.Method)
	}
	switch {
	case len(s.Body) > MaxBodyBytes:
		errs.Add(p, f("body"), "at most %d bytes, got %d", MaxBodyBytes, len(s.Body))
	case s.Body != "" && pr.Method != "POST" && pr.Method != "PUT":
		errs.Add(p, f("body"), "a body goes with method POST or PUT, not %s", pr.Method)
	}
	if err := checkPath(s.HeadersFile); err != nil {
		errs.Add(p, f("headers_file"), "%v", err)
	}
	if pr.Interval == 0 {
		pr.Interval = DefaultInterval
	}
	if pr.Interval < MinInterval || pr.Interval > MaxInterval {
		errs.Add(p, f("interval"), "want an interval between %v and %v, got %v", MinInterval, MaxInterval, s.Interval)
	}
	if pr.Timeout == 0 {
		pr.Timeout = min(pr.Interval, DefaultTimeout)
	}
	switch {
	case pr.Timeout < MinTimeout || pr.Timeout > MaxTimeout:
		errs.Add(p, f("timeout"), "want a timeout between %v and %v, got %v", MinTimeout, MaxTimeout, s.Timeout)
	case pr.Timeout > pr.Interval:
		errs.Add(p, f("timeout"), "the timeout (%v) must not exceed the interval (%v)", pr.Timeout, pr.Interval)
	}
	if s.ExpectStatus != 0 && (s.ExpectStatus < 100 || s.ExpectStatus > 599) {
		errs.Add(p, f("expect_status"), "want an HTTP status from 100 to 599, got %d", s.ExpectStatus)
	}
	from, err := ParseFrom(s.From)
	if err != nil {
		errs.Add(p, f("from"), "%v", err)
	}
	pr.From = from
	pr.Target = policy.Target{Kind: policy.TargetService, Name: s.Name}
	if s.Target != "" {
		t, err := policy.ParseTarget(s.Target)
		switch {
		case err != nil:
			errs.Add(p, f("target"), "%v", err)
		case t.Kind == policy.TargetUnresolved:
			errs.Add(p, f("target"), "write the target's kind: service:%s, class:%s or selector:k=v", s.Target, s.Target)
		case t.Kind != policy.TargetService && t.Kind != policy.TargetClass && t.Kind != policy.TargetSelector:
			errs.Add(p, f("target"), "a probe measures a service, class or selector, not a %s", t.Kind)
		default:
			pr.Target = t
		}
	}
	return pr, len(*errs) == n
}

func checkName(s string) error {
	if s == "" {
		return errors.New("a probe needs a name")
	}
	return names.Check(s)
}

// CheckURL says what is wrong with a probe URL: it must be http(s) with a
// host, at most MaxURLBytes, with no user or password (credentials go in
// headers_file, which never leaves the prober's machine).
func CheckURL(s string) error {
	if s == "" {
		return errors.New("a probe needs a url")
	}
	if len(s) > MaxURLBytes {
		return fmt.Errorf("at most %d bytes, got %d", MaxURLBytes, len(s))
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("want an http:// or https:// URL with a host, got %q", s)
	}
	if u.User != nil {
		return errors.New("the URL may not carry a user or password: put an Authorization header in headers_file")
	}
	return nil
}

func checkPath(s string) error {
	switch {
	case s == "":
		return nil
	case len(s) > 4096:
		return errors.New("at most 4096 bytes")
	case strings.ContainsAny(s, "\x00\n\r"):
		return errors.New("a path on one line, without NUL")
	}
	return nil
}

// ParseFrom parses from: "" or "server", "agents", "region:R", or
// "node:N[,node:M]".
func ParseFrom(s string) (From, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "", "server":
		return From{Server: true}, nil
	case "agents":
		return From{Agents: true}, nil
	}
	if r, ok := strings.CutPrefix(s, "region:"); ok {
		if !names.Valid(r) {
			return From{}, fmt.Errorf("invalid region %q", r)
		}
		return From{Region: r}, nil
	}
	var f From
	for _, part := range strings.Split(s, ",") {
		n, ok := strings.CutPrefix(strings.TrimSpace(part), "node:")
		if !ok || !names.Valid(n) {
			return From{}, fmt.Errorf("want server, agents, region:R or node:N[,node:M], got %q", s)
		}
		if !slices.Contains(f.Nodes, n) {
			f.Nodes = append(f.Nodes, n)
		}
	}
	if len(f.Nodes) > MaxFrom {
		return From{}, fmt.Errorf("at most %d nodes, got %d", MaxFrom, len(f.Nodes))
	}
	return f, nil
}
