package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/etcdtest"
)

// TestEtcdTLSFlags: the TLS flags are checked before anything connects,
// each error naming its flag.
func TestEtcdTLSFlags(t *testing.T) {
	for _, c := range []struct {
		f    etcdTLSFlags
		eps  []string
		want string
	}{
		{etcdTLSFlags{ca: "ca.pem"}, []string{"http://127.0.0.1:2379"}, "need https://"},
		{etcdTLSFlags{}, []string{"https://a:2379", "http://b:2379"}, "mix of http"},
		{etcdTLSFlags{cert: "c.pem"}, []string{"https://a:2379"}, "--etcd-cert and --etcd-key"},
		{etcdTLSFlags{ca: filepath.Join(t.TempDir(), "missing.pem")}, []string{"https://a:2379"}, "--etcd-cacert"},
	} {
		if _, err := c.f.config(c.eps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v %v: %v, want an error with %q", c.f, c.eps, err, c.want)
		}
	}
	if tc, err := (etcdTLSFlags{}).config([]string{"http://a:2379"}); tc != nil || err != nil {
		t.Errorf("plain endpoints: %v %v, want no TLS", tc, err)
	}
}

// TestAdminOverTLS: admin snapshot save reaches a TLS etcd that requires
// client certificates with the flags, and is refused without its
// certificate.
func TestAdminOverTLS(t *testing.T) {
	ec := etcdtest.StartTLS(t, 1)
	f := ec.TLS()
	ep := strings.Join(ec.Endpoints(), ",")
	dir := t.TempDir()
	_, errOut, code := run(t, "admin", "snapshot", "save", "--etcd-endpoints", ep, "--etcd-cacert", f.CA, "--etcd-cert", f.Cert, "--etcd-key", f.Key, filepath.Join(dir, "a.snap"))
	if code != 0 {
		t.Fatalf("save over TLS: exit %d: %s", code, errOut)
	}
	_, errOut, code = run(t, "admin", "snapshot", "save", "--etcd-endpoints", ep, "--etcd-cacert", f.CA, filepath.Join(dir, "b.snap"))
	if code == 0 {
		t.Fatal("save without a client certificate succeeded against --client-cert-auth")
	}
	t.Logf("without a client certificate: %s", strings.TrimSpace(errOut))
}
