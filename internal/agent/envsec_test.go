package agent

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// TestReplicaEnvIsClean: the agent runs with the admin token and another
// secret in its environment (as the README's demo had it); a replica's
// whole environment is its spec's variables, PATH, HOME (its own working
// directory, where it also runs), the GPU variables and ARBITER_*: neither
// secret appears, and the paths it is given are absolute although the
// agent's data dir is relative.
func TestReplicaEnvIsClean(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	t.Setenv("ARBITER_TOKEN", adminToken)
	t.Setenv("SECRET_X", "s3cret-value")
	t.Setenv("PATH", "/opt/agent-only/bin:"+os.Getenv("PATH"))
	t.Chdir(e.dir)
	e.startAgentWith("n1", func(o *Options) { o.DataDir, o.CheckpointRoot = "agent-rel", "" })
	e.waitFor("the node", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })
	e.submit("job", "normal", 1, time.Second, "60")
	envFile := filepath.Join(e.out, "job-0.env.0")
	e.waitFor("the replica to record its environment", 10*time.Second, func() bool { return exists(envFile) })
	raw, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{adminToken, "s3cret-value", "SECRET_X", "ARBITER_TOKEN", "/opt/agent-only"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the replica's environment holds %q:\n%s", secret, raw)
		}
	}
	m := readEnv(t, envFile)
	spec := map[string]bool{"OUTDIR": true, "RUN_FOR": true, "PATH": true, "HOME": true, "CUDA_VISIBLE_DEVICES": true, "NVIDIA_VISIBLE_DEVICES": true,
		"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true} // the last four the shell sets
	for k := range m {
		if !spec[k] && !strings.HasPrefix(k, "ARBITER_") {
			t.Errorf("the replica's environment has %s=%q, which neither its spec nor the agent's contract gives it", k, m[k])
		}
	}
	work := e.objs["n1"].WorkDir("team/job", 0)
	if m["PATH"] != cleanPath || m["HOME"] != work || !filepath.IsAbs(work) {
		t.Errorf("PATH=%q HOME=%q, want %q and the working dir %q", m["PATH"], m["HOME"], cleanPath, work)
	}
	for _, k := range []string{"ARBITER_CHECKPOINT_DIR", "ARBITER_NOTICE_FILE", "ARBITER_WORK_DIR"} {
		if !filepath.IsAbs(m[k]) {
			t.Errorf("%s=%q is not an absolute path", k, m[k])
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.out, "job-0.pwd")); strings.TrimSpace(string(b)) != work {
		t.Errorf("the replica runs in %q, want its working dir %q", strings.TrimSpace(string(b)), work)
	}
}

// TestRefuseRoot: replicas do not run as root unless --allow-root; the
// error names both ways out.
func TestRefuseRoot(t *testing.T) {
	base := Options{Server: "http://127.0.0.1:1", Token: "t", NodeID: "n", Inventory: Fake("n", 1, "A100-80G"), DataDir: t.TempDir()}
	cases := []struct {
		name  string
		edit  func(*Options)
		wantE bool
	}{
		{"run-as root", func(o *Options) { o.RunAs = "root" }, true},
		{"run-as uid 0", func(o *Options) { o.RunAs = "0" }, true},
		{"run-as root, allowed", func(o *Options) { o.RunAs, o.AllowRoot = "root", true }, false},
		{"run-as a missing user", func(o *Options) { o.RunAs = "no-such-user-xyz" }, true},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name  string
			edit  func(*Options)
			wantE bool
		}{"the agent is root", func(*Options) {}, true})
	}
	for _, c := range cases {
		o := base
		c.edit(&o)
		_, err := New(o)
		if (err != nil) != c.wantE {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.wantE && strings.Contains(c.name, "root") {
			if !errors.Is(err, ErrRunAsRoot) || !strings.Contains(err.Error(), "--run-as") || !strings.Contains(err.Error(), "--allow-root") {
				t.Errorf("%s: %v, want ErrRunAsRoot naming --run-as and --allow-root", c.name, err)
			}
		}
	}
}

// TestRunAsNobody: with RunAs the replica runs as that user, in a working
// directory and with a checkpoint directory it may write.
func TestRunAsNobody(t *testing.T) {
	u, err := user.Lookup("nobody")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and a user nobody")
	}
	e := newEnv(t, 30*time.Second)
	// The user must reach its directories under the test's.
	for d := e.dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()) && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	script := filepath.Join(e.dir, "whoami.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"uid=$(id -u)\"\ntouch \"$HOME/x\" && echo home-writable\n"+
		"echo c > \"$ARBITER_CHECKPOINT_DIR/c\" && echo ckpt-writable\nmkdir -p \"$HOME/sub\" && echo done\nsleep 60\n"), 0o755)
	e.startAgentWith("n1", func(o *Options) { o.RunAs, o.AllowRoot = "nobody", false })
	e.waitFor("the node", 5*time.Second, func() bool { ns, _ := e.admin.Nodes(e.ctx, ""); return len(ns) == 1 })
	_, err = e.admin.Submit(e.ctx, "team", api.WorkloadSpec{Name: "who", GPUs: api.GPUs(resource.GPUs(8)), Replicas: 1, Priority: "normal",
		Flavors: []string{"A100-80G"}, Regions: []string{"local"}, Command: &api.Command{Argv: []string{"/bin/sh", script}, Dir: "run/here"}})
	if err != nil {
		t.Fatal(err)
	}
	logPath := e.objs["n1"].LogPath("team/who", 0)
	var log string
	e.waitFor("the replica's output", 10*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		log = string(b)
		return strings.Contains(log, "done") || strings.Contains(log, "exited")
	})
	for _, want := range []string{"uid=" + u.Uid + "\n", "home-writable", "ckpt-writable"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	st, err := os.Stat(filepath.Join(e.objs["n1"].WorkDir("team/who", 0), "run", "here"))
	if err != nil {
		t.Fatalf("command.dir inside the working dir: %v", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != uid {
		t.Errorf("command.dir not owned by nobody: %+v", st.Sys())
	}
}
