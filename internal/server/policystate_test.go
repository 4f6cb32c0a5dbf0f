package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// notifySink is a loopback notification webhook.
func notifySink(t *testing.T) (string, <-chan Notification) {
	t.Helper()
	got := make(chan Notification, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n Notification
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &n) != nil {
			t.Errorf("webhook got %q", b)
		}
		got <- n
	}))
	t.Cleanup(hook.Close)
	return hook.URL, got
}

// drained waits for the runner's deliveries so far and reports whether
// the webhook received nothing more.
func nothingMore(t *testing.T, pr *policyRunner, got <-chan Notification) {
	t.Helper()
	pr.mu.Lock()
	last := pr.delivered
	pr.mu.Unlock()
	if last != nil {
		<-last
	}
	select {
	case n := <-got:
		t.Errorf("unexpected notification %+v", n)
	default:
	}
}

func receiveNote(t *testing.T, got <-chan Notification, rule, event string) Notification {
	t.Helper()
	select {
	case n := <-got:
		if n.Rule != rule || n.Event != event {
			t.Fatalf("notification %+v, want rule %s %s", n, rule, event)
		}
		return n
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s notification for %s", event, rule)
	}
	return Notification{}
}

// TestPolicyFiringsSurviveRestart: a server restarted on the same store
// resumes the rules in force without firing or notifying again (it used
// to: every restart posted "fired" for every active rule), keeps the
// original since-time, and notifies the revert once when the condition
// clears.
func TestPolicyFiringsSurviveRestart(t *testing.T) {
	hookURL, got := notifySink(t)
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1, NotifyWebhook: hookURL})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("busy", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx) // 8 of 64 GPUs in use: 12.5%
	rules := `policies:
  - name: busy
    when: {metric: utilization, of: cluster, above: 10%, for: 2m}
    then:
      - {type: notify, message: the cluster is busy}
      - {type: set_priority, target: contoso, priority: high}
    cooldown: 1m
`
	if _, err := h.admin.ApplyPolicy(h.ctx, api.PolicyApply{Name: "ops", Source: rules}); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	tc.Advance(2 * time.Minute)
	h.s.TickPolicies(h.ctx)
	fired := receiveNote(t, got, "busy", "fired")
	nothingMore(t, h.s.policies, got)

	for restart := range 2 { // twice: a resumed state is saved again
		tc.Advance(30 * time.Second)
		s2, err := New(h.ctx, Options{Store: h.st, AdminToken: testAdmin, Clock: tc.Now, RateLimit: -1, Logger: h.s.log, NotifyWebhook: hookURL})
		if err != nil {
			t.Fatal(err)
		}
		// As `serve --policy ops.yaml` does at every start: the same
		// source again changes nothing.
		if err := s2.ApplyPolicy(h.ctx, "ops", "ops.yaml", rules); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			s2.TickPolicies(h.ctx)
			tc.Advance(time.Minute)
		}
		nothingMore(t, s2.policies, got)
		acts := s2.policies.inForceNow()
		if len(acts) != 2 || !acts[0].Since.Equal(fired.Time) {
			t.Fatalf("restart %d: in force %+v, want both actions since %v", restart, acts, fired.Time)
		}
		h.s = s2
	}
	fs, err := h.admin.Firings(h.ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 {
		t.Errorf("firings after restarts: %+v, want the one firing", fs)
	}

	if _, err := c.Cancel(h.ctx, "contoso", "busy"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h.s.TickPolicies(h.ctx)
		tc.Advance(31 * time.Second)
	}
	receiveNote(t, got, "busy", "reverted")
	nothingMore(t, h.s.policies, got)
}

// TestChangedPolicyStartsFresh: state saved for one revision of a policy
// is not put back into another: a policy changed just before a restart
// starts its rules afresh (and so notifies its firing, with the new
// message).
func TestChangedPolicyStartsFresh(t *testing.T) {
	hookURL, got := notifySink(t)
	tc := newTestClock()
	h := newHarness(t, testConfig, Options{Clock: tc.Now, RateLimit: -1, NotifyWebhook: hookURL})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("busy", 8, 1)); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	src := func(msg string) string {
		return "policies:\n  - name: busy\n    when: {metric: utilization, of: cluster, above: 10%}\n    then: [{type: notify, message: " + msg + "}]\n"
	}
	if err := h.s.ApplyPolicy(h.ctx, "ops", "ops.yaml", src("first")); err != nil {
		t.Fatal(err)
	}
	h.s.TickPolicies(h.ctx)
	if n := receiveNote(t, got, "busy", "fired"); n.Message != "first" {
		t.Fatalf("got %+v", n)
	}
	// Changed, then a restart before any evaluation saved the new state.
	if err := h.s.ApplyPolicy(h.ctx, "ops", "ops.yaml", src("second")); err != nil {
		t.Fatal(err)
	}
	s2, err := New(h.ctx, Options{Store: h.st, AdminToken: testAdmin, Clock: tc.Now, RateLimit: -1, Logger: h.s.log, NotifyWebhook: hookURL})
	if err != nil {
		t.Fatal(err)
	}
	tc.Advance(time.Minute)
	s2.TickPolicies(h.ctx)
	if n := receiveNote(t, got, "busy", "fired"); n.Message != "second" {
		t.Fatalf("got %+v, want the changed policy's firing", n)
	}
	nothingMore(t, s2.policies, got)
}
