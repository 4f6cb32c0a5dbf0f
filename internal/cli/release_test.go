package cli

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/testbin"
)

func TestVersionCommand(t *testing.T) {
	out, errOut, code := run(t, "version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// go test stamps no VCS revision: the commit is unknown.
	want := "arbiter dev (commit unknown, " + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if out != want {
		t.Errorf("version printed %q, want %q", out, want)
	}
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v1.2.3", "0123456789ab"
	if got := VersionLine(); !strings.HasPrefix(got, "arbiter v1.2.3 (commit 0123456789ab, go") {
		t.Errorf("with -X values: %q", got)
	}
}

// TestReleaseScript builds the linux/amd64 archive with scripts/release.sh
// and runs its binary: static, with the version and commit the script
// injected. With a warm build cache it takes seconds; the first run
// compiles the dependencies once for CGO_ENABLED=0 -trimpath (minutes on two
// cores), so -short skips it.
func TestReleaseScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release binary")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("runs the linux/amd64 binary")
	}
	script, err := testbin.Script("release")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("bash", script, out)
	cmd.Env = append(os.Environ(), "TARGETS=linux/amd64", "VERSION=v0.0.0-test", "NVML=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	const name = "arbiter-v0.0.0-test-linux-amd64"
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(sums)), "  "+name+".tar.gz") {
		t.Errorf("SHA256SUMS: %q, %v", sums, err)
	}
	if b, err := exec.Command("tar", "-xzf", filepath.Join(out, name+".tar.gz"), "-C", out).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, b)
	}
	for _, f := range []string{"LICENSE", "NOTICE", "systemd/arbiter.service", "systemd/arbiter-agent.service"} {
		if _, err := os.Stat(filepath.Join(out, name, f)); err != nil {
			t.Errorf("the archive lacks %s: %v", f, err)
		}
	}
	got, err := exec.Command(filepath.Join(out, name, "arbiter"), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	line := string(got)
	if !strings.HasPrefix(line, "arbiter v0.0.0-test (commit ") || strings.Contains(line, "commit unknown") || !strings.Contains(line, "linux/amd64") {
		t.Errorf("the release binary says %q, want version v0.0.0-test and the checkout's commit", line)
	}
}

// TestDockerfile checks the Dockerfile's shape (the tests do not build
// images): a Go build stage with cgo off, a distroless runtime stage that
// runs as non-root with the data volume, serve by default.
func TestDockerfile(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var from []string
	last := map[string]string{} // instruction -> its arguments, in the last stage
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, args, _ := strings.Cut(line, " ")
		switch instr = strings.ToUpper(instr); instr {
		case "FROM":
			from = append(from, args)
			last = map[string]string{}
		default:
			last[instr] += args + "\n"
		}
	}
	if len(from) != 2 || !strings.HasPrefix(from[0], "golang:") || !strings.HasSuffix(from[0], " AS build") {
		t.Fatalf("stages %q, want a golang build stage and a runtime stage", from)
	}
	if !strings.HasPrefix(from[1], "gcr.io/distroless/static") {
		t.Errorf("runtime stage %q, want distroless static", from[1])
	}
	data, _ := os.ReadFile("../../Dockerfile")
	if !strings.Contains(string(data), "CGO_ENABLED=0 go build") {
		t.Error("the binary is not built with CGO_ENABLED=0")
	}
	if u := strings.TrimSpace(last["USER"]); u == "" || u == "root" || strings.HasPrefix(u, "0") {
		t.Errorf("USER %q, want a non-root user", u)
	}
	if !strings.Contains(last["VOLUME"], "/var/lib/arbiter") || !strings.Contains(last["ENV"], "ARBITER_DATA=/var/lib/arbiter") {
		t.Errorf("VOLUME %q, ENV %q: want the data volume /var/lib/arbiter as ARBITER_DATA", last["VOLUME"], last["ENV"])
	}
	if !strings.Contains(last["ENTRYPOINT"], "/usr/local/bin/arbiter") || !strings.Contains(last["CMD"], `"serve"`) {
		t.Errorf("ENTRYPOINT %q, CMD %q: want arbiter serve by default", last["ENTRYPOINT"], last["CMD"])
	}
}
