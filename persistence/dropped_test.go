package persistence

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// droppedStore fills a store that never flushes with two Sessions, one
// log record per commit, and returns a copy of its files as a crash
// leaves them, the name of the log file holding the records, the record
// of a's fifth event (seq 4) and the IDs. The seven commits after that
// record are a's seq 5, b's creation, b's seqs 1 and 2, a's 6, b's 3 and
// a's 7: what a repair that drops that record drops with it.
func droppedStore(t *testing.T) (path, name string, num uint64, a, b messages.SessionID) {
	t.Helper()
	st := openTemp(t, noFlush)
	admit := func(sid messages.SessionID) {
		t.Helper()
		if _, _, err := st.Admit(context.Background(), Admission{SessionID: sid, Prompt: messages.Prompt{Text: "prompt"}}); err != nil {
			t.Fatal(err)
		}
	}
	a = newSession(t, st)
	for range 3 {
		admit(a)
	}
	num = st.wal.next
	admit(a)
	admit(a)
	b = newSession(t, st)
	admit(b)
	admit(b)
	admit(a)
	admit(b)
	admit(a)
	path = filepath.Join(t.TempDir(), "s.db")
	copyStore(t, st.db.Path(), path)
	return path, path + []string{"-wal", "-wal2"}[st.wal.cur], num, a, b
}

// damageFile changes the bytes of file name with change.
func damageFile(t *testing.T, name string, change func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	change(b)
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sortedSessions returns ss sorted by ID, as Dropped lists them.
func sortedSessions(ss ...DroppedSession) []DroppedSession {
	return slices.SortedFunc(slices.Values(ss), func(x, y DroppedSession) int { return cmp.Compare(x.ID, y.ID) })
}

// TestDroppedRecords: a repair drops the damaged record and every commit
// after it, and said only how many. Dropped names the Sessions those
// commits wrote to, the seqs of their events and the other writes, read
// from the whole records after the damaged one, whichever part of it is
// damaged; a Session created in them is marked so. Each commit here
// writes one event and two other rows (the Session record and an index
// entry).
func TestDroppedRecords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte, off int64)
		want   func(a, b messages.SessionID) Dropped
	}{
		{"its payload", func(b []byte, off int64) { b[off+walRecordHead+3] ^= 0x40 }, func(a, b messages.SessionID) Dropped {
			return Dropped{Sessions: sortedSessions(
				DroppedSession{ID: a, FirstSeq: 5, LastSeq: 7, Events: 3},
				DroppedSession{ID: b, FirstSeq: 0, LastSeq: 3, Events: 4, Created: true},
			), Other: 14, Read: 7, Unread: 1}
		}},
		{"its length", func(b []byte, off int64) { b[off+1] ^= 0x01 }, func(a, b messages.SessionID) Dropped {
			return Dropped{Sessions: sortedSessions(
				DroppedSession{ID: a, FirstSeq: 5, LastSeq: 7, Events: 3},
				DroppedSession{ID: b, FirstSeq: 0, LastSeq: 3, Events: 4, Created: true},
			), Other: 14, Read: 7, Unread: 1}
		}},
		{"its checksum", func(b []byte, off int64) { b[off+4] ^= 0x01 }, func(a, b messages.SessionID) Dropped {
			return Dropped{Sessions: sortedSessions(
				DroppedSession{ID: a, FirstSeq: 5, LastSeq: 7, Events: 3},
				DroppedSession{ID: b, FirstSeq: 0, LastSeq: 3, Events: 4, Created: true},
			), Other: 14, Read: 7, Unread: 1}
		}},
		{"a lost sector", func(b []byte, off int64) {
			// From the end of the damaged record's payload through the
			// next record's head: that record and the one after it (whose
			// checksum chains from the lost one) cannot be read.
			next := off + walRecordHead + int64(binary.LittleEndian.Uint32(b[off:]))
			clear(b[next-4 : next+walRecordHead])
		}, func(a, b messages.SessionID) Dropped {
			return Dropped{Sessions: sortedSessions(
				DroppedSession{ID: a, FirstSeq: 6, LastSeq: 7, Events: 2},
				DroppedSession{ID: b, FirstSeq: 1, LastSeq: 3, Events: 3},
			), Other: 10, Read: 5, Unread: 3}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, name, num, a, b := droppedStore(t)
			damageFile(t, name, func(b []byte) { tc.damage(b, recordOffset(t, b, num)) })
			_, err := Open(path, noFlush)
			var d *WALDamage
			if !errors.As(err, &d) || d.Record != num || d.Intact != 7 {
				t.Fatalf("open: %v, want record %d damaged with 7 after it", err, num)
			}
			before, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.Dropped()
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.want(a, b); !reflect.DeepEqual(got, want) {
				t.Errorf("dropped %+v\nwant    %+v", got, want)
			}
			if after, _ := os.ReadFile(name); !bytes.Equal(after, before) {
				t.Error("reading what is dropped changed the log")
			}
		})
	}
}

