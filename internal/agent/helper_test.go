package agent

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary double as a replica (REPLICA_HELPER set
// in the replica's spec environment) and removes the built arbiter binary.
func TestMain(m *testing.M) {
	if os.Getenv("REPLICA_HELPER") == "lock" {
		lockReplica()
		return
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// lockReplica is a replica that proves it runs alone: it holds an
// exclusive flock on $LOCKDIR/WORKLOAD-REPLICA.lock for its whole life
// (the kernel releases it when the process ends, however it ends). A copy
// that finds the lock held appends to $LOCKDIR/overlaps (and waits for
// it), so a file there means two processes ran the same replica at once.
// It appends start and stop lines with wall-clock times to
// $LOCKDIR/WORKLOAD-REPLICA.log and exits on SIGTERM.
func lockReplica() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	dir := os.Getenv("LOCKDIR")
	base := filepath.Join(dir, os.Getenv("ARBITER_WORKLOAD")+"-"+os.Getenv("ARBITER_REPLICA"))
	node := os.Getenv("ARBITER_NODE")
	f, err := os.OpenFile(base+".lock", os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		appendLine(filepath.Join(dir, "overlaps"), fmt.Sprintf("%d %s pid %d found the lock held", time.Now().UnixNano(), node, os.Getpid()))
		syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		appendLine(filepath.Join(dir, "overlaps"), fmt.Sprintf("%d %s pid %d got the lock", time.Now().UnixNano(), node, os.Getpid()))
	}
	appendLine(base+".log", fmt.Sprintf("start %d %s %d", time.Now().UnixNano(), node, os.Getpid()))
	os.WriteFile(base+".pid.tmp", []byte(strconv.Itoa(os.Getpid())), 0o644)
	os.Rename(base+".pid.tmp", base+".pid")
	<-term
	appendLine(base+".log", fmt.Sprintf("stop %d %s %d", time.Now().UnixNano(), node, os.Getpid()))
	os.Exit(0)
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return
	}
	f.Write([]byte(line + "\n")) // one write: appends do not interleave
	f.Close()
}

// marker is one start or stop line of a lock replica.
type marker struct {
	kind string
	at   time.Time
	node string
	pid  int
}

func readMarkers(t *testing.T, path string) []marker {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []marker
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m marker
		var ns int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %s %d", &m.kind, &ns, &m.node, &m.pid); err != nil {
			t.Fatalf("marker %q: %v", sc.Text(), err)
		}
		m.at = time.Unix(0, ns)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// overlaps returns the lines of LOCKDIR/overlaps: none when no two
// processes ever ran the same replica at once.
func overlaps(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "overlaps"))
	return string(b)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// arbiterBinary builds cmd/arbiter once per test run.
func arbiterBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the arbiter binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the binary")
	}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "arbiter-bin"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "arbiter")
		if out, err := exec.Command(goBin, "build", "-o", binPath, "github.com/arbiterhq/arbiter/cmd/arbiter").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proxy forwards TCP connections to target until cut: then it closes
// every connection it carries and holds new ones without forwarding (as a
// partition that drops packets would) until restore closes them.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	isCut  bool
	conns  map[net.Conn]bool
	held   []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.isCut {
			p.held = append(p.held, c)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.isCut { // cut while dialing
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// cut starts the partition.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for c := range p.conns {
		c.Close()
	}
}

// restore ends it: the held connections are closed (their packets are
// gone) and new ones are forwarded again.
func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
	for _, c := range p.held {
		c.Close()
	}
	p.held = nil
}

// alive reports whether pid runs (not a zombie).
func alive(pid int) bool { return ProcessAlive(pid) }

// agentLogs logs the files on failure.
func logFilesOnFailure(t *testing.T, paths ...string) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range paths {
				b, _ := os.ReadFile(p)
				t.Logf("%s:\n%s", filepath.Base(p), strings.TrimSpace(string(b)))
			}
		}
	})
}
