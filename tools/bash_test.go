//go:build unix

package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
)

func bashMeta(t *testing.T, res Result) BashMetadata {
	t.Helper()
	var m BashMetadata
	if err := json.Unmarshal(res.Metadata, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// processAlive reports whether pid is a live process. Zombies count as
// dead: in containers whose init does not reap, killed orphans stay zombies.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !os.IsNotExist(err) && !os.IsPermission(err)
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}

// readPids reads the PIDs a command wrote, one per line.
func readPids(t *testing.T, path string, want int) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != want {
		t.Fatalf("pid file holds %v, want %d pids", pids, want)
	}
	return pids
}

func assertAllDead(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		eventually(t, 10*time.Second, fmt.Sprintf("process %d to die", pid), func() bool { return !processAlive(pid) })
	}
}

// spawnTree starts two background sleepers (one in a nested shell), records
// their PIDs and the nested shell's in pidfile, and then marks readiness.
func spawnTree(pidfile, ready string) string {
	return fmt.Sprintf(`sleep 1000 & echo $! >> %[1]s
sh -c 'sleep 1000 & echo $! >> %[1]s; wait' & echo $! >> %[1]s
while [ "$(wc -l < %[1]s)" -lt 3 ]; do :; done
echo ready > %[2]s
sleep 1000; wait`, pidfile, ready)
}

func TestBashResults(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	if err := os.Mkdir(filepath.Join(h.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		input  BashInput
		output string
		exit   int
		signal string
	}{
		{"stdout", BashInput{Command: "echo hello"}, "hello\n\nExit code: 0", 0, ""},
		{"stderr and exit code", BashInput{Command: "echo out; echo err >&2; exit 3"}, "out\nerr\n\nExit code: 3", 3, ""},
		{"no output", BashInput{Command: "true"}, "(no output)\n\nExit code: 0", 0, ""},
		{"no trailing newline", BashInput{Command: "printf abc"}, "abc\n\nExit code: 0", 0, ""},
		{"workdir", BashInput{Command: "pwd", Workdir: "sub"}, filepath.Join(h.root, "sub") + "\n\nExit code: 0", 0, ""},
		{"default workdir", BashInput{Command: "pwd"}, h.root + "\n\nExit code: 0", 0, ""},
		{"stdin is empty", BashInput{Command: "cat; echo done"}, "done\n\nExit code: 0", 0, ""},
		{"signal", BashInput{Command: "kill -TERM $$"}, "(no output)\n\nThe shell was ended by signal: terminated", -1, "terminated"},
		{"invalid UTF-8 output", BashInput{Command: `printf 'a\377b\n'`}, "a\uFFFDb\n\nExit code: 0", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := h.call(context.Background(), t, "bash", tc.input)
			if err != nil {
				t.Fatal(err)
			}
			if res.Output != tc.output {
				t.Fatalf("output %q, want %q", res.Output, tc.output)
			}
			m := bashMeta(t, res)
			if m.ExitCode != tc.exit || m.Signal != tc.signal {
				t.Fatalf("metadata %+v, want exit %d signal %q", m, tc.exit, tc.signal)
			}
		})
	}
}

func TestBashOutputTruncationKeepsHeadAndTail(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Bash: BashConfig{MaxOutputBytes: 1000}}})
	res, err := h.call(context.Background(), t, "bash", BashInput{Command: "echo HEAD-MARK; head -c 100000 /dev/zero | tr '\\0' x; echo; echo TAIL-MARK"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Output, "HEAD-MARK\n") || !strings.Contains(res.Output, "TAIL-MARK\n\nExit code: 0") {
		t.Fatalf("head or tail lost: %q…%q", res.Output[:40], res.Output[len(res.Output)-40:])
	}
	if !strings.Contains(res.Output, "[output truncated: ") {
		t.Fatalf("no truncation marker in %q", res.Output)
	}
	m := bashMeta(t, res)
	total := int64(len("HEAD-MARK\n") + 100000 + 1 + len("TAIL-MARK\n"))
	if m.OmittedBytes != total-1000 {
		t.Fatalf("omitted %d, want %d", m.OmittedBytes, total-1000)
	}
	if len(res.Output) > 1200 {
		t.Fatalf("output of %d bytes exceeds the budget", len(res.Output))
	}
}

