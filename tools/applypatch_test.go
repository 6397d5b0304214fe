package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

func patchText(body string) ApplyPatchInput {
	return ApplyPatchInput{PatchText: "*** Begin Patch\n" + body + "*** End Patch\n"}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestApplyPatchAsksOnceForTheBatch(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	h := newHarness(t, harnessConfig{asker: asker})
	h.write(t, "src/a.go", "package a\n")
	h.write(t, "old.txt", "x\n")
	res, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Add File: docs/n.md\n+n\n*** Update File: src/a.go\n@@\n-package a\n+package b\n*** Delete File: old.txt\n"))
	if err != nil {
		t.Fatal(err)
	}
	asked := asker.requests()
	if len(asked) != 1 || asked[0].Permission != PermissionEdit || !slices.Equal(asked[0].Patterns, []string{"docs/n.md", "src/a.go", "old.txt"}) {
		t.Fatalf("asked %+v, want one edit request for the three relative paths", asked)
	}
	var meta ApplyPatchMetadata
	if err := json.Unmarshal(res.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	want := []PatchedFile{{"docs/n.md", "A", 1, 0}, {"src/a.go", "M", 1, 1}, {"old.txt", "D", 0, 1}}
	if !slices.Equal(meta.Files, want) {
		t.Fatalf("metadata %+v, want %+v", meta.Files, want)
	}
	if res.Title != "3 files changed" {
		t.Fatalf("title %q", res.Title)
	}
	// The question counts lines from the patch alone (a deletion's are
	// known only once the file is read, after approval).
	var question ApplyPatchMetadata
	if err := json.Unmarshal(asked[0].Metadata, &question); err != nil {
		t.Fatal(err)
	}
	if want := []PatchedFile{{"docs/n.md", "A", 1, 0}, {"src/a.go", "M", 1, 1}, {"old.txt", "D", 0, 0}}; !slices.Equal(question.Files, want) {
		t.Fatalf("question metadata %+v, want %+v", question.Files, want)
	}
}

func TestApplyPatchRejectedChangesNothing(t *testing.T) {
	asker := &scriptedAsker{answer: func(Request) (Answer, error) { return Answer{Reply: Reject, Message: "not that file"}, nil }}
	h := newHarness(t, harnessConfig{asker: asker})
	p := h.write(t, "a.txt", "a\n")
	_, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: a.txt\n@@\n-a\n+b\n*** Add File: b.txt\n+b\n"))
	if errorType(t, err) != messages.ErrPermissionRejected || !strings.Contains(err.Error(), "not that file") {
		t.Fatalf("got %v", err)
	}
	if readFile(t, p) != "a\n" {
		t.Fatal("a rejected patch changed a file")
	}
	if _, err := os.Stat(filepath.Join(h.root, "b.txt")); !os.IsNotExist(err) {
		t.Fatal("a rejected patch added a file")
	}
	// An edit rule can deny one file of the batch: nothing is applied.
	h2 := newHarness(t, harnessConfig{rules: Ruleset{{"edit", "*", Allow}, {"edit", "*.lock", Deny}}})
	h2.write(t, "a.txt", "a\n")
	_, err = h2.call(context.Background(), t, "apply_patch", patchText("*** Update File: a.txt\n@@\n-a\n+b\n*** Add File: deps.lock\n+x\n"))
	if errorType(t, err) != messages.ErrPermissionRejected || readFile(t, filepath.Join(h2.root, "a.txt")) != "a\n" {
		t.Fatalf("got %v", err)
	}
}

func TestApplyPatchExternalDirectoriesAskedOncePerDirectory(t *testing.T) {
	lib := t.TempDir()
	for _, f := range []string{"pkg/a.go", "pkg/b.go", "other/c.go"} {
		p := filepath.Join(lib, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	canonLib, _ := filepath.EvalSymlinks(lib)
	asker := &scriptedAsker{answer: answerAlways(Once)}
	h := newHarness(t, harnessConfig{asker: asker, refs: map[string]string{"lib": lib}})
	h.write(t, "local.txt", "old\n")
	res, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Update File: @lib/pkg/a.go\n@@\n-old\n+new\n"+
			"*** Update File: @lib/pkg/b.go\n@@\n-old\n+new\n"+
			"*** Delete File: @lib/other/c.go\n"+
			"*** Update File: local.txt\n@@\n-old\n+new\n"))
	if err != nil {
		t.Fatal(err)
	}
	var perms []string
	for _, r := range asker.requests() {
		perms = append(perms, r.Permission+" "+strings.Join(r.Patterns, ","))
	}
	relLib, _ := filepath.Rel(h.root, canonLib)
	want := []string{
		"external_directory " + filepath.Join(canonLib, "pkg") + "/*",
		"external_directory " + filepath.Join(canonLib, "other") + "/*",
		"edit " + strings.Join([]string{relLib + "/pkg/a.go", relLib + "/pkg/b.go", relLib + "/other/c.go", "local.txt"}, ","),
	}
	if !slices.Equal(perms, want) {
		t.Fatalf("asked\n%q\nwant\n%q", perms, want)
	}
	if readFile(t, filepath.Join(lib, "pkg/a.go")) != "new\n" || readFile(t, filepath.Join(h.root, "local.txt")) != "new\n" {
		t.Fatal("patch not applied")
	}
	if _, err := os.Stat(filepath.Join(lib, "other/c.go")); !os.IsNotExist(err) {
		t.Fatal("delete through a reference not applied")
	}
	if !strings.Contains(res.Output, "M @lib/pkg/a.go") || !strings.Contains(res.Output, "D @lib/other/c.go") {
		t.Fatalf("output %q", res.Output)
	}
	// Denying the external directory stops the whole patch.
	h2 := newHarness(t, harnessConfig{rules: Ruleset{{"*", "*", Allow}, {"external_directory", "*", Deny}}, refs: map[string]string{"lib": lib}})
	_, err = h2.call(context.Background(), t, "apply_patch", patchText("*** Update File: @lib/pkg/a.go\n@@\n-new\n+newer\n"))
	if errorType(t, err) != messages.ErrPermissionRejected || readFile(t, filepath.Join(lib, "pkg/a.go")) != "new\n" {
		t.Fatalf("got %v", err)
	}
}

func TestApplyPatchSymlinks(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.root, "out")); err != nil {
		t.Fatal(err)
	}
	target := h.write(t, "real.txt", "real\n")
	if err := os.Symlink("real.txt", filepath.Join(h.root, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	_, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: out/secret.txt\n@@\n-secret\n+pwned\n"))
	if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "symbolic link") || readFile(t, secret) != "secret\n" {
		t.Fatalf("symlink escape: %v", err)
	}
	// Updating through a link inside the root edits the target and keeps the link.
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: alias.txt\n@@\n-real\n+edited\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(h.root, "alias.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 || readFile(t, target) != "edited\n" {
		t.Fatalf("update through link: %v %v", fi, err)
	}
	// Deleting the link removes the link, not its target.
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Delete File: alias.txt\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "alias.txt")); !os.IsNotExist(err) || readFile(t, target) != "edited\n" {
		t.Fatalf("delete of link: %v", err)
	}
}

