//go:build unix && !linux

package tools

import (
	"os/exec"
	"syscall"
)

// setDeathSignal does nothing: only Linux has a parent-death signal, so
// elsewhere a shell can outlive a daemon that crashed.
func setDeathSignal(*syscall.SysProcAttr) {}

// waitExited waits for cmd and reaps it; platforms without a portable
// waitid(WNOWAIT) accept the tiny window in which the reaped leader's
// process group ID could be reused before the leftover group is killed.
func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	return true, cmd.Wait()
}
