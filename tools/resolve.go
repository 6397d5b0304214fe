package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Resolver turns the paths tools receive into canonical file system paths
// confined to the Location root or to a named project reference. It is
// immutable and safe for concurrent use.
//
// A tool path is relative to the Location root, or has the form
// "@name/rel" to address project reference name. Absolute paths, ".."
// escapes and symbolic links that lead out of the root are rejected; a
// path's canonical form (every symbolic link resolved) is its resource
// identity for permission checks. ResolveEntry, for deletions, leaves a
// link in the final name unresolved: the link is what goes.
type Resolver struct {
	root string
	refs map[string]string
}

// Resolved is a resolved tool path.
type Resolved struct {
	// Input is the path as the tool received it.
	Input string
	// Path is the canonical absolute path, every symbolic link resolved. A
	// missing file's path is its canonical parent joined with the missing
	// names.
	Path string
	// Base is the canonical directory the path is confined to: the Location
	// root or the reference's directory.
	Base string
	// Rel is Path relative to Base, slash-separated; "." for Base itself.
	Rel string
	// Reference names the project reference used, or is empty.
	Reference string
	// Exists reports whether Path existed during resolution.
	Exists bool
	// Entry is the slash-separated path relative to Base of the directory
	// entry the input names: like Rel, but when the final name is a symbolic
	// link Entry names the link while Rel names its target. Deleting
	// removes Entry.
	Entry string
}

// PathError reports a path a tool may not use. It wraps one of
// ErrAbsolutePath, ErrPathEscape, ErrSymlinkEscape, ErrUnknownReference,
// ErrInvalidPath or ErrNotDirectory. Its message is written for the model.
type PathError struct {
	// Path is the path as given.
	Path string
	// Err is the sentinel saying what is wrong.
	Err error
	// Detail adds specifics, such as the configured reference names.
	Detail string
	// Near is, when resolution failed on the way (a component that is a
	// file, a broken link), the path as far as it resolved on disk (links
	// followed) with the rest of the input joined to it: what a permission
	// check that must not depend on the failure uses.
	Near string
}

// Error implements error.
func (e *PathError) Error() string {
	return fmt.Sprintf("path %q: %s", e.Path, e.Reason())
}

// Reason returns the message without the path, for callers that name the
// path themselves.
func (e *PathError) Reason() string {
	s := strings.TrimPrefix(e.Err.Error(), "tools: ")
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Unwrap returns the sentinel.
func (e *PathError) Unwrap() error { return e.Err }

// NewResolver returns a resolver for the Location directory root and the
// project references refs (name to directory; a relative directory is
// relative to root). Both root and every reference must be existing
// directories; they are canonicalized once here.
func NewResolver(root string, refs map[string]string) (*Resolver, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("%w: Location root %q is not absolute", ErrInvalidConfig, root)
	}
	canon, err := CanonicalDir(root)
	if err != nil {
		return nil, fmt.Errorf("%w: Location root: %v", ErrInvalidConfig, err)
	}
	r := &Resolver{root: canon, refs: make(map[string]string, len(refs))}
	for name, dir := range refs {
		if !validReferenceName(name) {
			return nil, fmt.Errorf("%w: reference name %q: use letters, digits, '.', '_' and '-'", ErrInvalidConfig, name)
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		c, err := CanonicalDir(dir)
		if err != nil {
			return nil, fmt.Errorf("%w: reference %q: %v", ErrInvalidConfig, name, err)
		}
		r.refs[name] = c
	}
	return r, nil
}

// CanonicalDir returns the absolute, symlink-free path of the existing
// directory dir. A path that resolves to something else fails with a
// *fs.PathError wrapping syscall.ENOTDIR, so errors.Is tells it from one
// that does not exist (fs.ErrNotExist).
func CanonicalDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	c, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(c)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", &fs.PathError{Op: "stat", Path: dir, Err: syscall.ENOTDIR}
	}
	return c, nil
}

func validReferenceName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Root returns the canonical Location root.
func (r *Resolver) Root() string { return r.root }

// References returns a copy of the canonical reference directories by name.
func (r *Resolver) References() map[string]string { return maps.Clone(r.refs) }