func TestApplyPatchDeleteAuthorizesTheLinkNotItsTarget(t *testing.T) {
	// The reference "up" is the root's parent, so links on either side of
	// the root resolve. A delete removes the link, so the link's directory
	// needs external_directory (ext), not its target's (lib).
	asker := &scriptedAsker{answer: answerAlways(Once)}
	h := newHarness(t, harnessConfig{asker: asker, refs: map[string]string{"up": ".."}})
	parent, name := filepath.Dir(h.root), filepath.Base(h.root)
	ext, lib := filepath.Join(parent, "ext"), filepath.Join(parent, "lib")
	for _, d := range []string{ext, lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	inside := h.write(t, "inside.txt", "in\n")
	outside := filepath.Join(lib, "outside.txt")
	if err := os.WriteFile(outside, []byte("out\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{filepath.Join(ext, "in-link"): inside, filepath.Join(h.root, "out-link"): outside} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Delete File: @up/ext/in-link\n*** Delete File: @up/"+name+"/out-link\n")); err != nil {
		t.Fatal(err)
	}
	var asked []string
	for _, r := range asker.requests() {
		asked = append(asked, r.Permission+" "+strings.Join(r.Patterns, ","))
	}
	want := []string{"external_directory " + ext + "/*", "edit ../ext/in-link,out-link"}
	if !slices.Equal(asked, want) {
		t.Fatalf("asked\n%q\nwant\n%q", asked, want)
	}
	for _, link := range []string{filepath.Join(ext, "in-link"), filepath.Join(h.root, "out-link")} {
		if _, err := os.Lstat(link); !os.IsNotExist(err) {
			t.Errorf("%s not deleted: %v", link, err)
		}
	}
	if readFile(t, inside) != "in\n" || readFile(t, outside) != "out\n" {
		t.Fatal("a link's target changed")
	}
}

func TestApplyPatchReportsNamesThatAreNotPlainQuoted(t *testing.T) {
	// The update succeeds, so its report must not fail the call: a model
	// told "failed" would patch the file a second time.
	h := newHarness(t, harnessConfig{rules: allowAll})
	real := h.write(t, "real\xff.txt", "old\n")
	if err := os.Symlink("real\xff.txt", filepath.Join(h.root, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	res, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: alias.txt\n@@\n-old\n+new\n"))
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, real) != "new\n" || res.Output != "Success. Updated the following files:\nM \"real\\xff.txt\"" {
		t.Fatalf("output %q", res.Output)
	}
}

func TestApplyPatchKeepsFileMode(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	p := h.write(t, "run.sh", "#!/bin/sh\necho old\n")
	if err := os.Chmod(p, 0o751); err != nil {
		t.Fatal(err)
	}
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: run.sh\n@@\n-echo old\n+echo new\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o751 || readFile(t, p) != "#!/bin/sh\necho new\n" {
		t.Fatalf("mode %v, err %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(h.root)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".sessiond-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

func TestApplyPatchUpdatesAFileWithTheLongestName(t *testing.T) {
	// 255 bytes is NAME_MAX on Linux; preflight passes for such a file, so
	// commit must not fail on the temporary file's name after the first
	// operation was applied.
	h := newHarness(t, harnessConfig{rules: allowAll})
	long := strings.Repeat("n", 251) + ".txt"
	p := h.write(t, long, "old\n")
	if _, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Add File: first.txt\n+x\n*** Update File: "+long+"\n@@\n-old\n+new\n")); err != nil {
		t.Fatal(err)
	}
	if readFile(t, p) != "new\n" {
		t.Fatal("not updated")
	}
}

func TestApplyPatchCancelledBeforeCommit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	asker := &scriptedAsker{answer: func(Request) (Answer, error) {
		cancel() // the interrupt arrives as the user approves
		return Answer{Reply: Once}, nil
	}}
	h := newHarness(t, harnessConfig{asker: asker})
	p := h.write(t, "a.txt", "a\n")
	_, err := h.call(ctx, t, "apply_patch", patchText("*** Update File: a.txt\n@@\n-a\n+b\n"))
	if errorType(t, err) != messages.ErrAborted || readFile(t, p) != "a\n" {
		t.Fatalf("got %v", err)
	}
}

// TestApplyPatchLeavesReadOnlyFilesAlone: an update of a file this process
// may not write fails in preflight, as a plain write would, though the
// rename that replaces it needs only the directory's permission; a user
// marks a file read-only to keep it as it is (and so for root too).
func TestApplyPatchLeavesReadOnlyFilesAlone(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	p := h.write(t, "locked.txt", "old\n")
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := h.call(context.Background(), t, "apply_patch", patchText(
		"*** Add File: first.txt\n+x\n*** Update File: locked.txt\n@@\n-old\n+new\n"))
	if err == nil || !strings.Contains(err.Error(), "no files were changed") || !strings.Contains(err.Error(), "locked.txt") {
		t.Fatalf("got %v, want the patch refused", err)
	}
	if readFile(t, p) != "old\n" {
		t.Fatal("a read-only file was changed")
	}
	if _, err := os.Stat(filepath.Join(h.root, "first.txt")); err == nil {
		t.Fatal("the patch was partly applied")
	}
}

// TestApplyPatchKeepsHardLinks: an update of a file with another hard link
// changes the content every link sees. Replacing it by a rename would give
// the patched name a new file and leave the other link with the old text.
func TestApplyPatchKeepsHardLinks(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	p := h.write(t, "a.txt", "old\n")
	other := filepath.Join(h.root, "b.txt")
	if err := os.Link(p, other); err != nil {
		t.Fatal(err)
	}
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: a.txt\n@@\n-old\n+new\n")); err != nil {
		t.Fatal(err)
	}
	if readFile(t, p) != "new\n" || readFile(t, other) != "new\n" {
		t.Fatalf("a.txt %q, its link b.txt %q", readFile(t, p), readFile(t, other))
	}
	a, _ := os.Stat(p)
	b, _ := os.Stat(other)
	if !os.SameFile(a, b) {
		t.Fatal("the link was broken")
	}
}

// otherGroup returns a group a file of this process's may be given that
// is not the process's own: any for root (4343), else a second group of
// the user's, or the process's own when it has no other.
func otherGroup() int {
	gid := os.Getgid()
	if os.Geteuid() == 0 {
		return 4343
	}
	if groups, err := os.Getgroups(); err == nil {
		for _, g := range groups {
			if g != gid {
				return g
			}
		}
	}
	return gid
}

// TestApplyPatchKeepsTheOwner: the replacement keeps the file's owner and
// group, where a new file would get this process's. Root gives the file to
// another user first (CI runs as root): root editing a user's file left it
// root's. Anyone else can only move it to another of their groups, where
// they have one.
func TestApplyPatchKeepsTheOwner(t *testing.T) {
	uid := os.Getuid()
	if os.Geteuid() == 0 {
		uid = 4242
	}
	checkUpdateKeepsOwner(t, uid, otherGroup())
}

// checkUpdateKeepsOwner gives a file owner uid and group gid, updates it
// with apply_patch and checks that both stayed.
func checkUpdateKeepsOwner(t *testing.T, uid, gid int) {
	t.Helper()
	h := newHarness(t, harnessConfig{rules: allowAll})
	p := h.write(t, "mine.txt", "old\n")
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := h.call(context.Background(), t, "apply_patch", patchText("*** Update File: mine.txt\n@@\n-old\n+new\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || readFile(t, p) != "new\n" {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid {
		t.Fatalf("owner %d:%d, want %d:%d", st.Uid, st.Gid, uid, gid)
	}
}
