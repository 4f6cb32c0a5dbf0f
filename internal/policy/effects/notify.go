package effects

import (
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter/internal/policy"
)

// Notification is what a notify action sends when its rule fires or
// reverts (the server POSTs it as JSON to the notification webhook and
// records it as an event; the simulator logs it).
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

// Notifications returns what a firing's notify actions send (nothing for
// a dry-run rule).
func Notifications(policyName string, f policy.Firing) []Notification {
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

// Text is the notification's line in the event log.
func (n *Notification) Text() string {
	if n.Channel != "" {
		return fmt.Sprintf("%s (%s, rule %s %s)", n.Message, n.Channel, n.Rule, n.Event)
	}
	return fmt.Sprintf("%s (rule %s %s)", n.Message, n.Rule, n.Event)
}
