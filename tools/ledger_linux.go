package tools

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// killCarrier kills process pid if it carries one of tokens, and says
// whether it did. The scan read the token a moment ago; the process may
// have exited since and its PID gone to another. So the process is pinned
// first (a pidfd), its token read again, and the signal sent through the
// pidfd: a signal that lands means the pinned process was alive, so not
// yet replaced, when its token was read. Where pidfds are missing (a
// kernel before 5.3, a seccomp filter) a plain kill follows the check,
// with the PID-reuse window between them that a pidfd closes.
func killCarrier(pid int, tokens map[string]bool) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return false // gone
		}
		return tokens[runToken(pid)] && syscall.Kill(pid, syscall.SIGKILL) == nil
	}
	defer unix.Close(fd)
	return tokens[runToken(pid)] && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}
