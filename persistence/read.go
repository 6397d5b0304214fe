package persistence

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/messages"
)

func loadMessage(v *view, sid messages.SessionID, id messages.MessageID) (Message, bool, error) {
	var m Message
	var ent idEntry
	ok, err := get(v, bucketIDs, []byte(id), &ent)
	if err != nil || !ok || ent.SessionID != sid || ent.Seq == 0 {
		return m, false, err
	}
	return m, true, decodeAt(v, bucketData, streamKey(sid, ent.Seq, rMessage), &m)
}

func decodeAt(r *view, bucket, key []byte, v any) error {
	ok, err := get(r, bucket, key, v)
	if err == nil && !ok {
		err = messages.Errorf(messages.ErrInternal, "persistence: index points at missing %s row", bucket)
	}
	return err
}

// fill sets the log-derived fields of a Session record.
func fillSession(v *view, s *Session) error {
	s.LastSeq = lastSeq(v, s.ID)
	s.Updated = s.Created
	if s.LastSeq >= 0 {
		ev, err := lastEvent(v, s.ID, s.LastSeq)
		if err != nil {
			return err
		}
		created, err := messages.EventCreated(ev)
		if err != nil {
			return err
		}
		s.Updated = created
	}
	return nil
}

// Get implements Store.
func (s *Bolt) Get(ctx context.Context, id messages.SessionID) (Session, error) {
	var out Session
	err := s.view(func(v *view) error {
		var err error
		if out, err = loadSession(v, id); err != nil {
			return err
		}
		return fillSession(v, &out)
	})
	return out, err
}

// List implements Store.
func (s *Bolt) List(ctx context.Context) ([]Session, error) {
	var out []Session
	err := s.view(func(v *view) error {
		c := v.cursor(bucketSessions)
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			r, err := loadSession(v, messages.SessionID(k))
			if err != nil {
				return err
			}
			if err := fillSession(v, &r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	// The bucket is keyed by ID, and supplied IDs sort anywhere: order by
	// creation time, then ID for Sessions created in the same millisecond.
	slices.SortStableFunc(out, func(a, b Session) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), strings.Compare(string(a.ID), string(b.ID)))
	})
	return out, err
}

// Watermark implements Store.
func (s *Bolt) Watermark(ctx context.Context, id messages.SessionID) (int64, error) {
	if s.tails.done() {
		// The memtables stay readable after Close; the store does not.
		return -1, ErrClosed
	}
	if w, ok := memLastSeq(s.snap.Load().mems, id); ok {
		return w, nil
	}
	var w int64
	err := s.view(func(v *view) error {
		var err error
		w, err = existingLastSeq(v, id)
		return err
	})
	return w, err
}

func (s *Bolt) limit(q Query) int {
	if q.Limit <= 0 {
		return s.opts.PageSize
	}
	return q.Limit
}

// errStop ends a walk early without an error: more rows remain.
var errStop = errors.New("stop")

// streamRows calls fn with the key and value of each of the Session's
// stream rows of kind r, in order, from the first that can hold seq
// after+1 (a log row is keyed by its last seq). It reports more when fn
// returned errStop.
func streamRows(v *view, sid messages.SessionID, after int64, r row, fn func(k, v []byte) error) (more bool, err error) {
	for k, val := range v.prefixed(bucketData, prefix(sid, kStream), streamKey(sid, after+1, 0)) {
		if row(k[len(k)-1]) != r {
			continue
		}
		if err := fn(k, val); err != nil {
			if err == errStop {
				return true, nil
			}
			return false, err
		}
	}
	return false, nil
}

// scanMessages walks the Session's message rows with source seq > after,
// decoding at most limit of them (all when limit < 0) with dec, and reports
// whether more remain.
func scanMessages(v *view, sid messages.SessionID, after int64, limit int, dec func(v []byte) error) (bool, error) {
	n := 0
	return streamRows(v, sid, after, rMessage, func(_, val []byte) error {
		if n == limit {
			return errStop
		}
		n++
		return dec(val)
	})
}

