package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// built holds the sessiond executable the process tests run. It is built
// on first use, not in TestMain: fuzz workers and in-process tests start the
// test binary many times and must not each pay for a go build.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// binary returns the sessiond executable, building it once per test process.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "sessiond-bin-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "sessiond")
		if runtime.GOOS == "windows" {
			built.path += ".exe"
		}
		out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("build sessiond: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// deadline bounds every wait of the process tests.
const deadline = 30 * time.Second

// TestMain fails the package when a test leaves a goroutine behind (the
// in-process tests run daemons, clients and log followers), once the
// sessiond binary the process tests shared is removed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(cleanupMain{m}) }

// cleanupMain runs the tests, then removes what they shared across tests.
type cleanupMain struct{ m *testing.M }

func (c cleanupMain) Run() int {
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if signal.Ignored(sig) && os.Getenv(signalChildEnv) == "" {
			// Run under nohup, or as a shell's background job (or by a CI
			// runner that ignores the signal), every process a test starts
			// would inherit the ignored signal, and sessiond rightly keeps a
			// signal ignored from the start: the tests that stop it with
			// SIGHUP or SIGINT would wait for a stop that never comes. A
			// caught signal is reset to its default in children, so catch
			// it here (not in TestSignalChild's process, whose ignored
			// signals are what it tests).
			signal.Notify(make(chan os.Signal, 1), sig)
		}
	}
	code := c.m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	return code
}

// testEnv returns a process environment with nothing of the caller's
// sessiond, provider or XDG settings, a private HOME, and the given
// NAME=value pairs.
func testEnv(t *testing.T, kv ...string) []string {
	t.Helper()
	var env []string
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		switch {
		case strings.HasPrefix(name, "SESSIOND_"), strings.HasPrefix(name, "OPENAI_"),
			strings.HasPrefix(name, "ANTHROPIC_"), strings.HasPrefix(name, "XDG_"), name == "HOME":
			continue
		}
		env = append(env, e)
	}
	env = append(env, "HOME="+t.TempDir())
	for i := 0; i+1 < len(kv); i += 2 {
		env = append(env, kv[i]+"="+kv[i+1])
	}
	return env
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a running sessiond.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	err    error
}

// start starts sessiond with args. The test's end kills it if it still
// runs.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	return launch(t, cmd)
}

// launch starts cmd with its output collected. The test's end kills it if
// it still runs.
func launch(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, cmd: cmd, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// signal sends sig to the process.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits for the process to exit and returns its exit status.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(deadline):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Fatalf("sessiond %s did not exit within %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(p.cmd.Args[1:], " "), deadline, p.stdout.String(), p.stderr.String())
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		p.t.Fatalf("sessiond %s was killed by %v\nstderr:\n%s", strings.Join(p.cmd.Args[1:], " "), ws.Signal(), p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitFor polls the buffer until re matches and returns the submatches.
func (p *proc) waitFor(b *syncBuffer, re string) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	eventually(p.t, "output matching "+re, func() bool {
		m = rx.FindStringSubmatch(b.String())
		return m != nil
	}, func() string {
		return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
	})
	return m
}

// eventually polls cond until it holds or the deadline passes. It fails
// early when cond cannot hold any more (a process exited).
func eventually(t *testing.T, what string, cond func() bool, detail func() string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("no %s within %v\n%s", what, deadline, detail())
		}
		time.Sleep(delay)
	}
}

// result is a finished sessiond run.
type result struct {
	stdout, stderr string
	code           int
}

// sessiond runs sessiond with args and stdin to completion.
func sessiond(t *testing.T, env []string, stdin io.Reader, args ...string) result {
	t.Helper()
	bin := binary(t) // built before the clock starts: a cold build can take minutes
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Stdin = env, stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("sessiond %s did not finish within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), deadline, stdout.String(), stderr.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// ok runs sessiond with args, fails the test unless it exits 0, and
// returns its stdout.
func ok(t *testing.T, env []string, args ...string) string {
	t.Helper()
	r := sessiond(t, env, nil, args...)
	if r.code != 0 {
		t.Fatalf("sessiond %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
