package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// inProcessRun is a run command running in the test process with the
// given stdin and terminal flags.
type inProcessRun struct {
	stdout, stderr syncBuffer
	cancel         context.CancelCauseFunc // a signal's cause stops run as the signal would
	done           chan struct{}           // closed when run has returned code
	code           int
}

// runInProcess starts `sessiond run args…` in this process with env as its
// environment, stdin as its input and stdinTTY and stdoutTTY as its
// terminals. The test's end stops it (as ^C would) if it still runs then.
func runInProcess(t *testing.T, env map[string]string, stdin io.Reader, stdinTTY, stdoutTTY bool, args ...string) *inProcessRun {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &inProcessRun{cancel: cancel, done: make(chan struct{})}
	a := &app{stdin: stdin, stdout: &r.stdout, stderr: &r.stderr, getenv: func(k string) string { return env[k] },
		stdinTTY: stdinTTY, stdoutTTY: stdoutTTY}
	go func() {
		r.code = a.main(ctx, append([]string{"run"}, args...))
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			cancel(signalCause{syscall.SIGINT})
			<-r.done
		}
	})
	return r
}

// wait returns run's exit status once it has returned, failing the test
// if it does not return within the deadline.
func (r *inProcessRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(deadline):
		t.Fatalf("run did not finish within %v\nstdout:\n%s\nstderr:\n%s", deadline, r.stdout.String(), r.stderr.String())
		return 0
	}
}

// TestRunAsksOnTheTerminal: with a terminal on stdin and no --yes, run
// puts each permission question to it and acts on the line typed: the
// demo's bash and edit, allowed once and always, run, and hello.txt is
// written. With a terminal on stdout the reasoning is dimmed instead of
// tagged [thinking].
func TestRunAsksOnTheTerminal(t *testing.T) {
	dir := t.TempDir()
	in, typed := io.Pipe()
	defer typed.Close() // ends the goroutine that reads the terminal
	r := runInProcess(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()}, in, true, true, "--dir", dir, "hi")
	for _, q := range []struct{ question, answer string }{
		{`allow bash "ls -la"`, "y\n"},
		{`allow edit "hello.txt"`, "a\n"},
	} {
		eventually(t, "the question "+q.question, func() bool { return strings.Contains(r.stderr.String(), q.question) }, r.stderr.String)
		if _, err := io.WriteString(typed, q.answer); err != nil {
			t.Fatal(err)
		}
	}
	if code := r.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
	}
	if !fileHas(filepath.Join(dir, "hello.txt"), "Hello from sessiond!\n") {
		t.Errorf("no hello.txt after the questions were allowed\nstdout:\n%s", r.stdout.String())
	}
	// The demo asks for what a terminal can answer: no hint to pass --yes.
	if errOut := r.stderr.String(); strings.Contains(errOut, "pass --yes") || !strings.Contains(errOut, "succeeded: 4 step(s)") {
		t.Errorf("stderr:\n%s", errOut)
	}
	if out := r.stdout.String(); !strings.HasPrefix(out, styleDim+"The us") || strings.Contains(out, "[thinking]") {
		t.Errorf("the reasoning is not dimmed on a terminal:\n%q", out)
	}
}

// TestRunRejectsAtTheEndOfTheTerminalInput: a terminal whose input
// ends (^D) answers no more questions: the open one and every later one
// is rejected, and run ends (exit 0, no hello.txt) instead of waiting for
// a line that never comes.
func TestRunRejectsAtTheEndOfTheTerminalInput(t *testing.T) {
	dir := t.TempDir()
	r := runInProcess(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()}, strings.NewReader(""), true, false, "--dir", dir, "hi")
	if code := r.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, r.stdout.String(), r.stderr.String())
	}
	if out := r.stdout.String(); !strings.Contains(out, `[permission] rejected bash "ls -la"`) || strings.Contains(out, "[tool] apply_patch") {
		t.Errorf("stdout:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "hello.txt")); err == nil {
		t.Error("hello.txt was written without an answer")
	}
}

