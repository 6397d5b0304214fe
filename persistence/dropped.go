package persistence

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/messages"
)

// A repair drops the damaged record and every commit after it. The count
// alone (WALDamage.Intact) does not tell an operator whose work that is,
// so Dropped reads the records that can still be read and says which
// Sessions they wrote to. It only reads the log files: it runs before a
// repair changes them, while Open has refused the store.

// DroppedSession is what the dropped records that could be read hold of
// one Session's log.
type DroppedSession struct {
	ID messages.SessionID
	// FirstSeq and LastSeq are the lowest and highest seq of the events
	// the records hold; Events is how many there are (fewer than the
	// range when a record between them could not be read).
	FirstSeq, LastSeq int64
	Events            int
	// Created reports that seq 0, the event that creates a Session, is
	// among them: the whole Session goes with the dropped commits.
	Created bool
}

// Dropped summarizes what the records a repair drops wrote, as far as
// they can still be read.
type Dropped struct {
	Sessions []DroppedSession // by ID
	// Other counts the writes that are not events of a Session's log: the
	// Session records, messages, indexes and such that went with them.
	Other int
	// Read is how many of the dropped records were read; Unread how many
	// could not be (the damaged record among them, unless only its file's
	// header is damaged). Together they are the damaged record and the
	// Intact after it.
	Read, Unread int
}

// Dropped reads what the records a repair of d would drop wrote, from
// the log files as they are now (read-only; call it before the repair).
// The damaged record cannot be read: its checksum fails, and its head may
// be what is damaged. The whole records after it are, each checked
// against the chain of checksums as recovery checks them. When the file's
// header is what is damaged (d.Header), the file's first record is read
// as it stands, since its checksum starts from the seed the header held,
// and the records after it are checked from there. When the log file is
// missing (d.Missing) or cut short (d.Short) there is nothing to read, and
// the summary is empty.
// A read that fails, or a checked record that does not decode, is an
// error, as is a log that no longer matches d.
func (d *WALDamage) Dropped() (Dropped, error) {
	if d.Missing || d.Short > 0 {
		return Dropped{}, nil
	}
	f, err := os.Open(d.File)
	if err != nil {
		return Dropped{}, fmt.Errorf("persistence: reading the dropped records: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Dropped{}, fmt.Errorf("persistence: reading the dropped records: %w", err)
	}
	// The other file of the pair: its records follow the damaged file's
	// when it is the newer one, and go with them.
	name := d.File + "2"
	if base, ok := strings.CutSuffix(d.File, "-wal2"); ok {
		name = base + "-wal"
	}
	var other io.ReaderAt
	var otherSize int64
	switch o, err := os.Open(name); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return Dropped{}, fmt.Errorf("persistence: reading the dropped records: %w", err)
	default:
		defer o.Close()
		ost, err := o.Stat()
		if err != nil {
			return Dropped{}, fmt.Errorf("persistence: reading the dropped records: %w", err)
		}
		other, otherSize = o, ost.Size()
	}
	out, err := droppedOf(d, f, st.Size(), other, otherSize)
	if err != nil {
		return Dropped{}, fmt.Errorf("persistence: reading the dropped records of %s: %w", d.File, err)
	}
	return out, nil
}

