package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
)

// OpenSteps returns the assistant messages whose step is open. Between
// drains there should be none; any found at the start of a drain were left
// by a process that died mid-step (orphans for failInterruptedTools).
func (s *Bolt) OpenSteps(ctx context.Context, sid messages.SessionID) ([]Message, error) {
	var out []Message
	err := s.view(func(v *view) error {
		p := prefix(sid, kOpen)
		for k := range v.prefixed(bucketData, p, nil) {
			m, ok, err := loadMessage(v, sid, messages.MessageID(k[len(p):]))
			if err != nil {
				return err
			}
			if ok {
				out = append(out, m)
			}
		}
		return nil
	})
	return out, err
}

// validateKey checks an instruction entry key or approval part.
func validateKey(field, k string) error {
	if k == "" || utf8.RuneCountInString(k) > 200 || strings.ContainsRune(k, 0) {
		return messages.Errorf(messages.ErrInvalid, "%s: want 1 to 200 characters without NUL", field)
	}
	return nil
}

// PutEntry stores an API-managed instruction entry of a Session. Entries
// are instruction-source inputs, observed at the next step boundary; the
// change reaches the log through session.instructions.updated.1.
func (s *Bolt) PutEntry(ctx context.Context, sid messages.SessionID, key, value string) error {
	if err := validateKey("key", key); err != nil {
		return err
	}
	return s.submit(ctx, func(w *wtx) error {
		if err := w.exists(sid); err != nil {
			return err
		}
		return w.putString(bucketEntries, strKey(sid, 0, key), value)
	})
}

// DeleteEntry removes an instruction entry; a missing entry is not-found.
func (s *Bolt) DeleteEntry(ctx context.Context, sid messages.SessionID, key string) error {
	return s.submit(ctx, func(w *wtx) error {
		if err := w.exists(sid); err != nil {
			return err
		}
		k := strKey(sid, 0, key)
		if w.v.get(bucketEntries, k) == nil {
			return messages.Errorf(messages.ErrNotFound, "instruction entry %q not found", key)
		}
		return w.del(bucketEntries, k)
	})
}

// Entries returns a Session's instruction entries; an unknown Session is
// session.not-found.
func (s *Bolt) Entries(ctx context.Context, sid messages.SessionID) (map[string]string, error) {
	out := map[string]string{}
	err := s.view(func(v *view) error {
		if err := sessionExists(v, sid); err != nil {
			return err
		}
		p := prefix(sid, 0)
		for k, v := range v.prefixed(bucketEntries, p, nil) {
			out[string(k[len(p):])] = string(v)
		}
		return nil
	})
	return out, err
}

func approvalKey(project, permission, pattern string) []byte {
	return []byte(project + "\x00" + permission + "\x00" + pattern)
}

// SaveApproval durably records an "always" permission reply for a project.
func (s *Bolt) SaveApproval(ctx context.Context, project, permission string, patterns []string) error {
	if err := validateKey("project", project); err != nil {
		return err
	}
	if err := validateKey("permission", permission); err != nil {
		return err
	}
	for _, p := range patterns {
		// NUL separates the key's fields (approvalKey).
		if strings.ContainsRune(p, 0) {
			return messages.Errorf(messages.ErrInvalid, "approval pattern %.60q contains NUL", p)
		}
	}
	return s.submit(ctx, func(w *wtx) error {
		for _, p := range patterns {
			if err := w.putBytes(bucketApprovals, approvalKey(project, permission, p), nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// Approved reports whether an "always" approval covers exactly this
// permission and pattern in the project.
func (s *Bolt) Approved(ctx context.Context, project, permission, pattern string) (bool, error) {
	var ok bool
	err := s.view(func(v *view) error {
		ok = v.get(bucketApprovals, approvalKey(project, permission, pattern)) != nil
		return nil
	})
	return ok, err
}

// Approvals lists a project's saved approvals as permission -> patterns.
func (s *Bolt) Approvals(ctx context.Context, project string) (map[string][]string, error) {
	out := map[string][]string{}
	err := s.view(func(v *view) error {
		p := []byte(project + "\x00")
		for k := range v.prefixed(bucketApprovals, p, nil) {
			perm, pat, _ := strings.Cut(string(k[len(p):]), "\x00")
			out[perm] = append(out[perm], pat)
		}
		return nil
	})
	return out, err
}

// Dump returns every key and value of every bucket (but the flush
// watermark, which is bookkeeping rather than state), with each log row
// expanded into one entry per event. It exists for
// replay-equivalence checks (tests and the actortest harness), not for
// production reads.
func (s *Bolt) Dump() (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := s.view(func(v *view) error {
		for _, name := range allBuckets {
			m := map[string]string{}
			out[string(name)] = m
			var err error
			for k, val := range stateRows(v, name, everyRow, &err) {
				m[string(k)] = string(val)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// rowSet selects which of a bucket's rows stateRows yields.
type rowSet int

const (
	// everyRow is all of them. The keys of one log row's events sort
	// before the message rows among them, so the keys are not in order
	// when a message row falls inside a log row's seqs: for Dump, which
	// does not need them in order.
	everyRow rowSet = iota
	// logRows is the log rows' events alone, in key order.
	logRows
	// otherRows is every row but the log rows, in key order.
	otherRows
)

// stateRows yields a bucket's rows as state, not as stored: without the
// flush watermark and the log generation, which are bookkeeping, and with each log row expanded
// into one row per event (streamKey(sid, seq, rLog)), since how events
// were grouped into rows depends on how they were appended (a Restore
// writes a Session's events as one row). A log row that does not decode
// ends the rows, its error in *errp.
func stateRows(v *view, name []byte, set rowSet, errp *error) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		c := v.cursor(name)
		for k, val := c.First(); k != nil; k, val = c.Next() {
			if bytes.Equal(name, bucketMeta) && (bytes.Equal(k, keyApplied) || bytes.Equal(k, keyLogGen)) {
				continue
			}
			if !bytes.Equal(name, bucketData) || !isLogRow(k) {
				if set == logRows {
					continue
				}
				if !yield(k, val) {
					return
				}
				continue
			}
			if set == otherRows {
				continue
			}
			sid := messages.SessionID(k[:len(k)-11])
			err := logRowEvents(val, streamSeq(k), func(seq int64, ev []byte) error {
				if !yield(streamKey(sid, seq, rLog), ev) {
					return errStopRows
				}
				return nil
			})
			if err == errStopRows {
				return
			}
			if err != nil {
				*errp = fmt.Errorf("log row %q: %w", k, err)
				return
			}
		}
	}
}

// errStopRows ends logRowEvents when stateRows' consumer stops.
var errStopRows = errors.New("persistence: rows no longer wanted")
