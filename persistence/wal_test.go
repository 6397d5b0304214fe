package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/messages"
)

// noFlush keeps the writer from flushing on its own, so the whole run stays
// in the write-ahead log until Close.
var noFlush = Options{FlushBytes: 1 << 40}

// populate creates sessions Sessions and admits n prompts spread over them.
func populate(t *testing.T, st *Bolt, sessions, n int) {
	t.Helper()
	ctx := context.Background()
	var sids []messages.SessionID
	for range sessions {
		sids = append(sids, newSession(t, st))
	}
	for i := range n {
		p := messages.Prompt{Text: fmt.Sprintf("prompt %d %s", i, strings.Repeat("x", i%300))}
		if _, _, err := st.Admit(ctx, Admission{SessionID: sids[i%len(sids)], Prompt: p}); err != nil {
			t.Fatal(err)
		}
	}
}

// newSession creates a Session in st and returns its ID.
func newSession(t testing.TB, st *Bolt) messages.SessionID {
	t.Helper()
	s, _, err := st.CreateSession(context.Background(), CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func dump(t *testing.T, st *Bolt) map[string]map[string]string {
	t.Helper()
	d, err := st.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// copyStore copies a store's files (bbolt and both WAL files) as they are
// now, the way a process killed at this moment leaves them.
func copyStore(t *testing.T, from, to string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-wal2"} {
		copyFile(t, from+suffix, to+suffix)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// openTemp opens a store in a temporary directory, closed when the test
// ends.
func openTemp(t *testing.T, opts Options) *Bolt {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openFlushing opens a store in a temporary directory that flushes every
// 4 KiB of log, and counts the flushes its writer has collected.
func openFlushing(t *testing.T) (*Bolt, *atomic.Int64) {
	t.Helper()
	flushes := new(atomic.Int64)
	st := openTemp(t, Options{NoSync: true, FlushBytes: 4 << 10, OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	return st, flushes
}

// openAndCheck opens a store and runs bbolt's consistency check on it.
func openAndCheck(t *testing.T, path string, opts Options) *Bolt {
	t.Helper()
	st, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("consistency check: %v", err)
	}
	return st
}

func sameState(t *testing.T, what string, got, want map[string]map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		for b, rows := range want {
			for k, v := range rows {
				if got[b][k] != v {
					t.Fatalf("%s: row %s/%q differs from the acknowledged state", what, b, k)
				}
			}
			for k := range got[b] {
				if _, ok := rows[k]; !ok {
					t.Fatalf("%s: row %s/%q was never acknowledged", what, b, k)
				}
			}
		}
		t.Fatalf("%s: recovered state differs from the acknowledged state", what)
	}
}

// TestRecoveryAfterProcessCrash copies the files of a running store, as a
// SIGKILL would leave them, after flushes ran while it wrote, and checks
// that reopening gives exactly the acknowledged state.
func TestRecoveryAfterProcessCrash(t *testing.T) {
	var flushes atomic.Int64
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{FlushBytes: 16 << 10, OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	populate(t, st, 5, 400)
	if flushes.Load() < 3 {
		t.Fatalf("only %d flushes ran", flushes.Load())
	}
	want := dump(t, st)
	crashed := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, crashed)
	sameState(t, "after a crash", dump(t, openAndCheck(t, crashed, Options{})), want)
}

// storeFiles reads a store's three files.
func storeFiles(t testing.TB, path string) map[string][]byte {
	files := map[string][]byte{}
	for _, suffix := range []string{"", "-wal", "-wal2"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		files[suffix] = b
	}
	return files
}

// recoverFiles writes files as a store in a new directory, opens it and
// returns its state.
func recoverFiles(t *testing.T, files map[string][]byte) map[string]map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	for suffix, b := range files {
		if err := os.WriteFile(path+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dump(t, openAndCheck(t, path, noFlush))
}

// TestRecoveryAroundFlush crashes a store at both ends of a background
// flush. At its start, the log holds every record the flush is about to
// write into bbolt. Once bbolt's commit is done, the records it holds are
// still in the older log file and the ones written since in the newer
// one: recovery must skip the former and apply the latter. And had the
// flush's commit never reached the disk (a power loss), bbolt as it was
// before the flush with the log as it is after must recover the same
// state: recovery then reads the older file on into the newer one.
func TestRecoveryAroundFlush(t *testing.T) {
	type capture struct {
		files map[string][]byte
		state map[string]map[string]string
	}
	var atStart capture
	committed := make(chan struct{}, 1)
	release := make(chan struct{})
	flushHook = func(stage string, s *Bolt) {
		switch {
		case stage == "start" && atStart.files == nil:
			// On the writer, between batches: everything acknowledged is
			// published and nothing else commits.
			atStart = capture{storeFiles(t, s.db.Path()), dump(t, s)}
		case stage == "committed":
			select {
			case committed <- struct{}{}:
				<-release
			default:
			}
		}
	}
	defer func() { flushHook = nil }()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{FlushBytes: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	sid := newSession(t, st)
	// Admit until the first flush has committed (and waits in the hook),
	// then a few more, which land in the newer log file only.
	var atCommit capture
	for i, extra := 0, -1; extra != 0; i++ {
		if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprintf("p%d %s", i, strings.Repeat("x", 300))}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-committed:
			extra = 5
		default:
			if extra > 0 {
				extra--
			}
		}
		if i > 10000 {
			t.Fatal("no flush committed")
		}
	}
	atCommit = capture{storeFiles(t, path), dump(t, st)}
	close(release)
	if atStart.files == nil {
		t.Fatal("no flush started")
	}
	sameState(t, "crash as the flush started", recoverFiles(t, atStart.files), atStart.state)
	sameState(t, "crash once the flush committed", recoverFiles(t, atCommit.files), atCommit.state)
	lost := map[string][]byte{"": atStart.files[""], "-wal": atCommit.files["-wal"], "-wal2": atCommit.files["-wal2"]}
	sameState(t, "power loss before the flush reached the disk", recoverFiles(t, lost), atCommit.state)
}

// TestRecoveryIgnoresTornTail: a record whose write was torn by a crash was
// never acknowledged; recovery ends the log before it.
func TestRecoveryIgnoresTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	populate(t, st, 2, 30)
	want := dump(t, st)
	crashed := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, crashed)
	// A torn next record: the right number, a wrong checksum.
	cur := st.wal.cur
	name := crashed + []string{"-wal", "-wal2"}[cur]
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := binary.LittleEndian.AppendUint32(nil, 3)
	rec = binary.LittleEndian.AppendUint32(rec, 12345)
	rec = binary.LittleEndian.AppendUint64(rec, st.wal.next)
	rec = append(rec, recDel, 1, 0)
	if _, err := f.WriteAt(rec, st.wal.off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sameState(t, "torn tail", dump(t, openAndCheck(t, crashed, noFlush)), want)
}

// TestRecoveryTwiceIgnoresStaleRecords: after a crash, recovery applies the
// log and starts over in the other file, whose old records (of the run
// before) sit behind the new ones, aligned when lengths match. After a
// second crash they must not read as the new records' continuation.
func TestRecoveryTwiceIgnoresStaleRecords(t *testing.T) {
	ctx := context.Background()
	admit := func(st *Bolt, sid messages.SessionID, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			p := messages.Prompt{Text: fmt.Sprintf("prompt %03d", i)}
			if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, st)
	admit(st, sid, 0, 40)
	first := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, first)
	st.Close()
	// Two recoveries: the second one's log is the file the first run wrote.
	st = openAndCheck(t, first, noFlush)
	st.Close()
	st = openAndCheck(t, first, noFlush)
	admit(st, sid, 40, 45)
	want := dump(t, st)
	second := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, first, second)
	sameState(t, "second crash", dump(t, openAndCheck(t, second, noFlush)), want)
}

func TestWALRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if replay, last, err := w.recover(7, 0); err != nil || replay != nil || last != 7 {
		t.Fatalf("empty WAL: %q %d %v", replay, last, err)
	}
	appendAll := func(from, to uint64) {
		t.Helper()
		for n := from; n <= to; n++ {
			got, err := w.append(fmt.Appendf(nil, "payload %d", n))
			if err != nil || got != n {
				t.Fatalf("append: record %d, %v; want %d", got, err, n)
			}
		}
	}
	recovered := func(applied, wantLast uint64, want ...uint64) {
		t.Helper()
		got, last, err := w.recover(applied, 0)
		if err != nil {
			t.Fatal(err)
		}
		var names, wantNames []string
		for _, p := range got {
			names = append(names, string(p))
		}
		for _, n := range want {
			wantNames = append(wantNames, fmt.Sprint("payload ", n))
		}
		if !reflect.DeepEqual(names, wantNames) || last != wantLast {
			t.Fatalf("recover(%d): %q last %d, want %q last %d", applied, names, last, wantNames, wantLast)
		}
	}
	if err := w.start(1, 11, 1); err != nil {
		t.Fatal(err)
	}
	appendAll(11, 13)
	recovered(10, 13, 11, 12, 13)
	recovered(12, 13, 13) // bbolt already has 11 and 12
	recovered(13, 13)
	if _, _, err := w.recover(9, 0); !errors.Is(err, errWALCorrupt) {
		t.Fatalf("log starting past bbolt: %v", err)
	}

	// A flush of 11-13 starts: the log goes on in file 0. Until bbolt has
	// them, recovery reads them from file 1 and goes on into file 0.
	if err := w.start(0, 14, 2); err != nil {
		t.Fatal(err)
	}
	appendAll(14, 15)
	recovered(13, 15, 14, 15)
	recovered(10, 15, 11, 12, 13, 14, 15)
	recovered(11, 15, 12, 13, 14, 15)
	// A hole between the files is corruption, not a shorter log.
	if _, err := w.files[1].f.WriteAt(make([]byte, 64), int64(walRecordStart+2*(walRecordHead+len("payload 11")))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.recover(10, 0); !errors.Is(err, errWALCorrupt) {
		t.Fatalf("log with a hole: %v", err)
	}

	// A torn header makes the other file the newest: its records are all
	// applied by then (the log starts over only after a flush). With a
	// record bbolt lacks, the header was damaged after it was synced.
	if _, err := w.files[0].f.WriteAt([]byte{0xff}, 9); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.recover(13, 0); !errors.Is(err, ErrWALDamaged) {
		t.Fatalf("damaged header over records bbolt lacks: %v", err)
	}
	recovered(15, 15)

	// File 1 is reused from the start; its old records after the new ones
	// (same lengths, so aligned) must not read as their continuation.
	if err := w.start(1, 16, 3); err != nil {
		t.Fatal(err)
	}
	appendAll(16, 16)
	recovered(15, 16, 16)

	// A failed append appends nothing, even when the whole record reached
	// the file before the write failed: recovery does not replay it, and
	// the next record takes its number and chains from the one before.
	writeFault = func(f *os.File, b []byte, off int64) error {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		return errors.New("injected write failure")
	}
	_, err = w.append([]byte("payload 17"))
	writeFault = nil
	if err == nil || errors.Is(err, errWALTorn) {
		t.Fatalf("failed append: %v", err)
	}
	recovered(15, 16, 16)
	appendAll(17, 17)
	recovered(15, 17, 16, 17)
	// A record that cannot even be invalidated tears the log, and the
	// error says so (the store then stops).
	rw := w.files[w.cur].f
	ro, err := os.Open(rw.Name())
	if err != nil {
		t.Fatal(err)
	}
	w.files[w.cur].f = ro
	_, err = w.append([]byte("payload 18"))
	w.files[w.cur].f = rw
	ro.Close()
	if !errors.Is(err, errWALTorn) {
		t.Fatalf("append that cannot invalidate its record: %v", err)
	}

	// A torn record ends the log.
	b, err := os.ReadFile(path + "-wal2")
	if err != nil {
		t.Fatal(err)
	}
	b[walRecordStart+walRecordHead] ^= 0xff
	if got, err := readRecords(bytes.NewReader(b), int64(len(b)), 16, 3); len(got) != 0 || err != nil {
		t.Fatalf("torn record read back: %q %v", got, err)
	}
}

// startedWAL opens the log of the store at path and starts its second
// file at record 1.
func startedWAL(t *testing.T, path string) *wal {
	t.Helper()
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if err := w.start(1, 1, 7); err != nil {
		w.close()
		t.Fatal(err)
	}
	return w
}

// closedAndRecovered closes w, opens the log at path again and recovers
// every record in it.
func closedAndRecovered(t *testing.T, w *wal, path string) ([][]byte, uint64, error) {
	t.Helper()
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.close() })
	return w.recover(0, 0)
}

