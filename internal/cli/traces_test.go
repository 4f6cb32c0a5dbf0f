package cli

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/testbin"
)

// sharedTraces is where the tests find the public traces: beside the
// checkout, as scripts/fetch-traces.sh ../shared/traces leaves them.
const sharedTraces = "../../../shared/traces"

// TestFetchTraces runs scripts/fetch-traces.sh without a network: it checks
// what DIR holds, names a corrupted file, fails clearly when it cannot
// download, and fetches from a mirror (the shared copy, by file://).
func TestFetchTraces(t *testing.T) {
	if _, err := os.Stat(filepath.Join(sharedTraces, "alibaba-gpu-v2023", "openb_node_list_gpu_node.csv")); err != nil {
		t.Skipf("traces not present: %v", err)
	}
	script, err := testbin.Script("fetch-traces")
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := filepath.Abs(sharedTraces)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(env string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	dir := t.TempDir()
	for _, f := range []string{"openb_node_list_gpu_node.csv", "openb_pod_list_default.csv"} {
		copyFile(t, filepath.Join(sharedTraces, "alibaba-gpu-v2023", f), filepath.Join(dir, "alibaba-gpu-v2023", f))
	}
	if out, err := fetch("", "--check", dir); err == nil || !strings.Contains(out, "lacks 19 of 21 files") {
		t.Errorf("--check of 2 of 21 files: %v\n%s", err, out)
	}
	if out, err := fetch("ARBITER_TRACES_MIRROR=file:///nonexistent", dir); err == nil ||
		!strings.Contains(out, "cannot download file:///nonexistent/") || !strings.Contains(out, "copy the traces into "+dir+" by hand") {
		t.Errorf("download from nowhere: %v\n%s", err, out)
	}
	if out, err := fetch("ARBITER_TRACES_MIRROR=file://"+mirror, dir); err != nil || !strings.Contains(out, "21 files in") {
		t.Fatalf("fetch from the mirror: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "alibaba-gpu-v2023", "openb_pod_list_default.csv")
	f, err := os.OpenFile(bad, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x\n")
	f.Close()
	if out, err := fetch("", dir); err == nil || !strings.Contains(out, bad+": sha256 ") || !strings.Contains(out, "1 of 21 files") {
		t.Errorf("corrupted file: %v\n%s", err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