// TestDroppedWithTheHeader: when the header of the file holding every
// record is damaged, all of them are dropped, the first read as it
// stands (its checksum starts from the header's seed); both Sessions
// were created in them.
func TestDroppedWithTheHeader(t *testing.T) {
	path, name, _, a, b := droppedStore(t)
	damageFile(t, name, func(b []byte) { b[9] ^= 0x40 })
	_, err := Open(path, noFlush)
	var d *WALDamage
	if !errors.As(err, &d) || !d.Header || d.Record != 1 || d.Intact != 11 {
		t.Fatalf("open: %v, want the header damaged before record 1, with 11 after it", err)
	}
	got, err := d.Dropped()
	want := Dropped{Sessions: sortedSessions(
		DroppedSession{ID: a, FirstSeq: 0, LastSeq: 7, Events: 8, Created: true},
		DroppedSession{ID: b, FirstSeq: 0, LastSeq: 3, Events: 4, Created: true},
	), Other: 24, Read: 12}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("dropped %+v, %v\nwant    %+v", got, err, want)
	}
	// The first record cannot be checked without the header: when it does
	// not decode either, it was damaged with it, and is left unread.
	damageFile(t, name, func(b []byte) { b[walRecordStart+walRecordHead] = 0xff })
	if got, err := d.Dropped(); err != nil || got.Read != 11 || got.Unread != 1 {
		t.Errorf("with the first record damaged too: %+v, %v; want 11 read and 1 unread", got, err)
	}
}

// TestDroppedNothingToRead: a missing log file leaves nothing to read;
// a log file that cannot be read, or that changed since its damage was
// found, is an error rather than an empty summary.
func TestDroppedNothingToRead(t *testing.T) {
	if got, err := (&WALDamage{File: filepath.Join(t.TempDir(), "s.db-wal"), Record: 3, Missing: true, Gen: 2}).Dropped(); err != nil || !reflect.DeepEqual(got, Dropped{}) {
		t.Errorf("a missing log file: %+v, %v; want nothing", got, err)
	}
	if _, err := (&WALDamage{File: filepath.Join(t.TempDir(), "s.db-wal"), Record: 3, Offset: walRecordStart, Intact: 4}).Dropped(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a log file that is not there: %v, want an error", err)
	}
	path, name, num, _, _ := droppedStore(t)
	damageFile(t, name, func(b []byte) { b[recordOffset(t, b, num)+walRecordHead+3] ^= 0x40 })
	_, err := Open(path, noFlush)
	var d *WALDamage
	if !errors.As(err, &d) {
		t.Fatalf("open: %v, want damage", err)
	}
	moved := *d
	moved.Offset += 8
	if _, err := moved.Dropped(); !errors.Is(err, errWALCorrupt) {
		t.Errorf("damage at an offset where no record starts: %v, want errWALCorrupt", err)
	}
	damageFile(t, name, func(b []byte) { b[walRecordStart+walRecordHead+3] ^= 0x40 })
	if _, err := d.Dropped(); !errors.Is(err, errWALCorrupt) {
		t.Errorf("a record before the damaged one damaged since: %v, want errWALCorrupt", err)
	}
}

