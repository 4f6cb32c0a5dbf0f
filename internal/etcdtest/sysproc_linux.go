package etcdtest

import "syscall"

// sysProcAttr makes the kernel SIGKILL a member when the test process dies,
// so a test binary that panics or times out leaves no etcd behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
