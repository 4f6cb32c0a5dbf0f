package etcdtest

import (
	"os"
	"sync"
	"testing"
)

var shared struct {
	once sync.Once
	c    *Cluster
	dir  string
	err  error
}

// Shared returns a one-member cluster started once per test process and
// shared by its tests, each of which keeps to a key prefix of its own.
// Faults (Kill, Stop, ...) must not be injected into it: use Start for
// that. The package's TestMain calls StopShared after m.Run.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	bin := Binary(t)
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "arbiter-etcd-shared-"); shared.err != nil {
			return
		}
		var c *Cluster
		for try := 0; try < 3; try++ {
			if c, shared.err = launch(t, bin, shared.dir+"/etcd", 1, nil); shared.err == nil {
				break
			}
			c.shutdown()
		}
		shared.c = c
	})
	if shared.err != nil {
		t.Fatalf("etcdtest: shared cluster: %v", shared.err)
	}
	return shared.c
}

// StopShared stops the shared cluster, if one was started, and removes
// its data.
func StopShared() {
	if shared.c != nil {
		for _, m := range shared.c.members {
			if m.cmd != nil && m.state != killed {
				_ = m.kill()
			}
		}
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}
