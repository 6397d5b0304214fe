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

	"golang.org/x/sys/unix"
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

const setsidChildEnv = "SESSIOND_TOOLS_SETSID_CHILD_DIR"

// TestSetsidChild is the child half of
// TestKillProcessesReachesWhatLeftTheGroup: a process a command started
// that leaves the command's session and group, as setsid or a daemon
// does, records its PID and waits to be killed. It does nothing in a
// normal run.
func TestSetsidChild(t *testing.T) {
	dir := os.Getenv(setsidChildEnv)
	if dir == "" {
		return
	}
	if _, err := syscall.Setsid(); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "pid.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "pid")); err != nil {
		t.Fatal(err)
	}
	select {}
}

// TestKillProcessesReachesWhatLeftTheGroup: a forced exit (a second
// signal) kills what a command started even when it left the command's
// process group: it carries the command's run token. It ran on until the
// next daemon started and swept the ledger.
func TestKillProcessesReachesWhatLeftTheGroup(t *testing.T) {
	dir := t.TempDir()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10,
			env:     append(os.Environ(), setsidChildEnv+"="+dir),
			command: fmt.Sprintf("%q -test.run='^TestSetsidChild$' -test.count=1 >/dev/null 2>&1 </dev/null & wait", os.Args[0])})
	}()
	pid := waitPID(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("the child's group: %d, %v; want its own, %d", pgid, err, pid)
	}
	KillProcesses()
	eventually(t, 10*time.Second, "the process that left the group to die", func() bool { return exited(pid) })
	<-done
}

// TestCancelledCommandKillsWhatLeftTheGroup: a cancelled command (an
// interrupt, a graceful shutdown) has every process it started killed,
// one that left its group included; it ran on, out of any record, since
// the ledger forgets the command's token once it is over.
func TestCancelledCommandKillsWhatLeftTheGroup(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type ran struct {
		res procResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := runProcess(ctx, procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10,
			env:     append(os.Environ(), setsidChildEnv+"="+dir),
			command: fmt.Sprintf("%q -test.run='^TestSetsidChild$' -test.count=1 >/dev/null 2>&1 </dev/null & wait", os.Args[0])})
		done <- ran{res, err}
	}()
	pid := waitPID(t, filepath.Join(dir, "pid"))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	cancel()
	r := <-done
	if r.err != nil || r.res.outcome != procCancelled {
		t.Fatalf("run: outcome %v, %v; want cancelled", r.res.outcome, r.err)
	}
	eventually(t, 10*time.Second, "the process that left the group to die", func() bool { return exited(pid) })
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
		command: `echo $$ > shell.tmp && mv shell.tmp shell; sleep 60 & echo $! > pid.tmp && mv pid.tmp pid; : > ready; wait`})
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
	// The shell itself makes "ready" once its mv has exited, which would
	// otherwise still carry the token, alive, when the sweep counts.
	eventually(t, 10*time.Second, "the shell to be ready", func() bool {
		_, err := os.Stat(filepath.Join(dir, "ready"))
		return err == nil
	})
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

// orphanedGroup starts a group, as a command's shell does, whose leader
// exits at once and leaves a sleep behind; every process in it carries
// token when it is not empty. It returns the sleep's PID and the group.
func orphanedGroup(t *testing.T, token string) (pid, pgid int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $! ; exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if token != "" {
		cmd.Env = withRunToken(nil, token)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if pid, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
		t.Fatal(err)
	}
	pgid = cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	return pid, pgid
}