// TestRunBlankPromptIsAUsageError: a prompt of blanks only is no prompt:
// a usage error (exit 2), before anything is opened.
func TestRunBlankPromptIsAUsageError(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()}, "run", "--yes", "  ", "\t")
	if code != exitUsage || !strings.Contains(errOut, "the prompt text is missing") {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(data); err == nil {
		t.Error("a usage error created the data dir")
	}
}

// TestRunModelChoice: run uses --model over the configured default (the
// default here fails, the chosen one succeeds); with no model anywhere it
// fails up front, naming the ways to set one, unless the build agent
// names its own; and a model that cannot serve fails before anything is
// created.
func TestRunModelChoice(t *testing.T) {
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "ok.json", `{"default": {"steps": [{"text": "fine"}, {"finish": "stop"}]}}`)
	writeFile(t, cfgDir, "refuse.json", `{"default": {"steps": [{"error": {"type": "provider.invalid-request", "message": "scripted refusal"}}]}}`)
	env := map[string]string{"HOME": t.TempDir()}
	run := func(config string, args ...string) (int, string, string) {
		t.Helper()
		cfg := writeFile(t, cfgDir, "sessiond.json", config)
		env["SESSIOND_DATA"] = t.TempDir()
		return runApp(t, env, append([]string{"run", "--config", cfg, "--dir", t.TempDir()}, append(args, "hi")...)...)
	}
	providers := `"providers": {"bad": {"type": "script", "file": "refuse.json"}, "good": {"type": "script", "file": "ok.json"}}`
	if code, out, errOut := run(`{`+providers+`, "model": "bad/x"}`, "--model", "good/x"); code != exitOK || !strings.Contains(out, "fine") {
		t.Errorf("--model good/x over the default bad/x: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, _, errOut := run(`{` + providers + `}`); code != exitFailed || !strings.Contains(errOut, `model.not-found: no model: set "model" in the configuration`) {
		t.Errorf("no model: exit %d\nstderr:\n%s", code, errOut)
	}
	if code, out, errOut := run(`{` + providers + `, "agents": {"build": {"model": "good/x"}}}`); code != exitOK || !strings.Contains(out, "fine") {
		t.Errorf("the build agent's model: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// A model that cannot serve (here its provider has no credentials) is
	// refused before a Session is created for it.
	keyless := `"providers": {"good": {"type": "script", "file": "ok.json"}, "p": {"type": "openai", "baseURL": "http://127.0.0.1:1/v1", "models": {"m": {}}}}`
	if code, _, errOut := run(`{`+keyless+`, "model": "good/x"}`, "--model", "p/m"); code != exitFailed ||
		!strings.Contains(errOut, `provider "p" has no credentials`) || strings.Contains(errOut, "sessiond: session ") {
		t.Errorf("--model p/m: exit %d\nstderr:\n%s", code, errOut)
	}
}

// TestServeTakesAnEmptyAddrAsUnset: --addr "" (a script's --addr "$X"
// with X unset) leaves the address to the environment, as no --addr
// does, instead of failing as a malformed address.
func TestServeTakesAnEmptyAddrAsUnset(t *testing.T) {
	data := t.TempDir()
	s := serveInProcess(t, map[string]string{"SESSIOND_DATA": data, "SESSIOND_ADDR": "127.0.0.1:0", "HOME": t.TempDir()}, "--addr", "")
	if code, _ := s.get("/api/health", ""); code != http.StatusOK {
		t.Fatalf("GET /api/health: %d", code)
	}
}

// TestServeWarnsWithoutADefaultModel: a daemon whose configuration
// names no model (here a script provider that lists none) warns at start
// that Sessions must select one; it does not stand the demo in.
func TestServeWarnsWithoutADefaultModel(t *testing.T) {
	data := t.TempDir()
	writeFile(t, data, "s.json", `{"default": {"steps": [{"text": "fine"}, {"finish": "stop"}]}}`)
	writeFile(t, data, ConfigFileName, `{"providers": {"s": {"type": "script", "file": "s.json"}}}`)
	s := serveInProcess(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()})
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve exited %d\nstderr:\n%s", code, s.stderr.String())
	}
	warning := regexp.MustCompile(`(?m)^\{"level":"warn",.*"message":"no default model: Sessions must select one`)
	serving := regexp.MustCompile(`(?m)^\{"level":"info","addr":"` + regexp.QuoteMeta(s.addr) + `","data":"` + regexp.QuoteMeta(data) + `","demo":false,.*"message":"serving"\}$`)
	if errOut := s.stderr.String(); !warning.MatchString(errOut) || !serving.MatchString(errOut) || strings.Contains(errOut, demoNotice) {
		t.Fatalf("stderr:\n%s", errOut)
	}
}