// TestWALRecordsPastThePreallocation: records that outgrow the zeros a
// file was extended with, one of them over half an extension long, are
// written whole, and extending the file for the next one zeroes only what
// lies past them: a reopened log reads every record back.
func TestWALRecordsPastThePreallocation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w := startedWAL(t, path)
	want := [][]byte{bytes.Repeat([]byte{'a'}, walExtend*3/4), []byte("small"), bytes.Repeat([]byte{'b'}, walExtend)}
	for i, p := range want {
		if n, err := w.append(p); err != nil || n != uint64(i+1) {
			w.close()
			t.Fatalf("append %d: record %d, %v", i+1, n, err)
		}
	}
	got, last, err := closedAndRecovered(t, w, path)
	if err != nil || last != 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered %d records, last %d, %v; want the 3 appended", len(got), last, err)
	}
}

// TestWALRecordFillingItsFile: a record that ends exactly where the file
// ends (it fit in the zeros ahead of it, so the file was not extended) is
// read back after a reopen like any other.
func TestWALRecordFillingItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w := startedWAL(t, path)
	p := bytes.Repeat([]byte{'f'}, int(w.files[1].end)-walRecordStart-walRecordHead)
	if _, err := w.append(p); err != nil || w.off != w.files[1].end {
		w.close()
		t.Fatalf("append: %v; the record ends at %d, the file at %d", err, w.off, w.files[1].end)
	}
	if got, last, err := closedAndRecovered(t, w, path); err != nil || last != 1 || len(got) != 1 || !bytes.Equal(got[0], p) {
		t.Fatalf("recovered %d records, last %d, %v; want the one appended", len(got), last, err)
	}
}

