//go:build !linux

package kubetest

import "syscall"

// sysProcAttr has nothing to add where Pdeathsig does not exist.
func sysProcAttr() *syscall.SysProcAttr { return nil }