// TestLedgerKillsByToken: the ledger holds only run tokens, written before
// a shell starts, so what a shell started and left is found by the token
// its processes carry, in its group or not. A token of another boot, and
// a process without the token (in a group with one that has it), are left
// alone.
func TestLedgerKillsByToken(t *testing.T) {
	token, stale, mixed := newRunToken(), newRunToken(), newRunToken()
	left, _ := orphanedGroup(t, token)
	ofOtherBoot, _ := orphanedGroup(t, stale)
	// A group with one process that carries the token and one that does
	// not.
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $! ; env -u "+runTokenVar+" sleep 30 >/dev/null 2>&1 & echo $! ; exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = withRunToken(nil, mixed)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var withToken, without int
	if _, err := fmt.Sscan(string(out), &withToken, &without); err != nil {
		t.Fatal(err)
	}
	mixedGroup := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-mixedGroup, syscall.SIGKILL) })
	// Until env has run sleep, the process still carries the token.
	eventually(t, 10*time.Second, "env to drop the token", func() bool { return runToken(without) == "" })
	boot, _ := bootID()
	path := filepath.Join(t.TempDir(), "ledger")
	ledger := fmt.Sprintf("%s %s\nanother-boot %s\n%s %s\n", boot, token, stale, boot, mixed)
	if err := os.WriteFile(path, []byte(ledger), 0o600); err != nil {
		t.Fatal(err)
	}
	_, killed, err := OpenProcessLedger(path)
	if err != nil || killed != 2 {
		t.Fatalf("OpenProcessLedger killed %d processes (%v), want 2", killed, err)
	}
	eventually(t, 10*time.Second, "the left processes to die", func() bool { return exited(left) && exited(withToken) })
	if exited(ofOtherBoot) || exited(without) {
		t.Fatalf("killed what it should not: another boot's %v, one without the token %v", exited(ofOtherBoot), exited(without))
	}
}

// TestSweepLeavesNoneBehind: a sweep scans again until no process carries
// a recorded token, so what a dying shell forks after a scan is killed
// too. Here a shell forks sleeps in a loop, as fast as it can.
func TestSweepLeavesNoneBehind(t *testing.T) {
	token := newRunToken()
	cmd := exec.Command("/bin/sh", "-c", "while :; do sleep 30 & done")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = withRunToken(nil, token)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	tokens := map[string]bool{token: true}
	eventually(t, 10*time.Second, "the loop to fork", func() bool { return len(carrying(tokens)) > 2 })
	if n := sweep(tokens, 10*time.Second); n < 2 {
		t.Fatalf("sweep killed %d processes", n)
	}
	if left := carrying(tokens); len(left) != 0 {
		t.Fatalf("left running: %v", left)
	}
}

// TestLedgerRecordsBeforeTheShellRuns: a command's token is in the ledger
// before its shell exists: recorded after the start, a kill in between left
// what the shell forked meanwhile unrecorded.
func TestLedgerRecordsBeforeTheShellRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger")
	l, _, err := OpenProcessLedger(path)
	if err != nil || l == nil {
		t.Fatalf("ledger %v: %v", l, err)
	}
	var running []int // processes carrying the token when it was recorded
	var inFile bool
	l.recorded = func(token string) {
		b, _ := os.ReadFile(path)
		inFile = slices.ContainsFunc(parseLedger(b), func(e ledgerEntry) bool { return e.token == token })
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			if pid, err := strconv.Atoi(d.Name()); err == nil && runToken(pid) == token {
				running = append(running, pid)
			}
		}
	}
	res, err := runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10, ledger: l,
		command: "echo ran"})
	if err != nil || !strings.Contains(res.output.String(), "ran") {
		t.Fatalf("the command: %+v, %v", res, err)
	}
	if !inFile || len(running) > 0 {
		t.Fatalf("at the record: token in the file %v; processes already carrying it %v", inFile, running)
	}
	if b, _ := os.ReadFile(path); len(parseLedger(b)) != 0 {
		t.Fatalf("the ledger keeps a finished command: %q", b)
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
	// Each command runs until the test lets it end (the file "end"), so
	// both are running when the ledgers are read, however slow the machine.
	started := func(l *ProcessLedger, name string) (done chan struct{}) {
		done = make(chan struct{})
		go func() {
			defer close(done)
			_, _ = runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: time.Minute, maxOut: 1 << 10, ledger: l,
				command: "touch " + name + "; while [ ! -e end ]; do sleep 0.01; done"})
		}()
		eventually(t, 10*time.Second, name+" to start", func() bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil })
		return done
	}
	lines := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return len(parseLedger(b))
	}
	end := func() { _ = os.WriteFile(filepath.Join(dir, "end"), nil, 0o600) }
	doneA := started(a, "runA")
	t.Cleanup(func() { end(); <-doneA })
	doneB := started(b, "runB")
	t.Cleanup(func() { end(); <-doneB })
	if lines("a") != 1 || lines("b") != 1 {
		t.Fatalf("while running: a lists %d, b lists %d", lines("a"), lines("b"))
	}
	end()
	<-doneA
	<-doneB
	if lines("a") != 0 || lines("b") != 0 {
		t.Fatalf("after: a lists %d, b lists %d", lines("a"), lines("b"))
	}
}

