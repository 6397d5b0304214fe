package tools

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// patchFS performs the file operations of apply_patch. Every path is
// slash-separated and relative to base, a canonical directory; the default
// implementation goes through os.Root so that a symbolic link swapped in
// after resolution still cannot lead outside base. Tests substitute an
// implementation that injects failures.
type patchFS interface {
	// stat returns the file info of rel, following a final symbolic link
	// when follow is set.
	stat(base, rel string, follow bool) (fs.FileInfo, error)
	// read returns the content of rel, failing when it exceeds max bytes.
	read(base, rel string, max int64) ([]byte, error)
	// create makes rel with data, creating missing parent directories; it
	// fails if rel exists.
	create(base, rel string, data []byte) error
	// writable returns an error when this process may not write the
	// existing file rel: its permission bits, an ACL or a read-only mount
	// say no.
	writable(base, rel string) error
	// replace atomically replaces the content of the existing file rel,
	// keeping its permission bits and owner; a file it cannot replace so
	// without changing what the file is (hard links, an owner this
	// process may not give) is written in place instead.
	replace(base, rel string, data []byte, perm fs.FileMode) error
	// remove deletes rel (a symbolic link itself, not its target).
	remove(base, rel string) error
}

// errTooLarge reports a file over apply_patch's size limit.
var errTooLarge = errors.New("file too large")

// rootFS is the os.Root-backed patchFS.
type rootFS struct{}

func (rootFS) stat(base, rel string, follow bool) (fs.FileInfo, error) {
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if follow {
		return r.Stat(rel)
	}
	return r.Lstat(rel)
}

func (rootFS) read(base, rel string, max int64) ([]byte, error) {
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, fi, err := openNoBlock(r, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errTooLarge
	}
	return data, nil
}

func (rootFS) create(base, rel string, data []byte) (err error) {
	r, err := os.OpenRoot(base)
	if err != nil {
		return err
	}
	defer r.Close()
	if dir := path.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (rootFS) writable(base, rel string) error {
	// replace renames a new file over rel, which asks only the directory's
	// permission: a file the user made read-only (chmod a-w, a Perforce
	// workspace) was rewritten, where a plain write fails. This asks the
	// file's own. A check, not an operation, so a path: a link swapped in
	// meanwhile only changes the answer, and replace still goes through
	// the root.
	return unix.Access(filepath.Join(base, filepath.FromSlash(rel)), unix.W_OK)
}

func (rootFS) replace(base, rel string, data []byte, perm fs.FileMode) error {
	r, err := os.OpenRoot(base)
	if err != nil {
		return err
	}
	defer r.Close()
	cur, err := r.Stat(rel)
	if err != nil {
		return err
	}
	st, _ := cur.Sys().(*syscall.Stat_t)
	if st != nil && st.Nlink > 1 {
		// A rename gives this name a new file and leaves every other link
		// to the old one with the old content: a hard-linked file is
		// written in place, as editors do.
		return overwrite(r, rel, data)
	}
	// The temporary name must not grow with the file's name: a name near
	// the file system's limit (NAME_MAX, 255 bytes on most) plus a suffix
	// would not fit, and the update would fail only at commit, after
	// preflight had passed and earlier operations were applied.
	tmp := path.Join(path.Dir(rel), ".sessiond-"+rand.Text()+".tmp")
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	inPlace, err := fillTemp(f, data, perm, st)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !inPlace {
		err = r.Rename(tmp, rel)
	}
	if err != nil || inPlace {
		_ = r.Remove(tmp)
	}
	if err != nil {
		return err
	}
	if inPlace {
		return overwrite(r, rel, data)
	}
	return nil
}

// fillTemp writes data into f, the replacement of a file whose stat is old
// (nil where the platform gives none), with the old file's permission
// bits and owner. inPlace reports that this process may not give f that
// owner (a user editing another's group-writable file): the old file must
// then be written in place instead.
func fillTemp(f *os.File, data []byte, perm fs.FileMode, old *syscall.Stat_t) (inPlace bool, err error) {
	if _, err := f.Write(data); err != nil {
		return false, err
	}
	// OpenFile's permission is filtered by the umask; restore the
	// original bits exactly.
	if err := f.Chmod(perm); err != nil {
		return false, err
	}
	if old == nil {
		return false, nil
	}
	// The new file belongs to this process; the old one may not (root
	// editing a user's file).
	mine, err := f.Stat()
	if err != nil {
		return false, err
	}
	if t, ok := mine.Sys().(*syscall.Stat_t); ok && (t.Uid != old.Uid || t.Gid != old.Gid) {
		return f.Chown(int(old.Uid), int(old.Gid)) != nil, nil
	}
	return false, nil
}

// overwrite writes data over the existing file rel, keeping the file
// itself (its owner, links and extended attributes). Unlike replace's
// rename it is not atomic: a crash part-way leaves part of the new content.
func overwrite(r *os.Root, rel string, data []byte) error {
	f, err := r.OpenFile(rel, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (rootFS) remove(base, rel string) error {
	r, err := os.OpenRoot(base)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Remove(rel)
}