func TestBashTimeoutKillsTheProcessGroup(t *testing.T) {
	// The timeout fires when the test says, once every process runs, not
	// after a wall-clock wait a loaded machine might outlast.
	fire, asked := make(chan time.Time, 1), make(chan time.Duration, 1)
	after := func(d time.Duration) <-chan time.Time { asked <- d; return fire }
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Bash: BashConfig{After: after}}})
	// The command never ends by itself (sleep 1000): the call returns
	// because the timeout killed it, which its error says.
	pids, done := startTree(context.Background(), t, h, 4000)
	if d := <-asked; d != 4*time.Second {
		t.Fatalf("timeout started for %v, want the input's 4s", d)
	}
	fire <- time.Now()
	if err := <-done; errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "timed out after 4s") {
		t.Fatalf("got %v, want a tool.execution timeout", err)
	}
	assertAllDead(t, pids)
}

func TestBashCancellationKillsTheProcessGroup(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	ctx, cancel := context.WithCancel(context.Background())
	pids, done := startTree(ctx, t, h, 0)
	cancel()
	if err := <-done; errorType(t, err) != messages.ErrAborted {
		t.Fatalf("got %v, want aborted", err)
	}
	assertAllDead(t, pids)
}

// startTree runs spawnTree's command (three processes that never end by
// themselves) as a bash call on another goroutine, and returns once all
// three run: their pids, and the call's error when it returns.
func startTree(ctx context.Context, t *testing.T, h *harness, timeoutMs int64) ([]int, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	pidfile, ready := filepath.Join(dir, "pids"), filepath.Join(dir, "ready")
	done := make(chan error, 1)
	go func() {
		_, err := h.call(ctx, t, "bash", BashInput{Command: spawnTree(pidfile, ready), TimeoutMs: timeoutMs})
		done <- err
	}()
	eventually(t, 30*time.Second, "the command to start its processes", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	pids := readPids(t, pidfile, 3)
	for _, pid := range pids {
		if !processAlive(pid) {
			t.Fatalf("process %d died before the call ended", pid)
		}
	}
	return pids, done
}

func TestBashBackgroundJobsDoNotOutliveTheShell(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	pidfile := filepath.Join(h.root, "pid")
	res, err := h.call(context.Background(), t, "bash", BashInput{Command: "sleep 1000 & echo $! > pid; echo started"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "started\n\nExit code: 0" {
		t.Fatalf("output %q", res.Output)
	}
	assertAllDead(t, readPids(t, pidfile, 1))
}

func TestBashExternalWorkdirNeedsPermission(t *testing.T) {
	outside := t.TempDir()
	canonOutside, _ := filepath.EvalSymlinks(outside)
	// Rules alone: bash allowed, external directories denied.
	h := newHarness(t, harnessConfig{rules: Ruleset{{"bash", "*", Allow}, {"external_directory", "*", Deny}}})
	_, err := h.call(context.Background(), t, "bash", BashInput{Command: "pwd", Workdir: outside})
	if errorType(t, err) != messages.ErrPermissionRejected || !strings.Contains(err.Error(), "external_directory") {
		t.Fatalf("got %v, want external_directory rejection", err)
	}
	// Asked: both permissions, external_directory first.
	asker := &scriptedAsker{answer: answerAlways(Once)}
	h2 := newHarness(t, harnessConfig{asker: asker})
	res, err := h2.call(context.Background(), t, "bash", BashInput{Command: "pwd", Workdir: outside})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != canonOutside+"\n\nExit code: 0" {
		t.Fatalf("output %q", res.Output)
	}
	asked := asker.requests()
	if len(asked) != 2 || asked[0].Permission != PermissionExternalDirectory || asked[0].Patterns[0] != canonOutside+"/*" ||
		asked[1].Permission != PermissionBash || asked[1].Patterns[0] != "pwd" || asked[1].Where != canonOutside {
		t.Fatalf("asked %+v", asked)
	}
	// A workdir inside the Location asks only for bash.
	asker2 := &scriptedAsker{answer: answerAlways(Once)}
	h3 := newHarness(t, harnessConfig{asker: asker2})
	if _, err := h3.call(context.Background(), t, "bash", BashInput{Command: "true", Workdir: "."}); err != nil {
		t.Fatal(err)
	}
	if asked := asker2.requests(); len(asked) != 1 || asked[0].Permission != PermissionBash {
		t.Fatalf("asked %+v", asked)
	}
}

func TestBashAlwaysApprovalCoversOnlyThatCommand(t *testing.T) {
	asker := &scriptedAsker{answer: func(req Request) (Answer, error) {
		if req.Patterns[0] == "ls *.txt" {
			return Answer{Reply: Always}, nil
		}
		return Answer{Reply: Reject}, nil
	}}
	h := newHarness(t, harnessConfig{asker: asker})
	h.write(t, "a.txt", "x\n")
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "ls *.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "ls *.txt"}); err != nil {
		t.Fatalf("the approved command again: %v", err)
	}
	// Matches "ls *.txt" read as a wildcard, but the user never saw it.
	_, err := h.call(context.Background(), t, "bash", BashInput{Command: "ls /; touch pwned; echo .txt"})
	if errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("got %v, want the unseen command asked and rejected", err)
	}
	if _, err := os.Stat(filepath.Join(h.root, "pwned")); !os.IsNotExist(err) {
		t.Fatal("the unseen command ran")
	}
	if n := len(asker.requests()); n != 2 {
		t.Fatalf("asked %d times, want 2", n)
	}
}

func TestBashExternalDirectoryAlwaysCoversTheDirectoryOnly(t *testing.T) {
	outside := t.TempDir()
	// The approved directory's name has wildcard characters: they must not
	// widen the approval to its siblings.
	approved := filepath.Join(outside, "a*")
	for _, d := range []string{approved, filepath.Join(approved, "sub"), filepath.Join(outside, "ab")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	canon, _ := filepath.EvalSymlinks(approved)
	asker := &scriptedAsker{answer: func(req Request) (Answer, error) {
		if req.Permission == PermissionExternalDirectory && req.Patterns[0] == canon+"/*" {
			return Answer{Reply: Always}, nil
		}
		if req.Permission == PermissionBash {
			return Answer{Reply: Once}, nil
		}
		return Answer{Reply: Reject}, nil
	}}
	h := newHarness(t, harnessConfig{asker: asker})
	for _, tc := range []struct {
		workdir string
		asked   bool // external_directory asked
	}{
		{approved, true},
		{approved, false},
		{filepath.Join(approved, "sub"), false}, // "always" covers what is beneath the directory
		{filepath.Join(outside, "ab"), true},
	} {
		before := len(asker.requests())
		_, err := h.call(context.Background(), t, "bash", BashInput{Command: "true", Workdir: tc.workdir})
		asked := false
		for _, r := range asker.requests()[before:] {
			asked = asked || r.Permission == PermissionExternalDirectory
		}
		if asked != tc.asked {
			t.Fatalf("%s: external_directory asked = %v, want %v (err %v)", tc.workdir, asked, tc.asked, err)
		}
	}
	if got := h.approvals.List("proj"); len(got) != 1 || got[0].Pattern != LiteralPattern(canon)+"/*" {
		t.Fatalf("saved %q", got)
	}
}

func TestBashDefaultAskThroughPending(t *testing.T) {
	asked := make(chan *messages.PermissionAsked, 4)
	pending := NewPending(PendingConfig{OnAsked: func(e *messages.PermissionAsked) { asked <- e }})
	h := newHarness(t, harnessConfig{asker: pending})
	for _, tc := range []struct {
		reply    Reply
		message  string
		wantType messages.ErrorType
	}{
		{Once, "", ""},
		{Reject, "run the tests with -short", messages.ErrPermissionRejected},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := h.call(context.Background(), t, "bash", BashInput{Command: "echo via pending"})
			done <- err
		}()
		e := <-asked
		if e.Permission != PermissionBash || len(e.Patterns) != 1 || e.Patterns[0] != "echo via pending" || e.CallID != "call_1" || e.SessionID != "ses_test" {
			t.Fatalf("asked %+v", e)
		}
		// A client reads the warnings as a list, empty when there are none.
		if !strings.Contains(string(e.Metadata), `"warnings":[]`) {
			t.Fatalf("metadata %s", e.Metadata)
		}
		if err := pending.Reply(e.RequestID, tc.reply, tc.message); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if errorType(t, err) != tc.wantType || (tc.message != "" && !strings.Contains(err.Error(), tc.message)) {
			t.Fatalf("reply %s: got %v", tc.reply, err)
		}
	}
}

func TestBashAdvisoryWarnings(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	h.write(t, "x.txt", "x\n")
	res, err := h.call(context.Background(), t, "bash", BashInput{Command: fmt.Sprintf("cat %s/x.txt > /dev/null; ls /nonexistent-sessiond-dir 2>/dev/null; echo ok", h.root)})
	if err != nil {
		t.Fatal(err)
	}
	m := bashMeta(t, res)
	if len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], "/nonexistent-sessiond-dir") || strings.Contains(m.Warnings[0], "/dev/null") || strings.Contains(m.Warnings[0], h.root) {
		t.Fatalf("warnings %q", m.Warnings)
	}
	if !strings.HasPrefix(res.Output, "Warning: the command mentions paths outside the project: /nonexistent-sessiond-dir (advisory only") {
		t.Fatalf("output %q", res.Output)
	}
	// The warning is advisory: the command ran.
	if !strings.Contains(res.Output, "ok\n\nExit code: 0") {
		t.Fatalf("command did not run: %q", res.Output)
	}
}

