//go:build unix && !linux

package nodeservers

import "syscall"

// groupAttr starts a server as the leader of a process group of its own, so that Stop reaches
// everything it started.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
