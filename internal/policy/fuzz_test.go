package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// fuzzLoad loads src and checks the loader's contract: it never panics;
// on failure every problem has a position and wraps ErrInvalid; on success
// the policy validates, explains, and runs in an engine.
func fuzzLoad(t *testing.T, src string) {
	p, err := Load("fuzz.yaml", []byte(src))
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("error does not wrap ErrInvalid: %v", err)
		}
		var list yamlfile.Errors
		if !errors.As(err, &list) || len(list) == 0 {
			t.Fatalf("error carries no problems: %v", err)
		}
		for _, e := range list {
			// yamlfile reports some syntax errors (bad UTF-8) at line 0.
			if (e.Pos.Line < 1 && !strings.HasPrefix(e.Msg, "invalid YAML")) || e.Pos.File != "fuzz.yaml" {
				t.Fatalf("problem without a position: %v", e)
			}
		}
		return
	}
	_ = p.Validate(known)
	if p.Explain() == "" {
		t.Fatal("empty explanation")
	}
	e, err := NewEngine(p)
	if err != nil {
		t.Fatalf("loaded policy does not build an engine: %v", err)
	}
	v := values{}
	for _, m := range AllMetrics() {
		v[Query{Metric: m, Target: Cluster}] = 1e6
	}
	for i := 0; i < 3; i++ {
		st := e.Evaluate(t0.Add(time.Duration(i)*time.Hour), v)
		for _, f := range st.Firings {
			_ = f.String()
		}
	}
}

func FuzzLoadOperators(f *testing.F) {
	f.Add(mustReadFile(f, "../../examples/policies/operators.yaml"))
	f.Add(`scheduling_policies:
  - name: r
    conditions:
      - metric: p99_latency
        target: service:chat
        threshold: 150
        duration: 5 minutes
      - resource_type: pool:a
        utilization_threshold: 0.9
    actions:
      - type: scale_dwn
        target: x
      - {type: set_spot_price, target: region:eastus, price: $2}
      - {type: set_limit, target: tenant:t, limit: 64}
    cooldown: 1m
    max_duration: 1h
`)
	f.Add("scheduling_policies: [{name: a, conditions: [{}], actions: [{}]}]")
	f.Add("scheduling_policies: [{name: b, conditions: [{resource_type: gpu_cluster, utilization_threshold: 85%, utilization: busy}], actions: [{type: notify, message: m}]}]")
	f.Add("scheduling_policies: [{name: b, conditions: [{metric: busy_utilization, target: tenant:acme, threshold: 5%, utilization: allocation}], actions: [{type: notify, message: m}]}]")
	f.Add(promOperators)
	f.Add("scheduling_policies: [{name: a, conditions: [{source: prometheus, server: 'https://[::1]:9090/p', query: up, target: service:x, target_label: service, threshold: 1, no_data: true}], actions: [{type: drain, target: pool:p}]}]")
	f.Fuzz(func(t *testing.T, src string) {
		if !strings.Contains(src, "scheduling_policies") {
			src = "scheduling_policies:\n" + src
		}
		fuzzLoad(t, src)
	})
}

func FuzzLoadNative(f *testing.F) {
	f.Add(mustReadFile(f, "../../examples/policies/native.yaml"))
	f.Add(`policies:
  - name: r
    when:
      any:
        - {metric: queue_wait, of: "selector:team=ml", below: 5m, hysteresis: 1m}
        - all: [{expr: "utilization() > 0.5", for: 2m}, {metric: spot_price, of: flavor:H100, above: $3/h}]
    then:
      - {type: notify, channel: ops, message: hi}
      - {type: reallocate, resources: inference, guarantee: 8}
    hysteresis: 5%
    dry_run: true
`)
	f.Add("policies: [{name: x, when: {expr: '1/0 > 0'}, then: [{type: drain, target: pool:p}]}]")
	f.Add("policies: [{name: b, when: {metric: utilization, utilization: busy, of: pool:p, below: 5%}, then: [{type: notify, message: m}]}]")
	f.Add("policies: [{name: b, when: {any: [{metric: busy_utilization, above: 90%}, {expr: 'busy_utilization(\"tenant:acme\") < 0.05'}], utilization: [x]}, then: [{type: notify, message: m}]}]")
	f.Add(fmt.Sprintf(promNative, "hold"))
	f.Add("policies: [{name: x, when: {source: prometheus, server: 'http://u:p@h', query: '', target_label: '0', of: cluster, above: 1, no_data: 2}, then: [{type: drain, target: pool:p}]}]")
	f.Fuzz(func(t *testing.T, src string) {
		if !strings.Contains(src, "policies") {
			src = "policies:\n" + src
		}
		fuzzLoad(t, src)
	})
}
