// Package prometheus holds Arbiter's Prometheus alerting rules
// (rules.yaml) and their unit tests (rules_test.yaml). It has no code:
// its Go test runs promtool over both, so `go test ./...` (and CI) checks
// the rules. promtool is built once from the Prometheus module by
// scripts/promtool.sh and cached, as the test etcd is.
//
// The rules' metric names are checked against those the server exports
// by internal/server's TestDeployMetricNames.
package prometheus
