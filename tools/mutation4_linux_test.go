package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests from mutation testing of the bash tool that need Linux: the
// process ledger reads /proc, and setsid is util-linux's.

// TestOpenProcessLedgerErrors: a ledger that cannot be read, or cannot be
// written, is an error, not a ledger that records nothing.
func TestOpenProcessLedgerErrors(t *testing.T) {
	if _, ok := bootID(); !ok {
		t.Fatal("no boot ID on this system")
	}
	dir := t.TempDir()
	if l, _, err := OpenProcessLedger(filepath.Join(dir, "missing", "ledger")); err == nil || l != nil {
		t.Fatalf("ledger in a missing directory: %v, %v; want an error", l, err)
	}
	sub := filepath.Join(dir, "a-directory")
	if err := os.MkdirAll(filepath.Join(sub, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenProcessLedger(sub); err == nil || !strings.Contains(err.Error(), "read process ledger") {
		t.Fatalf("ledger that is a directory: %v; want a read error", err)
	}
}

// TestBashDoesNotWaitForAProcessThatLeftTheSession: a process that left
// the command's session keeps the output pipe open but not the call: its
// output is abandoned after the drain grace.
func TestBashDoesNotWaitForAProcessThatLeftTheSession(t *testing.T) {
	setsid, err := lookPathIn("setsid", []string{"/usr/bin", "/bin"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessConfig{rules: allowAll})
	pidfile := filepath.Join(h.root, "pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	done := make(chan error, 1)
	go func() {
		// The shell goes on once the process is in a session of its own.
		res, err := h.call(context.Background(), t, "bash", BashInput{
			Command: setsid + " sh -c 'echo $$ > pid; exec sleep 1000' & while [ ! -s pid ]; do :; done; echo done"})
		if err == nil && !strings.Contains(res.Output, "\ndone\n\nExit code: 0") {
			err = fmt.Errorf("output %q", res.Output)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the call waited for a process outside its session")
	}
}
