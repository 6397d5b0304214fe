package persistence

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/messages"
)

// Append commits data as consecutive events of Session id.
func (s *Bolt) Append(ctx context.Context, id messages.SessionID, data ...messages.Payload) ([]messages.Event, error) {
	return s.append(ctx, id, data, nil)
}

// Commit implements Store.
func (s *Bolt) Commit(ctx context.Context, id messages.SessionID, data ...messages.Payload) (Committed, error) {
	var c Committed
	evs, err := s.append(ctx, id, data, func(w *wtx) error {
		// The operation's working copies are final here; flush encodes
		// them next without changing them.
		c.Messages = c.Messages[:0]
		for i := range w.msgs {
			if e := &w.msgs[i]; e.dirty {
				c.Messages = append(c.Messages, e.m.detached())
			}
		}
		slices.SortFunc(c.Messages, func(a, b Message) int { return cmp.Compare(a.Seq, b.Seq) })
		c.Session = nil
		if w.record != nil {
			s := *w.record
			c.Session = &s
		}
		return nil
	})
	c.Events = evs
	return c, err
}

// isNilPointer reports whether p is a nil pointer in a non-nil interface,
// whose Type and Session methods would dereference it.
func isNilPointer(p messages.Payload) bool {
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// append commits data as Append does, then runs done, when not nil, at the
// end of the operation.
func (s *Bolt) append(ctx context.Context, id messages.SessionID, data []messages.Payload, done func(w *wtx) error) ([]messages.Event, error) {
	if len(data) == 0 {
		return nil, nil
	}
	for _, p := range data {
		if p == nil || isNilPointer(p) {
			return nil, messages.Errorf(messages.ErrInvalid, "append: nil payload")
		}
		if !messages.IsDurable(p.Type()) {
			return nil, messages.Errorf(messages.ErrInvalid, "append: %s is not a durable event type", p.Type())
		}
		if p.Session() != id {
			return nil, messages.Errorf(messages.ErrInvalid, "append: %s payload names session %q, not %q", p.Type(), p.Session(), id)
		}
		if _, ok := p.(*messages.SessionCreated); ok {
			return nil, messages.Errorf(messages.ErrInvalid, "append: session.created.1 is written only by CreateSession")
		}
	}
	// Envelope identity and time are decided outside the transaction so the
	// operation stays deterministic if its batch is re-run.
	// Payloads are encoded here, in the caller's goroutine, so the single
	// writer only frames them.
	evs := make([]messages.Event, len(data))
	enc := make([][]byte, len(data))
	now := s.opts.Clock().UnixMilli()
	for i, p := range data {
		evs[i] = messages.Event{ID: s.opts.IDs.Event(), Created: now, Type: p.Type(), Data: p}
		b, err := messages.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("persistence: encode %s: %w", p.Type(), err)
		}
		enc[i] = b
	}
	err := s.submit(ctx, func(w *wtx) error {
		last, err := w.lastSeq(id)
		if err != nil {
			return err
		}
		next := last + 1
		for i := range evs {
			evs[i].Durable = &messages.Durable{AggregateID: id, Seq: next + int64(i), Version: messages.VersionOf(evs[i].Type)}
			if err := w.applyData(evs[i], enc[i]); err != nil {
				return err
			}
		}
		if done != nil {
			return done(w)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// Restore appends already-enveloped events (for instance read from another
// store's log) through the same projectors. Each event's seq must be the
// next seq of its Session. Restore exists so replay equivalence can be
// checked and logs can be migrated; it is not a user API.
func (s *Bolt) Restore(ctx context.Context, evs []messages.Event) error {
	return s.submit(ctx, func(w *wtx) error {
		w.restoring = true
		for _, ev := range evs {
			if ev.Durable == nil {
				return messages.Errorf(messages.ErrInvalid, "restore %s: not durable", ev.ID)
			}
			sid := ev.Durable.AggregateID
			next := w.last(sid) + 1
			if ev.Durable.Seq != next {
				return messages.Errorf(messages.ErrInvalid, "restore %s: seq %d, want %d", ev.ID, ev.Durable.Seq, next)
			}
			if err := w.apply(ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// lastSeq returns the Session's last seq, failing when the Session does not
// exist.
func (w *wtx) lastSeq(sid messages.SessionID) (int64, error) { return existing(w.last(sid), sid) }

// last returns the Session's last seq, counting events this operation
// queued for its log row, or -1.
func (w *wtx) last(sid messages.SessionID) int64 {
	for _, l := range w.logs {
		if l.sid == sid {
			return l.last
		}
	}
	if n, ok := w.s.seqs.get(sid); ok {
		return n
	}
	n := lastSeq(&w.v, sid)
	if n >= 0 {
		w.s.seqs.stage(sid, n)
	}
	return n
}

// existingLastSeq returns the Session's last seq, failing when the Session
// does not exist. Every Session's log starts with session.created.1 at seq
// 0 in the transaction that creates its record, so an empty log means no
// Session: one seek answers both questions.
func existingLastSeq(v *view, sid messages.SessionID) (int64, error) {
	return existing(lastSeq(v, sid), sid)
}

// existing returns last, or session.not-found when it is -1 (no log).
func existing(last int64, sid messages.SessionID) (int64, error) {
	if last < 0 {
		return last, messages.Errorf(messages.ErrSessionNotFound, "session %q not found", sid)
	}
	return last, nil
}

// lastSeq returns the Session's last committed seq, or -1.
func lastSeq(v *view, sid messages.SessionID) int64 {
	c := v.cursor(bucketData)
	k, _ := c.SeekLT(prefix(sid, kStream+1)) // the last key before the stream's end
	return streamEndSeq(sid, k)
}

// streamEndSeq returns the seq of k, the last key before the end of
// Session sid's stream, or -1 when k is not one of its stream rows. The
// last row is the last event or the message it created: either way its
// seq is the last seq.
func streamEndSeq(sid messages.SessionID, k []byte) int64 {
	p := prefix(sid, kStream)
	if k == nil || !bytes.HasPrefix(k, p) || len(k) != len(p)+9 {
		return -1
	}
	return streamSeq(k)
}

// memLastSeq answers lastSeq from the memtables alone when they hold any
// of the Session's stream rows, without a bbolt transaction (a runner
// checks its Session's watermark at every step boundary). The newest
// memtable holding one holds the last seq: the log only grows, and an
// operation that rewrites an older message also appends its log row.
func memLastSeq(mems []*memTree, sid messages.SessionID) (int64, bool) {
	pivot := &memEntry{k: append([]byte{dataIndex}, prefix(sid, kStream+1)...)}
	for _, m := range mems {
		var last *memEntry
		m.Descend(pivot, func(e *memEntry) bool {
			last = e
			return false
		})
		if last == nil || last.k[0] != dataIndex {
			continue
		}
		if seq := streamEndSeq(sid, last.k[1:]); seq >= 0 {
			if last.del {
				return -1, false // stream rows are never deleted; let bbolt's view decide
			}
			return seq, true
		}
	}
	return -1, false
}

// apply writes one event to the log and runs its projector.
func (w *wtx) apply(ev messages.Event) error { return w.applyData(ev, nil) }

// applyData is apply with the payload already encoded (see Append).
func (w *wtx) applyData(ev messages.Event, data []byte) error {
	sid := ev.Durable.AggregateID
	// The stored event is needed only until flush frames it into its log
	// row: it goes into the writer's scratch (see wtx.evs).
	start := len(w.evs)
	evs, err := messages.AppendEventData(w.evs, ev, data)
	if err != nil {
		return err
	}
	w.evs = evs
	b := evs[start:len(evs):len(evs)]
	if err := w.logEvent(sid, ev.Durable.Seq, b); err != nil {
		return err
	}
	if err := w.project(ev); err != nil {
		return fmt.Errorf("persistence: project %s@%d (%s): %w", sid, ev.Durable.Seq, ev.Type, err)
	}
	w.touch(sid)
	return nil
}

func (w *wtx) touch(sid messages.SessionID) {
	for _, t := range w.touched {
		if t == sid {
			return
		}
	}
	w.touched = append(w.touched, sid)
}

// derivedID returns the message ID of a row created by an event itself
// (chronological system messages): the event ID's body under msg_. It is a
// function of the stored event, so replay reproduces it.
func derivedID(ev messages.Event) messages.MessageID {
	return messages.MessageID(messages.MessagePrefix + strings.TrimPrefix(string(ev.ID), messages.EventPrefix))
}

// get decodes the value at key of bucket into v; ok is false when absent.
func get(r *view, bucket, key []byte, v any) (bool, error) {
	b := r.get(bucket, key)
	if b == nil {
		return false, nil
	}
	return true, decode(bucket, key, b, v)
}

// decode decodes b, the value at key of bucket, into v.
func decode(bucket, key, b []byte, v any) error {
	if err := messages.Unmarshal(b, v); err != nil {
		return fmt.Errorf("persistence: decode %s/%q: %w", bucket, string(key), err)
	}
	return nil
}

// session loads the Session record or returns session.not-found.
func (w *wtx) session(sid messages.SessionID) (Session, error) {
	return loadSession(&w.v, sid)
}

// exists reports whether Session sid exists without decoding its record:
// most writes only need to know that, and decoding is most of their cost.
func (w *wtx) exists(sid messages.SessionID) error {
	return sessionExists(&w.v, sid)
}

func sessionExists(v *view, sid messages.SessionID) error {
	if v.get(bucketData, prefix(sid, kSession)) == nil {
		return messages.Errorf(messages.ErrSessionNotFound, "session %q not found", sid)
	}
	return nil
}

func loadSession(v *view, sid messages.SessionID) (Session, error) {
	var s Session
	key := prefix(sid, kSession)
	e, b := v.lookup(bucketData, key)
	switch {
	case b == nil:
		return s, messages.Errorf(messages.ErrSessionNotFound, "session %q not found", sid)
	case e != nil && e.session != nil:
		return *e.session, nil
	}
	return s, decode(bucketData, key, b, &s)
}