// TestSessionDirPlansWhatItCreates: a --dir whose missing part lies
// under a root that does not exist yet either is allowed and created, mode
// 0755 (its planned path keeps the missing components in order); a path through a
// file is an error, not a directory planned past it; the directory
// returned is the absolute path given, not its symlink-free form.
func TestSessionDirPlansWhatItCreates(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "a")
	// The usual umask, so that the mode is the one sessionDir asks for
	// (no test of this package runs in parallel).
	defer syscall.Umask(syscall.Umask(0o022))
	got, err := sessionDir(filepath.Join(root, "b"), []string{root})
	if err != nil || got != filepath.Join(root, "b") {
		t.Fatalf("sessionDir under a missing root = %q, %v", got, err)
	}
	// A project directory, not a private one: the tools it runs and the
	// user's other programs read it as they would any other.
	if fi, err := os.Stat(got); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("created %v, %v; want a directory with mode 0755", fi, err)
	}
	file := writeFile(t, base, "file", "")
	if planned, err := canonicalToBe(filepath.Join(file, "sub", "dir")); err == nil {
		t.Errorf("canonicalToBe through a file = %q, want an error", planned)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	if got, err := sessionDir(link, []string{root}); err != nil || got != link {
		t.Errorf("sessionDir of a symbolic link into the root = %q, %v; want %q", got, err, link)
	}
}

// TestRunSendsTheAgentAndTheGlobalInstructions: what reaches the
// provider is wired from the configuration and the environment: the build
// agent's prompt, its step allowance (one step: the first request is the
// last, with the maximum-steps reminder and no tools) and the global
// AGENTS.md under $HOME/.config/sessiond.
func TestRunSendsTheAgentAndTheGlobalInstructions(t *testing.T) {
	fake := &fakeProvider{path: "/v1/chat/completions", body: openAIStream}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".config", "sessiond"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(home, ".config", "sessiond"), "AGENTS.md", "Global rule: GLOBAL-MARKER-7.\n")
	cfg := writeFile(t, t.TempDir(), "sessiond.json", `{"providers": {"local": {"type": "openai", "baseURL": "`+srv.URL+`/v1", "apiKey": "k",
		"models": {"m": {}}}}, "model": "local/m",
		"agents": {"build": {"prompt": "You are AGENT-MARKER-3.", "steps": 1}}}`)
	r := sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir(), "HOME", home), nil, "run", "--config", cfg, "--dir", t.TempDir(), "hi")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(fake.reqs))
	}
	req, _ := json.Marshal(fake.reqs[0])
	for _, want := range []string{"AGENT-MARKER-3", "GLOBAL-MARKER-7", "Maximum steps reached"} {
		if !strings.Contains(string(req), want) {
			t.Errorf("the request lacks %q:\n%s", want, req)
		}
	}
}

