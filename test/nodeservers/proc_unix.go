//go:build unix

package nodeservers

import (
	"os/exec"
	"syscall"
)

// signalGroup asks the server's process group to end (SIGTERM: the bridge then stops the
// children it started in groups of their own), or kills it.
func signalGroup(cmd *exec.Cmd, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}
