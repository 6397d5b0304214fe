package persistence

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/sessiond/sessiond/messages"
)

// A log row holds the events one operation appended to one Session, under
// the key of its last seq (streamKey(sid, last, rLog)): a step's start,
// fragments and tool call, or its settlements and end, are one row rather
// than one per event. Every event used to be its own row: a key to insert
// in the memtable, to write into bbolt at a flush and to walk past when
// reading messages, four or five of them per step.
//
//	row:   uvarint count | count × (uvarint length | stored event)
//
// The events are in seq order and contiguous, so the i-th has seq
// last-count+1+i and readers skip events without decoding them.

// encodeLogRow frames stored events as one log row.
func encodeLogRow(evs [][]byte) []byte {
	return appendLogRow(make([]byte, 0, logRowLen(evs)), evs)
}

// logRowLen is the length of the log row of evs.
func logRowLen(evs [][]byte) int {
	n := uvarintLen(uint64(len(evs)))
	for _, e := range evs {
		n += uvarintLen(uint64(len(e))) + len(e)
	}
	return n
}

func appendLogRow(b []byte, evs [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(evs)))
	for _, e := range evs {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	return b
}

// uvarintLen is the length of x as a uvarint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// logRowEvents calls fn with the seq and stored bytes of each event of a
// log row whose last event is last, refusing rows that are not exactly
// well-formed frames.
func logRowEvents(row []byte, last int64, fn func(seq int64, ev []byte) error) error {
	count, k := binary.Uvarint(row)
	if k <= 0 || count == 0 || count > uint64(len(row)) || int64(count) > last+1 {
		return fmt.Errorf("persistence: log row %d: bad event count", last)
	}
	p := row[k:]
	for seq := last - int64(count) + 1; seq <= last; seq++ {
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return fmt.Errorf("persistence: log row %d: event %d is cut short", last, seq)
		}
		if err := fn(seq, p[k:k+int(n)]); err != nil {
			return err
		}
		p = p[k+int(n):]
	}
	if len(p) != 0 {
		return fmt.Errorf("persistence: log row %d: %d bytes after its events", last, len(p))
	}
	return nil
}

// scanLog calls fn with the stored bytes of the Session's events with seq
// > after, at most limit of them, in order, and reports whether more
// remain.
func scanLog(v *view, sid messages.SessionID, after int64, limit int, fn func(ev []byte) error) (bool, error) {
	n := 0
	return streamRows(v, sid, after, rLog, func(k, row []byte) error {
		return logRowEvents(row, streamSeq(k), func(seq int64, ev []byte) error {
			if seq <= after {
				return nil
			}
			if n == limit {
				return errStop
			}
			n++
			return fn(ev)
		})
	})
}

// lastEvent returns the stored bytes of the Session's event at seq last,
// the last of its log.
func lastEvent(v *view, sid messages.SessionID, last int64) ([]byte, error) {
	row := v.get(bucketData, streamKey(sid, last, rLog))
	if row == nil {
		return nil, messages.Errorf(messages.ErrInternal, "persistence: no log row ends at %s@%d", sid, last)
	}
	var out []byte
	err := logRowEvents(row, last, func(seq int64, ev []byte) error {
		out = ev
		return nil
	})
	return out, err
}

// pendingLog is an operation's events for one Session, written as one log
// row when the operation ends.
type pendingLog struct {
	sid  messages.SessionID
	last int64
	evs  [][]byte
}

// logEvent queues an event's stored bytes for its Session's log row.
func (w *wtx) logEvent(sid messages.SessionID, seq int64, b []byte) error {
	for i := range w.logs {
		if l := &w.logs[i]; l.sid == sid {
			if seq != l.last+1 {
				return messages.Errorf(messages.ErrInvalid, "persistence: %s@%d appended after seq %d", sid, seq, l.last)
			}
			l.last, l.evs = seq, append(l.evs, b)
			return nil
		}
	}
	if len(w.logs) < cap(w.logs) {
		// An entry the writer's earlier operations used: reuse its slice.
		w.logs = w.logs[:len(w.logs)+1]
		l := &w.logs[len(w.logs)-1]
		l.sid, l.last, l.evs = sid, seq, append(l.evs[:0], b)
		return nil
	}
	w.logs = append(w.logs, pendingLog{sid: sid, last: seq, evs: [][]byte{b}})
	return nil
}

// flushLog writes the queued log rows.
func (w *wtx) flushLog() error {
	for _, l := range w.logs {
		// The row is framed straight into the memtable's bytes.
		k, v := w.s.mem.kv(dataIndex, streamKey(l.sid, l.last, rLog), logRowLen(l.evs))
		w.insert(dataIndex, k, appendLogRow(v, l.evs))
		w.s.seqs.stage(l.sid, l.last)
	}
	w.logs = w.logs[:0]
	return nil
}
