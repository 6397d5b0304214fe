//go:build unix

package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// outcome of a process run.
type procOutcome int

const (
	procExited    procOutcome = iota // the shell exited by itself
	procTimedOut                     // the timeout killed it
	procCancelled                    // ctx ended and killed it
)

// procResult is what a finished shell left behind.
type procResult struct {
	outcome  procOutcome
	exitCode int    // -1 when killed by a signal
	signal   string // the signal that ended the shell, if any
	output   *capture
}

// drainGrace bounds how long output is drained after the process group was
// killed: only a process that left the group (setsid, or a background job
// under set -m) can keep the pipe open that long, and its output is
// abandoned.
const drainGrace = 2 * time.Second

// procSpec describes one shell run.
type procSpec struct {
	shell   string
	command string
	dir     string
	env     []string
	timeout time.Duration
	after   func(time.Duration) <-chan time.Time // nil: a real timer
	maxOut  int
	ledger  *ProcessLedger // nil: not recorded
}

// runProcess runs spec.command with spec.shell -c in its own session and
// process group, without a controlling terminal, capturing stdout and
// stderr together. When the shell exits, times out or ctx ends, the whole
// group is killed with SIGKILL, so background jobs do not outlive the
// call, unless they left the group (setsid, or job control with set -m,
// which puts each job in a group of its own). Every goroutine it starts
// has ended when it returns.
func runProcess(ctx context.Context, spec procSpec) (procResult, error) {
	res := procResult{output: newCapture(spec.maxOut)}
	pr, pw, err := os.Pipe()
	if err != nil {
		return res, err
	}
	cmd := exec.Command(spec.shell, "-c", spec.command)
	cmd.Dir = spec.dir
	token := newRunToken()
	cmd.Env = withRunToken(spec.env, token)
	cmd.Stdout = pw // an *os.File: the child writes to it directly, exec starts no copier
	cmd.Stderr = pw
	// A session of its own, not only a process group: in a group of the
	// daemon's session, a command that reads or sets up the daemon's
	// terminal (`sessiond run`'s; a sudo, ssh or git password prompt) was
	// stopped by SIGTTIN or SIGTTOU until its timeout. Without a
	// controlling terminal it fails at once. The session's ID is the
	// shell's PID, as the group's is.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// If the daemon dies (SIGKILL, a crash), the shell must die with it:
	// the log will record the call as aborted after a restart, and a shell
	// running on would carry out the rest of its command after that, out
	// of any record. The kernel sends the death signal when the thread
	// that started the child exits, and Go ends a thread when a goroutine
	// locked to it returns; this goroutine holds its own thread until the
	// shell has exited, so no other goroutine can run on it and end it
	// early. Processes the
	// shell started are not covered (a background job may outlive the
	// daemon), as they are not by the kill of the process group either
	// once they leave it.
	setDeathSignal(cmd.SysProcAttr)
	// In the ledger before the shell runs: what it forks before a kill
	// must be found by its token (ledger.go).
	spec.ledger.record(token)
	defer spec.ledger.forget(token)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	kills := killRounds.Load()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if _, serr := os.Stat(spec.dir); spec.dir != "" && serr != nil {
			// Go reports a failed chdir as the shell's own path missing
			// ("fork/exec /usr/bin/bash: no such file or directory").
			return res, fmt.Errorf("working directory %s: %w", spec.dir, serr)
		}
		return res, err
	}
	pw.Close()
	pgid := cmd.Process.Pid
	liveGroups.Store(pgid, token)
	defer liveGroups.Delete(pgid)
	if killRounds.Load() != kills {
		// KillProcesses ran while the shell was starting, before its
		// group was listed: the shell may already have started something.
		killGroup(pgid)
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		// Errors end the copy: EOF once every writer is gone, or the
		// deadline set below.
		_, _ = io.Copy(res.output, pr)
	})
	type exit struct {
		reaped bool
		err    error
	}
	exited := make(chan exit, 1)
	wg.Go(func() {
		reaped, err := waitExited(cmd)
		exited <- exit{reaped, err}
	})

	var timedOut <-chan time.Time
	if spec.after != nil {
		timedOut = spec.after(spec.timeout)
	} else {
		timer := time.NewTimer(spec.timeout)
		defer timer.Stop()
		timedOut = timer.C
	}
	var ex exit
	select {
	case ex = <-exited:
	case <-ctx.Done():
		res.outcome = procCancelled
		killGroup(pgid)
		ex = <-exited
	case <-timedOut:
		res.outcome = procTimedOut
		killGroup(pgid)
		ex = <-exited
	}
	if res.outcome != procExited {
		// A command cut short has its processes killed, also those that
		// left its group (setsid, a daemon): they carry its token, which
		// the ledger forgets once this returns.
		killCarriers(map[string]bool{token: true})
	}
	// The shell has exited but is not reaped yet (on Linux), which pins its
	// process group ID: kill whatever it left running.
	killGroup(pgid)
	waitErr := ex.err
	if !ex.reaped {
		waitErr = cmd.Wait()
	}
	if err := pr.SetReadDeadline(time.Now().Add(drainGrace)); err != nil {
		pr.Close()
	}
	wg.Wait()
	pr.Close()

	if cmd.ProcessState == nil {
		return res, waitErr
	}
	res.exitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.signal = ws.Signal().String()
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, waitErr
	}
	return res, nil
}

// liveGroups holds the process groups of the commands running now, with
// their run tokens, for KillProcesses. It is process state, as the
// processes themselves are.
var liveGroups sync.Map // pgid -> run token

// killRounds counts the calls of KillProcesses, so that a command whose
// group was not yet in liveGroups when one ran still has its group killed.
var killRounds atomic.Int64

// KillProcesses sends SIGKILL to the process group of every command the
// tools of this process are running, for a process about to exit without
// the graceful stop that cancels them (a second signal): the shell would
// die with the process anyway (its death signal), but what it started
// would run on. What left the group (setsid, a daemon) is found by the
// command's run token, as the next process's ledger sweep would find it,
// but only after this one has gone and it ran on meanwhile.
func KillProcesses() {
	killRounds.Add(1)
	tokens := map[string]bool{}
	liveGroups.Range(func(pgid, token any) bool {
		killGroup(pgid.(int))
		tokens[token.(string)] = true
		return true
	})
	killCarriers(tokens)
}

// killCarriers kills every process that carries one of tokens.
func killCarriers(tokens map[string]bool) {
	if len(tokens) == 0 {
		return
	}
	for _, pid := range carrying(tokens) {
		killCarrier(pid, tokens)
	}
}

// killGroup sends SIGKILL to process group pgid. A group that is already
// gone is not an error.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
