package tools

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

const deathChildEnv = "SESSIOND_TOOLS_DEATH_CHILD_DIR"

// TestShellDeathChild is the child half of TestShellDiesWithTheDaemon: it
// runs a shell that records its PID and would write a file later, then
// waits to be killed. It does nothing in a normal run.
func TestShellDeathChild(t *testing.T) {
	dir := os.Getenv(deathChildEnv)
	if dir == "" {
		return
	}
	_, _ = runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10,
		command: `echo $$ > pid.tmp && mv pid.tmp pid; sleep 30; echo done > finished`})
}

// TestShellDiesWithTheDaemon kills a real process with SIGKILL while its
// shell runs: the shell must die with it, not carry out the rest of its
// command after the restarted daemon recorded the call as aborted.
func TestShellDiesWithTheDaemon(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShellDeathChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), deathChildEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	eventually(t, 10*time.Second, "the shell to start", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(bytes.TrimSpace(b)))
		return err == nil
	})
	// The sleep the shell started is not covered by the death signal:
	// kill the group once the test is done.
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventually(t, 10*time.Second, "the shell to die with its parent", func() bool { return exited(pid) })
	if _, err := os.Stat(filepath.Join(dir, "finished")); err == nil {
		t.Fatal("the shell finished its command after its parent died")
	}
}

// exited reports whether process pid has exited: it is gone, or a zombie
// nobody reaped (a container's init may not reap).
func exited(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// TestKillProcessesReachesWhatTheShellStarted: KillProcesses (what a
// forced exit calls) kills the whole group of a running command, the
// commands its shell started included, which the shell's death signal does
// not cover.
func TestKillProcessesReachesWhatTheShellStarted(t *testing.T) {
	dir := t.TempDir()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10,
			command: `sleep 60 & echo $! > pid.tmp && mv pid.tmp pid; wait`})
	}()
	var pid int
	eventually(t, 10*time.Second, "the command to start", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(bytes.TrimSpace(b)))
		return err == nil
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	KillProcesses()
	eventually(t, 10*time.Second, "the shell's sleep to die", func() bool { return exited(pid) })
	<-done
}

const ledgerChildEnv = "SESSIOND_TOOLS_LEDGER_CHILD_DIR"

// TestLedgerChild is the child half of TestRestartKillsWhatToolsLeft: it
// records its commands in a ledger and runs one whose shell starts a
// sleep, then waits to be killed. It does nothing in a normal run.
func TestLedgerChild(t *testing.T) {
	dir := os.Getenv(ledgerChildEnv)
	if dir == "" {
		return
	}
	if _, err := RecordProcesses(filepath.Join(dir, "ledger")); err != nil {
		t.Fatal(err)
	}
	_, _ = runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10,
		command: `echo $$ > shell; sleep 60 & echo $! > pid.tmp && mv pid.tmp pid; wait`})
}

// TestRestartKillsWhatToolsLeft: a process killed with SIGKILL while a
// tool command runs takes the shell with it, but not what the shell
// started; the next process to record in the same ledger kills that
// before anything runs again.
func TestRestartKillsWhatToolsLeft(t *testing.T) {
	t.Cleanup(func() { ledger.mu.Lock(); ledger.path = ""; ledger.mu.Unlock() })
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLedgerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ledgerChildEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	eventually(t, 10*time.Second, "the command to start", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(bytes.TrimSpace(b)))
		return err == nil
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	shell, err := os.ReadFile(filepath.Join(dir, "shell"))
	if err != nil {
		t.Fatal(err)
	}
	shellPID, err := strconv.Atoi(string(bytes.TrimSpace(shell)))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the shell to die with its parent", func() bool { return exited(shellPID) })
	if exited(pid) {
		t.Fatal("the shell's sleep died with the process: nothing left to test")
	}
	killed, err := RecordProcesses(filepath.Join(dir, "ledger"))
	if err != nil || killed != 1 {
		t.Fatalf("RecordProcesses killed %d groups: %v", killed, err)
	}
	eventually(t, 10*time.Second, "the sleep to die", func() bool { return exited(pid) })
	// The ledger starts over: the next process finds nothing to kill.
	if killed, err := RecordProcesses(filepath.Join(dir, "ledger")); err != nil || killed != 0 {
		t.Fatalf("second sweep killed %d: %v", killed, err)
	}
}

// TestLedgerLeavesLiveCommandsAlone: a group whose leader runs is a live
// process's command (or a reused ID), never a leftover, whatever the
// ledger says; lines that do not parse are skipped.
func TestLedgerLeavesLiveCommandsAlone(t *testing.T) {
	self := os.Getpid()
	start, ok := startTime(self)
	if !ok {
		t.Fatal("no start time of this process")
	}
	if (ledgerEntry{pgid: self, start: start}).leftOver() || (ledgerEntry{pgid: self, start: start + 1}).leftOver() {
		t.Fatal("a group whose leader runs counted as left over")
	}
	got := parseLedger([]byte("12 boot-a 100\nnot a line\n1 boot-a 5\n34 boot-b x\n56 boot-c 7\n"))
	if want := []ledgerEntry{{12, "boot-a", 100}, {56, "boot-c", 7}}; !slices.Equal(got, want) {
		t.Fatalf("parseLedger = %v", got)
	}
}
