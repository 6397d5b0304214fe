package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunDemo runs the README's first command: the demo model reads
// notes.txt, lists the directory and adds hello.txt for real.
func TestRunDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work") // run creates it
	data := t.TempDir()
	r := sessiond(t, testEnv(t), nil, "run", "--yes", "--dir", dir, "--data", data, "Look around and leave a hello file")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"[thinking] The user wants a tour",
		"Let me start by reading notes.txt.\n",
		`[tool] read {"path":"notes.txt"}`,
		"[done] read: 1\tThese are the notes",
		`[tool] bash {"command":"ls -la"}`,
		`[permission] allowed bash "ls -la" (--yes)`,
		"[done] bash: total",
		"[tool] apply_patch",
		`[permission] allowed edit "hello.txt" (--yes)`,
		"[done] apply_patch: Success.",
		"Done. I read notes.txt, listed the directory with `ls -la`, and added hello.txt containing \"Hello from sessiond!\".\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, want := range []string{demoNotice, "created notes.txt in " + dir, "sessiond: session ses_", " in " + dir + "\n", "succeeded: 4 step(s)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	// --yes answers the demo's questions: no hint to pass it, and run's
	// log stays at warn by default.
	if strings.Contains(r.stderr, "pass --yes") || strings.Contains(r.stderr, `"level":"info"`) {
		t.Errorf("stderr has a --yes hint or info logs")
	}
	if t.Failed() {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	hello, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
	if err != nil || string(hello) != "Hello from sessiond!\n" {
		t.Fatalf("hello.txt = %q, %v", hello, err)
	}
	if _, err := os.Stat(filepath.Join(data, StoreFileName)); err != nil {
		t.Fatalf("no store in the data dir: %v", err)
	}

	// An existing notes.txt is left alone.
	dir2 := t.TempDir()
	writeFile(t, dir2, "notes.txt", "my own notes\n")
	r = sessiond(t, testEnv(t, "SESSIOND_DATA", data), nil, "run", "--yes", "--dir", dir2, "again")
	if r.code != 0 || !strings.Contains(r.stdout, "[done] read: 1\tmy own notes") || strings.Contains(r.stderr, "created notes.txt") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// What the two runs left checks as sound: every projection is what
	// their logs make (check once reported every event before a message
	// row of a Session that had gone on past it).
	r = sessiond(t, testEnv(t, "SESSIOND_DATA", data), nil, "check", "--tmp", t.TempDir())
	if r.code != 0 || !strings.Contains(r.stdout, "is sound (Sessions: 2, events: ") {
		t.Fatalf("check: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunWithoutTerminal: with no terminal and no --yes the first question
// (bash) is rejected at once. The model sees the rejection, the step ends
// without continuing, and the busy period succeeds: exit 0, no hello.txt.
func TestRunWithoutTerminal(t *testing.T) {
	dir := t.TempDir()
	r := sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), nil, "run", "--dir", dir, "hi")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`[permission] rejected bash "ls -la": ` + rejectNoTerminal + " (pass --yes to allow)",
		"[failed] bash: permission.rejected: ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "[tool] apply_patch") {
		t.Error("the Session went on after the rejection")
	}
	if !strings.Contains(r.stderr, "pass --yes to allow them") || !strings.Contains(r.stderr, "succeeded: 2 step(s)") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "hello.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("hello.txt: %v", err)
	}
	if t.Failed() {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

// TestRunJSON prints every event as one JSON line, live deltas and
// permission events included, durable events in seq order.
func TestRunJSON(t *testing.T) {
	r := sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), nil, "run", "--json", "--yes", "--dir", t.TempDir(), "hi")
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	seen := map[string]int{}
	last := int64(-1)
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	var final string
	for sc.Scan() {
		var ev messages.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		seen[ev.Type]++
		if ev.Durable != nil {
			if ev.Durable.Seq != last+1 {
				t.Fatalf("seq %d after %d: %s", ev.Durable.Seq, last, sc.Text())
			}
			last = ev.Durable.Seq
			final = ev.Type
		}
	}
	for _, typ := range []string{messages.TypeSessionCreated, messages.TypeTextDelta, messages.TypeReasoningDelta,
		messages.TypePermissionAsked, messages.TypePermissionReplied, messages.TypeToolSucceeded} {
		if seen[typ] == 0 {
			t.Errorf("no %s event", typ)
		}
	}
	if seen[messages.TypePermissionAsked] != 2 || seen[messages.TypeStepEnded] != 4 || final != messages.TypeExecutionSucceeded {
		t.Errorf("asked %d, steps %d, last durable %s", seen[messages.TypePermissionAsked], seen[messages.TypeStepEnded], final)
	}
}

