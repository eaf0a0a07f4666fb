//go:build !unix

package nodeservers

import (
	"os/exec"
	"syscall"
)

// Process groups are a Unix matter: elsewhere Stop ends the server process alone.
func groupAttr() *syscall.SysProcAttr { return nil }

func signalGroup(cmd *exec.Cmd, _ bool) error { return cmd.Process.Kill() }