// TestReadRecordsStopsAtALengthPastTheEnd: a record whose length runs past
// the end of the file (a torn write at the end of the log) ends the log
// there; it is neither read nor a read error.
func TestReadRecordsStopsAtALengthPastTheEnd(t *testing.T) {
	const seed = 7
	b := make([]byte, walRecordStart)
	chain := uint32(seed)
	for num, p := range []string{"one", "two"} {
		rec := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
		rec = binary.LittleEndian.AppendUint32(rec, 0)
		rec = binary.LittleEndian.AppendUint64(rec, uint64(num+1))
		rec = append(rec, p...)
		chain = crc32.Update(chain, crcTable, rec[8:])
		binary.LittleEndian.PutUint32(rec[4:8], chain)
		b = append(b, rec...)
	}
	// Record 3's head, claiming 8 bytes more than the file holds after it.
	b = binary.LittleEndian.AppendUint32(b, 8+8)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, 3)
	b = append(b, "payload"...)
	b = append(b, 0)
	got, err := readRecords(bytes.NewReader(b), int64(len(b)), 1, seed)
	if err != nil || len(got) != 2 || string(got[0]) != "one" || string(got[1]) != "two" {
		t.Fatalf("read %q, %v; want records one and two", got, err)
	}
}

// TestWALLocksStore checks that a second Open of the same store waits for
// the WAL's lock and gives up after Timeout.
func TestWALLocksStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := Open(path, Options{Timeout: 50e6}); err == nil || !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

