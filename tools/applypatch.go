package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools/patch"
)

// ApplyPatchConfig configures the apply_patch tool. Zero fields take the
// defaults of DefaultApplyPatchConfig.
type ApplyPatchConfig struct {
	// MaxFileBytes is the largest file an update reads.
	MaxFileBytes int64
}

// DefaultApplyPatchConfig returns the defaults: files up to 16 MiB.
func DefaultApplyPatchConfig() ApplyPatchConfig {
	return ApplyPatchConfig{MaxFileBytes: 16 << 20}
}

// ApplyPatchInput is the input of the apply_patch tool.
type ApplyPatchInput struct {
	PatchText string `json:"patchText"`
}

// PatchedFile describes one file a patch changed.
type PatchedFile struct {
	// Path is relative to the Location root, or "@reference/path".
	Path string `json:"path"`
	// Action is "A" (added), "M" (updated) or "D" (deleted).
	Action string `json:"action"`
	// Additions and Deletions count the lines inserted and removed.
	Additions int `json:"additions"`
	Deletions int `json:"deletions"`
}

// ApplyPatchMetadata is the metadata of an apply_patch result.
type ApplyPatchMetadata struct {
	Files []PatchedFile `json:"files"`
}

// NewApplyPatch returns the apply_patch built-in, which adds, updates and
// deletes files with one patch. It parses the whole patch, resolves every
// target, asks for external_directory once per directory outside the
// Location (reached through project references), asks for edit once for
// the whole batch, and preflights every operation before changing
// anything. Operations are then committed in order; a failure at that
// stage returns a report naming the files applied and not applied. Moves
// are rejected and there is no rollback.
func NewApplyPatch(cfg ApplyPatchConfig) (Tool, error) {
	return newApplyPatch(cfg, rootFS{})
}

