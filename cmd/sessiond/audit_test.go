package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

// runAppCtx is runApp with the command context ctx.
func runAppCtx(t *testing.T, ctx context.Context, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }}
	code := a.main(ctx, args)
	return code, stdout.String(), stderr.String()
}

// TestToolCommandsGetDefaultSIGPIPE: sessiond keeps a closed stdout
// from killing it, but the commands its tools run must still die of
// SIGPIPE as usual: `yes | head -n 1` ends yes with status 141. With
// SIGPIPE ignored in the daemon (signal.Ignore) every command inherited
// the ignored disposition: yes failed with "Broken pipe" (status 1), and a
// shell loop writing into a closed pipe never ended.
func TestToolCommandsGetDefaultSIGPIPE(t *testing.T) {
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "pipe.json", `{"responses": [
		{"times": 1, "steps": [{"toolCall": {"id": "c1", "name": "bash", "input": {"command": "{ yes; echo \"yes exited $?\" >&2; } | head -n 1 >/dev/null"}}}, {"finish": "tool-calls"}]},
		{"steps": [{"text": "done"}, {"finish": "stop"}]}]}`)
	cfg := writeFile(t, cfgDir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "pipe.json"}}, "model": "s/any"}`)
	r := sessiond(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), nil, "run", "--yes", "--config", cfg, "--dir", t.TempDir(), "hi")
	if r.code != 0 || !strings.Contains(r.stdout, "yes exited 141") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestCommandsDoNotSeeTheTokenVariable: a token the configuration
// reads from "{env:NAME}" is kept from tool commands like SESSIOND_TOKEN:
// `env` would put it in the transcript, and a command could answer its own
// permission questions with it.
func TestCommandsDoNotSeeTheTokenVariable(t *testing.T) {
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "env.json", `{"responses": [
		{"times": 1, "steps": [{"toolCall": {"id": "c1", "name": "bash", "input": {"command": "echo \"named=[$AUDIT_SECRET] other=[$AUDIT_OTHER]\""}}}, {"finish": "tool-calls"}]},
		{"steps": [{"text": "done"}, {"finish": "stop"}]}]}`)
	cfg := writeFile(t, cfgDir, "sessiond.json", `{"token": "{env:AUDIT_SECRET}",
		"providers": {"s": {"type": "script", "file": "env.json"}}, "model": "s/any"}`)
	env := testEnv(t, "SESSIOND_DATA", t.TempDir(), "AUDIT_SECRET", "secret-from-a-named-variable-5678", "AUDIT_OTHER", "kept")
	r := sessiond(t, env, nil, "run", "--yes", "--config", cfg, "--dir", t.TempDir(), "hi")
	if r.code != 0 || !strings.Contains(r.stdout, "named=[] other=[kept]") || strings.Contains(r.stdout, "secret-from-a-named-variable-5678") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestCommandEnvKeepsOtherValues: only the variables that hold the
// token go; an empty token removes nothing but SESSIOND_TOKEN.
func TestCommandEnvKeepsOtherValues(t *testing.T) {
	environ := []string{"SESSIOND_TOKEN=tok-123456", "MY_TOKEN=tok-123456", "PATH=/bin", "EMPTY="}
	if got := strings.Join(commandEnv(environ, "tok-123456"), " "); got != "PATH=/bin EMPTY=" {
		t.Fatalf("commandEnv = %q", got)
	}
	if got := strings.Join(commandEnv(environ, ""), " "); got != "MY_TOKEN=tok-123456 PATH=/bin EMPTY=" {
		t.Fatalf("commandEnv without a token = %q", got)
	}
}

// TestRunInterruptedBeforeThePrompt: a ^C (or SIGTERM, or SIGHUP) that
// arrives while run is still starting (opening the store, creating the
// Session) ends it with 130 (143, 129), as documented, not with exit 1
// and "context canceled".
func TestRunInterruptedBeforeThePrompt(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}, {syscall.SIGHUP, 129}} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(signalCause{tt.sig})
		env := map[string]string{"SESSIOND_DATA": t.TempDir(), "HOME": t.TempDir()}
		code, _, errOut := runAppCtx(t, ctx, env, "run", "--yes", "--dir", t.TempDir(), "hi")
		if code != tt.want || strings.Contains(errOut, "context canceled") {
			t.Errorf("%v: exit %d, want %d\nstderr:\n%s", tt.sig, code, tt.want, errOut)
		}
	}
}

// TestResumeHelpNamesTheRealFlag: resume's help pointed at
// --resume=false, a flag no command has; prompt's flag is --no-resume.
func TestResumeHelpNamesTheRealFlag(t *testing.T) {
	code, out, _ := runApp(t, nil, "resume", "--help")
	if code != 0 || strings.Contains(out, "--resume=false") || !strings.Contains(out, "prompt --no-resume") {
		t.Fatalf("resume --help: exit %d\n%s", code, out)
	}
	// The flag it names exists.
	if code, _, errOut := runApp(t, nil, "prompt", "--no-resume", "--help"); code != 0 || errOut != "" {
		t.Fatalf("prompt --no-resume --help: exit %d: %s", code, errOut)
	}
}

// TestRunHelpStatesSIGTERMStatus: run's help states the exit status
// of SIGTERM (143) beside ^C's (130), as docs/cli.md does.
func TestRunHelpStatesSIGTERMStatus(t *testing.T) {
	if _, out, _ := runApp(t, nil, "run", "--help"); !strings.Contains(out, "143") {
		t.Fatalf("run --help:\n%s", out)
	}
}

// TestSessionSubcommandHelpParagraphs: a session subcommand's help
// keeps its own sentence and the connection paragraph apart.
func TestSessionSubcommandHelpParagraphs(t *testing.T) {
	for _, sub := range []string{"create", "list", "get", "move", "agent", "model"} {
		_, out, _ := runApp(t, nil, "session", sub, "--help")
		if !strings.Contains(out, ".\n\nThe daemon's address") {
			t.Errorf("session %s --help:\n%s", sub, out)
		}
	}
}

// TestDataDirIsAFile: a file where the data directory should be is
// reported as a data directory problem, not as an unreadable
// configuration file the user never named.
func TestDataDirIsAFile(t *testing.T) {
	file := writeFile(t, t.TempDir(), "data", "not a directory")
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--data", file},
		{"run", "--data", file, "--dir", t.TempDir(), "hi"},
	} {
		code, _, errOut := runApp(t, map[string]string{"HOME": t.TempDir()}, args...)
		if code != exitFailed || !strings.Contains(errOut, "data dir") || !strings.Contains(errOut, "not a directory") ||
			strings.Contains(errOut, ConfigFileName) {
			t.Errorf("%s: exit %d\nstderr:\n%s", args[0], code, errOut)
		}
	}
	// A client needs no data directory: it dials the address it is given.
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": file}, "active", "--addr", "127.0.0.1:1")
	if code != exitFailed || !strings.Contains(errOut, "cannot reach sessiond") {
		t.Errorf("active: exit %d\nstderr:\n%s", code, errOut)
	}
	code, _, errOut = runApp(t, map[string]string{"SESSIOND_DATA": file, "SESSIOND_ADDR": "127.0.0.1:1"}, "active")
	if code != exitFailed || !strings.Contains(errOut, "cannot reach sessiond") {
		t.Errorf("active without --addr: exit %d\nstderr:\n%s", code, errOut)
	}
}

// TestServeAddrIsAUsageError: a malformed --addr is a usage mistake
// (exit 2) for serve as it is for the client commands, not a failure
// (exit 1) reported after the configuration was read.
func TestServeAddrIsAUsageError(t *testing.T) {
	for _, tt := range []struct{ addr, want string }{
		{"nope", `invalid value "nope" for flag --addr: want host:port`},
		{"127.0.0.1:99999", `invalid value "127.0.0.1:99999" for flag --addr: want host:port`},
		{"http://127.0.0.1:4096", `invalid value "http://127.0.0.1:4096" for flag --addr: want host:port to listen on, not a URL`},
	} {
		code, out, errOut := runApp(t, map[string]string{"SESSIOND_DATA": t.TempDir()}, "serve", "--addr", tt.addr)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("serve --addr %s: exit %d, stderr %q; want exit 2 and %q", tt.addr, code, errOut, tt.want)
		}
	}
	// The environment's address is checked with the configuration (exit 1),
	// and the message names where it came from.
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "SESSIOND_ADDR": "nope"}, "serve")
	if code != exitFailed || !strings.Contains(errOut, `SESSIOND_ADDR: "nope": want host:port`) {
		t.Errorf("SESSIOND_ADDR=nope serve: exit %d, stderr %q", code, errOut)
	}
}

// TestClientBadEnvAddrNamesTheVariable: a malformed SESSIOND_ADDR is
// reported as SESSIOND_ADDR, not as an --addr the user never passed.
func TestClientBadEnvAddrNamesTheVariable(t *testing.T) {
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": t.TempDir(), "SESSIOND_ADDR": "nope"}, "active")
	if code != exitFailed || strings.Contains(errOut, "--addr") || !strings.Contains(errOut, `SESSIOND_ADDR: "nope": want host:port`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// daemonWithSession serves a daemon on a fresh data directory with one
// Session, sid, and returns it, its address and a client environment.
func daemonWithSession(t *testing.T, sid string) (*proc, string, []string) {
	t.Helper()
	srv, addr := serveDaemon(t, testEnv(t, "SESSIOND_DATA", t.TempDir()))
	client := testEnv(t, "SESSIOND_ADDR", addr)
	ok(t, client, "session", "create", "--id", sid, "--dir", t.TempDir())
	return srv, addr, client
}

// TestInstructionKeysAreNotEscapedTwice: an instruction key reaches
// the daemon as typed. The client appended the escaped key to the decoded
// URL path, so it was escaped again on the wire: "a b" was stored as
// "a%20b" (what `instruction list` then showed, and what a curl DELETE of
// "a b" did not find).
func TestInstructionKeysAreNotEscapedTwice(t *testing.T) {
	srv, addr, client := daemonWithSession(t, "ses_keys")
	defer srv.stop()
	key := "house style/é?#%2F"
	ok(t, client, "instruction", "set", "ses_keys", key, "Answer briefly.")
	if got := decode[map[string]string](t, ok(t, client, "instruction", "list", "ses_keys")); len(got) != 1 || got[key] != "Answer briefly." {
		t.Fatalf("instructions %q, want key %q", got, key)
	}
	// What the HTTP API names with the key escaped once is the same entry.
	req, err := http.NewRequest(http.MethodDelete, "http://"+addr+"/api/session/ses_keys/instruction/"+url.PathEscape(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE of the key escaped once: %d", res.StatusCode)
	}
	if got := decode[map[string]string](t, ok(t, client, "instruction", "list", "ses_keys")); len(got) != 0 {
		t.Fatalf("instructions after the DELETE: %q", got)
	}
}

// TestInstructionKeyThatNoPathNames: an empty key is a usage error, not
// the daemon's "no route" (HTTP 404).
func TestInstructionKeyThatNoPathNames(t *testing.T) {
	code, out, errOut := runApp(t, map[string]string{"SESSIOND_ADDR": "127.0.0.1:1"}, "instruction", "set", "ses_1", "", "text")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "KEY") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestInstructionKeysDotAndDotDot: the keys "." and "..", which the HTTP
// API takes percent-encoded, can be set, listed and deleted from the
// command line too (it refused them, so one set through the API could
// not be deleted with it).
func TestInstructionKeysDotAndDotDot(t *testing.T) {
	srv, _, client := daemonWithSession(t, "ses_dots")
	defer srv.stop()
	ok(t, client, "instruction", "set", "ses_dots", ".", "one")
	ok(t, client, "instruction", "set", "ses_dots", "..", "two")
	if got := decode[map[string]string](t, ok(t, client, "instruction", "list", "ses_dots")); len(got) != 2 || got["."] != "one" || got[".."] != "two" {
		t.Fatalf("instructions %q", got)
	}
	ok(t, client, "instruction", "delete", "ses_dots", "..")
	if got := decode[map[string]string](t, ok(t, client, "instruction", "list", "ses_dots")); len(got) != 1 || got["."] != "one" {
		t.Fatalf("instructions after deleting \"..\": %q", got)
	}
}
