package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/policy/effects"
)

// A policy rule's notify actions are sent when the rule fires and when it
// reverts. Each is recorded in the event log (type PolicyNotification,
// seen by the admin) with the firing, and, when Options.NotifyWebhook is
// set, POSTed to it as JSON. Deliveries run in order, off the policy
// loop; a dry-run rule sends nothing.

// Notification is the JSON body POSTed to the notification webhook; the
// policy runtime makes it (effects.Notifications), as in the simulator.
type Notification = effects.Notification

// notifications returns what a firing's notify actions send.
func notifications(policyName string, f policy.Firing) []Notification {
	return effects.Notifications(policyName, f)
}

// sendNotifications delivers ns to the webhook after every earlier
// delivery, without blocking the caller.
func (pr *policyRunner) sendNotifications(ctx context.Context, ns []Notification) {
	url := pr.s.opts.NotifyWebhook
	if url == "" || len(ns) == 0 {
		return
	}
	pr.mu.Lock()
	prev := pr.delivered
	done := make(chan struct{})
	pr.delivered = done
	pr.mu.Unlock()
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		for _, n := range ns {
			if err := postJSON(ctx, pr.hc, url, n); err != nil {
				pr.s.log.Warn("policy: notification delivery failed", "policy", n.Policy, "rule", n.Rule, "err", redact(err, url))
			}
		}
	}()
}

// postJSON POSTs v as JSON, trying up to 3 times on transport errors and
// 5xx answers.
func postJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode < 300 {
			return nil
		}
		last = fmt.Errorf("webhook answered %s", resp.Status)
		if resp.StatusCode < 500 {
			return last
		}
	}
	return last
}
