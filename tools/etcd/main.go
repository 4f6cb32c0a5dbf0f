// Command etcd is the etcd server, built from its Go module at the version
// pinned in this directory's go.mod. It exists so tests and CI can run a real
// etcd cluster on a machine that has only Go: scripts/etcd.sh builds it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
