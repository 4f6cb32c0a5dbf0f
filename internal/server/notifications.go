package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
)

// A policy rule's notify actions are sent when the rule fires and when it
// reverts. Each is recorded in the event log (type PolicyNotification,
// seen by the admin) with the firing, and, when Options.NotifyWebhook is
// set, POSTed to it as JSON. Deliveries run in order, off the policy
// loop; a dry-run rule sends nothing.

// Notification is the JSON body POSTed to the notification webhook.
type Notification struct {
	Policy  string    `json:"policy"`
	Rule    string    `json:"rule"`
	Event   string    `json:"event"` // "fired" or "reverted"
	Time    time.Time `json:"time"`
	Channel string    `json:"channel,omitempty"`
	Message string    `json:"message"`
	// Reason is the firing log's line: the values that decided.
	Reason string `json:"reason"`
}

// notifications returns what a firing's notify actions send.
func notifications(policyName string, f policy.Firing) []Notification {
	if f.DryRun {
		return nil
	}
	var out []Notification
	for _, a := range f.Actions {
		if a.Type == policy.ActionNotify {
			out = append(out, Notification{Policy: policyName, Rule: f.Rule, Event: f.Event.String(), Time: f.Time,
				Channel: a.Channel, Message: a.Message, Reason: f.String()})
		}
	}
	return out
}

// eventText is the notification's line in the event log.
func (n *Notification) eventText() string {
	if n.Channel != "" {
		return fmt.Sprintf("%s (%s, rule %s %s)", n.Message, n.Channel, n.Rule, n.Event)
	}
	return fmt.Sprintf("%s (rule %s %s)", n.Message, n.Rule, n.Event)
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
