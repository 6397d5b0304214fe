package persistence

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// VerifyReport is what Verify found.
type VerifyReport struct {
	Sessions int
	Events   int
	// Problems describes what does not hold, the first maxProblems of
	// them; More counts the rest. Both are empty for a sound store.
	Problems []string
	More     int
}

// maxProblems bounds VerifyReport.Problems: a projection gone wrong
// usually differs in many rows, and the first ones tell what happened.
const maxProblems = 20

func (r *VerifyReport) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	} else {
		r.More++
	}
}

// Verify checks the store against the invariants of doc.go. Nothing else
// may write to it meanwhile (sessiond's check command has it open alone).
// It checks:
//
//   - every page of the bbolt file, with bbolt's own check (each page
//     reachable once or free, none out of bounds, keys in order);
//   - every Session's log reads back whole, from seq 0 to its record's
//     last seq without a gap (Log checks the order);
//   - every projection is what the logs make of it: Verify replays every
//     Session's log into a new store in a temporary directory under dir
//     (Restore, removed afterwards) and compares both, bucket by bucket and
//     row by row, as Dump would but without holding either in memory.
//     Instruction entries and saved approvals are state kept beside the
//     logs (doc.go), so they are not rebuilt; an entry must belong to a
//     Session that exists.
//
// The error is for a check that could not run (a failed read, no room for
// the rebuilt store); what it found wrong is in the report.
func (s *Bolt) Verify(ctx context.Context, dir string) (VerifyReport, error) {
	var r VerifyReport
	// In a write transaction, which keeps a flush from changing the
	// freelist while bbolt's check reads it; rolled back.
	tx, err := s.db.Begin(true)
	if err != nil {
		return r, err
	}
	if err := walkPages(tx); err != nil {
		// Every later read of the damaged page would end the process:
		// bbolt's check reads in a goroutine of its own, and so would the
		// logs' replay.
		r.problem("database file: %v", err)
		return r, tx.Rollback()
	}
	for err := range tx.Check() {
		r.problem("database file: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		return r, err
	}
	// From the list index rather than List, which fails as a whole on one
	// Session it cannot read.
	var sids []messages.SessionID
	err = s.view(func(v *view) error {
		c := v.cursor(bucketSessions)
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			sids = append(sids, messages.SessionID(k))
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.Sessions = len(sids)
	// Named after the store, so that the next Open of it removes what a
	// killed check left beside it.
	tmp, err := os.MkdirTemp(dir, filepath.Base(s.Path())+verifySuffix)
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(tmp)
	rebuilt, err := Open(filepath.Join(tmp, "rebuilt.db"), Options{NoSync: true, PromptBytes: s.opts.PromptBytes})
	if err != nil {
		return r, err
	}
	defer rebuilt.Close()
	for _, sid := range sids {
		n, err := replayInto(ctx, s, rebuilt, sid)
		r.Events += n
		if ctx.Err() != nil {
			// Stopped, not damaged: what is not rebuilt yet would read
			// as rows the logs do not make.
			return r, ctx.Err()
		}
		if err != nil {
			r.problem("session %s: %v", sid, err)
		}
	}
	err = s.view(func(v *view) error {
		return rebuilt.view(func(w *view) error {
			for _, name := range allBuckets {
				if bytes.Equal(name, bucketApprovals) {
					continue
				}
				if bytes.Equal(name, bucketEntries) {
					checkEntries(v, &r)
					continue
				}
				// A log row's events may sort after the message rows of
				// their seqs (stateRows): the two kinds are compared apart.
				sets := []rowSet{otherRows}
				if bytes.Equal(name, bucketData) {
					sets = append(sets, logRows)
				}
				for _, set := range sets {
					if err := compareRows(v, w, name, set, &r); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	return r, err
}

// replayInto restores Session sid's whole log into dst, a batch at a
// time, and returns how many events it read. A log that ends short of the
// Session's last seq is an error, as is one Restore refuses.
func replayInto(ctx context.Context, src, dst *Bolt, sid messages.SessionID) (int, error) {
	const batch = 256
	var evs []messages.Event
	n, last := 0, int64(-1)
	for item, err := range src.Log(ctx, sid, -1, false) {
		if err != nil {
			return n, err
		}
		if item.Event == nil {
			continue
		}
		n++
		last = item.Event.Durable.Seq
		if evs = append(evs, *item.Event); len(evs) == batch {
			if err := dst.Restore(ctx, evs); err != nil {
				return n, err
			}
			evs = evs[:0]
		}
	}
	if len(evs) > 0 {
		if err := dst.Restore(ctx, evs); err != nil {
			return n, err
		}
	}
	var end int64
	if err := src.view(func(v *view) error { end = lastSeq(v, sid); return nil }); err != nil {
		return n, err
	}
	if last != end {
		return n, fmt.Errorf("the log ends at seq %d, the Session's rows at %d", last, end)
	}
	return n, nil
}

// compareRows walks the rows set of bucket name in the store (v) and in its
// rebuilt copy (w) in step and reports every row that is missing, extra or
// different.
func compareRows(v, w *view, name []byte, set rowSet, r *VerifyReport) error {
	var verr, werr error
	got, stopGot := iter.Pull2(stateRows(v, name, set, &verr))
	defer stopGot()
	want, stopWant := iter.Pull2(stateRows(w, name, set, &werr))
	defer stopWant()
	gk, gv, gok := got()
	wk, wv, wok := want()
	for gok || wok {
		switch c := compareKeys(gk, wk, gok, wok); {
		case c < 0:
			r.problem("%s %q: not what the logs make (they make no such row)", name, gk)
			gk, gv, gok = got()
		case c > 0:
			r.problem("%s %q: missing (the logs make it)", name, wk)
			wk, wv, wok = want()
		default:
			if !bytes.Equal(gv, wv) {
				r.problem("%s %q: differs from what the logs make", name, gk)
			}
			gk, gv, gok = got()
			wk, wv, wok = want()
		}
	}
	if verr != nil {
		r.problem("%s: %v", name, verr)
	}
	return werr
}

// compareKeys orders two positions of compareRows; an exhausted side
// (ok false) sorts after every key.
func compareKeys(a, b []byte, aok, bok bool) int {
	switch {
	case !aok:
		return 1
	case !bok:
		return -1
	}
	return bytes.Compare(a, b)
}

// checkEntries reports instruction entries of Sessions that do not exist.
func checkEntries(v *view, r *VerifyReport) {
	c := v.cursor(bucketEntries)
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			r.problem("%s %q: not a Session's entry", bucketEntries, k)
			continue
		}
		if lastSeq(v, messages.SessionID(k[:i])) < 0 {
			r.problem("%s %q: its Session does not exist", bucketEntries, k)
		}
	}
}

// walkPages reads every page of every bucket's tree, in key order, in the
// calling goroutine, where a damaged page pointer (one past the end of the
// file, or of the mapping) faults into a panic that it returns as an
// error, as it does a panic of bbolt's over a page it cannot read.
func walkPages(tx *bolt.Tx) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if _, fault := p.(interface{ Addr() uintptr }); fault {
				p = "a page pointer leads past the end of the file"
			}
			err = fmt.Errorf("reading its pages: %v", p)
		}
	}()
	return tx.ForEach(func(_ []byte, b *bolt.Bucket) error {
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
		}
		return nil
	})
}
