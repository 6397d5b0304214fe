//go:build unix && !linux

package tools

import "os/exec"

// waitExited waits for cmd and reaps it; platforms without a portable
// waitid(WNOWAIT) accept the tiny window in which the reaped leader's
// process group ID could be reused before the leftover group is killed.
func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	return true, cmd.Wait()
}