// lockedFile opens (creating) name and takes the exclusive lock a store
// takes on its first log file, as another process would hold it; the
// file closes with the test.
func lockedFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestWALLockFollowsARemovedFile: an Open that fails removes the first
// log file when it created it (dropCreated), while it holds the lock.
// Another Open that had the file open and was waiting for the lock gets
// it on a file no longer in the directory, and must not run its store's
// log there: it opens the file now at the path, and locks that.
func TestWALLockFollowsARemovedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	held := lockedFile(t, path+"-wal")
	waiting := make(chan struct{})
	var once sync.Once
	type result struct {
		w   *wal
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := openWAL(path, func() bool {
			once.Do(func() { close(waiting) })
			runtime.Gosched()
			return false
		})
		done <- result{w, err}
	}()
	<-waiting // it has the file open and wants the lock
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	held.Close()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.w.close()
	if !sameFile(r.w.files[0].f, path+"-wal") {
		t.Fatalf("the log's first file is not the one at %s-wal", path)
	}
	// And that is the file it locked.
	other, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
		t.Fatalf("lock of %s-wal beside the open log: %v, want EWOULDBLOCK", path, err)
	}
}

// TestWALLockIsOnTheFirstLogFile: the lock that excludes a second store
// is on path-wal, as the doc says, so any process holding that file's lock
// (another sessiond, of any version) keeps Open out.
func TestWALLockIsOnTheFirstLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	lockedFile(t, path+"-wal")
	if st, err := Open(path, Options{Timeout: 50e6}); !errors.Is(err, ErrLocked) {
		if err == nil {
			st.Close()
		}
		t.Fatalf("open beside a locked %s-wal: %v, want ErrLocked", path, err)
	}
}

// TestOpenEmptyPath refuses an empty path instead of creating log files
// in the working directory.
func TestOpenEmptyPath(t *testing.T) {
	if _, err := Open("", Options{}); err == nil {
		t.Fatal("opened a store at an empty path")
	}
	if _, err := os.Stat("-wal"); err == nil {
		t.Fatal("created -wal in the working directory")
	}
}

// TestWALWithoutDatabase refuses a WAL whose database file is missing
// rather than starting an empty store beside it.
func TestWALWithoutDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "no database file") {
		t.Fatalf("open: %v", err)
	}
}

