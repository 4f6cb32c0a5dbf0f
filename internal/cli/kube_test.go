package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKubeRejectsBadFlags(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(bad, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster, even when CI runs in one
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenant-mapping", "ns-without-tenant"}, "--tenant-mapping"},
		{[]string{"--tenant-mapping", "a=x,a=y"}, "mapped twice"},
		{[]string{"--gpu-model-map", "Voodoo-5=NoSuchModel"}, "--gpu-model-map"},
		{[]string{"--priority-class-mapping", "batch=urgent"}, "--priority-class-mapping"},
		{[]string{"--interval", "0s"}, "--interval must be positive"},
		{[]string{"--workers", "0"}, "--workers must be 1 to 1024"},
		{[]string{"--workers", "100000"}, "--workers must be 1 to 1024"},
		{[]string{"--kube-api-qps", "-1"}, "--kube-api-qps"},
		{[]string{"--kubeconfig", bad}, "kube: connecting"},
		{nil, "kube: connecting"}, // no kubeconfig, not in a cluster
	} {
		_, errOut, code := run(t, append([]string{"kube"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("kube %v: exit %d, %q; want an error naming %s", c.args, code, errOut, c.want)
		}
	}
}
