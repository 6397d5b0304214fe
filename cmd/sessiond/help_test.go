package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
)

// runApp runs the command line in-process and returns its exit status and
// output.
func runApp(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return env[k] }}
	code := a.main(context.Background(), args)
	return code, stdout.String(), stderr.String()
}

// TestHelp: --help (and help CMD) of every command exits 0 and prints the
// command's usage and flags to stdout.
func TestHelp(t *testing.T) {
	code, out, _ := runApp(t, nil, "--help")
	if code != 0 || !strings.Contains(out, "Usage:\n  sessiond <command>") {
		t.Fatalf("--help: exit %d\n%s", code, out)
	}
	for _, c := range commands {
		if !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("--help does not list %s", c.name)
		}
	}
	cases := map[string][]string{
		"serve":          {"--addr HOST:PORT", "--data DIR", "--config FILE", "--root DIR", "--token TOKEN", "--log-level LEVEL"},
		"run":            {"--dir D", "--model provider/model", "--yes", "--json", "--data DIR", "--config FILE"},
		"session":        {"session create makes a Session", "sessiond session create --help"},
		"session create": {"--dir D", "--id ID", "--addr HOST:PORT", "--token TOKEN"},
		"session list":   {"--addr HOST:PORT"},
		"session get":    {"Usage: sessiond session get [flags] ID"},
		"session move":   {"Usage: sessiond session move [flags] ID --dir D", "superseded"},
		"session agent":  {"Usage: sessiond session agent [flags] ID AGENT", "next step"},
		"session model":  {"Usage: sessiond session model [flags] ID provider/model", "retry"},
		"messages":       {"--after N", "--limit N", "compaction rows"},
		"resume":         {"does not wait", "prompt --no-resume"},
		"wait":           {"no wake in flight"},
		"compact":        {"session.compaction.ended.1"},
		"instruction":    {"session.instructions.updated.1", "1 to 200 characters"},
		"prompt":         {"--id ID", "--delivery MODE", "--no-resume"},
		"log":            {"--after N", "--follow", "Last-Event-ID"},
		"history":        {"--after N", "--limit N"},
		"active":         {"--addr HOST:PORT"},
		"interrupt":      {"reason user"},
		"permissions":    {"sessiond reply REQUEST_ID"},
		"reply":          {"--message TEXT", "once|always|reject"},
		"repair":         {"--force", "--data DIR", "sessiond.db-wal.damaged-TIME"},
		"check":          {"--tmp DIR", "--data DIR", "row by row"},
		"backup":         {"Usage: sessiond backup [flags] FILE", "--addr HOST:PORT", "must not exist", "sessiond.db"},
	}
	for name, wants := range cases {
		args := append(strings.Fields(name), "--help")
		code, out, errOut := runApp(t, nil, args...)
		if code != 0 || errOut != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, errOut)
		}
		if !strings.HasPrefix(out, "Usage: sessiond "+name) {
			t.Errorf("%s --help starts %q", name, clip(out, 60))
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q:\n%s", name, w, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "(default ") > 1 {
				t.Errorf("%s --help states a default twice: %q", name, line)
			}
		}
	}
	if len(cases) != len(commands)+6 {
		t.Errorf("%d help cases for %d commands (+6 session subcommands)", len(cases), len(commands))
	}

	// help CMD is CMD --help; -h works too.
	_, viaHelp, _ := runApp(t, nil, "help", "prompt")
	_, viaFlag, _ := runApp(t, nil, "prompt", "-h")
	if viaHelp != viaFlag || viaHelp == "" {
		t.Errorf("help prompt and prompt -h differ:\n%s\n%s", viaHelp, viaFlag)
	}

	// The binary agrees.
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"run", "--help"}} {
		if out := ok(t, testEnv(t), args...); !strings.Contains(out, "Usage") {
			t.Errorf("sessiond %v: %s", args, out)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "Commands:"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "--nope"}, "flag provided but not defined: --nope"},
		{[]string{"serve", "extra"}, `unexpected argument "extra"`},
		{[]string{"session"}, "want a subcommand: create, list, get, move, agent or model"},
		{[]string{"session", "agent", "ses_1"}, "want a Session ID and an agent"},
		{[]string{"session", "agent", "ses_1", "plan", "extra"}, "want a Session ID and an agent"},
		{[]string{"session", "model", "ses_1", "gpt"}, `invalid: model "gpt": want provider/model`},
		{[]string{"compact"}, "want exactly one Session ID"},
		{[]string{"instruction", "set", "ses_1", "k"}, `usage: instruction set ID KEY "text"`},
		{[]string{"instruction", "show"}, `unknown subcommand "show"; want list, set or delete`},
		{[]string{"instruction"}, "want a subcommand: list, set or delete"},
		{[]string{"messages", "--limit", "x", "ses_1"}, `invalid value "x" for flag --limit`},
		{[]string{"session", "move", "ses_1"}, "--dir is required"},
		{[]string{"session", "move", "--dir", "/tmp"}, "want a Session ID"},
		{[]string{"session", "move", "ses_1", "ses_2", "--dir", "/tmp"}, `unexpected argument "ses_2"`},
		{[]string{"session", "drop"}, `unknown subcommand "drop"`},
		{[]string{"session", "get"}, "want exactly one Session ID"},
		{[]string{"interrupt", "ses_1", "ses_2"}, "want exactly one Session ID"},
		{[]string{"active", "extra"}, `unexpected argument "extra"`},
		{[]string{"instruction", "delete", "ses_1", "k", "x"}, "usage: instruction delete ID KEY"},
		{[]string{"prompt", "ses_1"}, "want a Session ID and the prompt text"},
		{[]string{"prompt", "ses_1", "hi", "--delivery", "later"}, `--delivery "later": want steer or queue`},
		{[]string{"reply", "per_1", "maybe"}, `reply "maybe": want once, always or reject`},
		{[]string{"log"}, "want exactly one Session ID"},
		{[]string{"log", "ses_1", "--live"}, "--live needs --follow"},
		{[]string{"history", "--limit", "x", "ses_1"}, `invalid value "x" for flag --limit`},
		{[]string{"run", "--model", "nomodel", "hi"}, `--model: invalid: model "nomodel": want provider/model`},
		{[]string{"serve", "--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"run", "--log-level", "loud", "hi"}, `--log-level "loud"`},
		{[]string{"active", "--addr", "foo"}, `invalid value "foo" for flag --addr: want host:port or an http(s) URL`},
		{[]string{"log", "ses_1", "--addr", "ftp://x"}, `invalid value "ftp://x" for flag --addr`},
	} {
		code, out, errOut := runApp(t, nil, tt.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

// TestParseInterspersed: flags may come before, between and after the
// positional arguments, and "--" ends them.
func TestParseInterspersed(t *testing.T) {
	c := &command{name: "x"}
	for _, tt := range []struct {
		args []string
		pos  []string
		id   string
		yes  bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, "", false},
		{[]string{"--id", "m", "a", "b"}, []string{"a", "b"}, "m", false},
		{[]string{"a", "--id", "m", "b", "--yes"}, []string{"a", "b"}, "m", true},
		{[]string{"a", "--", "--id", "-x"}, []string{"a", "--id", "-x"}, "", false},
		{[]string{"--yes", "--", "-"}, []string{"-"}, "", true},
		{[]string{"a", "--", "b", "--", "c"}, []string{"a", "b", "--", "c"}, "", false},
	} {
		fs := newFlags(c)
		id := fs.String("id", "", "")
		yes := fs.Bool("yes", false, "")
		a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
		pos, _, ok := a.parse(c, fs, tt.args)
		if !ok || !reflect.DeepEqual(pos, tt.pos) || *id != tt.id || *yes != tt.yes {
			t.Errorf("%q: pos %q id %q yes %v ok %v", tt.args, pos, *id, *yes, ok)
		}
	}
	// --help is reported as such, not as an error.
	fs := newFlags(c)
	var stdout bytes.Buffer
	a := &app{stdout: &stdout, stderr: &bytes.Buffer{}}
	if _, code, ok := a.parse(c, fs, []string{"a", "--help"}); ok || code != exitOK || !strings.HasPrefix(stdout.String(), "Usage: sessiond x") {
		t.Fatalf("--help: ok %v code %d out %q", ok, code, stdout.String())
	}
}

// TestHelpOfHelp: docs/cli.md says `sessiond help <command>` shows a
// command's help, and every command takes --help. `sessiond help --help`
// (and `sessiond help -h`) is neither: main passes "--help" on as the name
// of a command and fails with `unknown command "--help"`, exit 2, where
// the program's usage with exit 0 is what --help gives everywhere else.
func TestHelpOfHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "--help"}, {"help", "-h"}, {"help"}, {"-h"}, {"-help"}, {"--help"}} {
		code, out, errOut := runApp(t, nil, args...)
		if code != 0 || !strings.Contains(out, "Usage:\n  sessiond <command>") {
			t.Errorf("sessiond %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestHelpOfAnUnknownCommand: `sessiond help NAME` with a NAME that is no
// command reports that NAME, as `sessiond NAME` does, not "help".
func TestHelpOfAnUnknownCommand(t *testing.T) {
	code, out, errOut := runApp(t, nil, "help", "frobnicate")
	if code != exitUsage || out != "" || !strings.HasPrefix(errOut, `sessiond: unknown command "frobnicate"`) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestUsageErrorNamesTheUsage: a usage mistake flag parsing cannot see
// prints the mistake, the command's usage line and where its help is.
func TestUsageErrorNamesTheUsage(t *testing.T) {
	_, _, errOut := runApp(t, nil, "serve", "extra")
	want := "sessiond serve: unexpected argument \"extra\"\nUsage: sessiond serve [flags]\nRun 'sessiond serve --help' for details.\n"
	if errOut != want {
		t.Fatalf("stderr %q, want %q", errOut, want)
	}
}

// TestCommandUsageLayout: a command's help lists each flag with its
// value name, its usage indented under it (every line of it), and its
// default unless that is a zero value (false, 0, empty); a command
// without flags has no Flags section.
func TestCommandUsageLayout(t *testing.T) {
	_, out, _ := runApp(t, nil, "serve", "--help")
	for _, want := range []string{
		"  --data DIR\n        data DIR holding sessiond.db and the default sessiond.json\n        (default $SESSIOND_DATA,",
		"  --log-level LEVEL\n        log LEVEL: debug, info, warn, error or disabled (default \"info\")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = runApp(t, nil, "run", "--help")
	if !strings.Contains(out, "  --yes\n        allow every permission question of this run\n") || strings.Contains(out, `(default "false")`) {
		t.Errorf("run --help:\n%s", out)
	}
	var buf bytes.Buffer
	c := &command{name: "bare", synopsis: "ARG", help: "Bare does nothing."}
	(&app{}).commandUsage(&buf, c, newFlags(c))
	if got := buf.String(); got != "Usage: sessiond bare ARG\n\nBare does nothing.\n" {
		t.Errorf("a command without flags: %q", got)
	}
}

// TestRootIsRepeatable: every --root given is kept, in order.
func TestRootIsRepeatable(t *testing.T) {
	fs := newFlags(serveCommand)
	var roots stringList
	fs.Var(&roots, "root", "")
	if err := fs.Parse([]string{"--root", "/a", "--root", "/b"}); err != nil || !reflect.DeepEqual([]string(roots), []string{"/a", "/b"}) {
		t.Fatalf("roots %q, %v", roots, err)
	}
}