// TestWALNewerThanDatabase refuses a database older than the log relies
// on (a restored backup beside a newer log, say) instead of losing the
// records in between.
func TestWALNewerThanDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	var flushes atomic.Int64
	st, err := Open(path, Options{FlushBytes: 4 << 10, OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(t.TempDir(), "old.db")
	copyFile(t, path, old)
	populate(t, st, 1, 200) // flushes start the log over twice and more
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if flushes.Load() < 3 {
		t.Fatalf("only %d flushes", flushes.Load())
	}
	copyFile(t, old, path)
	if _, err := Open(path, Options{}); !errors.Is(err, errWALCorrupt) {
		t.Fatalf("open with a stale database: %v", err)
	}
}

// TestWritesAreLogged fails when code in this package writes to bbolt
// outside wtx.putBytes and wtx.del, whose writes reach the WAL, and the
// two places that write what the log already holds (open's recovery and
// flush): such a write would be lost in recovery.
func TestWritesAreLogged(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"bolt.go writeMem": true, "bolt.go open": true, "bolt.go flushInto": true,
		"bolt.go putOp":           true, // putOp's Put is sync.Pool's
		"backup.go applyMems":     true, // writes a copy of the store, not the store
		"bolt.go putLogGen":       true, // bookkeeping of the log itself, in open, flushes and backups
		"migrate.go migrateInbox": true} // in open's transaction, after recovery
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || allowed[name+" "+fn.Name.Name] {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "crc32" {
						return true
					}
					switch sel.Sel.Name {
					case "Put", "Delete", "CreateBucket", "CreateBucketIfNotExists", "DeleteBucket", "NextSequence", "SetSequence", "Update", "Batch":
						t.Errorf("%s: %s calls %s directly; use wtx.putBytes or wtx.del", fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// FuzzDecodeRecord checks that no payload panics the decoder and that a
// payload it accepts is exactly a sequence of writes: encoding those writes
// again gives a payload that decodes to the same writes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{recPut, 1, 3, 'k', 'e', 'y', 2, 'v', 'v', recDel, 2, 1, 'k'})
	f.Add([]byte{recPut, 9, 1, 'k', 0})
	f.Add([]byte{recPut, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	writes := func(p []byte) ([]string, []byte, error) {
		var out []string
		var again []byte
		err := decodeRecord(p, func(op byte, bucket, key, val []byte) error {
			out = append(out, fmt.Sprintf("%d %s %q %q", op, bucket, key, val))
			again = append(again, op, bucketIndex(bucket))
			again = binary.AppendUvarint(again, uint64(len(key)))
			again = append(again, key...)
			if op == recPut {
				again = binary.AppendUvarint(again, uint64(len(val)))
				again = append(again, val...)
			}
			return nil
		})
		return out, again, err
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		first, again, err := writes(p)
		if err != nil {
			return
		}
		second, _, err := writes(again)
		if err != nil || !reflect.DeepEqual(first, second) {
			t.Fatalf("re-encoded writes differ: %v %q vs %q", err, first, second)
		}
	})
}

// TestBucketIndexByName: bucketIndex finds a bucket from a copy of its
// name too, not only from the package's own slice (whose address settles
// most calls).
func TestBucketIndexByName(t *testing.T) {
	for i, name := range allBuckets {
		if got := bucketIndex(bytes.Clone(name)); got != byte(i) {
			t.Errorf("bucketIndex(%q) = %d, want %d", name, got, i)
		}
	}
}

// TestDecodeRecordRefusesMalformedWrites: a write naming the first bucket
// index past the last bucket, or a key or value longer than the bytes
// left, is corruption, refused as such rather than read past its end.
func TestDecodeRecordRefusesMalformedWrites(t *testing.T) {
	for _, p := range [][]byte{
		{recPut, byte(len(allBuckets)), 1, 'k', 0},
		{recDel, 0, 2, 'k'},
		{recPut, 0, 1, 'k', 2, 'v'},
	} {
		err := decodeRecord(p, func(byte, []byte, []byte, []byte) error { return nil })
		if !errors.Is(err, errWALCorrupt) {
			t.Errorf("payload %q: %v, want errWALCorrupt", p, err)
		}
	}
}

// FuzzReadWAL feeds arbitrary bytes to the header and record readers: they
// must never panic, and whatever records they accept must decode or be
// refused cleanly.
func FuzzReadWAL(f *testing.F) {
	path := filepath.Join(f.TempDir(), "s.db")
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		f.Fatal(err)
	}
	_ = w.start(0, 6, 9)
	_, _ = w.append([]byte{recPut, 1, 1, 'k', 1, 'v'})
	_, _ = w.append([]byte{recDel, 1, 1, 'k'})
	b, _ := os.ReadFile(path + "-wal")
	w.close()
	f.Add(b[:walRecordStart+64])
	f.Add([]byte("sdwal"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, _ := decodeHeader(b)
		recs, err := readRecords(bytes.NewReader(b), int64(len(b)), h.first, h.seed)
		var d *WALDamage
		switch {
		case errors.As(err, &d):
			// A damaged record: the one after those read, with enough
			// whole ones after it to tell it from a torn write.
			if d.Record != h.first+uint64(len(recs)) || d.Intact < walInFlight || d.Offset < walRecordStart || d.Offset >= int64(len(b)) {
				t.Fatalf("damage %+v after %d records from %d", d, len(recs), h.first)
			}
		case err != nil:
			t.Fatalf("reading within the bytes: %v", err)
		}
		for _, p := range recs {
			_ = decodeRecord(p, func(byte, []byte, []byte, []byte) error { return nil })
		}
		// Through a read-ahead window smaller than most records, as
		// recovery reads, the same records and the same end.
		window := 1 + len(b)%29
		recs2, err2 := readRecords(&readAhead{r: bytes.NewReader(b), window: window}, int64(len(b)), h.first, h.seed)
		if !reflect.DeepEqual(recs2, recs) || fmt.Sprint(err2) != fmt.Sprint(err) {
			t.Fatalf("through a %d-byte window: %d records, %v; directly %d, %v", window, len(recs2), err2, len(recs), err)
		}
	})
}

// TestFailedSyncStopsWrites checks that a write whose WAL fdatasync fails
// is reported failed and never becomes visible, that the store then
// refuses every write (after a failed fsync the page cache can no longer be
// trusted to match the disk), and that reopening recovers everything
// acknowledged before.
func TestFailedSyncStopsWrites(t *testing.T) {
	var failing atomic.Bool
	syncFault = func() error {
		if failing.Load() {
			return errors.New("injected EIO")
		}
		return nil
	}
	defer func() { syncFault = nil }()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	populate(t, st, 2, 20)
	ctx := context.Background()
	sid := newSession(t, st)
	want := dump(t, st)
	failing.Store(true)
	if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "not durable"}}); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("admission whose sync failed: %v", err)
	}
	if p, err := st.Pending(ctx, sid); err != nil || len(p) != 0 {
		t.Fatalf("an unsynced admission is visible: %v %v", p, err)
	}
	failing.Store(false)
	_, _, err = st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "refused"}})
	if err == nil || !strings.Contains(err.Error(), "store failed") {
		t.Fatalf("write after a failed sync: %v", err)
	}
	// Close reports the failure; the log keeps what bbolt lacks.
	if err := st.Close(); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("close after failure: %v", err)
	}
	got := dump(t, openAndCheck(t, path, Options{}))
	for b, rows := range want {
		for k, v := range rows {
			if got[b][k] != v {
				t.Fatalf("acknowledged row %s/%q lost after a failed sync", b, k)
			}
		}
	}
}