// TestOpenStackRefusesALockedDataDirAtOnce: a data directory whose store
// another process holds is refused with errDataDirInUse, naming the store,
// after the short lock wait (lockTimeout, half a second) rather than a
// long one: a second daemon should learn at once that it is one too many.
func TestOpenStackRefusesALockedDataDirAtOnce(t *testing.T) {
	data := t.TempDir()
	held, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	began := time.Now()
	_, err = openStack(testConfig(t, data), zerolog.Nop(), stackOptions{})
	if !errors.Is(err, errDataDirInUse) || !strings.Contains(err.Error(), filepath.Join(data, StoreFileName)+" is locked") {
		t.Fatalf("openStack on a held data dir: %v", err)
	}
	// Generous against a loaded machine, and still well short of a wait
	// anybody would take for a hang.
	if waited := time.Since(began); waited > 5*time.Second {
		t.Fatalf("refused after %v, want about %v", waited, lockTimeout)
	}
}

// scriptedEnv returns the environment of a daemon whose data directory
// configures a script model that answers every step with "fine".
func scriptedEnv(t *testing.T) map[string]string {
	t.Helper()
	data := t.TempDir()
	writeFile(t, data, "s.json", `{"default": {"steps": [{"text": "fine"}, {"finish": "stop"}]}}`)
	writeFile(t, data, ConfigFileName, `{"providers": {"s": {"type": "script", "file": "s.json"}}, "model": "s/x"}`)
	return map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()}
}

// postOK posts body to path on the daemon, failing the test unless it
// answers 200.
func (s *inProcessServe) postOK(path, body string) {
	s.t.Helper()
	res, err := http.Post("http://"+s.addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("POST %s: %d", path, res.StatusCode)
	}
}