// Contains reports whether the canonical path p is the Location root or
// lies beneath it.
func (r *Resolver) Contains(p string) bool { return within(r.root, p) }

// RelToRoot returns p relative to the Location root, slash-separated. For
// paths outside the root the result starts with "..".
func (r *Resolver) RelToRoot(p string) string {
	rel, err := filepath.Rel(r.root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(rel)
}

// within reports whether p is base or lies beneath it; both are clean
// absolute paths.
func within(base, p string) bool {
	if p == base {
		return true
	}
	if base == string(filepath.Separator) {
		return strings.HasPrefix(p, base)
	}
	return strings.HasPrefix(p, base+string(filepath.Separator))
}

// lexical checks the shape of a tool path and splits it into the directory
// it is relative to (the root or a reference's), the reference's name, and
// the cleaned rest, without looking at the file system beyond the
// reference.
func (r *Resolver) lexical(p string) (base, ref, clean string, err error) {
	fail := func(err error, detail string) (string, string, string, error) {
		return "", "", "", &PathError{Path: p, Err: err, Detail: detail}
	}
	switch {
	case p == "":
		return fail(ErrInvalidPath, "empty path")
	case strings.ContainsRune(p, 0):
		return fail(ErrInvalidPath, "contains a NUL byte")
	case filepath.IsAbs(p):
		return fail(ErrAbsolutePath, "")
	}
	base, rest := r.root, p
	if name, tail, ok := strings.Cut(strings.TrimPrefix(p, "@"), "/"); strings.HasPrefix(p, "@") {
		if !ok {
			tail = "."
		}
		if dir, known := r.refs[name]; known {
			base, ref, rest = dir, name, tail
			if filepath.IsAbs(rest) {
				return fail(ErrAbsolutePath, "")
			}
		} else if _, err := os.Lstat(filepath.Join(r.root, "@"+name)); err != nil {
			return fail(ErrUnknownReference, r.describeReferences())
		}
	}
	clean = filepath.Clean(rest)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return fail(ErrPathEscape, "")
	}
	return base, ref, clean, nil
}

// Lexical returns the path p names before anything on disk is looked at
// (no symbolic link followed), for a permission check that must not depend
// on what exists; ok is false when p's shape alone is refused.
func (r *Resolver) Lexical(p string) (path string, ok bool) {
	base, _, clean, err := r.lexical(p)
	if err != nil {
		return "", false
	}
	return filepath.Join(base, clean), true
}

// Resolve resolves a tool path. The path need not exist; Resolved.Exists
// says whether it does. Errors are *PathError values.
func (r *Resolver) Resolve(p string) (Resolved, error) { return r.resolve(p, true) }

// ResolveEntry resolves a tool path as Resolve does but does not follow a
// symbolic link in its final name: Path, Rel and Entry all name the link
// itself, whether its target exists or not (Exists says the link does).
// A deletion removes the directory entry, so it resolves with this: a
// link to a missing target can be deleted, and deleting a link does not
// touch the file it points at.
func (r *Resolver) ResolveEntry(p string) (Resolved, error) { return r.resolve(p, false) }

