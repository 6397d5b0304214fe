package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	pid := waitPID(t, filepath.Join(dir, "pid"))
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
// waitPID waits for the file at path to hold a process ID (a command
// writes it, through a rename when it must not be read half written) and
// returns it.
func waitPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, 10*time.Second, "a process ID in "+filepath.Base(path), func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(string(bytes.TrimSpace(b)))
		return err == nil
	})
	return pid
}

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
	pid := waitPID(t, filepath.Join(dir, "pid"))
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
	l, _, err := OpenProcessLedger(filepath.Join(dir, "ledger"))
	if err != nil || l == nil {
		t.Fatalf("ledger %v: %v", l, err)
	}
	_, _ = runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10, ledger: l,
		command: `echo $$ > shell.tmp && mv shell.tmp shell; sleep 60 & echo $! > pid.tmp && mv pid.tmp pid; wait`})
}

// TestRestartKillsWhatToolsLeft: a process killed with SIGKILL while a
// tool command runs takes the shell with it, but not what the shell
// started; the next process to record in the same ledger kills that
// before anything runs again.
func TestRestartKillsWhatToolsLeft(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLedgerChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ledgerChildEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := waitPID(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	shellPID := waitPID(t, filepath.Join(dir, "shell"))
	eventually(t, 10*time.Second, "the shell to die with its parent", func() bool { return exited(shellPID) })
	if exited(pid) {
		t.Fatal("the shell's sleep died with the process: nothing left to test")
	}
	_, killed, err := OpenProcessLedger(filepath.Join(dir, "ledger"))
	if err != nil || killed != 1 {
		t.Fatalf("OpenProcessLedger killed %d groups: %v", killed, err)
	}
	eventually(t, 10*time.Second, "the sleep to die", func() bool { return exited(pid) })
	// The ledger starts over: the next process finds nothing to kill.
	if _, killed, err := OpenProcessLedger(filepath.Join(dir, "ledger")); err != nil || killed != 0 {
		t.Fatalf("second sweep killed %d: %v", killed, err)
	}
}

// TestLedgerLeavesAReusedGroupAlone: a ledger entry whose group ID the
// kernel has since given to another program's group (its leader gone, its
// members running: a daemon that forked away) is left alone, since its
// processes lack the command's run token.
func TestLedgerLeavesAReusedGroupAlone(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $! ; exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	boot, _ := bootID()
	self, _ := startTime(os.Getpid())
	path := filepath.Join(t.TempDir(), "ledger")
	if err := os.WriteFile(path, fmt.Appendf(nil, "%d %s %d %s\n", pgid, boot, self, newRunToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, killed, err := OpenProcessLedger(path); err != nil || killed != 0 || exited(child) {
		t.Fatalf("the sweep killed %d group(s) (%v); the other program's process exited: %v", killed, err, exited(child))
	}
}

// TestLedgersOfTwoRuntimes: two ledgers in one process (two runtimes on
// two data directories) each record their own commands, and each command
// leaves its ledger when it ends.
func TestLedgersOfTwoRuntimes(t *testing.T) {
	dir := t.TempDir()
	a, _, err := OpenProcessLedger(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := OpenProcessLedger(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	started := func(l *ProcessLedger, name string) (done chan struct{}) {
		done = make(chan struct{})
		go func() {
			defer close(done)
			_, _ = runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10, ledger: l,
				command: "touch " + name + "; sleep 0.2"})
		}()
		eventually(t, 10*time.Second, name+" to start", func() bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil })
		return done
	}
	lines := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return len(parseLedger(b))
	}
	doneA, doneB := started(a, "runA"), started(b, "runB")
	if lines("a") != 1 || lines("b") != 1 {
		t.Fatalf("while running: a lists %d, b lists %d", lines("a"), lines("b"))
	}
	<-doneA
	<-doneB
	if lines("a") != 0 || lines("b") != 0 {
		t.Fatalf("after: a lists %d, b lists %d", lines("a"), lines("b"))
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
	got := parseLedger([]byte("12 boot-a 100 t1\nnot a line\n1 boot-a 5 t2\n34 boot-b x t3\n56 boot-c 7 t4\n78 boot-d 9\n"))
	if want := []ledgerEntry{{12, "boot-a", 100, "t1"}, {56, "boot-c", 7, "t4"}}; !slices.Equal(got, want) {
		t.Fatalf("parseLedger = %v", got)
	}
}