// TestServeCountsTheRuntimeInMetrics: /metrics counts what the runtime
// and the HTTP API do, not only the store: a prompt that runs a step shows
// in sessiond_admissions_total and sessiond_steps_total, and a client
// following the event stream in sessiond_sse_subscribers.
func TestServeCountsTheRuntimeInMetrics(t *testing.T) {
	s := serveInProcess(t, scriptedEnv(t))
	dir, _ := json.Marshal(t.TempDir())
	s.postOK("/api/session", `{"id": "ses_metrics", "location": {"directory": `+string(dir)+`}}`)
	s.postOK("/api/session/ses_metrics/prompt", `{"prompt": {"text": "hi"}}`)
	steps := regexp.MustCompile(`(?m)^sessiond_steps_total\{outcome="[a-z]+"\} 1$`)
	var metrics string
	eventually(t, "the step in /metrics", func() bool {
		_, metrics = s.get("/metrics", "")
		return steps.MatchString(metrics)
	}, func() string { return metrics })
	if !strings.Contains(metrics, "\nsessiond_admissions_total 1\n") {
		t.Errorf("/metrics does not count the admission:\n%s", metrics)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+"/api/event", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	eventually(t, "the follower in /metrics", func() bool {
		_, metrics = s.get("/metrics", "")
		return strings.Contains(metrics, "\nsessiond_sse_subscribers{stream=\"event\"} 1\n")
	}, func() string { return metrics })
}

// TestServeRootsHoldForOlderSessions: --root confines the Sessions a
// daemon runs, not only those it creates: a Session created earlier, by a
// daemon without roots, in a directory outside them is not run (its wake
// is refused as forbidden, the prompt stays pending).
func TestServeRootsHoldForOlderSessions(t *testing.T) {
	env := scriptedEnv(t)
	data := env["SESSIOND_DATA"]
	s := serveInProcess(t, env)
	dir, _ := json.Marshal(t.TempDir())
	s.postOK("/api/session", `{"id": "ses_old", "location": {"directory": `+string(dir)+`}}`)
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve exited %d\nstderr:\n%s", code, s.stderr.String())
	}

	s = serveInProcess(t, env, "--root", t.TempDir())
	s.postOK("/api/session/ses_old/prompt", `{"prompt": {"text": "hi"}}`)
	eventually(t, "the wake to be refused", func() bool {
		return strings.Contains(s.stderr.String(), `location.directory \"`+strings.Trim(string(dir), `"`)+`\" is outside the allowed roots`)
	}, s.stderr.String)
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve exited %d\nstderr:\n%s", code, s.stderr.String())
	}
	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.History(context.Background(), "ses_old", persistence.Query{After: -1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if last := page.Data[len(page.Data)-1].Type; last != messages.TypePromptAdmitted {
		t.Fatalf("the Session outside the roots ran: its last event is %s", last)
	}
}

// runReadThenSay runs `sessiond run --json` with a scripted model of a
// 100,000-token window that reads notes.txt in its first step and says
// text in every later one, under the configuration's compaction section
// (a JSON object), and returns the exit code, stdout and stderr.
func runReadThenSay(t *testing.T, text, compaction string) (code int, out, errOut string) {
	t.Helper()
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "s.json", `{"responses": [
		{"times": 1, "steps": [{"toolCall": {"id": "c1", "name": "read", "input": {"path": "notes.txt"}}}, {"finish": "tool-calls"}]},
		{"steps": [{"text": `+strconv.Quote(text)+`}, {"finish": "stop"}]}]}`)
	cfg := writeFile(t, cfgDir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "s.json", "models": {"x": {"context": 100000}}}},
		"model": "s/x", "compaction": `+compaction+`}`)
	dir := t.TempDir()
	writeFile(t, dir, "notes.txt", "remember the milk\n")
	return runApp(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()},
		"run", "--json", "--yes", "--config", cfg, "--dir", dir, "hi")
}

// TestRunCompactsAutomaticallyWithTheConfiguredBuffer: automatic
// compaction is on by default and uses the configured buffer: with a
// buffer that leaves a large window less than a thousand tokens, the
// second step of a busy period compacts first (with the default buffer,
// a quarter of the window at most, it would not).
func TestRunCompactsAutomaticallyWithTheConfiguredBuffer(t *testing.T) {
	code, out, errOut := runReadThenSay(t, "## Objective\nread the notes", `{"buffer": 99000}`)
	if code != exitOK || !strings.Contains(out, `"type":"`+messages.TypeCompactionEnded+`"`) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestRunWithAutoCompactionOff: compaction.auto false reaches the
// runtime. The same configuration as above, where the buffer makes the
// second step compact first, runs both steps without compacting.
func TestRunWithAutoCompactionOff(t *testing.T) {
	code, out, errOut := runReadThenSay(t, "done reading", `{"auto": false, "buffer": 99000}`)
	if code != exitOK || !strings.Contains(out, `"type":"`+messages.TypeStepEnded+`"`) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(out, `"type":"`+messages.TypeCompactionStarted+`"`) {
		t.Fatalf("compacted with compaction.auto false:\n%s", out)
	}
	if n := strings.Count(out, `"type":"`+messages.TypeStepEnded+`"`); n != 2 {
		t.Fatalf("%d steps ended, want 2:\n%s", n, out)
	}
}

// TestRunReportsATranscriptItCouldNotWrite: a stdout that fails for a
// reason other than its reader being gone (EPIPE) is reported on stderr,
// and the busy period's outcome is still the status: the transcript's
// loss does not fail a Session that succeeded.
func TestRunReportsATranscriptItCouldNotWrite(t *testing.T) {
	var stderr syncBuffer
	a := &app{stdin: strings.NewReader(""), stdout: &failingWriter{}, stderr: &stderr,
		getenv: envOf("SESSIOND_DATA", t.TempDir(), "HOME", t.TempDir())}
	code := a.main(context.Background(), []string{"run", "--yes", "--dir", t.TempDir(), "hi"})
	if errOut := stderr.String(); code != exitOK || !strings.Contains(errOut, "sessiond run: write transcript: broken pipe\n") ||
		!strings.Contains(errOut, "succeeded: 4 step(s)") {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
}

// TestServeLogsRequestsAtDebug: the HTTP API logs through serve's logger:
// at --log-level debug every request is a line with its method, path and
// status.
func TestServeLogsRequestsAtDebug(t *testing.T) {
	s := serveInProcess(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()}, "--log-level", "debug")
	if code, _ := s.get("/api/health", ""); code != http.StatusOK {
		t.Fatalf("GET /api/health: %d", code)
	}
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve exited %d\nstderr:\n%s", code, s.stderr.String())
	}
	if errOut := s.stderr.String(); !strings.Contains(errOut, `"method":"GET","path":"/api/health","status":200,`) {
		t.Fatalf("stderr:\n%s", errOut)
	}
}

// TestOpenStackLogsTheStoresRecovery: the store logs through the stack's
// logger: opening a store a crash left with commits only in its
// write-ahead log says how many it recovered.
func TestOpenStackLogsTheStoresRecovery(t *testing.T) {
	data := crashedStore(t, func(st *persistence.Bolt) {
		if _, _, err := st.CreateSession(context.Background(), persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}}); err != nil {
			t.Fatal(err)
		}
	}, nil)
	var logs syncBuffer
	stack, err := openStack(testConfig(t, data), zerolog.New(&logs), stackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stack.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"message":"recovered commits from the write-ahead log"`) {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

// TestRunInterruptOnATerminalStartsALine: ^C with a terminal on stdin
// puts the notice on a line of its own (the ^C echo may have landed
// mid-line, after a question), then interrupts the Session for the user:
// exit 130, reason user.
func TestRunInterruptOnATerminalStartsALine(t *testing.T) {
	in, typed := io.Pipe()
	defer typed.Close() // ends the goroutine that reads the terminal
	r := runInProcess(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()}, in, true, false,
		"--json", "--config", slowConfig(t), "--dir", t.TempDir(), "hi")
	eventually(t, "a started step", func() bool {
		return strings.Contains(r.stdout.String(), `"type":"session.step.started.1"`)
	}, r.stderr.String)
	r.cancel(signalCause{syscall.SIGINT})
	if code := r.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d\nstderr:\n%s", code, r.stderr.String())
	}
	if errOut := r.stderr.String(); !strings.Contains(errOut, "\n\nsessiond: interrupting (^C again quits at once)\n") ||
		!strings.Contains(errOut, "interrupted (reason user)") {
		t.Fatalf("stderr:\n%q", errOut)
	}
}