// TestLedgerLeavesOthersAlone: a process whose token the ledger does not
// list (another ledger's live command) is left alone; lines that do not
// parse are skipped.
func TestLedgerLeavesOthersAlone(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = withRunToken(nil, newRunToken())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	if n := sweep(map[string]bool{newRunToken(): true}, time.Second); n != 0 || exited(cmd.Process.Pid) {
		t.Fatalf("killed %d processes of a token it was not given", n)
	}
	got := parseLedger([]byte("boot-a t1\nnot a line at all\n\nboot-b\n  boot-c   t3  \n"))
	if want := []ledgerEntry{{"boot-a", "t1"}, {"boot-c", "t3"}}; !slices.Equal(got, want) {
		t.Fatalf("parseLedger = %v", got)
	}
}

// TestKillCarrierReadsTheTokenAgain: killCarrier kills only a process that
// still carries one of the tokens when it is pinned (what the scan read
// may belong to a process since replaced under the same PID), and reports
// whether it killed.
func TestKillCarrierReadsTheTokenAgain(t *testing.T) {
	token := newRunToken()
	cmd := exec.Command("/bin/sh", "-c", "sleep 30")
	cmd.Env = withRunToken(nil, token)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })
	pid := cmd.Process.Pid
	eventually(t, 10*time.Second, "the shell to carry its token", func() bool { return runToken(pid) == token })
	if killCarrier(pid, map[string]bool{newRunToken(): true}) {
		t.Fatal("killed a process carrying another token")
	}
	select {
	case err := <-waited:
		t.Fatalf("the process exited: %v", err)
		waited <- err
	default:
	}
	if !killCarrier(pid, map[string]bool{token: true}) {
		t.Fatal("did not kill the carrier")
	}
	err := <-waited
	waited <- err
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the carrier ended with %v, not SIGKILL", err)
	}
	if killCarrier(pid, map[string]bool{token: true}) {
		t.Fatal("killed a PID whose process is gone")
	}
}

const ttyChildEnv = "SESSIOND_TOOLS_TTY_CHILD_DIR"

// TestTerminalChild is the child half of
// TestCommandsDoNotWaitOnTheDaemonsTerminal: with a controlling terminal,
// as `sessiond run` has, it runs a command that reads the terminal and
// writes what became of it. It does nothing in a normal run.
func TestTerminalChild(t *testing.T) {
	dir := os.Getenv(ttyChildEnv)
	if dir == "" {
		return
	}
	res, err := runProcess(context.Background(), procSpec{shell: "/bin/sh", dir: dir, timeout: 10 * time.Second, maxOut: 1 << 10,
		command: `read -r x </dev/tty; echo "read: $?"`})
	outcome := "exited"
	if res.outcome == procTimedOut {
		outcome = "timed out"
	}
	_ = os.WriteFile(filepath.Join(dir, "result"), []byte(fmt.Sprintf("%s %v: %s", outcome, err, res.output.String())), 0o644)
}

// TestCommandsDoNotWaitOnTheDaemonsTerminal: a command that reads the
// terminal (a password or passphrase prompt: sudo, ssh, git's credential
// prompt) fails at once when the daemon runs in a terminal, as `sessiond
// run` does, instead of being stopped by SIGTTIN until its timeout.
func TestCommandsDoNotWaitOnTheDaemonsTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminals here: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pseudo-terminal number: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pseudo-terminal: %v", err)
	}
	defer pts.Close()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTerminalChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), ttyChildEnv+"="+dir)
	cmd.Stdin = pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "result"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "exited <nil>") {
		t.Fatalf("the command that reads the terminal: %s", b)
	}
}
