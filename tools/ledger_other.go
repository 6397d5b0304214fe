//go:build unix && !linux

package tools

import "syscall"

// killCarrier kills process pid if it carries one of tokens, and says
// whether it did. Without pidfds the kill follows the check, with the
// window in which the PID could go to another process between them. (The
// ledger is only opened where /proc identifies processes, so this is
// reached only on a Unix that has one.)
func killCarrier(pid int, tokens map[string]bool) bool {
	return tokens[runToken(pid)] && syscall.Kill(pid, syscall.SIGKILL) == nil
}