// TestReadersSeeOnlyDurableCommits holds the WAL's fdatasync and checks
// that a commit stays invisible to readers until it is durable, then
// becomes visible before its caller is answered.
func TestReadersSeeOnlyDurableCommits(t *testing.T) {
	st := openTemp(t, Options{})
	ctx := context.Background()
	sid := newSession(t, st)
	held, release := holdNextSync(t)
	done := make(chan error, 1)
	go func() {
		_, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "hi"}})
		done <- err
	}()
	<-held // committed to the memtable and the log, not yet synced
	if w, err := st.Watermark(ctx, sid); err != nil || w != 0 {
		t.Fatalf("watermark %d (%v) while the admission is unsynced, want 0", w, err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w, err := st.Watermark(ctx, sid); err != nil || w != 1 {
		t.Fatalf("watermark %d (%v) after the admission was answered, want 1", w, err)
	}
}

// holdNextSync makes the store's next WAL fdatasync wait for release;
// held is closed once it waits.
func holdNextSync(t *testing.T) (held <-chan struct{}, release func()) {
	var hold atomic.Bool
	h, r := make(chan struct{}), make(chan struct{})
	hold.Store(true)
	syncFault = func() error {
		if hold.CompareAndSwap(true, false) {
			close(h)
			<-r
		}
		return nil
	}
	t.Cleanup(func() { syncFault = nil })
	return h, sync.OnceFunc(func() { close(r) })
}

// TestReadsStayConsistentAcrossFlushes reads a Session's log and inbox
// while another goroutine admits to it through constant flushes: every read
// must see a gap-free log whose watermark matches its last event, and every
// pending row must resolve to its inbox row.
func TestReadsStayConsistentAcrossFlushes(t *testing.T) {
	st, flushes := openFlushing(t)
	ctx := context.Background()
	sid := newSession(t, st)
	const n = 600
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprint("p", i)}}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	reads := 0
	for last := int64(0); last < n; reads++ {
		err := st.view(func(v *view) error {
			w := lastSeq(v, sid)
			if w < last {
				return fmt.Errorf("watermark went back from %d to %d", last, w)
			}
			last = w
			var seqs []int64
			if _, err := scanLog(v, sid, -1, n+1, func(b []byte) error {
				ev, err := messages.UnmarshalEvent(b)
				seqs = append(seqs, ev.Seq())
				return err
			}); err != nil {
				return err
			}
			for i, q := range seqs {
				if q != int64(i) {
					return fmt.Errorf("log of %d events has seq %d at %d", len(seqs), q, i)
				}
			}
			if int64(len(seqs)) != w+1 {
				return fmt.Errorf("watermark %d with %d events", w, len(seqs))
			}
			in, err := pending(v, sid)
			if err != nil {
				return err
			}
			if int64(len(in)) != w {
				return fmt.Errorf("%d pending inputs at watermark %d", len(in), w)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if flushes.Load() < 5 {
		t.Fatalf("only %d flushes ran during %d reads", flushes.Load(), reads)
	}
	t.Logf("%d reads across %d flushes", reads, flushes.Load())
}

// TestClaimsAboveTheLastIDAfterReopen checks the writer's shortcut for
// fresh IDs (view.get answers an ID-index lookup above Bolt.maxID without a
// search): an ID is claimed without a lookup only when it is
// above every key of the ID index, including the keys a reopened store
// already holds, and with or without a flush in between.
func TestClaimsAboveTheLastIDAfterReopen(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		t.Run(fmt.Sprint("flushed=", flushed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			st, err := Open(path, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			a, b := newSession(t, st), newSession(t, st)
			// A supplied ID above any generated one: the greatest key.
			const top = messages.MessageID("msg_zzzzzzzzzzzzzzzzzzzzzzzzzz")
			if _, _, err := st.Admit(ctx, Admission{ID: top, SessionID: a, Prompt: messages.Prompt{Text: "hi"}}); err != nil {
				t.Fatal(err)
			}
			if flushed {
				st.Close()
				st = openAndCheck(t, path, Options{NoSync: true})
			} else {
				// Only the log has it: Close is a kill here.
				copyStore(t, path, path+".copy")
				st.Close()
				st = openAndCheck(t, path+".copy", Options{NoSync: true})
			}
			// An assistant message claiming the prompt's ID in another
			// Session: no read path checks it before the writer.
			_, err = st.Append(ctx, b, &messages.StepStarted{SessionID: b, AssistantMessageID: top, Agent: "build"})
			if messages.TypeOf(err) != messages.ErrPromptConflict {
				t.Fatalf("claiming an ID in use after reopen: %v, want %s", err, messages.ErrPromptConflict)
			}
			_, err = st.Append(ctx, a, &messages.StepStarted{SessionID: a, AssistantMessageID: top, Agent: "build"})
			if messages.TypeOf(err) != messages.ErrPromptConflict {
				t.Fatalf("claiming an ID in use by an input of the same Session: %v, want %s", err, messages.ErrPromptConflict)
			}
		})
	}
}

// TestPaceWriteback: with fsync on, the pacer a flush runs starts the
// writeback of bbolt's dirty pages again and again until it is stopped.
func TestPaceWriteback(t *testing.T) {
	ticks := make(chan struct{}, 1)
	writebackHook = func() {
		select {
		case ticks <- struct{}{}:
		default:
		}
	}
	defer func() { writebackHook = nil }()
	st := openTemp(t, Options{})
	stop := st.paceWriteback()
	for range 2 {
		select {
		case <-ticks:
		case <-time.After(10 * time.Second):
			t.Fatal("no paced writeback")
		}
	}
	stop() // returns once the pacer has exited; goleak fails the package otherwise
}

// TestBacklogCountAfterReopen checks the writer's kept count of pending
// inputs (pendingCount): a reopened store counts the rows it recovered,
// from bbolt or from the log alone, and goes on counting promotions.
func TestBacklogCountAfterReopen(t *testing.T) {
	for _, flushed := range []bool{false, true} {
		t.Run(fmt.Sprint("flushed=", flushed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			opts := Options{NoSync: true, InboxBacklog: 3}
			st, err := Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			sid := newSession(t, st)
			var ids []messages.MessageID
			for i := range 3 {
				r, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprint(i)}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.ID)
			}
			if _, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: ids[0]}); err != nil {
				t.Fatal(err)
			}
			if flushed {
				st.Close()
				st = openAndCheck(t, path, opts)
			} else {
				copyStore(t, path, path+".copy")
				st.Close()
				st = openAndCheck(t, path+".copy", opts)
			}
			defer st.Close()
			if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "fits"}}); err != nil {
				t.Fatalf("third pending input after reopen: %v", err)
			}
			if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "full"}}); messages.TypeOf(err) != messages.ErrInboxFull {
				t.Fatalf("fourth pending input after reopen: %v, want %s", err, messages.ErrInboxFull)
			}
			if _, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: ids[1]}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "fits again"}}); err != nil {
				t.Fatalf("admission after a promotion freed a slot: %v", err)
			}
		})
	}
}