// droppedOf is Dropped on the damaged file f and the other log file o
// (nil when there is none), of the sizes given.
func droppedOf(d *WALDamage, f io.ReaderAt, size int64, o io.ReaderAt, osize int64) (Dropped, error) {
	hf, fok, err := headerAt(f, size)
	if err != nil {
		return Dropped{}, err
	}
	var ho walHeader
	var ook bool
	if o != nil {
		if ho, ook, err = headerAt(o, osize); err != nil {
			return Dropped{}, err
		}
	}
	// Only the records numbered up to the last that recovery counted are
	// the ones it drops.
	limit := d.Record + uint64(max(d.Intact, 0))
	if limit < d.Record {
		limit = math.MaxUint64
	}
	var recs [][]byte
	unchecked := false // recs[0] is the headerless file's first record
	newer := false     // the other file's records come after f's
	next := d.Record   // the number after the last record read from f
	if d.Header {
		body, stored, ok, err := readRecord(f, size, walRecordStart, d.Record)
		if err != nil {
			return Dropped{}, err
		}
		if ok {
			recs, unchecked = append(recs, body[8:]), true
			at := int64(walRecordStart) + walRecordHead + int64(len(body)) - 8
			if recs, next, err = collect(f, size, at, d.Record+1, limit, stored, recs); err != nil {
				return Dropped{}, err
			}
		}
		newer = ook && ho.first > d.Record
	} else {
		if !fok {
			return Dropped{}, fmt.Errorf("%w: its header no longer checks out", errWALCorrupt)
		}
		chain, err := chainAt(f, size, hf, d.Record, d.Offset)
		if err != nil {
			return Dropped{}, err
		}
		// Where the whole records resume, as recovery found them.
		run, err := wholeAfter(f, size, d.Offset, d.Record, chain)
		if err != nil {
			return Dropped{}, err
		}
		if run.n > 0 {
			if recs, next, err = collect(f, size, run.at, run.num, limit, run.chain, recs); err != nil {
				return Dropped{}, err
			}
		}
		newer = ook && ho.gen > hf.gen
	}
	if newer {
		var dmg *WALDamage
		rs, err := readRecords(&readAhead{r: o}, osize, ho.first, ho.seed)
		if err != nil && !errors.As(err, &dmg) {
			return Dropped{}, err
		}
		for i, p := range rs {
			// Numbers f's records took are not counted twice (a log in
			// order has none).
			if n := ho.first + uint64(i); n >= next && n > d.Record && n <= limit {
				recs = append(recs, p)
			}
		}
	}

	out := Dropped{Unread: max(d.Intact, 0) + 1}
	sessions := map[messages.SessionID]*DroppedSession{}
	for i, p := range recs {
		rows, other, err := recordWrites(p)
		if err != nil {
			if i == 0 && unchecked {
				continue // damaged with the header, as far as can be told
			}
			return Dropped{}, err
		}
		out.Read++
		out.Other += other
		for _, r := range rows {
			s := sessions[r.ID]
			if s == nil {
				s = &DroppedSession{ID: r.ID, FirstSeq: r.FirstSeq, LastSeq: r.LastSeq}
				sessions[r.ID] = s
			}
			s.FirstSeq, s.LastSeq, s.Events = min(s.FirstSeq, r.FirstSeq), max(s.LastSeq, r.LastSeq), s.Events+r.Events
			s.Created = s.Created || r.FirstSeq == 0
		}
	}
	out.Unread = max(out.Unread-out.Read, 0)
	for _, s := range sessions {
		out.Sessions = append(out.Sessions, *s)
	}
	slices.SortFunc(out.Sessions, func(a, b DroppedSession) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// headerAt reads the header of a log file of the given size.
func headerAt(r io.ReaderAt, size int64) (walHeader, bool, error) {
	if size < walHeaderLen {
		return walHeader{}, false, nil
	}
	b := make([]byte, walHeaderLen)
	if _, err := r.ReadAt(b, 0); err != nil {
		return walHeader{}, false, err
	}
	h, ok := decodeHeader(b)
	return h, ok, nil
}

// chainAt walks the records of a file with header h up to record want,
// which must be at off, and returns the checksum the record before it
// ends its chain with: the damaged record's own was made from it. The
// records before it are the ones recovery read, so one that is not there
// or does not check out means the log changed since.
func chainAt(r io.ReaderAt, size int64, h walHeader, want uint64, off int64) (uint32, error) {
	ra := &readAhead{r: r}
	chain, at := h.seed, int64(walRecordStart)
	for num := h.first; num < want; num++ {
		body, stored, ok, err := readRecord(ra, size, at, num)
		if err != nil {
			return 0, err
		}
		if !ok || crc32.Update(chain, crcTable, body) != stored {
			return 0, fmt.Errorf("%w: record %d before the damaged one no longer checks out", errWALCorrupt, num)
		}
		chain, at = stored, at+walRecordHead+int64(len(body))-8
	}
	if want < h.first || at != off {
		return 0, fmt.Errorf("%w: record %d is no longer at offset %d", errWALCorrupt, want, off)
	}
	return chain, nil
}

// collect appends to out the payloads of the records from off on,
// numbered from want up to limit, that check out chained from chain, and
// returns the number after the last of them.
func collect(r io.ReaderAt, size, off int64, want, limit uint64, chain uint32, out [][]byte) ([][]byte, uint64, error) {
	ra := &readAhead{r: r}
	for ; want <= limit; want++ {
		body, stored, ok, err := readRecord(ra, size, off, want)
		if err != nil || !ok {
			return out, want, err
		}
		if crc32.Update(chain, crcTable, body) != stored {
			return out, want, nil
		}
		out, chain = append(out, body[8:]), stored
		off += walRecordHead + int64(len(body)) - 8
		if want == math.MaxUint64 {
			return out, want, nil
		}
	}
	return out, want, nil
}

// recordWrites returns what a record payload writes: the events of each
// log row (one entry per row, a Session possibly more than once) and how
// many other writes it makes. A payload that is not exactly well-formed
// writes, or holds a log row that is not, is an error.
func recordWrites(p []byte) (rows []DroppedSession, other int, err error) {
	err = decodeRecord(p, func(op byte, bucket, key, val []byte) error {
		if op != recPut || !bytes.Equal(bucket, bucketData) || !isLogRow(key) {
			other++
			return nil
		}
		r := DroppedSession{ID: messages.SessionID(key[:len(key)-11]), LastSeq: streamSeq(key)}
		if err := logRowEvents(val, r.LastSeq, func(seq int64, _ []byte) error {
			if r.Events == 0 {
				r.FirstSeq = seq
			}
			r.Events++
			return nil
		}); err != nil {
			return fmt.Errorf("%w: %s: %w", errWALCorrupt, r.ID, err)
		}
		rows = append(rows, r)
		return nil
	})
	return rows, other, err
}