func (r *Resolver) resolve(p string, followLast bool) (Resolved, error) {
	fail := func(err error, detail string) (Resolved, error) {
		return Resolved{}, &PathError{Path: p, Err: err, Detail: detail}
	}
	base, ref, clean, err := r.lexical(p)
	if err != nil {
		return Resolved{}, err
	}
	res := Resolved{Input: p, Base: base, Reference: ref, Exists: true}
	cur, parent := base, base
	var comps []string
	if clean != "." {
		comps = strings.Split(clean, string(filepath.Separator))
	}
	for i, c := range comps {
		// A failure from here on says something about the disk: it carries
		// where resolution got to.
		failNear := func(err error, detail string) (Resolved, error) {
			near := filepath.Join(append([]string{cur}, comps[i:]...)...)
			return Resolved{}, &PathError{Path: p, Err: err, Detail: detail, Near: near}
		}
		parent = cur
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				cur = filepath.Join(append([]string{cur}, comps[i:]...)...)
				res.Exists = false
				if i < len(comps)-1 {
					parent = filepath.Dir(cur)
				}
			case errors.Is(err, syscall.ENAMETOOLONG):
				return failNear(ErrInvalidPath, "a name is longer than the file system allows")
			case errors.Is(err, syscall.ENOTDIR):
				return failNear(ErrNotDirectory, fmt.Sprintf("%s is a file", filepath.Join(comps[:i]...)))
			default:
				return failNear(ErrInvalidPath, describeErr(err))
			}
			break
		}
		if fi.Mode()&fs.ModeSymlink == 0 || !followLast && i == len(comps)-1 {
			cur = next
			continue
		}
		target, err := filepath.EvalSymlinks(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if lexical, ok := linkTarget(next); ok && !within(base, lexical) {
					return failNear(ErrSymlinkEscape, "")
				}
				return failNear(ErrInvalidPath, fmt.Sprintf("%s is a symbolic link to a missing target", filepath.Join(comps[:i+1]...)))
			}
			if errors.Is(err, syscall.ENAMETOOLONG) {
				return failNear(ErrInvalidPath, "a name is longer than the file system allows")
			}
			return failNear(ErrInvalidPath, describeErr(err))
		}
		if !within(base, target) {
			return failNear(ErrSymlinkEscape, "")
		}
		cur = target
	}
	if !within(base, cur) {
		return fail(ErrPathEscape, "")
	}
	res.Path = cur
	res.Rel = relSlash(base, cur)
	if len(comps) == 0 {
		res.Entry = "."
	} else {
		res.Entry = relSlash(base, filepath.Join(parent, comps[len(comps)-1]))
	}
	return res, nil
}

// linkTarget returns the lexical target of the symbolic link at path.
func linkTarget(path string) (string, bool) {
	t, err := os.Readlink(path)
	if err != nil {
		return "", false
	}
	if !filepath.IsAbs(t) {
		t = filepath.Join(filepath.Dir(path), t)
	}
	return filepath.Clean(t), true
}

func relSlash(base, p string) string {
	rel, err := filepath.Rel(base, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(rel)
}

// describeErr returns the reason of a file system error without the path
// it names, which the caller reports itself.
func describeErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func (r *Resolver) describeReferences() string {
	if len(r.refs) == 0 {
		return "no project references are configured"
	}
	names := slices.Sorted(maps.Keys(r.refs))
	for i, n := range names {
		names[i] = "@" + n
	}
	return "configured references: " + strings.Join(names, ", ")
}

// Workdir resolves a working directory for a command. Unlike Resolve it
// accepts absolute paths and ".." because leaving the Location is allowed
// after an external_directory approval; the caller checks Contains on the
// result. The directory must exist. Empty means the Location root.
func (r *Resolver) Workdir(p string) (string, error) {
	if p == "" {
		return r.root, nil
	}
	if strings.ContainsRune(p, 0) {
		return "", &PathError{Path: p, Err: ErrInvalidPath, Detail: "contains a NUL byte"}
	}
	dir := p
	switch {
	case strings.HasPrefix(p, "@"):
		name, tail, _ := strings.Cut(p[1:], "/")
		base, ok := r.refs[name]
		if !ok {
			if _, err := os.Lstat(filepath.Join(r.root, p)); err != nil {
				return "", &PathError{Path: p, Err: ErrUnknownReference, Detail: r.describeReferences()}
			}
			dir = filepath.Join(r.root, p)
		} else {
			dir = filepath.Join(base, tail)
		}
	case !filepath.IsAbs(p):
		dir = filepath.Join(r.root, p)
	}
	canon, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", &PathError{Path: p, Err: ErrInvalidPath, Detail: "no such directory"}
		}
		return "", &PathError{Path: p, Err: ErrInvalidPath, Detail: describeErr(err)}
	}
	fi, err := os.Stat(canon)
	if err != nil {
		return "", &PathError{Path: p, Err: ErrInvalidPath, Detail: describeErr(err)}
	}
	if !fi.IsDir() {
		return "", &PathError{Path: p, Err: ErrNotDirectory}
	}
	return canon, nil
}
