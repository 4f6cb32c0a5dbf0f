package policy

import (
	"strings"
	"testing"
	"time"
)

func TestPlainDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 10 * time.Minute: "10m", 30 * time.Minute: "30m", time.Hour: "1h", 90 * time.Minute: "1h30m",
		4 * time.Hour: "4h", 45 * time.Second: "45s", 150 * time.Millisecond: "150ms", 2*time.Hour + 5*time.Second: "2h0m5s",
	} {
		if got := plainDuration(d); got != want {
			t.Errorf("plainDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestExplainNative(t *testing.T) {
	p := mustLoad(t, mustReadFile(t, "../../examples/policies/native.yaml"))
	got := p.Explain()
	for _, want := range []string{
		"ai_training_priority: Keep room for the provider's own training when the fleet is nearly full.\n" +
			"  When GPU utilization of the whole cluster is above 85% (once true, it stays true until the value is back to 80%),\n" +
			"  shrink class developer_instances to 30% of its limit, evicting preemptible excess gracefully;\n" +
			"  and move class batch_jobs to pool low_priority_pool, requeued from their last checkpoint.\n" +
			"  The actions last while the condition holds and end once it has been clear for 10m; the rule changes state at most once every 10m.\n",
		"When (the capacity failure rate of region eastus is above 2% and (the number of pending GPUs of region eastus is above 256 or mean queue wait of tenant research is above 30m for 10m without a break)),\n" +
			"  set the spot price of region eastus to $3.20 per GPU-hour.",
		"When the expression `now.getHours() < 6",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explanation lacks:\n%s\ngot:\n%s", want, got)
		}
	}
}