func newApplyPatch(cfg ApplyPatchConfig, fsys patchFS) (Tool, error) {
	if cfg.MaxFileBytes < 0 {
		return nil, fmt.Errorf("%w: apply_patch: negative MaxFileBytes", ErrInvalidConfig)
	}
	if cfg.MaxFileBytes == 0 {
		cfg.MaxFileBytes = DefaultApplyPatchConfig().MaxFileBytes
	}
	p := &patcher{cfg: cfg, fs: fsys}
	return NewTool(Definition{
		Name:       "apply_patch",
		AsksItself: true,
		Description: "Add, update and delete files in the project with one patch. The patch format:\n\n" +
			"*** Begin Patch\n*** Add File: path/new.txt\n+first line of the new file\n" +
			"*** Update File: path/existing.go\n@@ func main() {\n context line\n-removed line\n+added line\n context line\n" +
			"*** Delete File: path/old.txt\n*** End Patch\n\n" +
			"Paths are relative to the project root (or @reference/path). In an update, each hunk starts with `@@` (optionally followed by a line " +
			"that occurs once before the change, to locate it) and lists context lines (prefix ' '), removed lines ('-') and added lines ('+'). " +
			"Context and removed lines must match the file exactly and in exactly one place; include about 3 lines of context around each change. " +
			"End a hunk with `*** End of File` when it must match at the end of the file. Hunks of one file must be in file order. " +
			"Every hunk is checked before any file is changed. Moving files (`*** Move to:`) is not supported: add the new file and delete the old one.",
		InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "patchText": {"type": "string", "minLength": 1, "description": "The full patch, from *** Begin Patch to *** End Patch."}
  },
  "required": ["patchText"],
  "additionalProperties": false
}`),
		Permission: PermissionEdit,
	}, p.run), nil
}

// patcher is the apply_patch built-in.
type patcher struct {
	cfg ApplyPatchConfig
	fs  patchFS
}

// target is one resolved file operation.
type target struct {
	op    patch.Op
	res   Resolved
	shown string // for the model: relative to the root or @reference/path
	// path is the canonical path the operation changes, res.Path (a delete
	// resolves with ResolveEntry: the path of a link it removes, not of
	// the link's target). Permissions are checked against it.
	path string
	rel  string // path relative to the Location root, the edit permission pattern
	// Preflight results.
	content        []byte
	perm           fs.FileMode
	added, removed int
}

func (p *patcher) run(ctx context.Context, call *CallContext, in ApplyPatchInput) (Result, error) {
	parsed, err := patch.Parse(in.PatchText)
	if err != nil {
		return Result{}, fmt.Errorf("apply_patch: invalid patch: %v; no files were changed", err)
	}
	targets, err := p.resolve(call, parsed)
	if err != nil {
		return Result{}, err
	}
	if err := p.authorize(ctx, call, targets); err != nil {
		return Result{}, err
	}
	if err := p.preflight(ctx, targets); err != nil {
		return Result{}, err
	}
	return p.commit(ctx, targets)
}

// resolve resolves every target, reporting every problem at once.
func (p *patcher) resolve(call *CallContext, parsed *patch.Patch) ([]*target, error) {
	var problems []string
	targets := make([]*target, 0, len(parsed.Ops))
	byPath := make(map[string]*target)
	for _, op := range parsed.Ops {
		if op.MoveTo != "" {
			problems = append(problems, fmt.Sprintf("line %d: %s %s: *** Move to is not supported yet; add the file at its new path (*** Add File) and delete the old one (*** Delete File) instead", op.Line, op.Kind, op.Path))
			continue
		}
		resolve := call.Paths.Resolve
		if op.Kind == patch.Delete {
			resolve = call.Paths.ResolveEntry // the entry goes, a link's target stays
		}
		res, err := resolve(op.Path)
		if err != nil {
			reason := err.Error()
			var pe *PathError
			if errors.As(err, &pe) {
				reason = pe.Reason()
			}
			problems = append(problems, fmt.Sprintf("%s %s: %s", op.Kind, op.Path, reason))
			continue
		}
		t := &target{op: op, res: res, shown: displayPath(res), path: res.Path}
		t.rel = call.Paths.RelToRoot(t.path)
		if prev, dup := byPath[res.Path]; dup {
			problems = append(problems, fmt.Sprintf("%s %s: the same file as %s %s; use one operation per file", op.Kind, op.Path, prev.op.Kind, prev.op.Path))
			continue
		}
		byPath[res.Path] = t
		targets = append(targets, t)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("apply_patch: the patch was not applied; no files were changed:\n- %s", strings.Join(problems, "\n- "))
	}
	return targets, nil
}

// authorize asks for external_directory once per directory outside the
// Location, then for edit once for the whole batch.
func (p *patcher) authorize(ctx context.Context, call *CallContext, targets []*target) error {
	asked := make(map[string]bool)
	for _, t := range targets {
		if call.Paths.Contains(t.path) {
			continue
		}
		dir := filepath.Dir(t.path)
		if asked[dir] {
			continue
		}
		asked[dir] = true
		if err := call.Ask(ctx, externalDirectoryRequest(dir, "apply_patch")); err != nil {
			return err
		}
	}
	patterns := make([]string, len(targets))
	files := make([]PatchedFile, len(targets))
	for i, t := range targets {
		patterns[i] = t.rel
		// The counts the question shows come from the patch alone: files
		// are read only after approval. A deleted file's lines are not
		// known yet, so a deletion shows 0.
		files[i] = PatchedFile{Path: t.shown, Action: t.op.Kind.Letter()}
		switch t.op.Kind {
		case patch.Add:
			files[i].Additions = len(t.op.Content)
		case patch.Update:
			for _, h := range t.op.Hunks {
				a, r := h.Counts()
				files[i].Additions += a
				files[i].Deletions += r
			}
		}
	}
	return call.Ask(ctx, Request{
		Permission: PermissionEdit,
		Patterns:   patterns,
		Metadata:   mustJSON(ApplyPatchMetadata{Files: files}),
	})
}

// preflight checks every operation and computes updated contents, so that
// nothing changes unless everything can.
func (p *patcher) preflight(ctx context.Context, targets []*target) error {
	var problems []string
	for _, t := range targets {
		if ctx.Err() != nil {
			return messages.Errorf(messages.ErrAborted, "apply_patch was cancelled; no files were changed")
		}
		if err := p.check(t); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("apply_patch: the patch was not applied; no files were changed:\n- %s", strings.Join(problems, "\n- "))
	}
	return nil
}

// check preflights one target.
func (p *patcher) check(t *target) error {
	base := t.res.Base
	switch t.op.Kind {
	case patch.Add:
		if _, err := p.fs.stat(base, t.res.Entry, false); err == nil {
			return fmt.Errorf("add %s: the file already exists; use *** Update File to change it", t.shown)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("add %s: %s", t.shown, describeErr(err))
		}
		t.content = t.op.NewContent()
		t.added = len(t.op.Content)
	case patch.Update:
		fi, err := p.fs.stat(base, t.res.Rel, true)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("update %s: the file does not exist; use *** Add File to create it", t.shown)
		case err != nil:
			return fmt.Errorf("update %s: %s", t.shown, describeErr(err))
		case fi.IsDir():
			return fmt.Errorf("update %s: is a directory", t.shown)
		case !fi.Mode().IsRegular():
			return fmt.Errorf("update %s: not a regular file", t.shown)
		}
		if fi.Mode().Perm()&0o222 == 0 {
			// Read-only for everyone, root included: whoever marked it so
			// meant it to stay as it is, and root's writes would ignore it.
			return fmt.Errorf("update %s: the file is read-only", t.shown)
		}
		if err := p.fs.writable(base, t.res.Rel); err != nil {
			return fmt.Errorf("update %s: the file is not writable: %s", t.shown, describeErr(err))
		}
		old, err := p.fs.read(base, t.res.Rel, p.cfg.MaxFileBytes)
		if err != nil {
			if errors.Is(err, errTooLarge) {
				return fmt.Errorf("update %s: the file is larger than %d bytes", t.shown, p.cfg.MaxFileBytes)
			}
			return fmt.Errorf("update %s: %s", t.shown, describeErr(err))
		}
		updated, err := patch.Apply(old, t.op.Hunks)
		if err != nil {
			return fmt.Errorf("update %s: %v", t.shown, err)
		}
		t.content, t.perm = updated, fi.Mode().Perm()
		for _, h := range t.op.Hunks {
			a, r := h.Counts()
			t.added += a
			t.removed += r
		}
	case patch.Delete:
		fi, err := p.fs.stat(base, t.res.Entry, false)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("delete %s: the file does not exist", t.shown)
		case err != nil:
			return fmt.Errorf("delete %s: %s", t.shown, describeErr(err))
		case fi.IsDir():
			return fmt.Errorf("delete %s: is a directory; apply_patch deletes files only", t.shown)
		}
		if fi.Mode().IsRegular() {
			if data, err := p.fs.read(base, t.res.Entry, p.cfg.MaxFileBytes); err == nil {
				t.removed = len(patchLines(data))
			}
		}
	}
	return nil
}

// patchLines splits data into lines for counting.
func patchLines(data []byte) []string {
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// commit applies the operations in order. A failure leaves the earlier
// operations applied and reports exactly which files changed.
func (p *patcher) commit(ctx context.Context, targets []*target) (Result, error) {
	files := make([]PatchedFile, 0, len(targets))
	for i, t := range targets {
		if ctx.Err() != nil {
			return Result{}, partialError(targets, files, i, messages.Errorf(messages.ErrAborted, "cancelled"), messages.ErrAborted)
		}
		var err error
		switch t.op.Kind {
		case patch.Add:
			err = p.fs.create(t.res.Base, t.res.Entry, t.content)
		case patch.Update:
			err = p.fs.replace(t.res.Base, t.res.Rel, t.content, t.perm)
		case patch.Delete:
			err = p.fs.remove(t.res.Base, t.res.Entry)
		}
		if err != nil {
			return Result{}, partialError(targets, files, i, err, messages.ErrToolExecution)
		}
		files = append(files, PatchedFile{Path: t.shown, Action: t.op.Kind.Letter(), Additions: t.added, Deletions: t.removed})
	}
	var b strings.Builder
	b.WriteString("Success. Updated the following files:")
	for _, f := range files {
		b.WriteString("\n" + f.Action + " " + f.Path)
	}
	title := fmt.Sprintf("%d files changed", len(files))
	if len(files) == 1 {
		title = files[0].Action + " " + files[0].Path
	}
	return Result{Title: title, Output: b.String(), Metadata: mustJSON(ApplyPatchMetadata{Files: files})}, nil
}

// partialError reports a commit that stopped at targets[failed].
func partialError(targets []*target, applied []PatchedFile, failed int, err error, typ messages.ErrorType) error {
	var b strings.Builder
	t := targets[failed]
	reason := describeErr(err)
	var me *messages.Error
	if errors.As(err, &me) {
		reason = me.Message
	}
	fmt.Fprintf(&b, "apply_patch: the patch was only partly applied: %s %s failed: %s.", t.op.Kind, t.shown, reason)
	b.WriteString("\nApplied:")
	if len(applied) == 0 {
		b.WriteString(" none")
	}
	for _, f := range applied {
		b.WriteString("\n" + f.Action + " " + f.Path)
	}
	b.WriteString("\nNot applied:")
	for _, rest := range targets[failed:] {
		b.WriteString("\n" + rest.op.Kind.Letter() + " " + rest.shown)
	}
	b.WriteString("\nRead the files that were not applied before patching them again.")
	return messages.Errorf(typ, "%s", b.String())
}
