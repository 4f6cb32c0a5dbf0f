// Package kubetest runs a real kube-apiserver, over a real etcd, on loopback
// for tests.
//
// The server is the kube-apiserver of the k8s.io/kubernetes version pinned in
// tools/kube-apiserver (built from its Go module by scripts/kube.sh build,
// once per machine and cached), and its etcd is a one-member cluster of
// internal/etcdtest, so a machine with only Go runs these tests. There is no
// kubelet, controller manager or scheduler: tests create Node objects with
// the capacity and labels they need, and nothing acts on Pods but the test
// and the code under test.
//
// Start generates in the test's temporary directory everything the server
// needs: a CA and a serving certificate for 127.0.0.1, a service-account
// signing key pair, and a static token file with an admin token (group
// system:masters). Authorization is RBAC. Other identities come from
// TokenConfig, whose tokens a token-review webhook in the test process
// answers, so RBAC rules (those of deploy/, say) can be tested as the user
// they are written for.
//
// Admission runs kube-apiserver's default plugins but two whose work a
// controller of the controller manager (not run here) must finish:
// ServiceAccount, which rejects every Pod until the namespace's "default"
// ServiceAccount exists, and TaintNodesByCondition, which taints every new
// Node node.kubernetes.io/not-ready:NoSchedule until the node-lifecycle
// controller sees it Ready. So NamespaceLifecycle holds (a namespace must
// exist before objects in it), Priority resolves a Pod's priorityClassName,
// and a Node has the taints the test gives it.
//
// What a kubelet would do, the test does: a bound Pod stays Pending (and a
// Pending Pod ignores PodDisruptionBudgets on eviction) until the test sets
// its status Running; an evicted or deleted bound Pod gets a
// deletionTimestamp and stays, terminating, until deleted with grace 0. No
// disruption controller runs either: a budget's status is the test's to set.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"github.com/arbiterhq/arbiter/internal/testbin"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/etcdtest"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// startTimeout bounds how long Start waits for /readyz once the process runs.
const startTimeout = 120 * time.Second

// ServiceClusterIPRange is the --service-cluster-ip-range the server gets.
// No traffic goes to it: nothing here runs a Service's proxy.
const ServiceClusterIPRange = "10.96.0.0/16"

// ServiceAccountIssuer is the server's --service-account-issuer.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// ErrExited is returned (wrapped, with the log's tail) when kube-apiserver
// exits before it is ready.
var ErrExited = errors.New("kubetest: kube-apiserver exited before it was ready")

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary returns the path of the kube-apiserver binary, building it through
// scripts/kube.sh build on the first call in this process. A build failure is
// fatal (with the script's output): a test that needs the API server must not
// pass by skipping.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { buildPath, buildErr = testbin.Build("kube") })
	if buildErr != nil {
		t.Fatalf("kubetest: %v", buildErr)
	}
	return buildPath
}

// APIServer is a running kube-apiserver with its etcd.
type APIServer struct {
	etcd       *etcdtest.Cluster
	dir        string
	host       string // https://127.0.0.1:PORT
	caPEM      []byte
	adminToken string
	kubeconfig string
	webhook    *tokenWebhook

	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when cmd has exited
	waitErr error         // cmd.Wait's result, set before exited closes

	// Ready is how long the last start took from exec to /readyz answering ok.
	Ready time.Duration
}

