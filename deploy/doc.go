// Package deploy holds what an operator deploys beside the binary: the
// Kubernetes manifests (deployment.yaml, rbac.yaml, crds/), the systemd
// units (systemd/), the Prometheus alerting rules (prometheus/rules.yaml,
// unit-tested by prometheus/rules_test.yaml) and the Grafana dashboard
// (grafana/arbiter.json). It has no code. Its tests run promtool (built
// once from the Prometheus module by scripts/promtool.sh and cached, as
// the test etcd is) over the rules and over the dashboard's queries, so
// `go test ./...` and CI check both.
//
// That every metric name the rules and the dashboard use is one the
// server exports is checked by internal/server's TestDeployMetricNames.
package deploy
