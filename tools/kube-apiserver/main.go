// Command kube-apiserver is the Kubernetes API server, built from the
// k8s.io/kubernetes Go module at the version pinned in this directory's
// go.mod. It exists so tests and CI can run a real API server (over a real
// etcd) on a machine that has only Go: scripts/kube.sh builds it. This main
// is the one of k8s.io/kubernetes/cmd/kube-apiserver.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
