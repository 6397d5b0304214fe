package tools

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// dirEntry is one child in a directory listing.
type dirEntry struct {
	name  string
	isDir bool
}

// listDir returns one page of the direct children of the directory
// res.Rel under root: directories first, then alphabetical order (case
// folded, ties by bytes). A symbolic link to a directory inside the root
// counts as a directory.
// d is the directory, already opened (see openNoBlock): opening its path
// again would reopen the window in which a FIFO can be swapped in.
func (r *reader) listDir(root *os.Root, d *os.File, res Resolved, shown string, offset, limit int) (Result, error) {
	des, err := d.ReadDir(-1)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %v", shown, describeErr(err))
	}
	entries := make([]dirEntry, 0, len(des))
	for _, de := range des {
		e := dirEntry{name: de.Name(), isDir: de.IsDir()}
		if de.Type()&os.ModeSymlink != 0 {
			// Links resolve as Resolve resolves them: os.Root alone refuses
			// an absolute link even to a directory inside the root, which
			// read follows. Links that leave the root, dangle or loop list
			// as files; root.Stat keeps the look inside.
			if target, err := filepath.EvalSymlinks(filepath.Join(res.Path, de.Name())); err == nil && within(res.Base, target) {
				if fi, err := root.Stat(relSlash(res.Base, target)); err == nil && fi.IsDir() {
					e.isDir = true
				}
			}
		}
		entries = append(entries, e)
	}
	sortEntries(entries)
	total := len(entries)
	if total == 0 {
		if offset > 1 {
			return Result{}, fmt.Errorf("read %s: offset %d is beyond the end of the directory, which is empty", shown, offset)
		}
		return Result{Title: shown, Output: "(The directory is empty.)",
			Metadata: mustJSON(ReadMetadata{Path: shown, Kind: "directory", Offset: 1})}, nil
	}
	if offset > total {
		return Result{}, fmt.Errorf("read %s: offset %d is beyond the end of the directory, which has %d entries; use an offset from 1 to %d", shown, offset, total, total)
	}
	// A page ends at limit entries or at the page budget, whichever comes
	// first (names of 255 bytes, quoted, make a 2,000-entry page megabytes),
	// but holds at least one entry.
	end := offset - 1
	var b strings.Builder
	for _, e := range entries[offset-1 : min(offset-1+limit, total)] {
		line := showName(e.name)
		if e.isDir {
			line += "/"
		}
		if end >= offset && b.Len()+len(line)+1 > r.cfg.MaxPageBytes {
			break
		}
		b.WriteString(line)
		b.WriteByte('\n')
		end++
	}
	page := entries[offset-1 : end]
	next := 0
	if end < total {
		next = end + 1
		fmt.Fprintf(&b, "\n(Showing entries %d-%d of %d. Call read with offset=%d to continue.)", offset, end, total, next)
	} else {
		unit := "entries"
		if total == 1 {
			unit = "entry"
		}
		fmt.Fprintf(&b, "\n(%d %s.)", total, unit)
	}
	return Result{
		Title:  shown,
		Output: b.String(),
		Metadata: mustJSON(ReadMetadata{
			Path: shown, Kind: "directory", Offset: offset, Count: len(page), Next: next, Total: total,
		}),
	}, nil
}

// sortEntries orders directories first, then names alphabetically with
// case folded, ties broken by bytes so the order is total.
func sortEntries(entries []dirEntry) {
	slices.SortFunc(entries, func(a, b dirEntry) int {
		if a.isDir != b.isDir {
			if a.isDir {
				return -1
			}
			return 1
		}
		return cmp.Or(strings.Compare(strings.ToLower(a.name), strings.ToLower(b.name)), strings.Compare(a.name, b.name))
	})
}