// History implements Store. Every durable event type of the catalog is
// public, so no filtering is needed beyond decoding.
func (s *Bolt) History(ctx context.Context, id messages.SessionID, q Query) (Page[messages.Event], error) {
	var page Page[messages.Event]
	if q.After < -1 {
		q.After = -1
	}
	err := s.view(func(v *view) error {
		if err := sessionExists(v, id); err != nil {
			return err
		}
		page.Data = make([]messages.Event, 0, min(s.limit(q), 128))
		more, err := scanLog(v, id, q.After, s.limit(q), func(v []byte) error {
			ev, err := messages.UnmarshalEvent(v)
			if err != nil {
				return err
			}
			page.Data = append(page.Data, ev)
			return nil
		})
		page.HasMore = more
		return err
	})
	return page, err
}

// Messages implements Store.
func (s *Bolt) Messages(ctx context.Context, id messages.SessionID, q Query) (Page[Message], error) {
	var page Page[Message]
	if q.After < -1 {
		q.After = -1
	}
	err := s.view(func(v *view) error {
		if err := sessionExists(v, id); err != nil {
			return err
		}
		page.Data = []Message{}
		more, err := scanMessages(v, id, q.After, s.limit(q), appendMessage(&page.Data))
		page.HasMore = more
		return err
	})
	return page, err
}

// appendMessage returns a scanMessages callback that decodes each row onto
// the end of *out.
func appendMessage(out *[]Message) func(raw []byte) error {
	return func(raw []byte) error {
		*out = append(*out, Message{})
		if err := messages.Unmarshal(raw, &(*out)[len(*out)-1]); err != nil {
			*out = (*out)[:len(*out)-1]
			return err
		}
		return nil
	}
}

// Message implements Store.
func (s *Bolt) Message(ctx context.Context, sid messages.SessionID, id messages.MessageID) (Message, error) {
	var m Message
	err := s.view(func(v *view) error {
		var ok bool
		var err error
		m, ok, err = loadMessage(v, sid, id)
		if err == nil && !ok {
			err = messages.Errorf(messages.ErrNotFound, "message %q not found in session %q", id, sid)
		}
		return err
	})
	return m, err
}

// Pending implements Store.
func (s *Bolt) Pending(ctx context.Context, id messages.SessionID) ([]Input, error) {
	var out []Input
	err := s.view(func(v *view) error {
		if err := sessionExists(v, id); err != nil {
			return err
		}
		var err error
		out, err = pending(v, id)
		return err
	})
	return out, err
}