func TestOutsidePaths(t *testing.T) {
	root := "/home/me/proj"
	tests := []struct {
		command string
		want    []string
	}{
		{"ls", nil},
		{"cat /etc/passwd", []string{"/etc/passwd"}},
		{"cat /home/me/proj/a.go /home/me/proj", nil},
		{"cp a.go /tmp/x && rm -rf /var/tmp/y", []string{"/tmp/x", "/var/tmp/y"}},
		{"echo hi > /dev/null 2>/dev/stderr", nil},
		{`grep -r "x" '/opt/lib' --out=/srv/out`, []string{"/opt/lib", "/srv/out"}},
		{"cat ~/.ssh/id_rsa", []string{"/home/me/.ssh/id_rsa"}},
		{"cat /etc/hosts /etc/hosts", []string{"/etc/hosts"}},
		{"cd /home/me/proj/../other", []string{"/home/me/other"}},
		{"echo a/b ./c", nil},
	}
	for _, tc := range tests {
		got := outsidePaths(tc.command, root, "/home/me")
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("outsidePaths(%q) = %q, want %q", tc.command, got, tc.want)
		}
	}
}

func TestBashFallsBackToSh(t *testing.T) {
	bin := t.TempDir()
	shPath, err := lookPathIn("sh", []string{"/bin", "/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shPath, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	cfg, err := BashConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Shell != filepath.Join(bin, "sh") {
		t.Fatalf("shell %q, want the sh fallback", cfg.Shell)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := (BashConfig{}).withDefaults(); err == nil {
		t.Fatal("no shell on PATH must be a configuration error")
	}
}

func lookPathIn(name string, dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %v", name, dirs)
}

func TestBashConfigErrors(t *testing.T) {
	for _, cfg := range []BashConfig{
		{DefaultTimeout: time.Minute, MaxTimeout: time.Second},
		{MaxOutputBytes: 10},
		{DefaultTimeout: -time.Second},
	} {
		if _, err := NewBash(cfg); err == nil {
			t.Errorf("NewBash(%+v) accepted a bad configuration", cfg)
		}
	}
}

func TestCapture(t *testing.T) {
	c := newCapture(10)
	_, _ = c.Write([]byte("abc"))
	if c.String() != "abc" || c.omitted() != 0 {
		t.Fatalf("small output %q", c.String())
	}
	c = newCapture(10)
	for _, chunk := range []string{"01234", "56789", "abcdefghij", "KLMNO"} {
		_, _ = c.Write([]byte(chunk))
	}
	if got := c.String(); got != "01234\n\n… [output truncated: 15 bytes omitted from the middle] …\n\nKLMNO" {
		t.Fatalf("got %q", got)
	}
	// Rune boundaries: "é" (2 bytes) straddles both cuts.
	c = newCapture(8)
	_, _ = c.Write([]byte("abcé" + strings.Repeat("-", 20) + "éxyz"))
	if got := c.String(); !strings.HasPrefix(got, "abc\n") || !strings.HasSuffix(got, "\nxyz") || !strings.Contains(got, "omitted") {
		t.Fatalf("got %q", got)
	}
}

// TestBashAdvisoryWarningsAskNothing: under the default rules (ask when no
// rule matches), absolute paths outside the project in the command are
// warned about only: bash is asked, external_directory is not.
func TestBashAdvisoryWarningsAskNothing(t *testing.T) {
	asker := &scriptedAsker{answer: func(req Request) (Answer, error) {
		if req.Permission == PermissionBash {
			return Answer{Reply: Once}, nil
		}
		return Answer{Reply: Reject}, nil
	}}
	h := newHarness(t, harnessConfig{asker: asker})
	outside := t.TempDir()
	res, err := h.call(context.Background(), t, "bash", BashInput{Command: fmt.Sprintf("ls %s; echo ok", outside)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range asker.requests() {
		if r.Permission != PermissionBash {
			t.Fatalf("asked %s for an advisory path: %+v", r.Permission, r)
		}
	}
	if m := bashMeta(t, res); len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], outside) || !strings.Contains(res.Output, "ok\n") {
		t.Fatalf("warnings %q, output %q", m.Warnings, res.Output)
	}
}

// TestBashDoesNotStartWhenTheInterruptRacesAOnceReply: a "once" reply that
// wins the race with an interrupt does not start the command; the call is
// settled as aborted, and a command started then would run unrecorded.
func TestBashDoesNotStartWhenTheInterruptRacesAOnceReply(t *testing.T) {
	ledger, _, err := OpenProcessLedger(filepath.Join(t.TempDir(), "ledger"))
	if err != nil {
		t.Fatal(err)
	}
	started := false
	ledger.recorded = func(string) { started = true }
	ctx, cancel := context.WithCancel(context.Background())
	asker := &scriptedAsker{answer: func(Request) (Answer, error) {
		cancel() // the interrupt arrives as the user approves
		return Answer{Reply: Once}, nil
	}}
	h := newHarness(t, harnessConfig{asker: asker, builtins: BuiltinConfig{Bash: BashConfig{Ledger: ledger}}})
	_, err = h.call(ctx, t, "bash", BashInput{Command: "touch ran"})
	if errorType(t, err) != messages.ErrAborted || started {
		t.Fatalf("got %v; the command started: %v", err, started)
	}
}

// TestBashInARemovedDirectory: a command whose working directory is gone
// fails naming the directory; Go's own error blamed the shell
// ("fork/exec /usr/bin/bash: no such file or directory").
func TestBashInARemovedDirectory(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	if err := os.RemoveAll(h.root); err != nil {
		t.Fatal(err)
	}
	_, err := h.call(context.Background(), t, "bash", BashInput{Command: "pwd"})
	if err == nil || !strings.Contains(err.Error(), "the Session's directory "+h.root+" does not exist") || strings.Contains(err.Error(), "fork/exec") {
		t.Fatalf("bash in a removed directory: %v", err)
	}
}

// TestToolsRefuseASwappedRoot: a Location directory renamed away and
// replaced by a symbolic link to elsewhere (outside the daemon's roots,
// which were checked when the Location was set up) runs no tool: read
// followed the link, and returned a file from outside.
func TestToolsRefuseASwappedRoot(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOPSECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(h.root, h.root+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, h.root); err != nil {
		t.Fatal(err)
	}
	for name, input := range map[string]any{"read": ReadInput{Path: "secret.txt"}, "bash": BashInput{Command: "cat secret.txt"}} {
		res, err := h.call(context.Background(), t, name, input)
		if err == nil || !strings.Contains(err.Error(), "now resolves to "+outside) || strings.Contains(res.Output, "TOPSECRET") {
			t.Fatalf("%s in a swapped root: %q, %v", name, res.Output, err)
		}
	}
}

// TestStillAt: a file read opened by an allowed path must be the file at
// that path after the open, reached without a link; a directory swapped
// for a link to a denied one between the check and the open read the
// denied file (a race a command running beside the read can win).
func TestStillAt(t *testing.T) {
	dir := t.TempDir()
	pub, private := filepath.Join(dir, "pub"), filepath.Join(dir, "private")
	for _, d := range []string{pub, private} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"), []byte(filepath.Base(d)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(p string) fs.FileInfo {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	if err := stillAt(filepath.Join(pub, "f"), stat(filepath.Join(pub, "f"))); err != nil {
		t.Fatalf("the same file: %v", err)
	}
	// Opened through the swapped link, then checked while it is there,
	// and after it was swapped back.
	secret := stat(filepath.Join(private, "f"))
	if err := os.Rename(pub, pub+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(private, pub); err != nil {
		t.Fatal(err)
	}
	if err := stillAt(filepath.Join(pub, "f"), secret); err == nil || !strings.Contains(err.Error(), "now resolves to") {
		t.Fatalf("through a link: %v", err)
	}
	if err := os.Remove(pub); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pub+".away", pub); err != nil {
		t.Fatal(err)
	}
	if err := stillAt(filepath.Join(pub, "f"), secret); err == nil || !strings.Contains(err.Error(), "is another file now") {
		t.Fatalf("swapped back: %v", err)
	}
}
