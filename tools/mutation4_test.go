//go:build unix

package tools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
)

// Tests from mutation testing of the bash and read tools, path resolution,
// the registry and execution: each pins behaviour that a changed line of
// the implementation left unchecked.

// TestNewResolverRefusesRelativeRootsAndDotReferences pins the
// configuration checks: a relative root is refused even when it names a
// directory relative to the working directory, and "." and ".." are no
// reference names.
func TestNewResolverRefusesRelativeRootsAndDotReferences(t *testing.T) {
	if _, err := os.Stat("testdata"); err != nil {
		t.Fatal(err)
	}
	if _, err := NewResolver("testdata", nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewResolver(relative root) = %v, want ErrInvalidConfig", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewResolver(file, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewResolver(a file) = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{".", ".."} {
		if _, err := NewResolver(dir, map[string]string{name: dir}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewResolver(reference %q) = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// TestWithinNeedsASeparator pins the prefix test of within: a sibling whose
// name starts with the root's is outside, and every absolute path is
// within "/".
func TestWithinNeedsASeparator(t *testing.T) {
	tests := []struct {
		base, p string
		want    bool
	}{
		{"/a/loc", "/a/loc", true},
		{"/a/loc", "/a/loc/x", true},
		{"/a/loc", "/a/loc2", false},
		{"/a/loc", "/a/loc2/x", false},
		{"/a/loc", "/a", false},
		{"/", "/", true},
		{"/", "/etc/passwd", true},
	}
	for _, tc := range tests {
		if got := within(tc.base, tc.p); got != tc.want {
			t.Errorf("within(%q, %q) = %v, want %v", tc.base, tc.p, got, tc.want)
		}
	}
}

// TestResolveRefusesALinkToASiblingSharingTheRootsPrefix resolves a link to
// a directory beside the root whose name extends the root's.
func TestResolveRefusesALinkToASiblingSharingTheRootsPrefix(t *testing.T) {
	base := t.TempDir()
	root, sibling := filepath.Join(base, "loc"), filepath.Join(base, "loc2")
	for _, d := range []string{root, sibling} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sibling, "secret.txt"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../loc2", filepath.Join(root, "sib")); err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := r.Resolve("sib/secret.txt"); !errors.Is(err, ErrSymlinkEscape) {
		t.Fatalf("Resolve through a link to a sibling = %+v, %v; want ErrSymlinkEscape", res, err)
	}
	if r.Contains(filepath.Join(r.Root()+"2", "secret.txt")) {
		t.Fatal("Contains takes a sibling that shares the root's prefix for a path inside")
	}
}

// TestPathErrorDetailsTellTheModelWhatIsWrong pins the details of path
// errors the model reads: they say what is wrong in words and never carry
// the absolute path of the Location.
func TestPathErrorDetailsTellTheModelWhatIsWrong(t *testing.T) {
	pt := newPathTree(t)
	bare, err := NewResolver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(pt.root, "@literal"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() (any, error)
		want string
	}{
		{"resolve NUL", func() (any, error) { return pt.r.Resolve("a\x00b") }, "contains a NUL byte"},
		{"resolve long name", func() (any, error) { return pt.r.Resolve(longName(256)) }, "longer than the file system allows"},
		{"resolve long name inside", func() (any, error) { return pt.r.Resolve("dir/" + longName(256) + "/x") }, "longer than the file system allows"},
		{"unknown reference", func() (any, error) { return pt.r.Resolve("@nope/x") }, "configured references: @lib)"},
		{"no references", func() (any, error) { return bare.Resolve("@nope/x") }, "no project references are configured"},
		{"workdir NUL", func() (any, error) { return pt.r.Workdir("a\x00b") }, "contains a NUL byte"},
		{"workdir missing", func() (any, error) { return pt.r.Workdir("missing") }, "no such directory"},
		{"workdir unknown reference", func() (any, error) { return pt.r.Workdir("@nope") }, "configured references: @lib)"},
		{"workdir through a file", func() (any, error) { return pt.r.Workdir("a.txt/sub") }, "(not a directory)"},
		{"workdir long name", func() (any, error) { return pt.r.Workdir(longName(256)) }, "(file name too long)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			if err == nil {
				t.Fatalf("= %v, nil; want an error", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pt.root) || strings.Contains(err.Error(), pt.r.Root()) {
				t.Fatalf("error %q names the Location's absolute path", err)
			}
		})
	}
}

// TestWorkdirAtDirectoryThatExists takes "@name" for a directory of the
// Location when no reference has that name, as Resolve does.
func TestWorkdirAtDirectoryThatExists(t *testing.T) {
	pt := newPathTree(t)
	got, err := pt.r.Workdir("@scoped")
	if want := filepath.Join(pt.r.Root(), "@scoped"); err != nil || got != want {
		t.Fatalf("Workdir(@scoped) = %q, %v; want %q", got, err, want)
	}
	got, err = pt.r.Workdir("@lib/back_to_loc")
	if want := pt.r.Root(); err != nil || got != want {
		t.Fatalf("Workdir(@lib/back_to_loc) = %q, %v; want %q", got, err, want)
	}
}

// TestReadConfigRefusesEachNegativeLimit checks every limit on its own.
func TestReadConfigRefusesEachNegativeLimit(t *testing.T) {
	for _, cfg := range []ReadConfig{{DefaultLimit: -1}, {MaxLineBytes: -1}, {MaxPageBytes: -1}, {MaxBinaryBytes: -1}} {
		if _, err := NewRead(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewRead(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// cancellingApprovals approves everything and cancels the call's context
// while doing so: the permission check passes, and the tool goes on with
// a context that has ended, as when an interrupt lands right after it.
type cancellingApprovals struct{ cancel context.CancelFunc }

func (c cancellingApprovals) Approved(context.Context, string, string, string) (bool, error) {
	c.cancel()
	return true, nil
}

func (cancellingApprovals) Save(context.Context, string, string, []string) error { return nil }

// cancelledDuringCheck returns a registry with the built-ins whose
// permission check cancels the context it returns.
func cancelledDuringCheck(t *testing.T, builtins BuiltinConfig) (*Registry, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	perms, err := NewPermissions(PermissionsConfig{Project: "p", Approvals: cancellingApprovals{cancel}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(Config{Root: t.TempDir(), Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := RegisterBuiltins(reg, builtins)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(scope.Close)
	return reg, ctx
}

// TestReadCancelledAfterTheCheckSaysSo: a read whose context ends after
// its permission check is aborted with a message naming the file.
func TestReadCancelledAfterTheCheckSaysSo(t *testing.T) {
	reg, ctx := cancelledDuringCheck(t, BuiltinConfig{})
	if err := os.WriteFile(filepath.Join(reg.Paths().Root(), "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := reg.Execute(ctx, Call{Name: "read", Input: json.RawMessage(`{"path": "a.txt"}`)})
	if errorType(t, err) != messages.ErrAborted || !strings.Contains(err.Error(), "read a.txt was cancelled") {
		t.Fatalf("got %v, want aborted: read a.txt was cancelled", err)
	}
}

// TestBashCancelledWhenTheShellFailsToStart: a command whose context ended
// is reported cancelled even when its shell could not start.
func TestBashCancelledWhenTheShellFailsToStart(t *testing.T) {
	reg, ctx := cancelledDuringCheck(t, BuiltinConfig{Bash: BashConfig{Shell: "/nonexistent-sessiond-test/bash"}})
	_, err := reg.Execute(ctx, Call{Name: "bash", Input: json.RawMessage(`{"command": "true"}`)})
	if errorType(t, err) != messages.ErrAborted || !strings.Contains(err.Error(), "bash: the command was cancelled") {
		t.Fatalf("got %v, want aborted: bash: the command was cancelled", err)
	}
}

// TestReadAsksForTheContentsOfWhatBecameADirectory: a file replaced by a
// directory between the question and the open gets the question for the
// directory's contents before it is listed.
func TestReadAsksForTheContentsOfWhatBecameADirectory(t *testing.T) {
	var h *harness
	asker := &scriptedAsker{}
	asker.answer = func(req Request) (Answer, error) {
		if len(asker.requests()) == 1 {
			p := filepath.Join(h.root, "x")
			if err := os.Remove(p); err != nil {
				return Answer{}, err
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				return Answer{}, err
			}
			if err := os.WriteFile(filepath.Join(p, "inner.txt"), nil, 0o644); err != nil {
				return Answer{}, err
			}
		}
		return Answer{Reply: Once}, nil
	}
	h = newHarness(t, harnessConfig{asker: asker})
	h.write(t, "x", "a file\n")
	res, err := h.call(context.Background(), t, "read", ReadInput{Path: "x"})
	if err != nil || !strings.Contains(res.Output, "inner.txt") {
		t.Fatalf("read = %+v, %v", res, err)
	}
	p := filepath.Join(h.root, "x")
	asked := asker.requests()
	if len(asked) != 2 || !slices.Equal(asked[0].Patterns, []string{p}) || !slices.Equal(asked[1].Patterns, []string{p + "/*"}) {
		t.Fatalf("asked %+v, want %s then %s/*", asked, p, p)
	}
}

// TestReadOffsetPastTheEndOfAnEmptyFile names a usable offset.
func TestReadOffsetPastTheEndOfAnEmptyFile(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	h.write(t, "empty.txt", "")
	_, err := h.call(context.Background(), t, "read", ReadInput{Path: "empty.txt", Offset: 2})
	if err == nil || !strings.Contains(err.Error(), "use an offset from 1 to 1") {
		t.Fatalf("got %v, want a hint to use offset 1", err)
	}
}

// TestReadBinaryAtTheLimit: a binary file of exactly MaxBinaryBytes is
// returned whole.
func TestReadBinaryAtTheLimit(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{MaxBinaryBytes: 64}}})
	data := strings.Repeat("\x00", 64)
	h.write(t, "exact.bin", data)
	res, err := h.call(context.Background(), t, "read", ReadInput{Path: "exact.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if m := readMeta(t, res); m.Size != 64 || !strings.HasSuffix(res.Output, "\n"+base64.StdEncoding.EncodeToString([]byte(data))) {
		t.Fatalf("result %+v", res)
	}
}

// TestReadBinaryThatGrewWhileRead: a file longer than its size said is
// refused, not cut at the limit.
func TestReadBinaryThatGrewWhileRead(t *testing.T) {
	r := &reader{cfg: ReadConfig{MaxBinaryBytes: 8}}
	for _, n := range []int{9, 20} {
		_, err := r.readBinary(bufio.NewReader(strings.NewReader(strings.Repeat("\x00", n))), "f.bin", 4)
		if err == nil || !strings.Contains(err.Error(), "grew past the limit of 8 bytes") {
			t.Errorf("%d bytes: got %v, want the file to be refused", n, err)
		}
	}
	res, err := r.readBinary(bufio.NewReader(strings.NewReader(strings.Repeat("\x00", 8))), "f.bin", 4)
	if err != nil || !strings.HasPrefix(res.Output, "Binary file f.bin (8 bytes") {
		t.Fatalf("8 bytes: %+v, %v", res, err)
	}
}

// TestBashConfigLimits pins the edges of the configuration: a default
// timeout above the default maximum raises the maximum, 64 bytes of output
// is the least accepted, and HOME is the default home.
func TestBashConfigLimits(t *testing.T) {
	cfg, err := BashConfig{DefaultTimeout: 20 * time.Minute}.withDefaults()
	if err != nil || cfg.MaxTimeout != 20*time.Minute {
		t.Fatalf("a 20 minute default timeout: %+v, %v; want it as the maximum too", cfg, err)
	}
	if _, err := NewBash(BashConfig{MaxOutputBytes: 63}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("MaxOutputBytes 63: %v, want ErrInvalidConfig", err)
	}
	if _, err := NewBash(BashConfig{MaxOutputBytes: 64}); err != nil {
		t.Errorf("MaxOutputBytes 64: %v", err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	if cfg, err := (BashConfig{}).withDefaults(); err != nil || cfg.Home != home {
		t.Fatalf("Home %q, %v; want $HOME %q", cfg.Home, err, home)
	}
}

// TestBashResultDetails pins what a result says besides the output: the
// refusal of a blank command, the title (the first line, clipped), the
// canonical workdir, the output before a timeout, and that no process
// group stays listed for KillProcesses once a call is over.
func TestBashResultDetails(t *testing.T) {
	fire := make(chan time.Time, 1)
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Bash: BashConfig{
		After: func(time.Duration) <-chan time.Time { return fire },
	}}})
	if err := os.Mkdir(filepath.Join(h.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.call(ctx, t, "bash", BashInput{Command: " \n\t"}); err == nil || !strings.Contains(err.Error(), "bash: the command is empty") {
		t.Fatalf("blank command: %v", err)
	}
	long := "echo " + strings.Repeat("x", 100)
	res, err := h.call(ctx, t, "bash", BashInput{Command: long + "\necho second", Workdir: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	if want := long[:80] + "…"; res.Title != want {
		t.Fatalf("title %q, want %q", res.Title, want)
	}
	if m := bashMeta(t, res); m.Workdir != filepath.Join(h.root, "sub") {
		t.Fatalf("metadata workdir %q", m.Workdir)
	}
	if res, err := h.call(ctx, t, "bash", BashInput{Command: "echo a\necho b"}); err != nil || res.Title != "echo a" {
		t.Fatalf("title %q, %v; want the first line", res.Title, err)
	}
	n := 0
	liveGroups.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d process groups still listed after the calls returned", n)
	}
	// The output before a timeout is in its error.
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	done := make(chan error, 1)
	go func() {
		_, err := h.call(ctx, t, "bash", BashInput{Command: "echo before-the-timeout; touch " + ready + "; sleep 1000"})
		done <- err
	}()
	eventually(t, 30*time.Second, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
	fire <- time.Now()
	if err := <-done; errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "Output before the timeout:\nbefore-the-timeout\n") {
		t.Fatalf("got %v, want the output before the timeout", err)
	}
}

// TestReadReferenceRootIsShownByItsName: listing a reference's directory
// shows it as "@name", not "@name/.".
func TestReadReferenceRootIsShownByItsName(t *testing.T) {
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "util.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessConfig{rules: allowAll, refs: map[string]string{"lib": lib}})
	res, err := h.call(context.Background(), t, "read", ReadInput{Path: "@lib"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Title != "@lib" || readMeta(t, res).Path != "@lib" {
		t.Fatalf("title %q, metadata %s", res.Title, res.Metadata)
	}
}

// TestReadTextPageEdges pins the edges of paging: a page that fills its
// byte budget exactly, a page that starts at a last line without a
// newline, a cancelled skip that would run past the end, and the count of
// lines of a file whose last line has no newline.
func TestReadTextPageEdges(t *testing.T) {
	ctx := context.Background()
	page := func(ctx context.Context, text string, lim pageLimits) (textPage, error) {
		return readTextPage(ctx, bufio.NewReader(strings.NewReader(text)), lim)
	}
	p, err := page(ctx, "aaaa\nbbbb\ncccc\n", pageLimits{offset: 1, limit: 10, maxLine: 100, maxPage: 8})
	if err != nil || !slices.Equal(p.lines, []string{"aaaa", "bbbb"}) || p.next != 3 {
		t.Fatalf("exact budget: %+v, %v; want two lines and next 3", p, err)
	}
	p, err = page(ctx, "one\ntwo", pageLimits{offset: 2, limit: 10, maxLine: 100, maxPage: 100})
	if err != nil || !slices.Equal(p.lines, []string{"two"}) || p.total != 2 {
		t.Fatalf("last line without a newline: %+v, %v", p, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := page(cancelled, "a\nb\n", pageLimits{offset: 5, limit: 10, maxLine: 100, maxPage: 100}); err != context.Canceled {
		t.Fatalf("cancelled skip past the end: %v, want context.Canceled", err)
	}
	for _, text := range []string{"one\ntwo", "one\ntwo\n"} {
		_, err := page(ctx, text, pageLimits{offset: 5, limit: 10, maxLine: 100, maxPage: 100})
		var beyond *errOffsetBeyondEnd
		if !errors.As(err, &beyond) || beyond.lines != 2 {
			t.Fatalf("%q past the end: %v, want 2 lines", text, err)
		}
	}
}

// TestReadListingEdges pins the edges of a listing: a page that fills its
// byte budget exactly (names and newlines), a link to a file inside the
// root listed as a file, and an offset past an empty directory.
func TestReadListingEdges(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{MaxPageBytes: 14}}})
	for _, f := range []string{"d/aaaa", "d/bbbb", "d/cccc", "empty/.keep"} {
		h.write(t, f, "x")
	}
	if err := os.Remove(filepath.Join(h.root, "empty", ".keep")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := h.call(ctx, t, "read", ReadInput{Path: "d"})
	if err != nil {
		t.Fatal(err)
	}
	// "aaaa\nbbbb\n" is 10 bytes; "cccc\n" would make 15.
	if want := "aaaa\nbbbb\n\n(Showing entries 1-2 of 3. Call read with offset=3 to continue.)"; res.Output != want {
		t.Fatalf("listing %q, want %q", res.Output, want)
	}
	h2 := newHarness(t, harnessConfig{rules: allowAll})
	h2.write(t, "links/target.txt", "x")
	if err := os.Symlink("target.txt", filepath.Join(h2.root, "links", "alias")); err != nil {
		t.Fatal(err)
	}
	res, err = h2.call(ctx, t, "read", ReadInput{Path: "links"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "alias\ntarget.txt\n\n(2 entries.)"; res.Output != want {
		t.Fatalf("listing %q, want %q", res.Output, want)
	}
	if _, err := h.call(ctx, t, "read", ReadInput{Path: "empty", Offset: 2}); err == nil || !strings.Contains(err.Error(), "offset 2 is beyond the end of the directory, which is empty") {
		t.Fatalf("offset 2 of an empty directory: %v", err)
	}
}

// TestCaptureStaysBounded: however the output arrives, the capture holds
// at most its head and twice its tail budget, and keeps the last bytes.
func TestCaptureStaysBounded(t *testing.T) {
	c := newCapture(10)
	for i := range 1002 {
		_, _ = c.Write([]byte{byte('a' + i%26)})
		if len(c.head) > c.headCap || len(c.tail) >= 2*c.tailCap {
			t.Fatalf("after %d bytes: head %d tail %d bytes, budgets %d and %d", i+1, len(c.head), len(c.tail), c.headCap, c.tailCap)
		}
	}
	if got := c.String(); !strings.HasPrefix(got, "abcde\n") || !strings.HasSuffix(got, "\njklmn") || c.omitted() != 992 {
		t.Fatalf("got %q, omitted %d", got, c.omitted())
	}
}

// TestCommandPatternsOfLetAndKorn: "let" is a command of its own, a
// command given twice is asked for once, and a Korn shell's script is
// parsed as one (bash and POSIX sh would refuse a ksh function).
func TestCommandPatternsOfLetAndKorn(t *testing.T) {
	for _, tc := range []struct {
		shell, script string
		want          []string
	}{
		{"/bin/bash", "let x=1", []string{"let x=1"}},
		{"/bin/bash", "echo a; echo a && echo b", []string{"echo a", "echo b"}},
		{"/bin/mksh", "function f { echo hi; }", []string{"echo hi"}},
		{"ksh", "function f { echo hi; }", []string{"echo hi"}},
	} {
		got, err := commandPatterns(tc.shell, tc.script)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: %q, %v; want %q", tc.shell, tc.script, got, err, tc.want)
		}
	}
}

// TestWithRunTokenLeavesTheCallersSliceAlone: the token is appended to a
// copy, not into spare capacity of the configured environment, which
// concurrent commands share.
func TestWithRunTokenLeavesTheCallersSliceAlone(t *testing.T) {
	env := make([]string, 1, 4)
	env[0] = "A=1"
	got := withRunToken(env, "tok")
	if !slices.Equal(got, []string{"A=1", runTokenVar + "=tok"}) {
		t.Fatalf("withRunToken = %q", got)
	}
	if spare := env[:2][1]; spare != "" {
		t.Fatalf("the caller's spare capacity now holds %q", spare)
	}
}

// TestExecuteMetadataAndSessionRules: a tool whose definition requires
// metadata fails without it; input of only white space is {}; and the
// Session's rules reach the permission checks a tool makes.
func TestExecuteMetadataAndSessionRules(t *testing.T) {
	reg := newTestRegistry(t, map[string]Ruleset{DefaultAgent: allowAll})
	s := reg.NewScope("test")
	if err := reg.Register(s, NewTool(Definition{Name: "nometa", Description: "d", InputSchema: echoSchema,
		MetadataSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *CallContext, echoInput) (Result, error) { return Result{Output: "x"}, nil })); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(s, echoTool("asks", func(ctx context.Context, call *CallContext, in echoInput) (Result, error) {
		if err := call.Ask(ctx, Request{Permission: "custom", Patterns: []string{in.Text}}); err != nil {
			return Result{}, err
		}
		return Result{Output: "allowed"}, nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := reg.Execute(ctx, Call{Name: "nometa", Input: json.RawMessage(`{"text":"a"}`)})
	if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "returned no metadata, but its definition requires it") {
		t.Fatalf("missing metadata: %v", err)
	}
	_, err = reg.Execute(ctx, Call{Name: "asks", Input: json.RawMessage(" \n\t")})
	if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "missing property 'text'") {
		t.Fatalf("white space input: %v, want it validated as {}", err)
	}
	_, err = reg.Execute(ctx, Call{Name: "asks", Input: json.RawMessage(`{"text":"secret"}`),
		Rules: Ruleset{{Permission: "custom", Pattern: "secret", Action: Deny}}})
	if errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("a Session rule denying the tool's request: %v, want permission.rejected", err)
	}
	_, err = reg.Execute(ctx, Call{Name: "asks", Input: json.RawMessage(`{"text":"a"}`),
		Rules: Ruleset{{Permission: "asks", Pattern: "*", Action: Deny}}})
	if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), `tool "asks" is not available to agent build`) {
		t.Fatalf("a tool the Session's rules deny entirely: %v, want it unavailable", err)
	}
}

// TestExecuteChecksAsTheCallsAgent: a tool's permission checks are made
// under the rules of the call's agent, not the default agent's.
func TestExecuteChecksAsTheCallsAgent(t *testing.T) {
	reg := newTestRegistry(t, map[string]Ruleset{
		DefaultAgent: {{"*", "*", Allow}, {"custom", "*", Deny}},
		"plan":       {{"*", "*", Allow}},
	})
	if err := reg.Register(reg.NewScope("s"), echoTool("asks", func(ctx context.Context, call *CallContext, in echoInput) (Result, error) {
		return Result{Output: "allowed"}, call.Ask(ctx, Request{Permission: "custom", Patterns: []string{in.Text}})
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Execute(context.Background(), Call{Agent: "plan", Name: "asks", Input: json.RawMessage(`{"text":"x"}`)}); err != nil {
		t.Fatalf("agent plan: %v", err)
	}
	if _, err := reg.Execute(context.Background(), Call{Name: "asks", Input: json.RawMessage(`{"text":"x"}`)}); errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("default agent: %v, want permission.rejected", err)
	}
}

// TestRegistryDefinitionEdges: a dot is no tool name character, and the
// registry keeps its own copy of a definition, whatever the tool's owner
// does with the schema bytes afterwards.
func TestRegistryDefinitionEdges(t *testing.T) {
	reg := newTestRegistry(t, nil)
	s := reg.NewScope("s")
	if err := reg.Register(s, echoTool("a.b", nil)); !errors.Is(err, ErrInvalidDefinition) {
		t.Fatalf("name with a dot: %v, want ErrInvalidDefinition", err)
	}
	if err := reg.Register(s, echoTool(strings.Repeat("a", 64), nil)); err != nil {
		t.Fatalf("64-character name: %v", err)
	}
	schema := slices.Clone(echoSchema)
	if err := reg.Register(s, NewTool(Definition{Name: "own", Description: "d", InputSchema: schema},
		func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil })); err != nil {
		t.Fatal(err)
	}
	schema[0] = 'X'
	for _, d := range reg.Definitions("", nil) {
		if d.Name == "own" && d.InputSchema[0] != '{' {
			t.Fatal("changing the schema bytes given to NewTool changed the catalog")
		}
	}
}

// TestSchemaRefusesFileReferences: a schema may not load another from the
// file system.
func TestSchemaRefusesFileReferences(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(p, []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := newTestRegistry(t, nil)
	tool := NewTool(Definition{Name: "fileref", Description: "d", InputSchema: json.RawMessage(`{"type":"object","$ref":"file://` + p + `"}`)},
		func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil })
	if err := reg.Register(reg.NewScope("s"), tool); !errors.Is(err, ErrInvalidDefinition) {
		t.Fatalf("schema with a file reference: %v, want ErrInvalidDefinition", err)
	}
}

// TestValidationMessages pins the list of problems the model reads: only
// the failing leaves, "(root)" for the top level, and at most
// maxSchemaErrors of them with a count of the rest.
func TestValidationMessages(t *testing.T) {
	props := map[string]any{}
	for _, c := range "abcdefghi" {
		props[string(c)] = map[string]any{"type": "string"}
	}
	schema := mustJSON(map[string]any{"type": "object", "properties": props, "required": []string{"a"}})
	reg := newTestRegistry(t, map[string]Ruleset{DefaultAgent: allowAll})
	if err := reg.Register(reg.NewScope("s"), NewTool(Definition{Name: "many", Description: "d", InputSchema: schema},
		func(context.Context, *CallContext, map[string]any) (Result, error) { return Result{}, nil })); err != nil {
		t.Fatal(err)
	}
	call := func(input string) string {
		t.Helper()
		_, err := reg.Execute(context.Background(), Call{Name: "many", Input: json.RawMessage(input)})
		if err == nil {
			t.Fatalf("input %s passed", input)
		}
		return err.Error()
	}
	if got, want := call(`{"b":"x"}`), "invalid input for tool many: at (root): missing property 'a'; fix"; !strings.Contains(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := call(`{"a":1}`), "invalid input for tool many: at /a: got number, want string; fix"; !strings.Contains(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	eight := call(`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1}`)
	if n := strings.Count(eight, "got number, want string"); n != 8 || strings.Contains(eight, "more") {
		t.Errorf("eight problems: %q", eight)
	}
	nine := call(`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1}`)
	if n := strings.Count(nine, "got number, want string"); n != 8 || !strings.Contains(nine, "; … and 1 more;") {
		t.Errorf("nine problems: %q", nine)
	}
}

// TestPendingEdges: a question asked with a context that has already ended
// is never published; questions without a Session are not siblings, so
// rejecting one leaves the others waiting; a supplied ID in use is not
// taken over; and an "always" in one project
// approves no question of another, even one that project's approvals now
// cover.
func TestPendingEdges(t *testing.T) {
	var events []string
	p := NewPending(PendingConfig{
		OnAsked:   func(e *messages.PermissionAsked) { events = append(events, "asked") },
		OnReplied: func(e *messages.PermissionReplied) { events = append(events, "replied") },
	})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Ask(cancelled, Request{Permission: "x"}); !errors.Is(err, context.Canceled) || len(events) != 0 {
		t.Fatalf("ask with an ended context: %v, events %q", err, events)
	}

	pending, _, asked := newRecordedPending()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer pending.CancelAll()
	var results [2]chan error
	for i := range results {
		results[i] = make(chan error, 1)
		wg.Go(func() {
			_, err := pending.Ask(context.Background(), Request{Permission: "x"})
			results[i] <- err
		})
		<-asked
	}
	if err := pending.Reply("per_1", Reject, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-results[0]; err != nil {
		t.Fatal(err)
	}
	if left := pending.List(); len(left) != 1 || left[0].ID != "per_2" {
		t.Fatalf("waiting %+v, want per_2 alone", left)
	}
	// A supplied ID already in use is replaced by a fresh one.
	askCtx, stop := context.WithCancel(context.Background())
	var mine sync.WaitGroup
	for range 2 {
		mine.Go(func() { _, _ = pending.Ask(askCtx, Request{ID: "mine", Permission: "x"}) })
	}
	firstID, secondID := <-asked, <-asked
	stop()
	if firstID != "mine" || secondID != "per_3" {
		t.Fatalf("asked %q then %q, want mine then per_3", firstID, secondID)
	}
	mine.Wait()

	r := newSiblingRig(t)
	req := func(sid messages.SessionID) Request {
		return Request{SessionID: sid, Permission: PermissionBash, Patterns: []string{"make test"}}
	}
	first, _ := r.ask("proj", req("ses_1"))
	inOther, _ := r.ask("other", req("ses_1"))
	otherSession, _ := r.ask("other", req("ses_2"))
	// Saves "make test" for project other, which covers inOther now.
	if err := r.pending.Reply(otherSession, Always, ""); err != nil {
		t.Fatal(err)
	}
	if err := r.pending.Reply(first, Always, ""); err != nil {
		t.Fatal(err)
	}
	if got := r.waitingIDs(); !slices.Equal(got, []string{inOther}) {
		t.Fatalf("waiting %q, want %q: another project's question is no sibling", got, inOther)
	}
}

// TestMemoryApprovalsEdges: an ended context fails both calls, and List
// returns a copy.
func TestMemoryApprovalsEdges(t *testing.T) {
	var m MemoryApprovals
	ctx := context.Background()
	if err := m.Save(ctx, "p", "bash", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Approved(cancelled, "p", "bash", "a"); !errors.Is(err, context.Canceled) {
		t.Errorf("Approved with an ended context: %v", err)
	}
	if err := m.Save(cancelled, "p", "bash", []string{"c"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Save with an ended context: %v", err)
	}
	list := m.List("p")
	list[0].Pattern = "changed"
	if got := m.List("p"); len(got) != 2 || got[0].Pattern != "a" {
		t.Fatalf("List after changing its result: %+v", got)
	}
}

// TestRegisterBuiltinsFailureRegistersNothing: when one built-in cannot be
// registered, those registered before it are removed again.
func TestRegisterBuiltinsFailureRegistersNothing(t *testing.T) {
	reg := newTestRegistry(t, nil)
	if err := reg.Register(reg.NewScope("plugin"), echoTool("bash", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := RegisterBuiltins(reg, BuiltinConfig{}); !errors.Is(err, ErrDuplicateTool) {
		t.Fatalf("RegisterBuiltins = %v, want ErrDuplicateTool", err)
	}
	if got := names(reg.Definitions("", nil)); !slices.Equal(got, []string{"bash"}) {
		t.Fatalf("catalog %v, want only the plugin's bash", got)
	}
}

// TestOutsidePathsEdges: "~" alone is the home directory, "~" paths are
// skipped when the home is unknown, a path outside that is a link into the
// project is not outside, and the paths come sorted.
func TestOutsidePathsEdges(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "proj")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "x.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	if got := outsidePaths("cd ~ && ls", root, "/home/me"); !slices.Equal(got, []string{"/home/me"}) {
		t.Errorf("~ alone: %q", got)
	}
	if got := outsidePaths("cat "+filepath.Join(base, "alias", "x.txt"), root, ""); len(got) != 0 {
		t.Errorf("a link into the project: %q", got)
	}
	if got := outsidePaths("cat ~/x", root, ""); len(got) != 0 {
		t.Errorf("~ without a known home: %q", got)
	}
	if got := outsidePaths("cp /var/b /etc/a", root, ""); !slices.Equal(got, []string{"/etc/a", "/var/b"}) {
		t.Errorf("not sorted: %q", got)
	}
}

// TestCaptureMarkerCountsWhatTheRuneCutsDrop: the marker counts every
// byte not shown, including those of runes cut at either end.
func TestCaptureMarkerCountsWhatTheRuneCutsDrop(t *testing.T) {
	c := newCapture(8)
	_, _ = c.Write([]byte("abcé" + strings.Repeat("-", 20) + "éxyz"))
	if got, want := c.String(), "abc\n\n… [output truncated: 24 bytes omitted from the middle] …\n\nxyz"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	c = newCapture(10)
	_, _ = c.Write([]byte("0123456789"))
	_, _ = c.Write([]byte("ab"))
	if got, want := c.String(), "01234\n\n… [output truncated: 2 bytes omitted from the middle] …\n\n789ab"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
