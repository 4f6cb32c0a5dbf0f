package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Limits. Options.Limits (the `limits:` section of serve's config file,
// see config.Limits) bounds what the server keeps for each tenant and
// what one request may carry, so that memory, the store and every answer
// stay bounded whatever tenants send:
//
//   - counts: a tenant's queued (live) workloads and reservations, and
//     the policies, are checked inside the write's transaction (so
//     concurrent writers cannot pass a limit together) and refused with
//     409 LimitExceeded, Field "limits.NAME". The queue count is a counter
//     the store keeps (store.LiveWorkloads): no scan per submission.
//   - sizes: labels, command.env, command.argv, command.dir and policy
//     sources are refused with 400 InvalidArgument naming the field; the
//     message names the limit.
//   - answers: lists page (paging.go), at most Limits.MaxPageSize items
//     and about Limits.PageBytes bytes a page.

// errLimit is the answer to a count at its limit.
func errLimit(limit string, n int, format string, args ...any) *api.Error {
	return apiErr(http.StatusConflict, api.CodeLimitExceeded, "limits."+limit,
		"%s (limits.%s is %d)", fmt.Sprintf(format, args...), limit, n)
}

// queuedLimit is the tenant's bound on live workloads.
func (s *Server) queuedLimit(tenant string) int {
	if t, ok := s.limits.Tenants[tenant]; ok && t.WorkloadsQueued > 0 {
		return t.WorkloadsQueued
	}
	return s.limits.WorkloadsQueued
}

// queuedBytesLimit is the tenant's bound on its live workloads' bytes.
func (s *Server) queuedBytesLimit(tenant string) int {
	if t, ok := s.limits.Tenants[tenant]; ok && t.QueuedBytes > 0 {
		return t.QueuedBytes
	}
	return s.limits.QueuedBytes
}

// reservationLimit is the tenant's bound on reservations.
func (s *Server) reservationLimit(tenant string) int {
	if t, ok := s.limits.Tenants[tenant]; ok && t.Reservations > 0 {
		return t.Reservations
	}
	return s.limits.Reservations
}

// checkQueued refuses a new live workload of about size bytes when the
// tenant has its limit of them, or of their bytes, in tx (call it in the
// submission's transaction).
func (s *Server) checkQueued(tx store.ReadTx, tenant string, size int) error {
	n, max := store.LiveWorkloads(tx, tenant), s.queuedLimit(tenant)
	if n >= int64(max) {
		return errLimit("workloads_queued", max, "tenant %q has %d pending or running workloads; cancel some or wait for them to end", tenant, n)
	}
	b, maxb := store.LiveBytes(tx, tenant), s.queuedBytesLimit(tenant)
	if b+int64(size) > int64(maxb) {
		return errLimit("queued_bytes", maxb, "tenant %q's pending or running workloads take %d bytes, and this one %d more; cancel some or send smaller ones", tenant, b, size)
	}
	return nil
}

// storedSize is about what obj takes in the store (Put adds its revision
// numbers).
func storedSize(obj any) int {
	b, err := json.Marshal(obj)
	if err != nil {
		return 0
	}
	return len(b) + 64
}

// checkReservationCount refuses a new reservation at the tenant's limit
// (the scan is of the tenant's own reservations, at most the limit).
func (s *Server) checkReservationCount(tx store.ReadTx, tenant string) error {
	max, n := s.reservationLimit(tenant), 0
	tx.ScanRaw(store.KindReservation, tenant+"/", "", func(string, []byte) bool { n++; return n < max })
	if n >= max {
		return errLimit("reservations", max, "tenant %q has %d reservations; delete one first", tenant, n)
	}
	return nil
}

// checkPolicyCount refuses a new policy (replacing one is always
// allowed) when the limit of applied policies is reached.
func (s *Server) checkPolicyCount(tx store.ReadTx, name string) error {
	if _, ok := tx.GetRaw(store.KindPolicy, name); ok {
		return nil
	}
	max, n := s.limits.Policies, 0
	tx.ScanRaw(store.KindPolicy, "", "", func(string, []byte) bool { n++; return n < max })
	if n >= max {
		return errLimit("policies", max, "%d policies are applied; delete one first", n)
	}
	return nil
}

// tooLarge is the answer to a field over a size limit.
func tooLarge(field, limit string, max int, format string, args ...any) *api.Error {
	return apiErr(http.StatusBadRequest, api.CodeInvalid, field, "%s, more than limits.%s (%d)", fmt.Sprintf(format, args...), limit, max)
}

// checkLabels bounds a label set (of a workload or a node) and checks
// its syntax: keys of letters, digits, '-', '_', '.' and '/', starting
// with a letter or digit; values of printable characters.
func (s *Server) checkLabels(field string, labels map[string]string) error {
	l := s.limits
	if len(labels) > l.Labels {
		return tooLarge(field, "labels", l.Labels, "%d labels", len(labels))
	}
	for _, k := range sortedKeys(labels) {
		v := labels[k]
		switch {
		case len(k) > l.LabelKeyBytes:
			return tooLarge(field, "label_key_bytes", l.LabelKeyBytes, "a label key of %d bytes", len(k))
		case !validLabelKey(k):
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field, "invalid label key %q: use letters, digits, '-', '_', '.' and '/', starting with a letter or digit", k)
		case len(v) > l.LabelValueBytes:
			return tooLarge(field+"."+k, "label_value_bytes", l.LabelValueBytes, "a value of %d bytes", len(v))
		case !printable(v):
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field+"."+k, "label values may not hold control characters")
		}
	}
	return nil
}

func validLabelKey(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("-_./", c)) {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// checkCommand bounds a workload's command (its syntax is api.Command's
// Validate).
func (s *Server) checkCommand(c *api.Command) error {
	if c == nil {
		return nil
	}
	l := s.limits
	if len(c.Argv) > l.Args {
		return tooLarge("command.argv", "args", l.Args, "%d arguments", len(c.Argv))
	}
	n := 0
	for _, a := range c.Argv {
		n += len(a)
	}
	if n > l.ArgvBytes {
		return tooLarge("command.argv", "argv_bytes", l.ArgvBytes, "%d bytes of arguments", n)
	}
	if len(c.Env) > l.EnvVars {
		return tooLarge("command.env", "env_vars", l.EnvVars, "%d variables", len(c.Env))
	}
	n = 0
	for k, v := range c.Env {
		n += len(k) + len(v)
	}
	if n > l.EnvBytes {
		return tooLarge("command.env", "env_bytes", l.EnvBytes, "%d bytes of environment", n)
	}
	if len(c.Dir) > l.DirBytes {
		return tooLarge("command.dir", "dir_bytes", l.DirBytes, "a directory of %d bytes", len(c.Dir))
	}
	return nil
}

// checkWorkloadFields applies the size limits to a submission.
func (s *Server) checkWorkloadFields(req *api.WorkloadSpec) error {
	if err := s.checkLabels("labels", req.Labels); err != nil {
		return err
	}
	return s.checkCommand(req.Command)
}

// checkPolicySource bounds a policy's source.
func (s *Server) checkPolicySource(src string) error {
	if len(src) > s.limits.PolicyBytes {
		return tooLarge("source", "policy_bytes", s.limits.PolicyBytes, "a source of %d bytes", len(src))
	}
	return nil
}
