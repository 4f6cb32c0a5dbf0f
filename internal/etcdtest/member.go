package etcdtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// state is where a member's process stands.
type state int

const (
	running state = iota // started and not paused
	stopped              // paused by SIGSTOP
	killed               // exited (SIGKILL); Restart starts it again
)

func (s state) String() string {
	switch s {
	case running:
		return "running"
	case stopped:
		return "stopped"
	case killed:
		return "killed"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// signal is the signal that moves a member into state s.
func (s state) signal() syscall.Signal {
	switch s {
	case stopped:
		return syscall.SIGSTOP
	case killed:
		return syscall.SIGKILL
	}
	return syscall.SIGCONT
}

// member is one etcd process of a Cluster, with the ports and data directory
// it keeps across restarts.
type member struct {
	name                 string
	dataDir, logPath     string
	clientPort, peerPort int
	secure               bool // clients speak TLS (StartTLS)

	cmd     *exec.Cmd
	state   state
	exited  chan struct{} // closed when cmd has exited
	waitErr error         // cmd.Wait's result, set before exited closes
}

func (m *member) clientURL() string {
	if m.secure {
		return "https://127.0.0.1:" + strconv.Itoa(m.clientPort)
	}
	return "http://127.0.0.1:" + strconv.Itoa(m.clientPort)
}
func (m *member) peerURL() string { return "http://127.0.0.1:" + strconv.Itoa(m.peerPort) }

// kill sends SIGKILL (a stopped process dies of it too) and waits for the exit.
func (m *member) kill() error {
	if err := m.cmd.Process.Kill(); err != nil && !errors.Is(err, syscall.ESRCH) {
		select {
		case <-m.exited:
		default:
			return fmt.Errorf("kill %s: %w", m.name, err)
		}
	}
	<-m.exited
	m.state = killed
	return nil
}

// Ports are picked at random below Linux's ephemeral range (32768 and up), so
// the kernel does not hand them to outgoing connections, and each is checked
// free by binding it. handedOut keeps this process from picking a port twice,
// since a member's ports stay reserved across its restarts.
const (
	portLow  = 20000
	portHigh = 32000
)

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// pickPorts returns n distinct loopback ports that were free when checked.
func pickPorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("no %d free loopback ports in [%d, %d)", n, portLow, portHigh)
		}
		p := portLow + rand.IntN(portHigh-portLow)
		if handedOut[p] || !portFree(p) {
			continue
		}
		handedOut[p] = true
		ports = append(ports, p)
	}
	return ports, nil
}

// portFree reports whether port p can be bound on 127.0.0.1 now.
func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
