//go:build unix

package tools

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

func TestCommandPatterns(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   []string
	}{
		{"make test", []string{"make test"}},
		// Expansions bash evaluates again at run time are asked for on
		// their own: a quoted "$(…)" in a variable's value runs there, in
		// no syntax tree, and "echo *" allowed all of these.
		{`echo ${x:='$(touch P)'} ${x@P}`, []string{`echo ${x:='$(touch P)'} ${x@P}`, "${x@P}"}},
		{`echo ${x:='$(touch E)'} ${x@E}`, []string{`echo ${x:='$(touch E)'} ${x@E}`, "${x@E}"}},
		{`echo ${x:='a[$(touch A)]'} $((x))`, []string{`echo ${x:='a[$(touch A)]'} $((x))`, "$((x))"}},
		{`echo ${x:='a[$(touch I)]'} ${a[x]}`, []string{`echo ${x:='a[$(touch I)]'} ${a[x]}`, "${a[x]}"}},
		{`echo ${x:='a[$(touch N)]'} ${!x}`, []string{`echo ${x:='a[$(touch N)]'} ${!x}`, "${!x}"}},
		{`echo ${s:$n:2}`, []string{`echo ${s:$n:2}`, "${s:$n:2}"}},
		// Arithmetic on literals, lengths, key lists and plain quoting
		// evaluate nothing: no extra question.
		{`echo $((1 + 0x2a * 2#101)) ${#x} ${!arr[@]} ${arr[0]} ${x@Q} ${s:1:2}`, []string{`echo $((1 + 0x2a * 2#101)) ${#x} ${!arr[@]} ${arr[0]} ${x@Q} ${s:1:2}`}},
		{"ls -la # list", []string{"ls -la"}},
		{"echo 'a; b' \"c && d\"", []string{"echo 'a; b' \"c && d\""}},
		{"git status; touch pwned", []string{"git status", "touch pwned"}},
		{"git status && rm -rf ~ || true", []string{"git status", "rm -rf ~", "true"}},
		{"git status | sh", []string{"git status", "sh"}},
		{"git status $(curl -s x | sh)", []string{"git status $(curl -s x | sh)", "curl -s x", "sh"}},
		{"git status `id`", []string{"git status `id`", "id"}},
		{"{ a; b; } > out.txt", []string{"{ a; b; } > out.txt", "a", "b"}},
		{"(cd sub && make)", []string{"cd sub", "make"}},
		{"for f in *.go; do gofmt -l $f; done", []string{"gofmt -l $f"}},
		{"if test -f x; then rm x; fi", []string{"test -f x", "rm x"}},
		{"f() { rm -rf /; }; f", []string{"rm -rf /", "f"}},
		{"FOO=1 make test > log 2>&1", []string{"FOO=1 make test > log 2>&1"}},
		{"sleep 5 &\nwait", []string{"sleep 5 &", "wait"}},
		{"export X=1; [[ -n $X ]]", []string{"export X=1", "[[ -n $X ]]"}},
		{"cat <<EOF\nhello; rm x\nEOF", []string{"cat <<EOF\nhello; rm x\nEOF"}},
		// A here-document's body is part of its command, though the
		// parser ends the statement before it: at a later redirection,
		// at its ';' or at its '&'.
		{"python3 - <<'EOF' 2>&1\nprint(1)\nEOF", []string{"python3 - <<'EOF' 2>&1\nprint(1)\nEOF"}},
		{"cat <<'EOF' > run.sh\nrm -rf ~\nEOF", []string{"cat <<'EOF' > run.sh\nrm -rf ~\nEOF"}},
		{"sh <<EOF &\nrm -rf ~\nEOF", []string{"sh <<EOF &\nrm -rf ~\nEOF"}},
		{"sh <<EOF; echo done\nrm -rf ~\nEOF", []string{"sh <<EOF; echo done\nrm -rf ~\nEOF", "echo done"}},
	} {
		got, err := commandPatterns("bash", tc.script)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.script, got, err, tc.want)
		}
	}
	for _, bad := range []string{"echo $(", "if true; then", "   ", "# only a comment"} {
		if got, err := commandPatterns("bash", bad); err == nil {
			t.Errorf("%q: %q, want an error", bad, got)
		}
	}
}

// FuzzCommandPatterns: any script either fails to parse or yields
// patterns, each a piece of the script.
func FuzzCommandPatterns(f *testing.F) {
	for _, s := range []string{"make test", "a; b && c | d", "x $(y `z`)", "{ a; } > f", "cat <<EOF\nx\nEOF", "f() { g; }"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script string) {
		got, err := commandPatterns("bash", script)
		if err != nil {
			return
		}
		if len(got) == 0 {
			t.Fatal("no patterns and no error")
		}
		for _, p := range got {
			if p == "" || !strings.Contains(script, p) {
				t.Fatalf("pattern %q is not a piece of %q", p, script)
			}
		}
	})
}

