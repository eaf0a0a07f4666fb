package nodeservers

import "syscall"

// groupAttr starts a server as the leader of a process group of its own, so that Stop reaches
// everything it started, and has the kernel stop it if the test process dies first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