// TestPromotionsLeaveNoTombstones: a busy Session admits and promotes
// within one memtable; its deleted pending and open-step rows leave no
// tombstones there for every later scan of its rows to step over.
func TestPromotionsLeaveNoTombstones(t *testing.T) {
	s := openTemp(t, Options{NoSync: true})
	ctx := context.Background()
	sid := newSession(t, s)
	for i := range 50 {
		r, _, err := s.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprint("p", i)}})
		if err != nil {
			t.Fatal(err)
		}
		asst := s.opts.IDs.Message()
		if _, err := s.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: r.ID},
			&messages.StepStarted{SessionID: sid, AssistantMessageID: asst, Agent: "build", Attempt: 1},
			&messages.StepEnded{SessionID: sid, AssistantMessageID: asst, Finish: "stop"}); err != nil {
			t.Fatal(err)
		}
	}
	tombstones := 0
	for _, m := range s.snap.Load().mems {
		m.Scan(func(e *memEntry) bool {
			if e.del {
				tombstones++
			}
			return true
		})
	}
	if tombstones != 0 {
		t.Fatalf("%d tombstones in the memtables", tombstones)
	}
	if p, err := s.Pending(ctx, sid); err != nil || len(p) != 0 {
		t.Fatalf("pending %v (%v)", p, err)
	}
}

// TestFailedSyncStartsNoFlush: a batch whose fdatasync fails and whose
// record takes the log past FlushBytes does not start a flush, which would
// publish the memtable holding it to readers and write it into bbolt,
// although its caller was told it failed.
func TestFailedSyncStartsNoFlush(t *testing.T) {
	var armed atomic.Bool
	syncFault = func() error {
		if armed.CompareAndSwap(true, false) { // EIO once, as Linux reports it
			return errors.New("injected EIO")
		}
		return nil
	}
	var flushes atomic.Int32
	flushHook = func(stage string, s *Bolt) {
		if stage == "start" {
			flushes.Add(1)
		}
	}
	defer func() { syncFault, flushHook = nil, nil }()
	const flushBytes = 64 << 10
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{FlushBytes: flushBytes})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sid := newSession(t, st)
	text := strings.Repeat("x", 2048)
	for st.wal.size() < flushBytes-2048 { // the writer is idle between calls
		if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	before := flushes.Load()
	armed.Store(true) // the next record crosses FlushBytes
	if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: text}}); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("admission whose sync failed: %v", err)
	}
	if err := st.Close(); err == nil { // waits for the writer
		t.Fatal("close after a failed sync reported nothing")
	}
	if n := flushes.Load(); n != before {
		t.Fatalf("%d flushes started after the failed sync", n-before)
	}
}

// TestRecoveryAppliesEveryWriteInOrder: recovery gathers the log's writes
// before it writes them into bbolt, so a key written twice, deleted after
// a write, or written again after its deletion must end as the last write
// left it, and a row a promotion deleted must stay deleted.
func TestRecoveryAppliesEveryWriteInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	sid := newSession(t, st)
	for _, text := range []string{"first", "second"} {
		if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := st.Pending(ctx, sid)
	if err != nil || len(rows) != 2 {
		t.Fatalf("pending %v, %v", rows, err)
	}
	if _, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: rows[0].ID}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ key, value string }{
		{"twice", "1"}, {"twice", "2"},
		{"gone", "1"}, {"gone", ""},
		{"back", "1"}, {"back", ""}, {"back", "2"},
	} {
		if w.value == "" {
			err = st.DeleteEntry(ctx, sid, w.key)
		} else {
			err = st.PutEntry(ctx, sid, w.key, w.value)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := dump(t, st)
	crashed := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, crashed)
	got := dump(t, openAndCheck(t, crashed, Options{}))
	sameState(t, "after a crash", got, want)
	pending := 0
	for k := range got["data"] {
		if strings.HasPrefix(k, string(prefix(sid, kPending))) {
			pending++
		}
	}
	if entries := len(got["entries"]); pending != 1 || entries != 2 {
		t.Fatalf("%d pending rows and %d entries recovered, want 1 (the promotion deleted one) and 2 (twice, back)", pending, entries)
	}
}

// countingReaderAt counts the reads that reach r.
type countingReaderAt struct {
	r     io.ReaderAt
	reads int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}