// TestRunFailed: a busy period that fails exits 1 and prints the error's
// type and message.
func TestRunFailed(t *testing.T) {
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "refuse.json", `{"responses": [{"steps": [
		{"error": {"type": "provider.invalid-request", "message": "scripted refusal"}}]}]}`)
	cfg := writeFile(t, cfgDir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "refuse.json"}}, "model": "s/any"}`)
	r := sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), nil, "run", "--config", cfg, "--dir", t.TempDir(), "hi")
	if r.code != 1 || !strings.Contains(r.stderr, "failed: provider.invalid-request: scripted refusal") ||
		!strings.Contains(r.stdout, "[step failed] provider.invalid-request: scripted refusal") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, demoNotice) {
		t.Fatal("the demo stood in for a configured provider")
	}

	// A directory outside the configured roots is refused up front, and a
	// missing one is not created there.
	root := t.TempDir()
	cfg = writeFile(t, cfgDir, "rooted.json", `{"roots": ["`+root+`"]}`)
	missing := filepath.Join(t.TempDir(), "a", "b")
	for _, dir := range []string{t.TempDir(), missing} {
		r = sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), nil, "run", "--config", cfg, "--dir", dir, "hi")
		if r.code != 1 || !strings.Contains(r.stderr, "forbidden: --dir ") || !strings.Contains(r.stderr, "is outside the allowed roots ("+root+")") {
			t.Fatalf("outside the roots: exit %d\nstderr:\n%s", r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused --dir was created: %v", err)
	}
	// Inside a root, a missing directory is created.
	r = sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), nil, "run", "--config", cfg, "--dir", filepath.Join(root, "new", "dir"), "hi")
	if _, err := os.Stat(filepath.Join(root, "new", "dir")); err != nil || strings.Contains(r.stderr, "outside the allowed roots") {
		t.Fatalf("inside the roots: %v\nstderr:\n%s", err, r.stderr)
	}

	// A model the catalog does not know fails before anything runs, and
	// leaves no --dir behind.
	notMade := filepath.Join(t.TempDir(), "not", "made")
	r = sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), nil, "run", "--model", "nope/x", "--dir", notMade, "hi")
	if r.code != 1 || !strings.Contains(r.stderr, `model.not-found: model "nope/x": unknown provider "nope"`) {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Dir(notMade)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a run refused for its model created --dir: %v", err)
	}
}

// slowScript is a script provider whose every response starts a text and
// then stays busy for a minute, so a Session is reliably mid-step once its
// step.started.1 is durable (the text's first delta makes it so).
const slowScript = `{"default": {"steps": [{"text": "Let me think."}, {"delayMs": 60000}, {"text": "too late"}, {"finish": "stop"}]}}`

// slowConfig writes a configuration whose default model is the slow
// script and returns its path.
func slowConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "slow.json", slowScript)
	return writeFile(t, dir, "sessiond.json", `{"providers": {"slow": {"type": "script", "file": "slow.json"}}, "model": "slow/any"}`)
}

// TestRunInterrupt: SIGINT interrupts the Session with reason user and run
// exits 130.
func TestRunInterrupt(t *testing.T) {
	p := start(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), "run", "--json", "--config", slowConfig(t), "--dir", t.TempDir(), "hi")
	p.waitFor(&p.stdout, `"type":"session.step.started.1"`)
	p.signal(syscall.SIGINT)
	if code := p.wait(); code != exitInterrupted {
		t.Fatalf("exit %d\nstderr:\n%s", code, p.stderr.String())
	}
	if !strings.Contains(p.stdout.String(), `"type":"session.execution.interrupted.1"`) ||
		!strings.Contains(p.stdout.String(), `"reason":"user"`) || !strings.Contains(p.stderr.String(), "interrupted (reason user): 1 step(s)") ||
		// Without a terminal no blank line goes before the notice: no ^C
		// echo can have landed mid-line.
		strings.Contains(p.stderr.String(), "\n\nsessiond: interrupting (^C again quits at once)") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", p.stdout.String(), p.stderr.String())
	}
}

// TestRunUsage: a missing prompt is a usage error.
func TestRunUsage(t *testing.T) {
	r := sessiond(t, testEnv(t), nil, "run", "--yes")
	if r.code != exitUsage || !strings.Contains(r.stderr, "the prompt text is missing") {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	// The error is printed once: the flag package prints nothing itself.
	r = sessiond(t, testEnv(t), nil, "run", "--bogus", "x")
	if r.code != exitUsage || strings.Count(r.stderr, "flag provided but not defined: --bogus") != 1 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
}

// TestRunSurvivesAClosedStdout: run … | head -1 closes run's stdout while
// it runs. The write fails (EPIPE) instead of SIGPIPE killing the process
// mid busy period, and the Session still ends with its terminal event.
func TestRunSurvivesAClosedStdout(t *testing.T) {
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "s.json", `{"responses":[{"steps":[{"text":"first"},{"delayMs":300},{"text":"second"},{"finish":"stop"}]}]}`)
	cfg := writeFile(t, cfgDir, "c.json", `{"providers":{"s":{"type":"script","file":"s.json"}},"model":"s/x"}`)
	data := t.TempDir()
	cmd := exec.Command(binary(t), "run", "--config", cfg, "--data", data, "--dir", t.TempDir(), "hi")
	cmd.Env = testEnv(t)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	_ = out.(*os.File).Close() // as head -1 exits
	_ = cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Fatalf("run ended with %v\n%s", cmd.ProcessState, stderr.String())
	}
	st, err := persistence.Open(filepath.Join(data, "sessiond.db"), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sessions, err := st.List(t.Context())
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions %+v %v", sessions, err)
	}
	h, err := st.History(t.Context(), sessions[0].ID, persistence.Query{After: -1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if last := h.Data[len(h.Data)-1].Type; last != messages.TypeExecutionSucceeded {
		t.Fatalf("the Session's last event is %s", last)
	}
}

// TestCommandsDoNotSeeTheToken: a bash command the model runs does not
// find the daemon's bearer token in its environment (where `env` would
// put it in the transcript, and a command could answer its own permission
// questions through the API), and sees the rest of the environment.
func TestCommandsDoNotSeeTheToken(t *testing.T) {
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "env.json", `{"responses": [
		{"times": 1, "steps": [{"toolCall": {"id": "c1", "name": "bash", "input": {"command": "echo \"token=[$SESSIOND_TOKEN] other=[$SESSIOND_TEST_OTHER]\""}}}, {"finish": "tool-calls"}]},
		{"steps": [{"text": "done"}, {"finish": "stop"}]}]}`)
	cfg := writeFile(t, cfgDir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "env.json"}}, "model": "s/any"}`)
	env := testEnv(t, "SESSIOND_DATA", t.TempDir(), "SESSIOND_TOKEN", "secret-token-1234", "SESSIOND_TEST_OTHER", "kept")
	r := sessiond(t, env, nil, "run", "--yes", "--config", cfg, "--dir", t.TempDir(), "hi")
	if r.code != 0 || !strings.Contains(r.stdout, "token=[] other=[kept]") || strings.Contains(r.stdout, "secret-token-1234") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