// TestBashRulesCoverEveryCommand: an allow rule for a command's prefix
// does not allow what is chained after it or substituted into it.
func TestBashRulesCoverEveryCommand(t *testing.T) {
	for _, cmd := range []string{"git status; touch pwned", "git status && touch pwned", "git status $(touch pwned)"} {
		asker := &scriptedAsker{answer: answerAlways(Reject)}
		h := newHarness(t, harnessConfig{asker: asker, rules: Ruleset{{"*", "*", Ask}, {"bash", "git status*", Allow}}})
		_, err := h.call(context.Background(), t, "bash", BashInput{Command: cmd})
		if errorType(t, err) != messages.ErrPermissionRejected {
			t.Fatalf("%q: %v, want it asked and rejected", cmd, err)
		}
		if _, err := os.Stat(filepath.Join(h.root, "pwned")); err == nil {
			t.Fatalf("%q ran", cmd)
		}
		if asked := asker.requests(); len(asked) != 1 || !slices.Contains(asked[0].Patterns, "touch pwned") {
			t.Fatalf("%q asked %+v", cmd, asked)
		}
	}
	// The allowed command alone still runs without asking.
	h := newHarness(t, harnessConfig{asker: &scriptedAsker{answer: answerAlways(Reject)},
		rules: Ruleset{{"*", "*", Ask}, {"bash", "git status*", Allow}, {"bash", "true", Allow}}})
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "git status --short || true"}); err != nil {
		t.Fatal(err)
	}
	// A script that does not parse is refused before anything is asked.
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "git status $("}); err == nil || !strings.Contains(err.Error(), "does not parse") {
		t.Fatalf("unparseable script: %v", err)
	}
}

// TestBashAlwaysCoversOnlyItsWorkdir: "always" for a command in one
// directory does not approve it in another.
func TestBashAlwaysCoversOnlyItsWorkdir(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Always)}
	h := newHarness(t, harnessConfig{asker: asker})
	h.write(t, "build/out.o", "x")
	h.write(t, "main.go", "package main\n")
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "rm -f *", Workdir: "build"}); err != nil {
		t.Fatal(err)
	}
	if asked := asker.requests(); len(asked) != 1 || asked[0].Patterns[0] != "rm -f *" || asked[0].Where != "build" {
		t.Fatalf("asked %+v", asked)
	}
	asker.answer = answerAlways(Reject)
	_, err := h.call(context.Background(), t, "bash", BashInput{Command: "rm -f *"})
	if errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("in the project root: %v, want asked and rejected", err)
	}
	if _, err := os.Stat(filepath.Join(h.root, "main.go")); err != nil {
		t.Fatal("the approval for build/ ran the command in the project root")
	}
	// In build/ again, the approval holds.
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "rm -f *", Workdir: "build"}); err != nil {
		t.Fatal(err)
	}
}

// TestBashAlwaysCoversOnlyThatHereDocument: "always" for a command that
// reads a here-document approves that document, not every one the
// command could read ("python3 - <<'EOF' 2>&1" runs any script).
func TestBashAlwaysCoversOnlyThatHereDocument(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Always)}
	h := newHarness(t, harnessConfig{asker: asker})
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "cat <<'EOF' > out.txt\nharmless\nEOF"}); err != nil {
		t.Fatal(err)
	}
	asker.answer = answerAlways(Reject)
	_, err := h.call(context.Background(), t, "bash", BashInput{Command: "cat <<'EOF' > out.txt\nrm -rf ~\nEOF"})
	if errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("another here-document ran on the first one's approval: %v", err)
	}
	if got := readFile(t, filepath.Join(h.root, "out.txt")); got != "harmless\n" {
		t.Fatalf("out.txt is %q", got)
	}
}

// TestCommandPatternsFollowTheShell: the script is split as the shell that
// runs it reads it; for a shell not known here, as bash and as POSIX sh.
func TestCommandPatternsFollowTheShell(t *testing.T) {
	script := `echo $'\'; touch pwned #'` // bash: one echo; dash: echo, then touch
	for _, tc := range []struct {
		shell string
		want  []string
	}{
		{"/bin/bash", []string{`echo $'\'; touch pwned #'`}},
		{"/bin/sh", []string{`echo $'\'`, "touch pwned"}},
		{"dash", []string{`echo $'\'`, "touch pwned"}},
		{"/opt/bin/fish", []string{`echo $'\'; touch pwned #'`, `echo $'\'`, "touch pwned"}},
	} {
		got, err := commandPatterns(tc.shell, script)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.shell, got, err, tc.want)
		}
	}
}

// TestBashDenyRulesHoldInEveryWorkdir: the workdir scopes approvals, not
// rules: an exact deny rule still denies in another directory.
func TestBashDenyRulesHoldInEveryWorkdir(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: Ruleset{{"bash", "touch *", Allow}, {"bash", "touch pwned", Deny}}})
	h.write(t, "sub/keep", "")
	for _, wd := range []string{"", "sub"} {
		_, err := h.call(context.Background(), t, "bash", BashInput{Command: "touch pwned", Workdir: wd})
		if errorType(t, err) != messages.ErrPermissionRejected {
			t.Fatalf("workdir %q: %v, want denied", wd, err)
		}
	}
}