// Start builds kube-apiserver if needed, starts a one-member etcd and the
// server on a free loopback port, and waits until /readyz answers ok.
// Everything stops in t.Cleanup. A port another process takes between the
// pick and the server's bind makes that try fail; Start then retries on a
// fresh port, and fails the test after three tries with the server's log.
func Start(t testing.TB) *APIServer {
	t.Helper()
	bin := Binary(t)
	etcd := etcdtest.Start(t, 1)
	dir := filepath.Join(t.TempDir(), "kube-apiserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	s := &APIServer{etcd: etcd, dir: dir, adminToken: newToken(), webhook: newTokenWebhook()}
	t.Cleanup(s.webhook.close) // after the server stops: cleanups run last-in first-out
	args, err := s.prepare()
	if err != nil {
		t.Fatalf("kubetest: preparing kube-apiserver's files: %v", err)
	}
	var lastErr error
	for try := 1; try <= 3; try++ {
		port, err := pickPort()
		if err != nil {
			t.Fatalf("kubetest: %v", err)
		}
		err = s.launch(bin, port, args)
		if err == nil {
			t.Cleanup(s.stop)
			if err := s.writeKubeconfig(); err != nil {
				t.Fatalf("kubetest: %v", err)
			}
			return s
		}
		lastErr = err
		s.stop()
		t.Logf("kubetest: kube-apiserver try %d on port %d failed: %v", try, port, err)
	}
	t.Fatalf("kubetest: could not start kube-apiserver: %v", lastErr)
	return nil
}

// prepare writes the PKI, token file and webhook config into s.dir and
// returns the flags that do not depend on the port.
func (s *APIServer) prepare() ([]string, error) {
	p, err := newPKI(s.dir)
	if err != nil {
		return nil, err
	}
	s.caPEM = p.caPEM
	tokenFile := filepath.Join(s.dir, "tokens.csv")
	if err := writeTokenFile(tokenFile, s.adminToken); err != nil {
		return nil, err
	}
	webhookConfig := filepath.Join(s.dir, "token-webhook.kubeconfig")
	if err := s.webhook.writeConfig(webhookConfig); err != nil {
		return nil, err
	}
	return []string{
		"--etcd-servers=" + strings.Join(s.etcd.Endpoints(), ","),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// The "kubernetes" Service's Endpoints may not name a loopback address.
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + s.dir,
		"--tls-cert-file=" + p.servingCert,
		"--tls-private-key-file=" + p.servingKey,
		"--token-auth-file=" + tokenFile,
		"--authentication-token-webhook-config-file=" + webhookConfig,
		"--authentication-token-webhook-version=v1",
		"--authorization-mode=RBAC",
		"--service-account-key-file=" + p.saPublic,
		"--service-account-signing-key-file=" + p.saPrivate,
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		// Plugins whose work a controller (not run here) must complete:
		// ServiceAccount rejects every Pod until the namespace's "default"
		// ServiceAccount exists; TaintNodesByCondition taints every new Node
		// not-ready until the node-lifecycle controller lifts it.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		"--profiling=false",
	}, nil
}

// launch starts the server on port and waits until it is ready or has exited.
func (s *APIServer) launch(bin string, port int, args []string) error {
	s.host = "https://127.0.0.1:" + strconv.Itoa(port)
	s.logPath = filepath.Join(s.dir, "kube-apiserver-"+strconv.Itoa(port)+".log")
	logf, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, append(args, "--secure-port="+strconv.Itoa(port))...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(startTimeout); err != nil {
		return fmt.Errorf("%w\n%s", err, s.logTail(40))
	}
	s.Ready = time.Since(began)
	return nil
}

// waitReady polls /readyz until it answers 200, the process exits, or d passes.
func (s *APIServer) waitReady(d time.Duration) error {
	hc, err := rest.HTTPClientFor(s.Config())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	last := errors.New("no answer yet")
	for {
		if err := readyz(ctx, hc, s.host); err == nil {
			return nil
		} else {
			last = err
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w: %v", ErrExited, s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("kubetest: /readyz not ok within %v: %v", d, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readyz asks host's /readyz once.
func readyz(ctx context.Context, hc *http.Client, host string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// stop ends the server: SIGTERM, then SIGKILL after a few seconds. Its etcd
// is thrown away with the test, so a hard stop loses nothing that matters.
func (s *APIServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// logTail returns the last n lines of the server's log.
func (s *APIServer) logTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "kube-apiserver log (" + s.logPath + "), last lines:\n" + strings.Join(lines, "\n")
}

// Config returns a client-go config for the admin (group system:masters),
// trusting the server's CA. It has no client-side rate limit (QPS < 0), so
// tests measure the server and the code under test, not client-go's default
// of 5 requests a second. Each call returns a fresh copy.
func (s *APIServer) Config() *rest.Config {
	return s.config(s.adminToken)
}

func (s *APIServer) config(token string) *rest.Config {
	return &rest.Config{
		Host:            s.host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), s.caPEM...)},
		QPS:             -1,
	}
}

// TokenConfig returns a client-go config that authenticates as user in
// groups (and system:authenticated, which the server adds), with a token
// minted for it now. The identity has only what RBAC grants it.
func (s *APIServer) TokenConfig(user string, groups ...string) *rest.Config {
	return s.config(s.webhook.issue(user, groups))
}

// Client returns an admin clientset.
func (s *APIServer) Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatalf("kubetest: clientset: %v", err)
	}
	return c
}

// Kubeconfig returns the path of a kubeconfig file for the admin (what
// `arbiter kube --kubeconfig` or kubectl takes).
func (s *APIServer) Kubeconfig() string { return s.kubeconfig }

// writeKubeconfig writes the admin's kubeconfig into s.dir.
func (s *APIServer) writeKubeconfig() error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: s.host, CertificateAuthorityData: s.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.adminToken}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "admin"}
	cfg.CurrentContext = "kubetest"
	path := filepath.Join(s.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	s.kubeconfig = path
	return nil
}

// Etcd returns the etcd cluster the server stores its objects in.
func (s *APIServer) Etcd() *etcdtest.Cluster { return s.etcd }

// Ports are picked at random below Linux's ephemeral range, as etcdtest's
// are, so outgoing connections do not take them, and checked free by binding.
const (
	portLow  = 20000
	portHigh = 32000
)

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// pickPort returns a loopback port that was free when checked and that this
// process has not handed out before.
func pickPort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for tries := 0; tries < 1000; tries++ {
		p := portLow + rand.IntN(portHigh-portLow)
		if handedOut[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = l.Close()
		handedOut[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port in [%d, %d)", portLow, portHigh)
}
