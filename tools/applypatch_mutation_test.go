package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// hookFS is rootFS that answers writable with writableErr (so a test does
// not depend on who runs it) and calls before, when set, before each stat
// and create.
type hookFS struct {
	rootFS
	writableErr error
	before      func(op, rel string)
}

func (f hookFS) writable(string, string) error { return f.writableErr }

func (f hookFS) stat(base, rel string, follow bool) (fs.FileInfo, error) {
	if f.before != nil {
		f.before("stat", rel)
	}
	return f.rootFS.stat(base, rel, follow)
}

func (f hookFS) create(base, rel string, data []byte) error {
	if f.before != nil {
		f.before("create", rel)
	}
	return f.rootFS.create(base, rel, data)
}

// newHookHarness is a harness, every permission allowed, whose apply_patch
// goes through fsys.
func newHookHarness(t *testing.T, fsys patchFS) *harness {
	t.Helper()
	perms, err := NewPermissions(PermissionsConfig{Agents: map[string]Ruleset{DefaultAgent: allowAll}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(Config{Root: t.TempDir(), Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	tool, err := newApplyPatch(ApplyPatchConfig{}, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(reg.NewScope("hook"), tool); err != nil {
		t.Fatal(err)
	}
	return &harness{root: reg.Paths().Root(), reg: reg, perms: perms}
}

// message returns the message of a typed tool error of type want.
func message(t *testing.T, err error, want messages.ErrorType) string {
	t.Helper()
	var me *messages.Error
	if !errors.As(err, &me) || me.Type != want {
		t.Fatalf("got %v, want a %s error", err, want)
	}
	return me.Message
}

// absent fails unless rel does not exist under root.
func absent(t *testing.T, root, rel string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(root, rel)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s exists (%v)", rel, err)
	}
}

func TestApplyPatchRejectsANegativeLimit(t *testing.T) {
	if _, err := NewApplyPatch(ApplyPatchConfig{MaxFileBytes: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v, want ErrInvalidConfig", err)
	}
}

// TestApplyPatchFileSizeLimit: a file of exactly MaxFileBytes is updated;
// one byte more is refused in preflight, never patched as a truncated read.
func TestApplyPatchFileSizeLimit(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{ApplyPatch: ApplyPatchConfig{MaxFileBytes: 8}}})
	exact := h.write(t, "exact.txt", "1234567\n")
	big := h.write(t, "big.txt", "12345678\n")
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: exact.txt\n@@\n-1234567\n+x\n")); err != nil {
		t.Fatal(err)
	}
	if readFile(t, exact) != "x\n" {
		t.Fatal("file of exactly the limit not updated")
	}
	_, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: big.txt\n@@\n-12345678\n+x\n"))
	if msg := message(t, err, messages.ErrToolExecution); !strings.HasSuffix(msg, "no files were changed:\n- update big.txt: the file is larger than 8 bytes") {
		t.Fatalf("message %q", msg)
	}
	if readFile(t, big) != "12345678\n" {
		t.Fatal("file over the limit changed")
	}
}

// cancelledAt returns a context and a harness whose apply_patch cancels
// it just before its file system's operation op on rel.
func cancelledAt(t *testing.T, op, rel string) (context.Context, *harness) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, newHookHarness(t, hookFS{before: func(o, r string) {
		if o == op && r == rel {
			cancel()
		}
	}})
}

// TestApplyPatchCancelledInPreflight: cancellation noticed before any write
// says that nothing changed.
func TestApplyPatchCancelledInPreflight(t *testing.T) {
	ctx, h := cancelledAt(t, "stat", "a.txt")
	_, err := h.call(ctx, t, "apply_patch", patchText("*** Add File: a.txt\n+a\n*** Add File: b.txt\n+b\n"))
	if msg := message(t, err, messages.ErrAborted); msg != "apply_patch was cancelled; no files were changed" {
		t.Fatalf("message %q", msg)
	}
	absent(t, h.root, "a.txt")
	absent(t, h.root, "b.txt")
}

// TestApplyPatchCancelledInCommit: cancellation between two writes stops
// before the second and reports exactly what was applied.
func TestApplyPatchCancelledInCommit(t *testing.T) {
	ctx, h := cancelledAt(t, "create", "a.txt")
	_, err := h.call(ctx, t, "apply_patch", patchText("*** Add File: a.txt\n+a\n*** Add File: b.txt\n+b\n"))
	want := "apply_patch: the patch was only partly applied: add b.txt failed: cancelled.\nApplied:\nA a.txt\nNot applied:\nA b.txt\n" +
		"Read the files that were not applied before patching them again."
	if msg := message(t, err, messages.ErrAborted); msg != want {
		t.Fatalf("message\n%s\nwant\n%s", msg, want)
	}
	if readFile(t, filepath.Join(h.root, "a.txt")) != "a\n" {
		t.Fatal("the first file was not added")
	}
	absent(t, h.root, "b.txt")
}

// TestApplyPatchPreflightSeesChangesMadeDuringTheQuestion: the files are
// looked at only after approval, which may take long; a directory turned
// into a file meanwhile fails every operation under it in preflight.
func TestApplyPatchPreflightSeesChangesMadeDuringTheQuestion(t *testing.T) {
	var root string
	asker := &scriptedAsker{answer: func(Request) (Answer, error) {
		d := filepath.Join(root, "d")
		if err := os.RemoveAll(d); err != nil {
			return Answer{}, err
		}
		if err := os.WriteFile(d, []byte("now a file\n"), 0o644); err != nil {
			return Answer{}, err
		}
		return Answer{Reply: Once}, nil
	}}
	h := newHarness(t, harnessConfig{asker: asker})
	root = h.root
	h.write(t, "d/x.txt", "x\n")
	h.write(t, "d/y.txt", "y\n")
	_, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Add File: new.txt\n+n\n*** Add File: d/n.txt\n+n\n*** Update File: d/x.txt\n@@\n-x\n+X\n*** Delete File: d/y.txt\n"))
	want := "apply_patch: the patch was not applied; no files were changed:\n- add d/n.txt: not a directory\n" +
		"- update d/x.txt: not a directory\n- delete d/y.txt: not a directory"
	if msg := message(t, err, messages.ErrToolExecution); msg != want {
		t.Fatalf("message\n%s\nwant\n%s", msg, want)
	}
	absent(t, h.root, "new.txt")
}

// TestApplyPatchRefusesToUpdateAFIFO: an update needs a regular file.
func TestApplyPatchRefusesToUpdateAFIFO(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	if err := syscall.Mkfifo(filepath.Join(h.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: fifo\n@@\n+x\n"))
	if msg := message(t, err, messages.ErrToolExecution); !strings.HasSuffix(msg, "\n- update fifo: not a regular file") {
		t.Fatalf("message %q", msg)
	}
}

// TestApplyPatchReadOnlyMeansNoWriteBitAtAll: a file is read-only when no
// one may write it; a file only its group or others may write is updated
// (when writable allows it) and keeps its exact bits, which the umask
// would otherwise have filtered.
func TestApplyPatchReadOnlyMeansNoWriteBitAtAll(t *testing.T) {
	h := newHookHarness(t, hookFS{})
	modes := map[string]fs.FileMode{"group.txt": 0o464, "other.txt": 0o446, "all.txt": 0o666}
	for name, mode := range modes {
		if err := os.Chmod(h.write(t, name, "old\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Update File: group.txt\n@@\n-old\n+new\n*** Update File: other.txt\n@@\n-old\n+new\n*** Update File: all.txt\n@@\n-old\n+new\n")); err != nil {
		t.Fatal(err)
	}
	for name, mode := range modes {
		p := filepath.Join(h.root, name)
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != mode || readFile(t, p) != "new\n" {
			t.Errorf("%s: mode %v (want %v), err %v", name, fi.Mode().Perm(), mode, err)
		}
	}
	if err := os.Chmod(h.write(t, "ro.txt", "old\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: ro.txt\n@@\n-old\n+new\n"))
	if msg := message(t, err, messages.ErrToolExecution); !strings.HasSuffix(msg, "\n- update ro.txt: the file is read-only") {
		t.Fatalf("message %q", msg)
	}
}

// TestApplyPatchAsksWritable: a file writable refuses (an ACL, a read-only
// mount, another owner) fails preflight, so nothing else is applied.
func TestApplyPatchAsksWritable(t *testing.T) {
	h := newHookHarness(t, hookFS{writableErr: syscall.EACCES})
	p := h.write(t, "a.txt", "old\n")
	_, err := h.call(context.Background(), t, "apply_patch", patchText("*** Add File: first.txt\n+x\n*** Update File: a.txt\n@@\n-old\n+new\n"))
	want := "apply_patch: the patch was not applied; no files were changed:\n- update a.txt: the file is not writable: permission denied"
	if msg := message(t, err, messages.ErrToolExecution); msg != want {
		t.Fatalf("message %q", msg)
	}
	if readFile(t, p) != "old\n" {
		t.Fatal("changed")
	}
	absent(t, h.root, "first.txt")
}

// TestApplyPatchDeletionCounts: a deletion reports the lines the file had;
// an empty file has none, and a symbolic link has none of its target's.
func TestApplyPatchDeletionCounts(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	h.write(t, "empty.txt", "")
	h.write(t, "nonl.txt", "a\nb")
	target := h.write(t, "target.txt", "1\n2\n3\n")
	if err := os.Symlink("target.txt", filepath.Join(h.root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	res, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Delete File: empty.txt\n*** Delete File: nonl.txt\n*** Delete File: link.txt\n"))
	if err != nil {
		t.Fatal(err)
	}
	var meta ApplyPatchMetadata
	if err := json.Unmarshal(res.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	want := []PatchedFile{{"empty.txt", "D", 0, 0}, {"nonl.txt", "D", 0, 2}, {"link.txt", "D", 0, 0}}
	if !slices.Equal(meta.Files, want) {
		t.Fatalf("metadata %+v, want %+v", meta.Files, want)
	}
	if readFile(t, target) != "1\n2\n3\n" {
		t.Fatal("the link's target changed")
	}
}

func TestApplyPatchTitleNamesASingleFile(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	h.write(t, "a.txt", "a\n")
	res, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: a.txt\n@@\n-a\n+b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Title != "M a.txt" || res.Output != "Success. Updated the following files:\nM a.txt" {
		t.Fatalf("title %q, output %q", res.Title, res.Output)
	}
}

// TestRootFSCreate: create makes missing parents and the file with the
// modes a plain create gets (0o755 and 0o644 under the umask), and never
// replaces a file that appeared after preflight.
func TestRootFSCreate(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.txt")
	f, err := os.OpenFile(ref, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Mkdir(filepath.Join(dir, "refdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := (rootFS{}).create(dir, "sub/deeper/new.txt", []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	for got, want := range map[string]string{"sub/deeper/new.txt": "ref.txt", "sub": "refdir", "sub/deeper": "refdir"} {
		g, err1 := os.Stat(filepath.Join(dir, got))
		w, err2 := os.Stat(filepath.Join(dir, want))
		if err1 != nil || err2 != nil || g.Mode() != w.Mode() {
			t.Errorf("%s: mode %v, want %v (%v %v)", got, g.Mode(), w.Mode(), err1, err2)
		}
	}
	if readFile(t, filepath.Join(dir, "sub/deeper/new.txt")) != "x\n" {
		t.Fatal("content")
	}
	if err := (rootFS{}).create(dir, "ref.txt", []byte("clobbered")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("create over an existing file: %v", err)
	}
	if readFile(t, ref) != "" {
		t.Fatal("create replaced an existing file")
	}
}

// TestApplyPatchReplacesTheFileAtomically: an update renames a complete new
// file over the old one, so a reader that opened the file before sees the
// old content whole, never a truncated or half-written one. As root the
// file first goes to another owner, whom the replacement must keep too.
func TestApplyPatchReplacesTheFileAtomically(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	p := h.write(t, "a.txt", "old\n")
	if os.Geteuid() == 0 {
		if err := os.Chown(p, 4242, 4343); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: a.txt\n@@\n-old\n+new\n")); err != nil {
		t.Fatal(err)
	}
	seen, err := io.ReadAll(reader)
	if err != nil || string(seen) != "old\n" {
		t.Fatalf("a reader of the old file saw %q (%v)", seen, err)
	}
	after, err := os.Stat(p)
	if err != nil || readFile(t, p) != "new\n" {
		t.Fatal(err)
	}
	b, a := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
	if a.Uid != b.Uid || a.Gid != b.Gid {
		t.Fatalf("owner %d:%d, want %d:%d", a.Uid, a.Gid, b.Uid, b.Gid)
	}
}

// TestApplyPatchKeepsTheGroup: a file whose owner is this process's but
// whose group is another keeps that group. Root can choose any group;
// anyone else needs a second group of their own, or the group stays theirs.
func TestApplyPatchKeepsTheGroup(t *testing.T) {
	checkUpdateKeepsOwner(t, os.Getuid(), otherGroup())
}

// TestApplyPatchShrinksAHardLinkedFile: a hard-linked file is written in
// place, and new content shorter than the old leaves nothing of the old
// behind.
func TestApplyPatchShrinksAHardLinkedFile(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	p := h.write(t, "a.txt", "a much longer old line\n")
	if err := os.Link(p, filepath.Join(h.root, "b.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: a.txt\n@@\n-a much longer old line\n+new\n")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(h.root, "b.txt")); got != "new\n" {
		t.Fatalf("content %q", got)
	}
}

// TestApplyPatchNamesTheDeletedLink: deleting a symbolic link removes the
// link and leaves its target, so the question and the report name the
// link. Naming the target (as an update through a link rightly does) told
// the model that a file still there was gone.
func TestApplyPatchNamesTheDeletedLink(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	h := newHarness(t, harnessConfig{asker: asker})
	target := h.write(t, "dir/real.txt", "real\n")
	if err := os.Symlink("dir/real.txt", filepath.Join(h.root, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	res, err := h.call(context.Background(), t, "apply_patch", patchText("*** Delete File: alias.txt\n"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Title != "D alias.txt" || res.Output != "Success. Updated the following files:\nD alias.txt" {
		t.Fatalf("title %q, output %q", res.Title, res.Output)
	}
	asked := asker.requests()
	var question ApplyPatchMetadata
	if len(asked) != 1 || json.Unmarshal(asked[0].Metadata, &question) != nil ||
		!slices.Equal(question.Files, []PatchedFile{{"alias.txt", "D", 0, 0}}) || !slices.Equal(asked[0].Patterns, []string{"alias.txt"}) {
		t.Fatalf("asked %+v", asked)
	}
	absent(t, h.root, "alias.txt")
	if readFile(t, target) != "real\n" {
		t.Fatal("the target changed")
	}
}

// TestApplyPatchDeletesLinksWhateverTheyPointAt: a deletion removes the
// link it names, so a link to a missing target, or to a file outside the
// root, can be deleted (each was refused as unresolvable), and a link can
// go in the same patch that edits its target (refused as "the same
// file"). What the links point at is left as it was.
func TestApplyPatchDeletesLinksWhateverTheyPointAt(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	h := newHarness(t, harnessConfig{asker: asker})
	target := h.write(t, "target.txt", "old\n")
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"gone.txt": "missing.txt", "alias.txt": "target.txt", "out.txt": outside} {
		if err := os.Symlink(to, filepath.Join(h.root, link)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Delete File: gone.txt\n*** Delete File: alias.txt\n*** Update File: target.txt\n@@\n-old\n+new\n*** Delete File: out.txt\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Success. Updated the following files:\nD gone.txt\nD alias.txt\nM target.txt\nD out.txt"; res.Output != want {
		t.Fatalf("output %q, want %q", res.Output, want)
	}
	asked := asker.requests()
	if len(asked) != 1 || !slices.Equal(asked[0].Patterns, []string{"gone.txt", "alias.txt", "target.txt", "out.txt"}) {
		t.Fatalf("asked %+v", asked)
	}
	for _, link := range []string{"gone.txt", "alias.txt", "out.txt"} {
		absent(t, h.root, link)
	}
	if readFile(t, target) != "new\n" || readFile(t, outside) != "outside\n" {
		t.Fatal("a link's target was deleted or changed otherwise than patched")
	}
	// A link on the way to the name is still followed, and must resolve.
	if err := os.Symlink("missing-dir", filepath.Join(h.root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	_, err = h.call(context.Background(), t, "apply_patch", patchText("*** Delete File: dirlink/x.txt\n"))
	if err == nil || !strings.Contains(err.Error(), "missing target") {
		t.Fatalf("delete through a dangling directory link: %v", err)
	}
}
