package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// recordOffset returns the offset of record num in a log file's bytes,
// walking the record heads from the first.
func recordOffset(t *testing.T, b []byte, num uint64) int64 {
	t.Helper()
	for off := int64(walRecordStart); off+walRecordHead <= int64(len(b)); {
		n := int64(binary.LittleEndian.Uint32(b[off:]))
		switch got := binary.LittleEndian.Uint64(b[off+8:]); {
		case got == num:
			return off
		case got > num || n == 0:
			t.Fatalf("no record %d in the log (found %d at %d)", num, got, off)
		}
		off += walRecordHead + n
	}
	t.Fatalf("no record %d in the log", num)
	return 0
}

// damagedCopy admits ten prompts to a Session, one log record each, and
// returns a copy of the store as a crash after the tenth leaves it, with
// record rec of the ten (0-based) damaged in its payload, and the state
// the store had before that record.
func damagedCopy(t *testing.T, rec int) (path string, num uint64, before map[string]map[string]string) {
	t.Helper()
	path, num, _, before = damagedCopyWith(t, rec, func(b []byte, off int64) {
		b[off+walRecordHead+3] ^= 0x40 // a bit flipped on the disk
	})
	return path, num, before
}

// damagedCopyWith is damagedCopy with record rec damaged by damage, given
// the log file's bytes and the record's offset, which it also returns.
func damagedCopyWith(t *testing.T, rec int, damage func(b []byte, off int64)) (path string, num uint64, off int64, before map[string]map[string]string) {
	t.Helper()
	st := openTemp(t, noFlush)
	sid := newSession(t, st)
	for i := range 10 {
		if i == rec {
			before, num = dump(t, st), st.wal.next
		}
		if _, _, err := st.Admit(context.Background(), Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprintf("prompt %d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	path = filepath.Join(t.TempDir(), "s.db")
	copyStore(t, st.db.Path(), path)
	name := path + []string{"-wal", "-wal2"}[st.wal.cur]
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	off = recordOffset(t, b, num)
	damage(b, off)
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, num, off, before
}

// TestDamagedLogRecordIsRefused: a record in the middle of the log that
// fails its checksum, with whole records after it, was acknowledged before
// it went bad (walInFlight). Open refuses the store, naming the record,
// rather than dropping it and every commit after it as the end of the log;
// RepairWAL recovers up to it, says what it dropped, and the repaired
// store then opens as any other and takes commits.
func TestDamagedLogRecordIsRefused(t *testing.T) {
	path, num, before := damagedCopy(t, 10-1-walInFlight) // walInFlight whole records after it
	_, err := Open(path, noFlush)
	var d *WALDamage
	if !errors.As(err, &d) || !errors.Is(err, ErrWALDamaged) {
		t.Fatalf("open of a damaged log: %v, want a *WALDamage", err)
	}
	if d.Record != num || d.Intact != walInFlight || !strings.HasSuffix(d.File, "-wal") && !strings.HasSuffix(d.File, "-wal2") {
		t.Fatalf("damage %+v, want record %d with the %d after it whole", d, num, walInFlight)
	}
	if b, _ := os.ReadFile(d.File); recordOffset(t, b, num) != d.Offset {
		t.Errorf("damage at offset %d, the record is at %d", d.Offset, recordOffset(t, b, num))
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("record %d", num)) || !strings.Contains(msg, fmt.Sprintf("%d records after it", walInFlight)) {
		t.Errorf("error %q does not say which record or how many follow", msg)
	}

	var logs bytes.Buffer
	logger := zerolog.New(&logs)
	opts := noFlush
	opts.RepairWAL, opts.Logger = true, logger
	st := openAndCheck(t, path, opts)
	sameState(t, "repaired", dump(t, st), before)
	if !strings.Contains(logs.String(), "dropped a damaged record") || !strings.Contains(logs.String(), fmt.Sprintf(`"dropped_after":%d`, walInFlight)) {
		t.Errorf("repair logged %q", logs.String())
	}
	// The Session goes on from the last commit kept, without a hole.
	var sid messages.SessionID
	for _, s := range mustList(t, st) {
		sid = s.ID
	}
	a, _, err := st.Admit(context.Background(), Admission{SessionID: sid, Prompt: messages.Prompt{Text: "after the repair"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(10 - walInFlight); a.AdmittedSeq != want { // seq 0 created it, then the admissions kept
		t.Errorf("first admission after the repair at seq %d, want %d", a.AdmittedSeq, want)
	}
	want := dump(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	sameState(t, "reopened after the repair", dump(t, openAndCheck(t, path, noFlush)), want)
}

// mustList returns every Session of st.
func mustList(t *testing.T, st *Bolt) []Session {
	t.Helper()
	list, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestTornRecordBeforeTheLastIsTheEnd: a crash can leave the last two
// records written but not synced, and the disk may keep the second and
// tear the first. Neither was acknowledged: the log ends before them, and
// the store opens.
func TestTornRecordBeforeTheLastIsTheEnd(t *testing.T) {
	path, _, before := damagedCopy(t, 8)
	sameState(t, "torn next-to-last record", dump(t, openAndCheck(t, path, noFlush)), before)
}

// TestDamageInTheOlderLogFile: every record of the older log file was
// synced before the newer one started, so one it lacks or that went bad was
// acknowledged, even with nothing after it in that file. Recovery refuses;
// a repair keeps the records before it and drops the rest, the newer
// file's included (they would follow a hole).
func TestDamageInTheOlderLogFile(t *testing.T) {
	for _, tc := range []struct {
		name          string
		older         int    // records 11, 12, ... in the older file
		damage        uint64 // record whose payload is flipped
		intact        int
		repairedUpTo  uint64
		repairedCount int
	}{
		{"in the middle", 3, 12, 1 + 2, 11, 1},
		{"its last record", 3, 13, 2, 12, 2},
		{"followed by enough to tell", 2 + walInFlight, 12, walInFlight + 2, 11, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			w := startedWAL(t, path) // file 1 from record 1
			for n := 1; n <= 3; n++ {
				if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
					t.Fatal(err)
				}
			}
			// Renumber: records 11 on in file 1, then two in file 0.
			if err := w.start(1, 11, 1); err != nil {
				t.Fatal(err)
			}
			next := 11 + tc.older
			for n := 11; n < next; n++ {
				if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.start(0, uint64(next), 2); err != nil {
				t.Fatal(err)
			}
			for n := next; n < next+2; n++ {
				if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path + "-wal2")
			if err != nil {
				t.Fatal(err)
			}
			off := recordOffset(t, b, tc.damage)
			if _, err := w.files[1].f.WriteAt([]byte{b[off+walRecordHead] ^ 1}, off+walRecordHead); err != nil {
				t.Fatal(err)
			}
			_, _, err = w.recover(10, 0)
			var d *WALDamage
			if !errors.As(err, &d) || d.Record != tc.damage || d.Offset != off || d.Intact != tc.intact || d.File != path+"-wal2" {
				t.Fatalf("recover: %v (%+v), want record %d at %d damaged with %d whole after it", err, d, tc.damage, off, tc.intact)
			}
			w.repair = true
			replay, last, err := w.recover(10, 0)
			if err != nil || last != tc.repairedUpTo || len(replay) != tc.repairedCount || w.damage == nil || w.damage.Intact != tc.intact {
				t.Fatalf("repair: %d records up to %d, %v, damage %+v; want %d up to %d", len(replay), last, err, w.damage, tc.repairedCount, tc.repairedUpTo)
			}
		})
	}
}

// TestWriterWritesOnlyWhileTheSyncerWaits pins what the damage check
// (walInFlight) and the log's error reporting rest on. The writer runs an
// operation that arrives while a batch syncs into its open batch, but
// writes no record until the syncer has answered that batch: at most one
// record is ever unsynced, and no write or invalidating fdatasync of the
// log runs beside the syncer's fdatasync (Linux reports a writeback error
// to one fdatasync of a file only, so a second one running beside it could
// take the error the first needed). Once the sync ends, the open batch
// goes out at once.
func TestWriterWritesOnlyWhileTheSyncerWaits(t *testing.T) {
	var writes atomic.Int64
	writeFault = func(f *os.File, b []byte, off int64) error {
		writes.Add(1)
		_, err := f.WriteAt(b, off)
		return err
	}
	defer func() { writeFault = nil }()
	st := openTemp(t, noFlush)
	ctx := context.Background()
	held, release := holdNextSync(t)
	t.Cleanup(release) // before the store closes, should the test fail first
	from := writes.Load()
	first := make(chan error, 1)
	go func() { first <- st.submit(ctx, putMeta("first", "1")) }()
	<-held // its record is written, its fdatasync held
	ran := make(chan struct{})
	second := make(chan error, 1)
	go func() {
		second <- st.submit(ctx, func(w *wtx) error {
			close(ran)
			return putMeta("second", "2")(w)
		})
	}()
	<-ran
	// Polling: the writer, done with the operation, waits for the syncer
	// or for more work.
	for deadline := time.Now().Add(10 * time.Second); !writerWaits(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the writer never waited")
		}
	}
	if n := writes.Load() - from; n != 1 {
		t.Fatalf("%d records written while the first one synced, want only it", n)
	}
	select {
	case err := <-second:
		t.Fatalf("the second operation was answered (%v) before its record was written", err)
	default:
	}
	release()
	for _, c := range []chan error{first, second} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Load() - from; n != 2 {
		t.Fatalf("%d records written, want 2", n)
	}
}

// writerWaits reports whether the store's writer goroutine is blocked in
// a select: waiting for work, or for the syncer with a batch open.
func writerWaits() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		head := bytes.SplitN(g, []byte("\n"), 2)[0]
		if bytes.Contains(g, []byte("persistence.(*Bolt).writer(")) && bytes.HasPrefix(head, []byte("goroutine ")) {
			return bytes.Contains(head, []byte("[select"))
		}
	}
	return false
}

// TestDamagedLogHeaderIsRefused: a log file's header is synced before any
// record goes into it, so a file without a valid header that holds a
// record bbolt lacks had its header damaged after those records were
// acknowledged. Taken for a torn header, the file was started over and
// every commit in it dropped without a word (sessiond repair even said the
// store opened cleanly, and did it). Open refuses it; RepairWAL drops its
// records, and the repaired store opens cleanly again.
func TestDamagedLogHeaderIsRefused(t *testing.T) {
	st := openTemp(t, noFlush)
	before := dump(t, st)
	sid := newSession(t, st)
	for i := range 10 {
		if _, _, err := st.Admit(context.Background(), Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprintf("prompt %d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, st.db.Path(), path)
	name := path + []string{"-wal", "-wal2"}[st.wal.cur]
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[9] ^= 0x40 // a bit of its generation flipped on the disk
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, noFlush)
	var d *WALDamage
	if !errors.As(err, &d) || !d.Header || d.File != name || d.Record != 1 || d.Intact != 10 {
		t.Fatalf("open with a damaged log header: %v (%+v), want the header of %s damaged, record 1 and 10 after it", err, d, name)
	}
	if msg := err.Error(); !strings.Contains(msg, "header is damaged") || !strings.Contains(msg, "record 1 and 10 more") {
		t.Errorf("error %q does not say what is damaged", msg)
	}
	opts := noFlush
	opts.RepairWAL = true
	repaired := openAndCheck(t, path, opts)
	sameState(t, "repaired", dump(t, repaired), before)
	if err := repaired.Close(); err != nil {
		t.Fatal(err)
	}
	sameState(t, "reopened after the repair", dump(t, openAndCheck(t, path, noFlush)), before)
}

// TestDamagedLogHeaderOfEitherFile: the damaged header may be the newer
// file's, whose records follow the older file's, or the older file's,
// whose records the newer file's follow; a torn header over an earlier
// run's records, which bbolt has, is no damage.
func TestDamagedLogHeaderOfEitherFile(t *testing.T) {
	for _, tc := range []struct {
		name         string
		file         int // whose header is flipped: 1 is the older (11-13), 0 the newer (14-15)
		applied      uint64
		record       uint64
		intact       int
		repairedUpTo uint64
		repaired     int
	}{
		{"the newer file", 0, 10, 14, 1, 13, 3},
		{"the older file", 1, 10, 11, 2 + 2, 10, 0},
		{"the older file, flushed", 1, 13, 0, 0, 15, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			w := startedWAL(t, path)
			if err := w.start(1, 11, 1); err != nil {
				t.Fatal(err)
			}
			for n := 11; n <= 13; n++ {
				if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.start(0, 14, 2); err != nil {
				t.Fatal(err)
			}
			for n := 14; n <= 15; n++ {
				if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.files[tc.file].f.WriteAt([]byte{0xff}, 9); err != nil {
				t.Fatal(err)
			}
			replay, last, err := w.recover(tc.applied, 0)
			if tc.record == 0 {
				if err != nil || last != tc.repairedUpTo || len(replay) != tc.repaired {
					t.Fatalf("recover: %d records up to %d, %v; want %d up to %d", len(replay), last, err, tc.repaired, tc.repairedUpTo)
				}
				return
			}
			var d *WALDamage
			if !errors.As(err, &d) || !d.Header || d.Record != tc.record || d.Intact != tc.intact || d.File != w.files[tc.file].f.Name() {
				t.Fatalf("recover: %v (%+v), want the header before record %d damaged with %d after it", err, d, tc.record, tc.intact)
			}
			w.repair = true
			replay, last, err = w.recover(tc.applied, 0)
			if err != nil || last != tc.repairedUpTo || len(replay) != tc.repaired || w.damage == nil || !w.damage.Header {
				t.Fatalf("repair: %d records up to %d, %v, damage %+v; want %d up to %d", len(replay), last, err, w.damage, tc.repaired, tc.repairedUpTo)
			}
			// The log starts over as Open starts it; the next recovery
			// finds it whole.
			if err := w.start(w.older(), last+1, 3); err != nil {
				t.Fatal(err)
			}
			w.repair, w.damage = false, nil
			if _, got, err := w.recover(last, 0); err != nil || got != last {
				t.Fatalf("recover after the repair: up to %d, %v; want %d", got, err, last)
			}
		})
	}
}

// TestDamagedLogRecordHead: damage to a record's head (its length, number
// or checksum), or a lost sector over a record's end and the next one's
// head, ended the log as a torn record does, and every acknowledged commit
// after it was dropped without a word. The records after it are found by
// their numbers and checked out as for damage to a payload; damage that
// leaves fewer than walInFlight whole records after it is still a torn
// end.
func TestDamagedLogRecordHead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rec    int // of the ten admissions, 0-based
		damage func(b []byte, off int64)
		record int // the admission refused as damaged; -1: the log ends before rec
		intact int
	}{
		{"its length", 4, func(b []byte, off int64) { b[off+1] ^= 0x10 }, 4, 5},
		{"its length zeroed", 4, func(b []byte, off int64) { copy(b[off:off+4], make([]byte, 4)) }, 4, 5},
		{"its number", 4, func(b []byte, off int64) { b[off+8] ^= 0x01 }, 4, 5},
		{"its checksum", 4, func(b []byte, off int64) { b[off+5] ^= 0x01 }, 4, 5},
		{"its whole head", 4, func(b []byte, off int64) { copy(b[off:off+walRecordHead], make([]byte, walRecordHead)) }, 4, 5},
		{"a sector over the head after it", 3, func(b []byte, off int64) {
			next := off + walRecordHead + int64(binary.LittleEndian.Uint32(b[off:]))
			copy(b[next-8:next+walRecordHead], make([]byte, walRecordHead+8))
		}, 3, 6},
		{"its head, too near the end to tell", 9 - walInFlight + 1, func(b []byte, off int64) { b[off+1] ^= 0x10 }, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, num, off, before := damagedCopyWith(t, tc.rec, tc.damage)
			if tc.record < 0 {
				sameState(t, "torn end", dump(t, openAndCheck(t, path, noFlush)), before)
				return
			}
			_, err := Open(path, noFlush)
			var d *WALDamage
			if !errors.As(err, &d) || d.Record != num || d.Offset != off || d.Intact != tc.intact {
				t.Fatalf("open: %v (%+v), want record %d at %d damaged, %d after it", err, d, num, off, tc.intact)
			}
			opts := noFlush
			opts.RepairWAL = true
			sameState(t, "repaired", dump(t, openAndCheck(t, path, opts)), before)
		})
	}
}

// TestMissingLogIsRefused: a store that did not stop cleanly needs the log
// file its last run was writing. Deleted or emptied since (by hand, or by
// a copy of the database file alone), the log would seem to end at the
// other file's end, and every commit since the last flush would be gone
// without a word. Open refuses it and changes nothing; with the file put
// back it opens whole, and a repair goes on without it.
func TestMissingLogIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone func(t *testing.T, path string) // what happens to the copy's log
	}{
		{"both files deleted", func(t *testing.T, path string) {
			for _, suffix := range []string{"-wal", "-wal2"} {
				if err := os.Remove(path + suffix); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"the newer file deleted", func(t *testing.T, path string) {
			if err := os.Remove(path + "-wal"); err != nil {
				t.Fatal(err)
			}
		}},
		{"the newer file emptied", func(t *testing.T, path string) {
			if err := os.Truncate(path+"-wal", 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := filepath.Join(t.TempDir(), "s.db")
			st, err := Open(from, noFlush)
			if err != nil {
				t.Fatal(err)
			}
			newSession(t, st)
			if got := logGen(t, st); got != st.wal.gen {
				t.Fatalf("a new store's database file names log generation %d, its log is at %d", got, st.wal.gen)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				st = openAndCheck(t, from, noFlush)
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// Reopened, the store's log runs on in -wal (generation 4)
			// beside -wal2 (generation 3, all in bbolt).
			st = openAndCheck(t, from, noFlush)
			if st.wal.cur != 0 || st.wal.gen != 4 {
				t.Fatalf("log in file %d, generation %d; the test expects file 0, generation 4", st.wal.cur, st.wal.gen)
			}
			before, first := dump(t, st), st.wal.next
			populate(t, st, 2, 10)
			after := dump(t, st)
			path := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, from, path) // killed here
			saved, err := os.ReadFile(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			tc.gone(t, path)
			files := dirFiles(t, filepath.Dir(path))

			_, err = Open(path, noFlush)
			if got := dirFiles(t, filepath.Dir(path)); !maps.Equal(got, files) {
				t.Errorf("the refused Open changed the directory: %v, was %v", got, files)
			}
			var d *WALDamage
			if !errors.As(err, &d) || !d.Missing || d.Gen != 4 || d.Record != first || d.File != path+"-wal" {
				t.Fatalf("open without the log's newer file: %v (%+v), want generation 4 missing from record %d", err, d, first)
			}
			if msg := err.Error(); !strings.Contains(msg, "did not stop cleanly") || !strings.Contains(msg, fmt.Sprintf("record %d on", first)) {
				t.Errorf("error %q does not say what is missing", msg)
			}
			// Nothing changed: with the file back, every commit is there.
			if err := os.WriteFile(path+"-wal", saved, 0o600); err != nil {
				t.Fatal(err)
			}
			whole := openAndCheck(t, path, noFlush)
			sameState(t, "with the log put back", dump(t, whole), after)
			if err := whole.Close(); err != nil {
				t.Fatal(err)
			}

			// Once more without it, repaired: what bbolt held, and a store
			// that opens as usual afterwards.
			path = filepath.Join(t.TempDir(), "s.db")
			copyStore(t, from, path)
			tc.gone(t, path)
			opts := noFlush
			opts.RepairWAL = true
			repaired := openAndCheck(t, path, opts)
			sameState(t, "repaired", dump(t, repaired), before)
			crashed := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, path, crashed) // killed before its first flush
			sameState(t, "killed after the repair", dump(t, openAndCheck(t, crashed, noFlush)), before)
			if err := repaired.Close(); err != nil {
				t.Fatal(err)
			}
			sameState(t, "reopened after the repair", dump(t, openAndCheck(t, path, noFlush)), before)
		})
	}
}

// dirFiles returns the names and sizes of the files in dir.
func dirFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, e := range es {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = info.Size()
	}
	return out
}

// TestMissingLogAfterAFlush: a flush names the file the log goes on in
// with the records it writes into bbolt, so the file is needed from the
// flush's commit on, even while the older file is still there.
func TestMissingLogAfterAFlush(t *testing.T) {
	st := flushHeldAfterItsCommit(t)
	path := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, st.db.Path(), path) // killed here
	newer, h := newestLogFile(t, path)
	if err := os.Remove(newer); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, noFlush)
	var d *WALDamage
	if !errors.As(err, &d) || !d.Missing || d.Gen != h.gen || d.Record != h.first {
		t.Fatalf("open without the file the flush named: %v (%+v), want generation %d missing from record %d", err, d, h.gen, h.first)
	}
}

// newestLogFile returns the log file of the store at path whose header
// has the highest generation, and that header.
func newestLogFile(t *testing.T, path string) (string, walHeader) {
	t.Helper()
	var newer string
	var newest walHeader
	for _, name := range []string{path + "-wal", path + "-wal2"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if h, ok := decodeHeader(b); ok && h.gen > newest.gen {
			newer, newest = name, h
		}
	}
	return newer, newest
}

// TestCleanStopNeedsNoLog: a store that was closed holds every commit in
// bbolt, and its database file opens alone, without log files, as a copy
// of it made while no daemon ran does.
func TestCleanStopNeedsNoLog(t *testing.T) {
	from, want := stoppedStore(t)
	path := filepath.Join(t.TempDir(), "s.db")
	copyFile(t, from, path)
	st := openAndCheck(t, path, noFlush)
	sameState(t, "the database file alone", dump(t, st), want)
	populate(t, st, 1, 3) // and it goes on as a store
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLogNoteNamesTheNextFile: a file the log leaves names the file it
// goes on in, so a log that lacks that file is refused even while bbolt,
// whose flush has not committed, names only the older one; the note goes
// when its file is started again, and a store that stopped cleanly (need
// 0) is not held to it.
func TestLogNoteNamesTheNextFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w := startedWAL(t, path) // file 1, generation 1, from record 1
	appendN := func(from, to int) {
		for n := from; n <= to; n++ {
			if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(1, 3)
	if err := w.start(0, 4, 2); err != nil { // generation 2, a flush of 1-3 begins
		t.Fatal(err)
	}
	appendN(4, 5)
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(t.TempDir(), "wal")
	copyFile(t, path+"-wal", saved)
	recoverWithout := func(applied, need uint64) ([][]byte, error) {
		t.Helper()
		if err := os.Remove(path + "-wal"); err != nil {
			t.Fatal(err)
		}
		defer copyFile(t, saved, path+"-wal")
		w, err := openWAL(path, func() bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		defer w.close()
		replay, _, err := w.recover(applied, need)
		return replay, err
	}
	_, err := recoverWithout(0, 1)
	var d *WALDamage
	if !errors.As(err, &d) || !d.Missing || d.Gen != 2 || d.Record != 4 {
		t.Fatalf("recover without generation 2, bbolt naming generation 1: %v (%+v), want generation 2 missing from record 4", err, d)
	}
	if replay, err := recoverWithout(5, 0); err != nil || replay != nil {
		t.Fatalf("recover after a clean stop: %q, %v; want nothing to replay", replay, err)
	}

	// Started again, file 1 loses its note and file 0 gets one.
	w, err = openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if replay, last, err := w.recover(0, 1); err != nil || len(replay) != 5 || last != 5 {
		t.Fatalf("recover the whole log: %d records, last %d, %v", len(replay), last, err)
	}
	if err := w.start(1, 6, 3); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint64{3, 0} {
		if h, ok, err := w.readHeader(i); err != nil || !ok || h.nextGen != want {
			t.Errorf("file %d: header %+v, %v, %v; want a note of generation %d", i, h, ok, err, want)
		}
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
}

// TestNamedLogFileNeverStarted: Open names the file it is about to start
// in the transaction that puts what it recovered into bbolt; killed before
// the start, it leaves a store naming a file that never existed. The file
// before it, which the log never left (no note), shows that nothing was
// written there, and the store opens whole.
func TestNamedLogFileNeverStarted(t *testing.T) {
	from, want := stoppedStore(t)
	path := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, from, path)
	_, h := newestLogFile(t, path)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return putLogGen(tx, h.gen+1) }) // and killed
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "opened after a start that never came", dump(t, openAndCheck(t, path, noFlush)), want)
}

// logGen returns the log generation st's bbolt file names (keyLogGen).
func logGen(t *testing.T, st *Bolt) uint64 {
	t.Helper()
	var gen uint64
	err := st.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLogGen); len(v) == 8 {
			gen = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// stoppedStore returns the path of a store holding 10 prompts over 2
// Sessions that was closed, and its state.
func stoppedStore(t *testing.T) (string, map[string]map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, st, 2, 10)
	want := dump(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// TestNamedLogFileNeverStartedAfterAStaleNote: the file the log leaves can
// hold a note from an earlier run naming the very generation Open is about
// to name and start: the file that note named was deleted after a clean
// stop (which loses nothing), or was lost and a repair went on without
// it. Killed between its recovery transaction and the start, Open left a
// store that named a file never started beside a note that seemed to say
// the log had gone on in it, and the next Open refused the store as one
// that had lost that file, though nothing was ever written there.
func TestNamedLogFileNeverStartedAfterAStaleNote(t *testing.T) {
	errKilled := errors.New("killed before the start")
	for _, tc := range []struct {
		name string
		// store returns a store whose newer log file (-wal, generation 2)
		// is deleted, with its older one (generation 1) noting it, the
		// options that open it, and the state Open must recover.
		store func(t *testing.T) (string, Options, map[string]map[string]string)
	}{
		{"stopped cleanly, the newer file deleted", func(t *testing.T) (string, Options, map[string]map[string]string) {
			from, want := stoppedStore(t)
			if err := openAndCheck(t, from, noFlush).Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, from, path)
			return path, noFlush, want
		}},
		{"killed, the newer file lost and repaired", func(t *testing.T) (string, Options, map[string]map[string]string) {
			from, _ := stoppedStore(t)
			st := openAndCheck(t, from, noFlush)
			before := dump(t, st)
			populate(t, st, 1, 3)
			path := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, from, path) // killed here
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			opts := noFlush
			opts.RepairWAL = true
			return path, opts, before
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, opts, want := tc.store(t)
			if newer, h := newestLogFile(t, path); newer != path+"-wal" || h.gen != 2 {
				t.Fatalf("newest log file %s, generation %d; the test expects %s-wal, generation 2", newer, h.gen, path)
			}
			if err := os.Remove(path + "-wal"); err != nil {
				t.Fatal(err)
			}
			openFault = func() error { return errKilled }
			_, err := Open(path, opts)
			openFault = nil
			if !errors.Is(err, errKilled) {
				t.Fatalf("open: %v, want it killed before the start", err)
			}
			st := openAndCheck(t, path, noFlush)
			sameState(t, "opened after the start that never came", dump(t, st), want)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMissingLogWhileAFlushRan: killed while a flush ran, a store's bbolt
// names the older log file, which holds the records the flush was writing,
// and the newer file goes on after them. With the older file deleted or
// emptied since, recovery found a log that started after bbolt's last
// record and called it corrupt: an error repair did not handle, so even
// 'repair --force' could not open the store. It is a missing file, which
// Open refuses and a repair goes on without, dropping the newer file's
// records too, as they would follow a hole.
func TestMissingLogWhileAFlushRan(t *testing.T) {
	for _, gone := range []func(name string) error{
		os.Remove,
		func(name string) error { return os.Truncate(name, 0) },
	} {
		path := filepath.Join(t.TempDir(), "s.db")
		w := startedWAL(t, path) // file 1, generation 1, from record 1
		for n := 1; n <= 5; n++ {
			if n == 4 {
				if err := w.start(0, 4, 2); err != nil { // generation 2: a flush of 1-3 runs
					t.Fatal(err)
				}
			}
			if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.close(); err != nil {
			t.Fatal(err)
		}
		if err := gone(path + "-wal2"); err != nil {
			t.Fatal(err)
		}
		recoverFrom := func(repair bool) ([][]byte, uint64, *wal, error) {
			t.Helper()
			w, err := openWAL(path, func() bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			w.repair = repair
			replay, last, err := w.recover(0, 1) // bbolt: nothing applied, generation 1 named
			return replay, last, w, err
		}
		_, _, refused, err := recoverFrom(false)
		if cerr := refused.close(); cerr != nil {
			t.Fatal(cerr)
		}
		var d *WALDamage
		if !errors.As(err, &d) || !d.Missing || d.Gen != 1 || d.Record != 1 || d.Intact != 2 {
			t.Fatalf("recover without generation 1: %v (%+v), want generation 1 missing from record 1, 2 records after it", err, d)
		}
		replay, last, w, err := recoverFrom(true)
		if err != nil || len(replay) != 0 || last != 0 || w.damage == nil || !w.damage.Missing {
			t.Fatalf("repair: %q up to %d, %v, damage %+v; want nothing replayed and the file reported missing", replay, last, err, w.damage)
		}
		if err := w.start(w.older(), 1, 3); err != nil { // as Open goes on
			t.Fatal(err)
		}
		if _, err := w.append([]byte("after the repair")); err != nil {
			t.Fatal(err)
		}
		if replay, last, err := closedAndRecovered(t, w, path); err != nil || len(replay) != 1 || last != 1 {
			t.Fatalf("recover after the repair: %q up to %d, %v; want the one record written since", replay, last, err)
		}
	}
}

// TestLogStartingTooLateIsCorrupt: a log that holds the file bbolt names,
// and the one after it, but starts after bbolt's last record has a hole no
// file can fill (bbolt was replaced by an older copy, say). It is not a
// missing file that a repair could go on without: it stays corruption.
func TestLogStartingTooLateIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w := startedWAL(t, path)                  // file 1, generation 1, from record 1
	if err := w.start(1, 10, 2); err != nil { // generation 2, from record 10
		t.Fatal(err)
	}
	for n := 10; n <= 13; n++ {
		if n == 13 {
			if err := w.start(0, 13, 3); err != nil { // generation 3: a flush of 10-12 runs
				t.Fatal(err)
			}
		}
		if _, err := w.append(fmt.Appendf(nil, "payload %d", n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	_, _, err = w.recover(5, 2) // bbolt holds up to record 5 and names generation 2
	var d *WALDamage
	if !errors.Is(err, errWALCorrupt) || errors.As(err, &d) {
		t.Fatalf("recover: %v, want a corrupt log, not damage a repair handles", err)
	}
}

// TestCutShortLogIsRefused: a store that did not stop cleanly, whose newest
// log file was cut short since (a copy that stopped early, a truncation),
// read as a log that ends early: the acknowledged commits in its lost end
// were gone without a word, and check called the store sound. Every file
// the log starts is extended first, so one smaller than that was cut:
// Open refuses it and changes nothing; a repair keeps the whole records
// before the cut. A cleanly stopped store, which needs no log, opens.
func TestCutShortLogIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		size func(end int64) int64 // the cut file's size, given where its records end
		kept int                   // records a repair recovers (-1: all but the last)
	}{
		{"header only", func(int64) int64 { return walHeaderLen + 8 }, 0},
		{"its header slot", func(int64) int64 { return walRecordStart }, 0},
		{"inside the last record", func(end int64) int64 { return end - 10 }, -1},
		{"after the last record", func(end int64) int64 { return end }, -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := filepath.Join(t.TempDir(), "s.db")
			st, err := Open(from, noFlush)
			if err != nil {
				t.Fatal(err)
			}
			before := dump(t, st)
			first := st.wal.next
			populate(t, st, 2, 5)
			after, next, end := dump(t, st), st.wal.next, st.wal.off
			suffix := []string{"-wal", "-wal2"}[st.wal.cur]
			crashed := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, from, crashed) // killed here
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, crashed, path)
			cut := path + suffix
			saved, err := os.ReadFile(cut)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(cut, tc.size(end)); err != nil {
				t.Fatal(err)
			}
			files := dirFiles(t, filepath.Dir(path))
			_, err = Open(path, noFlush)
			if got := dirFiles(t, filepath.Dir(path)); !maps.Equal(got, files) {
				t.Errorf("the refused Open changed the directory: %v, was %v", got, files)
			}
			kept := uint64(next - first)
			switch tc.kept {
			case 0:
				kept = 0
			case -1:
				kept--
			}
			var d *WALDamage
			if !errors.As(err, &d) || d.Short != tc.size(end) || d.File != cut || d.Record != first+kept {
				t.Fatalf("open with a cut-short log: %v (%+v), want %s cut short at %d from record %d", err, d, cut, tc.size(end), first+kept)
			}
			if msg := err.Error(); !strings.Contains(msg, "cut short") || !strings.Contains(msg, fmt.Sprintf("record %d on", d.Record)) {
				t.Errorf("error %q does not say what happened", msg)
			}
			if dr, err := d.Dropped(); err != nil || len(dr.Sessions) != 0 {
				t.Errorf("Dropped of a cut-short file: %+v, %v", dr, err)
			}

			// Put back, the file gives every commit.
			if err := os.WriteFile(cut, saved, 0o600); err != nil {
				t.Fatal(err)
			}
			whole := openAndCheck(t, path, noFlush)
			sameState(t, "with the log put back", dump(t, whole), after)
			if err := whole.Close(); err != nil {
				t.Fatal(err)
			}

			// Repaired: the records before the cut, and a store that
			// opens as usual afterwards.
			path = filepath.Join(t.TempDir(), "s.db")
			copyStore(t, crashed, path)
			cut = path + suffix
			if err := os.Truncate(cut, tc.size(end)); err != nil {
				t.Fatal(err)
			}
			opts := noFlush
			opts.RepairWAL = true
			repaired := openAndCheck(t, path, opts)
			switch {
			case kept == 0:
				sameState(t, "repaired", dump(t, repaired), before)
			case kept == uint64(next-first):
				sameState(t, "repaired", dump(t, repaired), after)
			}
			if repaired.wal.next != first+kept {
				t.Errorf("repaired log goes on at record %d, want %d", repaired.wal.next, first+kept)
			}
			fixed := dump(t, repaired)
			if err := repaired.Close(); err != nil {
				t.Fatal(err)
			}
			again := openAndCheck(t, path, noFlush)
			sameState(t, "reopened after the repair", dump(t, again), fixed)
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}

			// Stopped cleanly, the store needs no log: the same cut opens.
			clean := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, from, clean)
			if err := os.Truncate(clean+suffix, tc.size(end)); err != nil {
				t.Fatal(err)
			}
			opened := openAndCheck(t, clean, noFlush)
			sameState(t, "stopped cleanly, log cut", dump(t, opened), after)
			if err := opened.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