// TestDroppedAcrossBothFiles: a damaged record in the older log file,
// while the flush that started the newer one had not completed, drops the
// newer file's records too; they are read with the older file's.
func TestDroppedAcrossBothFiles(t *testing.T) {
	put := func(p []byte, bucket, key, val []byte) []byte {
		p = append(p, recPut, bucketIndex(bucket))
		p = append(binary.AppendUvarint(p, uint64(len(key))), key...)
		return append(binary.AppendUvarint(p, uint64(len(val))), val...)
	}
	row := func(p []byte, sid messages.SessionID, seq int64) []byte {
		return put(p, bucketData, streamKey(sid, seq, rLog), encodeLogRow([][]byte{{0x80}}))
	}
	path := filepath.Join(t.TempDir(), "s.db")
	w := startedWAL(t, path)
	defer w.close()
	for n := uint64(11); n <= 18; n++ {
		if n == 17 {
			if err := w.start(0, 17, 2); err != nil {
				t.Fatal(err)
			}
		} else if n == 11 {
			if err := w.start(1, 11, 1); err != nil {
				t.Fatal(err)
			}
		}
		p := row(nil, "ses_a", int64(n-11))
		if n == 18 {
			p = put(row(p, "ses_b", 0), bucketIDs, []byte("msg_1"), []byte{0x80})
		}
		if _, err := w.append(p); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path + "-wal2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.files[1].f.WriteAt([]byte{b[recordOffset(t, b, 12)+walRecordHead+3] ^ 0x40}, recordOffset(t, b, 12)+walRecordHead+3); err != nil {
		t.Fatal(err)
	}
	_, _, err = w.recover(10, 0)
	var d *WALDamage
	if !errors.As(err, &d) || d.Record != 12 || d.Intact != 4+2 || d.File != path+"-wal2" {
		t.Fatalf("recover: %v, want record 12 of %s-wal2 damaged with 6 after it", err, path)
	}
	got, err := d.Dropped()
	want := Dropped{Sessions: []DroppedSession{
		{ID: "ses_a", FirstSeq: 2, LastSeq: 7, Events: 6},
		{ID: "ses_b", FirstSeq: 0, LastSeq: 0, Events: 1, Created: true},
	}, Other: 1, Read: 6, Unread: 1}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("dropped %+v, %v\nwant    %+v", got, err, want)
	}
}

// FuzzDropped feeds arbitrary log files and damage to the reader of what
// a repair drops: the log is on the disk and may be anything. It must not
// panic, read past the files or count a record twice, and what it returns
// must be well-formed.
func FuzzDropped(f *testing.F) {
	path := filepath.Join(f.TempDir(), "s.db")
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		f.Fatal(err)
	}
	row := func(sid string, seq int64) []byte {
		k := streamKey(messages.SessionID(sid), seq, rLog)
		v := encodeLogRow([][]byte{{0x80}, {0x81}})
		p := binary.AppendUvarint([]byte{recPut, dataIndex}, uint64(len(k)))
		p = binary.AppendUvarint(append(p, k...), uint64(len(v)))
		return append(p, v...)
	}
	_ = w.start(1, 1, 7)
	for n := range 7 {
		_, _ = w.append(row("ses_a", int64(2*n+1)))
	}
	_ = w.start(0, 8, 9)
	_, _ = w.append(row("ses_b", 1))
	_, _ = w.append([]byte{recDel, 1, 1, 'k'})
	older, _ := os.ReadFile(path + "-wal2")
	newer, _ := os.ReadFile(path + "-wal")
	w.close()
	older, newer = older[:walRecordStart+512], newer[:walRecordStart+128]
	f.Add(older, newer, uint64(2), int64(walRecordStart+60), 7, false)
	f.Add(older, newer, uint64(1), int64(0), 8, true)
	f.Add(newer, older, uint64(8), int64(walRecordStart), 1, false)
	f.Fuzz(func(t *testing.T, fb, ob []byte, record uint64, off int64, intact int, header bool) {
		record, intact = record%(1<<32), intact%(1<<16)
		d := &WALDamage{Record: record, Offset: off, Intact: intact, Header: header}
		var o io.ReaderAt
		if len(ob) > 0 {
			o = bytes.NewReader(ob)
		}
		got, err := droppedOf(d, bytes.NewReader(fb), int64(len(fb)), o, int64(len(ob)))
		if err != nil {
			return
		}
		if got.Read+got.Unread != max(intact, 0)+1 {
			t.Fatalf("%d records read and %d not, of the damaged one and %d after it", got.Read, got.Unread, intact)
		}
		for i, s := range got.Sessions {
			if s.Events < 1 || s.FirstSeq > s.LastSeq || s.Created != (s.FirstSeq == 0) || i > 0 && got.Sessions[i-1].ID >= s.ID {
				t.Fatalf("session %d of %+v", i, got.Sessions)
			}
		}
	})
}