// TestReadAheadReadsWhatTheFileHolds: reads through readAhead return what
// reads of the file return, for reads within a window, across its end,
// larger than one, behind it and past the end of the file, while small
// reads in order cost one read of the file per window.
func TestReadAheadReadsWhatTheFileHolds(t *testing.T) {
	data := make([]byte, 3*readAheadBytes+100)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	file := &countingReaderAt{r: bytes.NewReader(data)}
	a := &readAhead{r: file}
	for _, rd := range []struct {
		off int64
		n   int
	}{
		{0, 16}, {16, 1000}, {readAheadBytes - 8, 16}, {5, 10}, {readAheadBytes + 3, 2 * readAheadBytes}, {int64(len(data)) - 10, 10}, {int64(len(data)) - 10, 11},
	} {
		want := make([]byte, rd.n)
		wn, werr := bytes.NewReader(data).ReadAt(want, rd.off)
		got := make([]byte, rd.n)
		n, err := a.ReadAt(got, rd.off)
		if (err == nil) != (werr == nil) || werr == nil && (n != wn || !bytes.Equal(got, want)) {
			t.Fatalf("ReadAt(%d bytes at %d): %d, %v, want %d, %v and the file's bytes", rd.n, rd.off, n, err, wn, werr)
		}
	}
	file.reads = 0
	a = &readAhead{r: file}
	for off := int64(0); off+100 <= int64(len(data)); off += 100 {
		if _, err := a.ReadAt(make([]byte, 100), off); err != nil {
			t.Fatal(err)
		}
	}
	if file.reads != 4 {
		t.Fatalf("%d reads of the file for %d bytes read in order, want 4", file.reads, len(data))
	}
}

// TestAcknowledgedMeansSynced: by the time a commit or an admission is
// answered, every log record written before its answer has been through an
// fdatasync of its file. The other crash tests cannot see a sync that was
// skipped (the page cache survives a SIGKILL); this one watches the log's
// writes and syncs. The flushes every 8 KiB move the log between its two
// files, so a sync of the wrong one fails it too.
func TestAcknowledgedMeansSynced(t *testing.T) {
	var mu sync.Mutex
	written := map[*os.File]int64{} // the end of the last record written to each file
	synced := map[*os.File]int64{}  // how far each file's syncs have covered
	writeFault = func(f *os.File, b []byte, off int64) error {
		_, err := f.WriteAt(b, off)
		mu.Lock()
		written[f] = max(written[f], off+int64(len(b)))
		mu.Unlock()
		return err
	}
	sync := syncFile
	syncFile = func(f *os.File) error {
		mu.Lock()
		upTo := written[f]
		mu.Unlock()
		err := sync(f)
		if err == nil {
			mu.Lock()
			synced[f] = max(synced[f], upTo)
			mu.Unlock()
		}
		return err
	}
	defer func() { writeFault, syncFile = nil, sync }()
	flushes := new(atomic.Int64)
	s := openTemp(t, Options{FlushBytes: 8 << 10, OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	ctx := context.Background()
	sid := newSession(t, s)
	check := func(what string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for f, end := range written {
			if synced[f] < end {
				t.Fatalf("%s answered with %s synced to %d of %d bytes", what, filepath.Base(f.Name()), synced[f], end)
			}
		}
	}
	for i := range 150 {
		if _, _, err := s.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprintf("%0100d", i)}}); err != nil {
			t.Fatal(err)
		}
		check("an admission")
		if _, err := s.Commit(ctx, sid, &messages.ExecutionStarted{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
		check("a commit")
	}
	if flushes.Load() < 2 || len(written) != 2 {
		t.Fatalf("%d flushes, records written to %d files: the log did not move between its files", flushes.Load(), len(written))
	}
}

// TestFlushesRemapWhileTheWriterWaits: a flush whose bbolt commit grows
// the file remaps it, which waits for every open read transaction, and
// the writer waits for a running flush once the log has grown twice as far
// as FlushBytes. The writer's batch holds a read transaction while it is
// open, so it must end it before it waits for the flusher, or each waits
// for the other for good. Small flushes over a mapping that starts small
// remap again and again while hundreds of batches commit.
func TestFlushesRemapWhileTheWriterWaits(t *testing.T) {
	defer func(n int) { initialMmapSize = n }(initialMmapSize)
	initialMmapSize = 0 // bbolt's smallest, doubled as the file grows
	var flushes, returned atomic.Int64
	st := openTemp(t, Options{NoSync: true, FlushBytes: 2 << 10, OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	sids := make([]messages.SessionID, 8)
	for i := range sids {
		sids[i] = newSession(t, st)
	}
	ctx := context.Background()
	text := strings.Repeat("x", 512)
	var wg sync.WaitGroup
	for _, sid := range sids {
		wg.Go(func() {
			for range 150 {
				if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: text}}); err != nil {
					t.Error(err)
					return
				}
				returned.Add(1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		// A submitted write is never abandoned, so a deadlock shows as
		// admissions that never return.
		t.Fatalf("%d admissions returned in a minute, of %d: the writer and the flusher wait for each other", returned.Load(), 150*len(sids))
	}
	if flushes.Load() < 10 {
		t.Fatalf("%d flushes in %d admissions", flushes.Load(), returned.Load())
	}
}