// pending returns the Session's unsettled inputs in admission order.
func pending(v *view, sid messages.SessionID) ([]Input, error) {
	var ids []messages.MessageID
	for _, id := range v.prefixed(bucketData, prefix(sid, kPending), nil) {
		ids = append(ids, messages.MessageID(id))
	}
	var out []Input
	for _, id := range ids {
		in, ok, err := loadInput(v, id)
		if err == nil && (!ok || in.SessionID != sid || in.PromotedSeq != nil) {
			err = messages.Errorf(messages.ErrInternal, "persistence: session %q lists %q as pending", sid, id)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// loadInput returns input id; ok is false when the ID names no input.
func loadInput(v *view, id messages.MessageID) (Input, bool, error) {
	var ent idEntry
	ok, err := get(v, bucketIDs, []byte(id), &ent)
	if err != nil || !ok || ent.Kind != idInput {
		return Input{}, false, err
	}
	in, err := inputOf(v, id, ent)
	return in, err == nil, err
}

// inputOf rebuilds the inbox row of input id from its ID entry and the
// event that admitted it, which hold all of it between them.
func inputOf(v *view, id messages.MessageID, ent idEntry) (Input, error) {
	raw, err := eventAt(v, ent.SessionID, ent.Admitted)
	if err != nil {
		return Input{}, err
	}
	return inputFrom(raw, id, ent)
}

// inputOf is inputOf for an operation, which may have admitted the input
// itself: its events reach their log rows only when it ends.
func (w *wtx) inputOf(id messages.MessageID, ent idEntry) (Input, error) {
	for _, l := range w.logs {
		if first := l.last - int64(len(l.evs)) + 1; l.sid == ent.SessionID && ent.Admitted >= first && ent.Admitted <= l.last {
			return inputFrom(l.evs[ent.Admitted-first], id, ent)
		}
	}
	return inputOf(&w.v, id, ent)
}

// inputFrom is inputOf given the admission event's stored bytes.
func inputFrom(raw []byte, id messages.MessageID, ent idEntry) (Input, error) {
	ev, err := messages.UnmarshalEvent(raw)
	if err != nil {
		return Input{}, err
	}
	var in Input
	switch p := ev.Data.(type) {
	case *messages.PromptAdmitted:
		in = admittedInput(ev, p)
	case *messages.CompactionAdmitted:
		in = compactionInput(ev, p)
	}
	if in.ID != id {
		return Input{}, messages.Errorf(messages.ErrInternal, "persistence: the ID entry of %q points at %s@%d, which admits no such input", id, ent.SessionID, ent.Admitted)
	}
	if ent.Settled != 0 {
		in.PromotedSeq = &ent.Settled
	}
	return in, nil
}

// eventAt returns the stored bytes of the Session's event at seq.
func eventAt(v *view, sid messages.SessionID, seq int64) ([]byte, error) {
	var out []byte
	_, err := streamRows(v, sid, seq-1, rLog, func(k, row []byte) error {
		if err := logRowEvents(row, streamSeq(k), func(at int64, ev []byte) error {
			if at == seq {
				out = ev
			}
			return nil
		}); err != nil {
			return err
		}
		return errStop
	})
	if err == nil && out == nil {
		err = messages.Errorf(messages.ErrInternal, "persistence: no event at %s@%d", sid, seq)
	}
	return out, err
}

// Input implements Store.
func (s *Bolt) Input(ctx context.Context, id messages.MessageID) (Input, error) {
	var in Input
	err := s.view(func(v *view) error {
		var ok bool
		var err error
		in, ok, err = loadInput(v, id)
		if err == nil && !ok {
			err = messages.Errorf(messages.ErrNotFound, "input %q not found", id)
		}
		return err
	})
	return in, err
}

// Boundary implements Store.
func (s *Bolt) Boundary(ctx context.Context, id messages.SessionID, after int64) (Boundary, error) {
	var b Boundary
	err := s.view(func(v *view) error {
		var err error
		if b.Session, err = loadSession(v, id); err != nil {
			return err
		}
		if b.Pending, err = pending(v, id); err != nil {
			return err
		}
		if c, ok, err := loadCheckpoint(v, id); err != nil {
			return err
		} else if ok {
			b.Checkpoint = &c
		}
		if _, err = scanMessages(v, id, max(after, -1), -1, appendMessage(&b.Messages)); err != nil {
			return err
		}
		b.Seq = lastSeq(v, id)
		return nil
	})
	return b, err
}

// Checkpoint implements Store.
func (s *Bolt) Checkpoint(ctx context.Context, id messages.SessionID) (Checkpoint, bool, error) {
	var c Checkpoint
	var ok bool
	err := s.view(func(v *view) error {
		var err error
		c, ok, err = loadCheckpoint(v, id)
		return err
	})
	return c, ok, err
}

// loadCheckpoint reads the Session's instruction checkpoint; ok is false
// when none is initialized.
func loadCheckpoint(v *view, sid messages.SessionID) (c Checkpoint, ok bool, err error) {
	ok, err = get(v, bucketData, prefix(sid, kCheckpoint), &c)
	return c, ok, err
}
