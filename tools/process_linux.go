package tools

import (
	"os/exec"
	"syscall"
	"unsafe"
)

// setDeathSignal asks the kernel to SIGKILL the child when its parent
// thread dies.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// waitExited blocks until cmd's process has exited without reaping it
// (waitid with WNOWAIT). While the exited leader stays unreaped its process
// group ID cannot be reused, so killing the group afterwards can only hit
// the command's own leftovers. It reports reaped false: the caller reaps
// with cmd.Wait.
func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	const pPID = 1     // P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(cmd.Process.Pid),
			uintptr(unsafe.Pointer(&info)), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return false, nil
		case syscall.EINTR:
			continue
		default:
			return false, errno
		}
	}
}
