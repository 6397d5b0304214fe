package main

import (
	"bytes"
	"context"
	"errors"
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

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// hangingToolConfig writes a configuration whose model runs one bash
// command, allowed without a question, that starts a sleep in its process
// group, writes the sleep's PID to the file pid in the Session's
// directory and waits for it. It returns the configuration's path.
func hangingToolConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "hang.json", `{"responses": [
		{"times": 1, "steps": [{"toolCall": {"id": "c1", "name": "bash", "input": {"command": "sleep 60 & echo $! > pid.tmp && mv pid.tmp pid; wait"}}}, {"finish": "tool-calls"}]},
		{"steps": [{"text": "done"}, {"finish": "stop"}]}]}`)
	return writeFile(t, dir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "hang.json"}}, "model": "s/any",
		"agents": {"build": {"permission": [{"permission": "*", "action": "allow"}]}}}`)
}

// toolSleep waits for the PID the hanging tool command writes to dir/pid.
// The test's end kills that process if it still runs.
func toolSleep(t *testing.T, dir string, detail func() string) int {
	t.Helper()
	var pid int
	eventually(t, "the tool command's pid file", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, detail)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// processGone reports whether process pid has exited: it does not exist,
// or it is a zombie nobody reaped yet (orphans go to PID 1, which in a
// container may never reap them).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}

// lastEvent returns the last durable event of the only Session in the
// store of data directory data.
func lastEvent(t *testing.T, data string) messages.Event {
	t.Helper()
	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sessions, err := st.List(context.Background())
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions %+v, %v", sessions, err)
	}
	page, err := st.History(context.Background(), sessions[0].ID, persistence.Query{After: -1, Limit: 100})
	if err != nil || len(page.Data) == 0 {
		t.Fatalf("history %+v, %v", page, err)
	}
	return page.Data[len(page.Data)-1]
}

// TestSIGHUPStopsGracefully: the SIGHUP a foreground serve or run gets
// when its terminal closes stops it as SIGTERM does: the running Session
// is interrupted with reason shutdown, durably, and the tool command's
// process group is killed. SIGHUP was not handled: it killed the process
// at once, the Session had no terminal event, and the sleep the command
// started ran on, orphaned.
func TestSIGHUPStopsGracefully(t *testing.T) {
	t.Run("run", func(t *testing.T) {
		data, dir := t.TempDir(), t.TempDir()
		p := start(t, testEnv(t, "SESSIOND_DATA", data), "run", "--json", "--config", hangingToolConfig(t), "--dir", dir, "hi")
		sleep := toolSleep(t, dir, func() string { return p.stderr.String() })
		p.signal(syscall.SIGHUP)
		if code := p.wait(); code != 128+int(syscall.SIGHUP) {
			t.Fatalf("exit %d, want %d\nstderr:\n%s", code, 128+int(syscall.SIGHUP), p.stderr.String())
		}
		if !strings.Contains(p.stdout.String(), `"type":"session.execution.interrupted.1"`) ||
			!strings.Contains(p.stderr.String(), "interrupted (reason shutdown)") {
			t.Fatalf("stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
		}
		eventually(t, "the tool command's sleep to die", func() bool { return processGone(sleep) }, p.stderr.String)
		last := lastEvent(t, data)
		if ei, ok := last.Data.(*messages.ExecutionInterrupted); !ok || ei.Reason != messages.ReasonShutdown {
			t.Fatalf("last event %s %+v, want %s reason shutdown", last.Type, last.Data, messages.TypeExecutionInterrupted)
		}
	})

	t.Run("serve", func(t *testing.T) {
		data, dir := t.TempDir(), t.TempDir()
		srv, addr := serveDaemon(t, testEnv(t, "SESSIOND_DATA", data), "--config", hangingToolConfig(t))
		client := testEnv(t, "SESSIOND_ADDR", addr)
		sid := decode[persistence.Session](t, ok(t, client, "session", "create", "--dir", dir)).ID
		ok(t, client, "prompt", string(sid), "hi")
		sleep := toolSleep(t, dir, srv.stderr.String)
		srv.signal(syscall.SIGHUP)
		if code := srv.wait(); code != 0 {
			t.Fatalf("serve exited %d after SIGHUP\nstderr:\n%s", code, srv.stderr.String())
		}
		eventually(t, "the tool command's sleep to die", func() bool { return processGone(sleep) }, srv.stderr.String)
		last := lastEvent(t, data)
		if ei, ok := last.Data.(*messages.ExecutionInterrupted); !ok || ei.Reason != messages.ReasonShutdown {
			t.Fatalf("last event %s %+v, want %s reason shutdown", last.Type, last.Data, messages.TypeExecutionInterrupted)
		}
	})
}

// signalChildEnv makes TestSignalChild act.
const signalChildEnv = "SESSIOND_TEST_SIGNAL_CHILD"

// TestSignalChild is the child half of the tests of notifySignals: it
// prints "ready" once the handler is in place, and "stopping: CAUSE" when
// the first signal arrives, then hangs as a stop that never ends would.
// It does nothing in a normal run.
func TestSignalChild(t *testing.T) {
	if os.Getenv(signalChildEnv) == "" {
		return
	}
	ctx, stop := notifySignals()
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopping:", context.Cause(ctx))
	<-time.After(deadline)
	t.Fatal("no second signal ended the process")
}

// startSignalChild starts TestSignalChild in a new test process, through
// sh -c script (which ends with exec "$0" "$@"), and waits until it is
// ready. The test's end kills it if it still runs.
func startSignalChild(t *testing.T, script string) *proc {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script, os.Args[0], "-test.run=^TestSignalChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), signalChildEnv+"=1")
	p := launch(t, cmd)
	p.waitFor(&p.stdout, "(?m)^ready$")
	return p
}

// TestSecondSIGHUPQuitsAHungStop: a second signal ends a stop that hangs,
// SIGHUP as well as SIGTERM: the signal's default action ends the process
// (after the tool commands' process groups were killed).
func TestSecondSIGHUPQuitsAHungStop(t *testing.T) {
	p := startSignalChild(t, `exec "$0" "$@"`)
	p.signal(syscall.SIGHUP)
	p.waitFor(&p.stdout, "stopping: hangup received")
	p.signal(syscall.SIGHUP)
	eventually(t, "the process to end", func() bool {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}, p.stderr.String)
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGHUP {
		t.Fatalf("ended with %v, want killed by SIGHUP\nstdout:\n%s\nstderr:\n%s", p.cmd.ProcessState, p.stdout.String(), p.stderr.String())
	}
}

// TestIgnoredSignalsStayIgnored: a signal ignored from the start stays
// ignored, and the first signal sessiond acts on is the SIGTERM sent
// after it. Under nohup (SIGHUP ignored) handling SIGHUP would undo nohup
// and stop a daemon its user meant to outlive the terminal; a shell starts
// its background jobs (sessiond serve &) with SIGINT ignored, so that a ^C
// at the terminal leaves them running.
func TestIgnoredSignalsStayIgnored(t *testing.T) {
	for trap, sig := range map[string]syscall.Signal{"HUP": syscall.SIGHUP, "INT": syscall.SIGINT} {
		t.Run(trap, func(t *testing.T) {
			p := startSignalChild(t, `trap "" `+trap+`; exec "$0" "$@"`)
			p.signal(sig)
			p.signal(syscall.SIGTERM)
			m := p.waitFor(&p.stdout, "stopping: (.*) received")
			if m[1] != syscall.SIGTERM.String() {
				t.Fatalf("stopped by %s, want %s", m[1], syscall.SIGTERM)
			}
		})
	}
}

// TestHelpNamesSIGHUP: serve's and run's help name SIGHUP with the
// signals that stop them, and run's its exit status (129), as docs/cli.md
// does.
func TestHelpNamesSIGHUP(t *testing.T) {
	for cmd, want := range map[string][]string{"serve": {"SIGHUP"}, "run": {"SIGHUP", "129"}} {
		_, out, _ := runApp(t, nil, cmd, "--help")
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q:\n%s", cmd, w, out)
			}
		}
	}
}

// TestNotifyOn: the first stop signal cancels the context with the signal
// as its cause; a second kills the tool commands' process groups, restores
// the signals' default actions and raises the signal again, in that order.
// With no stop signal (all ignored from the start) nothing is relayed at
// all: Notify with no signals would relay every signal, and a terminal's
// SIGWINCH would stop the daemon.
func TestNotifyOn(t *testing.T) {
	var steps []string
	var ch chan<- os.Signal
	raised := make(chan struct{})
	h := signalHooks{
		notify: func(c chan<- os.Signal, sigs ...os.Signal) {
			ch = c
			steps = append(steps, fmt.Sprint("notify ", sigs))
		},
		stop:      func(c chan<- os.Signal) { steps = append(steps, "stop") },
		reset:     func(sigs ...os.Signal) { steps = append(steps, fmt.Sprint("reset ", sigs)) },
		killTools: func() { steps = append(steps, "kill tools") },
		raise:     func(sig syscall.Signal) { steps = append(steps, "raise "+sig.String()); close(raised) },
	}
	sigs := []os.Signal{syscall.SIGTERM, syscall.SIGHUP}
	ctx, stop := notifyOn(sigs, h)
	ch <- syscall.SIGHUP
	<-ctx.Done()
	if c, ok := context.Cause(ctx).(signalCause); !ok || c.sig != syscall.SIGHUP {
		t.Fatalf("cause %v, want SIGHUP's", context.Cause(ctx))
	}
	ch <- syscall.SIGTERM
	<-raised
	stop()
	want := []string{"notify [terminated hangup]", "kill tools", "reset [terminated hangup]", "raise terminated", "stop"}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %q, want %q", steps, want)
	}

	steps = nil
	ctx, stop = notifyOn(nil, h)
	stop()
	if !slices.Equal(steps, []string{"stop"}) || context.Cause(ctx) != context.Canceled {
		t.Fatalf("with no stop signals: steps %q, cause %v", steps, context.Cause(ctx))
	}
}