// TestRunFailsWhenTheDemoNotesCannotBeWritten: the demo needs the
// notes.txt it reads; when it cannot be created (here its path is longer
// than the system allows, while the directory's is not) run fails before
// it creates a Session, saying so, instead of running a demo that cannot
// work.
func TestRunFailsWhenTheDemoNotesCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	const pathMax = 4096 // Linux's, the terminating NUL included
	for len(dir) < pathMax-8 {
		dir = filepath.Join(dir, strings.Repeat("d", min(200, pathMax-8-len(dir)-1)))
	}
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()}, "run", "--yes", "--dir", dir, "hi")
	if code != exitFailed || !strings.Contains(errOut, "sessiond run: demo: ") || !strings.Contains(errOut, "file name too long") ||
		strings.Contains(errOut, "sessiond: session ") {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
}

// TestServeRefusesAMissingRoot: a --root that does not exist, or is no
// directory, fails serve (exit 1, naming it) before it listens or opens
// the store: no data directory is left behind.
func TestServeRefusesAMissingRoot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for root, want := range map[string]string{
		filepath.Join(t.TempDir(), "missing"): "does not exist",
		file:                                  "is not a directory",
	} {
		data := filepath.Join(t.TempDir(), "data")
		code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()}, "serve", "--addr", "127.0.0.1:0", "--root", root)
		if code != exitFailed || !strings.Contains(errOut, "sessiond serve: --root "+root+" "+want) || strings.Contains(errOut, "listening on") {
			t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
		}
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("serve refused for its root left %s: %v", data, err)
		}
	}
	// A root of the configuration file is named as such.
	dir := t.TempDir()
	missing := filepath.Join(dir, "rel")
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), []byte(`{"roots": ["rel"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": filepath.Join(dir, "data"), "HOME": t.TempDir()},
		"serve", "--addr", "127.0.0.1:0", "--config", filepath.Join(dir, ConfigFileName))
	if code != exitFailed || !strings.Contains(errOut, "sessiond serve: roots[0] of the configuration "+missing+" does not exist") {
		t.Fatalf("a missing root of the file: exit %d\nstderr:\n%s", code, errOut)
	}
	// An empty --root (an unset variable) is a usage error, not the
	// working directory.
	code, _, errOut = runApp(t, map[string]string{"SESSIOND_DATA": filepath.Join(dir, "data"), "HOME": t.TempDir()}, "serve", "--addr", "127.0.0.1:0", "--root", "")
	if code != exitUsage || !strings.Contains(errOut, "--root: empty path") {
		t.Fatalf("--root \"\": exit %d\nstderr:\n%s", code, errOut)
	}
}

// TestServeStoresTheCanonicalDirectoryUnderRoots: with --root, a Session
// created through a symbolic link inside a root is stored with the
// link's target, so that changing the link later cannot move the Session
// out of its root.
func TestServeStoresTheCanonicalDirectoryUnderRoots(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	s := serveInProcess(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()}, "--root", root)
	dir, _ := json.Marshal(link)
	res, err := http.Post("http://"+s.addr+"/api/session", "application/json", strings.NewReader(`{"id": "ses_link", "location": {"directory": `+string(dir)+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("create through a link: %d", res.StatusCode)
	}
	_, body := s.get("/api/session/ses_link", "")
	var got struct{ Data persistence.Session }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	if want, _ := filepath.EvalSymlinks(real); got.Data.Location.Directory != want {
		t.Fatalf("stored directory %q, want %q", got.Data.Location.Directory, want)
	}
}

// TestRunCompactionKeepsTheConfiguredRecentContext: compaction.keep
// reaches the runtime: with a keep of 5 tokens, the checkpoint's recent
// context is at most 20 characters, where the default would keep the
// whole of this short history.
func TestRunCompactionKeepsTheConfiguredRecentContext(t *testing.T) {
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "s.json", `{"responses": [
		{"times": 1, "steps": [{"toolCall": {"id": "c1", "name": "read", "input": {"path": "notes.txt"}}}, {"finish": "tool-calls"}]},
		{"steps": [{"text": "## Objective\nread the notes"}, {"finish": "stop"}]}]}`)
	cfg := writeFile(t, cfgDir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "s.json", "models": {"x": {"context": 100000}}}},
		"model": "s/x", "compaction": {"buffer": 99000, "keep": 5}}`)
	dir := t.TempDir()
	writeFile(t, dir, "notes.txt", "remember the milk, the eggs and the bread\n")
	code, out, errOut := runApp(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()},
		"run", "--json", "--yes", "--config", cfg, "--dir", dir, "hi")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for line := range strings.Lines(out) {
		var e struct {
			Type string `json:"type"`
			Data struct {
				Recent *string `json:"recent"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != messages.TypeCompactionEnded {
			continue
		}
		if e.Data.Recent == nil || *e.Data.Recent == "" || len(*e.Data.Recent) > 20 {
			t.Fatalf("%s: recent context %q, want 1 to 20 characters", messages.TypeCompactionEnded, line)
		}
		return
	}
	t.Fatalf("no %s in\n%s", messages.TypeCompactionEnded, out)
}

// TestServeCapsTheSteersAStepTakesIn: limits.steerBatch reaches the
// runtime. Two steers admitted while step 1's tool blocks (on a FIFO the
// test opens when they are in) are promoted one per step boundary with a
// cap of 1, where no cap would promote both before step 2.
func TestServeCapsTheSteersAStepTakesIn(t *testing.T) {
	data, dir := t.TempDir(), t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, data, "s.json", `{"responses": [
		{"times": 1, "steps": [{"toolCall": {"id": "c1", "name": "bash", "input": {"command": "cat go"}}}, {"finish": "tool-calls"}]}],
		"default": {"steps": [{"text": "fine"}, {"finish": "stop"}]}}`)
	writeFile(t, data, ConfigFileName, `{"providers": {"s": {"type": "script", "file": "s.json"}}, "model": "s/x",
		"agents": {"build": {"permission": [{"permission": "*", "pattern": "*", "action": "allow"}]}},
		"limits": {"steerBatch": 1}}`)
	s := serveInProcess(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()})
	jdir, _ := json.Marshal(dir)
	s.postOK("/api/session", `{"id": "ses_steer", "location": {"directory": `+string(jdir)+`}}`)
	s.postOK("/api/session/ses_steer/prompt", `{"prompt": {"text": "start"}}`)
	type event struct {
		Type string `json:"type"`
	}
	history := func() []event {
		code, body := s.get("/api/session/ses_steer/history?limit=100", "")
		var page struct{ Data []event }
		if err := json.Unmarshal([]byte(body), &page); code != http.StatusOK || err != nil {
			t.Fatalf("history: %d %q: %v", code, body, err)
		}
		return page.Data
	}
	var events []event
	eventually(t, "the bash call to start", func() bool {
		events = history()
		return slices.ContainsFunc(events, func(e event) bool { return e.Type == messages.TypeToolCalled })
	}, func() string { return fmt.Sprint(events) })
	var err error
	for _, text := range []string{"one", "two"} {
		s.postOK("/api/session/ses_steer/prompt", `{"prompt": {"text": "`+text+`"}, "delivery": "steer"}`)
	}
	// Opened without blocking once cat has it open (ENXIO until then);
	// closing it ends cat's input, and cat exits.
	var f *os.File
	eventually(t, "cat to open the FIFO", func() bool {
		f, err = os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0)
		return err == nil
	}, func() string { return fmt.Sprint(err, history()) })
	f.Close()
	eventually(t, "the Session to settle", func() bool {
		events = history()
		return len(events) > 0 && events[len(events)-1].Type == messages.TypeExecutionSucceeded
	}, func() string { return fmt.Sprint(events) })
	// Promotions between steps: the first prompt's before step 1, then one
	// per boundary.
	var seen []int
	n := 0
	for _, e := range events {
		switch e.Type {
		case messages.TypePromptPromoted:
			n++
		case messages.TypeStepStarted:
			seen, n = append(seen, n), 0
		}
	}
	if !slices.Equal(seen, []int{1, 1, 1}) {
		t.Fatalf("promotions before each step %v, want [1 1 1]\n%v", seen, events)
	}
}

// TestServeSaysWhyAKeylessProviderGivesNoDefault: a provider whose models
// are listed but whose apiKey reads an unset variable leaves the daemon
// without a default model; the warning names the variable, instead of
// telling the operator to list models they did list.
func TestServeSaysWhyAKeylessProviderGivesNoDefault(t *testing.T) {
	data := t.TempDir()
	writeFile(t, data, ConfigFileName, `{"providers": {"o": {"type": "openai", "apiKey": "{env:QA_NOKEY}", "models": {"m": {"context": 1000, "output": 100}}}}}`)
	s := serveInProcess(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()})
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve exited %d\nstderr:\n%s", code, s.stderr.String())
	}
	if errOut := s.stderr.String(); !strings.Contains(errOut, `no default model: Sessions must select one (model \"o/m\": provider \"o\" has no credentials; set environment variable QA_NOKEY, which its apiKey reads)`) {
		t.Fatalf("stderr:\n%s", errOut)
	}
}
