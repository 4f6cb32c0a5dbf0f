package store

import (
	"os"
	"strings"
	"testing"
)

func sharedEtcd(t *testing.T) []string {
	eps := os.Getenv("ARBITER_TEST_ETCD")
	if eps == "" {
		t.Skip("no etcd")
	}
	return strings.Split(eps, ",")
}
