package store

import (
	"os"
	"testing"

	"github.com/arbiterhq/arbiter/internal/etcdtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.StopShared()
	os.Exit(code)
}

// sharedEtcd is the endpoints of the package's etcd cluster (a real one,
// started once; each test keeps to a prefix of its own).
func sharedEtcd(t *testing.T) []string { return etcdtest.Shared(t).Endpoints() }
