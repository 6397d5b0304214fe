package persistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// TestLookupLooksPastAnEmptyNewerMemtable: right after a flush starts, the
// newer memtable is empty and the flushing one holds everything not yet in
// bbolt; a lookup must go on to the older memtable, not stop at the empty
// one, whether the older one holds a value or a tombstone over bbolt's.
func TestLookupLooksPastAnEmptyNewerMemtable(t *testing.T) {
	tx := bareBolt(t, func(tx *bolt.Tx) error { return tx.Bucket(bucketData).Put([]byte("gone"), []byte("bolt")) })
	older := newMemTree()
	older.Set(&memEntry{k: memKey(dataIndex, []byte("fresh")), v: []byte("older")})
	older.Set(&memEntry{k: memKey(dataIndex, []byte("gone")), del: true})
	v := &view{tx: tx, mems: []*memTree{newMemTree(), older}}
	if got := v.get(bucketData, []byte("fresh")); string(got) != "older" {
		t.Fatalf("fresh = %q, want the older memtable's %q", got, "older")
	}
	if got := v.get(bucketData, []byte("gone")); got != nil {
		t.Fatalf("gone = %q, want it deleted by the older memtable", got)
	}
}

// TestOpenSurvivesATornLogRestart: every Open records in bbolt the number
// of the last record it holds before it starts the log over, so a crash
// that tears the header of the restarted log file leaves a store that the
// other file, whose records bbolt already holds, still opens.
func TestOpenSurvivesATornLogRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	flushes := new(atomic.Int64)
	st, err := Open(path, Options{NoSync: true, FlushBytes: 4 << 10, OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, st)
	for i := 0; flushes.Load() == 0; i++ {
		p := messages.Prompt{Text: fmt.Sprint("prompt ", i, strings.Repeat("x", 500))}
		if _, _, err := st.Admit(context.Background(), Admission{SessionID: sid, Prompt: p}); err != nil {
			t.Fatal(err)
		}
	}
	want := dump(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// An Open that recovers nothing still starts the log over.
	st, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Tear the header that restart wrote: the newer one.
	tearWALHeader(t, path, func(gen, best uint64) bool { return gen >= best }, 0)
	sameState(t, "after a torn restart", dump(t, openAndCheck(t, path, Options{NoSync: true})), want)
}

// TestSnapshotCoversARunningFlush: from the moment a flush is handed to
// the flusher, the published snapshot covers bbolt both before and after
// the flush's transaction, so a read right after the flush commits, with
// no commit since to publish a newer snapshot, does not wait for one.
func TestSnapshotCoversARunningFlush(t *testing.T) {
	var armed atomic.Bool
	checked := make(chan string, 1)
	flushHook = func(stage string, s *Bolt) {
		if stage != "committed" || !armed.CompareAndSwap(true, false) {
			return
		}
		tx, err := s.db.Begin(false)
		if err != nil {
			checked <- err.Error()
			return
		}
		defer tx.Rollback()
		if sn := s.snap.Load(); tx.ID() < sn.lo || tx.ID() > sn.hi {
			checked <- fmt.Sprintf("bbolt at transaction %d after the flush, snapshot covers %d..%d", tx.ID(), sn.lo, sn.hi)
			return
		}
		checked <- ""
	}
	t.Cleanup(func() { flushHook = nil }) // after the store's Close
	const flushBytes = 64 << 10
	st := openTemp(t, Options{NoSync: true, FlushBytes: flushBytes})
	armed.Store(true)
	if err := st.submit(context.Background(), putMeta("k", strings.Repeat("v", flushBytes))); err != nil {
		t.Fatal(err)
	}
	if msg := <-checked; msg != "" {
		t.Fatal(msg)
	}
	if _, err := st.Dump(); err != nil {
		t.Fatal(err)
	}
}

// TestFlushStartsWithTheLogAtExactlyFlushBytes: the writer starts a flush
// once the log has grown to FlushBytes, the boundary included.
func TestFlushStartsWithTheLogAtExactlyFlushBytes(t *testing.T) {
	var started atomic.Int64
	flushHook = func(stage string, _ *Bolt) {
		if stage == "start" {
			started.Add(1)
		}
	}
	t.Cleanup(func() { flushHook = nil }) // after the store's Close
	st := openTemp(t, Options{NoSync: true, FlushBytes: 1 << 40})
	ctx := context.Background()
	if err := st.submit(ctx, putMeta("k", "v")); err != nil {
		t.Fatal(err)
	}
	// An operation that writes nothing, run by the writer: the log stays
	// as it is, exactly FlushBytes long from this commit on.
	err := st.submit(ctx, func(w *wtx) error {
		w.s.opts.FlushBytes = w.s.wal.size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.submit(ctx, func(*wtx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if started.Load() == 0 {
		t.Fatal("no flush started with the log at FlushBytes")
	}
}

// TestCloseAcknowledgesDurableCommitsBeforeAFlushFails: Close lets the
// syncer answer every commit queued before it, and only then collects a
// running flush; a flush failing meanwhile does not turn a commit whose
// record is synced into a failure of unknown outcome.
func TestCloseAcknowledgesDurableCommitsBeforeAFlushFails(t *testing.T) {
	entered, release := holdFirstFlushFailure()
	defer func() { flushFault = nil }()
	const flushBytes = 64 << 10
	st := openTemp(t, Options{NoSync: true, FlushBytes: flushBytes})
	ctx := context.Background()
	if err := st.submit(ctx, putMeta("big", strings.Repeat("v", flushBytes))); err != nil {
		t.Fatal(err)
	}
	<-entered // the flush runs, and fails once released
	held, releaseSync := holdNextSync(t)
	committed := make(chan error, 1)
	go func() { committed <- st.submit(ctx, putMeta("k", "v")) }()
	<-held // its record is written, its sync running
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	close(release)
	// The flush has failed, and either the writer collected it (failing
	// the store) or its result waits for the writer.
	for len(st.flushDone) == 0 && st.Failed() == nil {
		runtime.Gosched()
	}
	releaseSync()
	if err := <-committed; err != nil {
		t.Fatalf("a commit synced before the flush failure was collected: %v", err)
	}
	if err := <-closed; err == nil || !strings.Contains(err.Error(), "injected flush failure") {
		t.Fatalf("close with a flush failing: %v", err)
	}
}

// TestReadRacingCloseFailsWithErrClosed: a read that took its snapshot
// before Close and begins its bbolt transaction after Close closed the
// file reports ErrClosed, not bbolt's error.
func TestReadRacingCloseFailsWithErrClosed(t *testing.T) {
	var armed atomic.Bool
	var st *Bolt
	viewHook = func() {
		if armed.CompareAndSwap(true, false) {
			if err := st.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { viewHook = nil })
	st = openTemp(t, Options{NoSync: true})
	armed.Store(true)
	if _, err := st.Dump(); !errors.Is(err, ErrClosed) {
		t.Fatalf("read as the store closed: %v, want ErrClosed", err)
	}
}

// TestOpenOfACorruptFileLeavesItClosed: an Open that bbolt's panic on a
// corrupt freelist page ends closes the database file, not only its lock:
// nothing is left open on it.
func TestOpenOfACorruptFileLeavesItClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	verifiedStore(t, path)
	editFreelistPage(t, path, func(page []byte) { page[8] = flagLeaf })
	if st, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			st.Close()
		}
		t.Fatalf("open: %v, want ErrCorrupt", err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == path {
			t.Fatalf("descriptor %s still open on %s", fd.Name(), path)
		}
	}
}

// TestFailedKeepsTheFirstFailure: once the store has failed, a later
// failure does not replace the first one, which Failed reports.
func TestFailedKeepsTheFirstFailure(t *testing.T) {
	st := openTemp(t, Options{NoSync: true})
	first, second := errors.New("first failure"), errors.New("second failure")
	st.fail(first)
	st.fail(second)
	if err := st.Failed(); !errors.Is(err, first) || errors.Is(err, second) {
		t.Fatalf("Failed = %v, want the first failure only", err)
	}
}

// TestOpenRemovesWhatABackupLeftBesideABackslash: a backslash in the
// store's directory is a glob escape, so it is escaped itself when Open
// looks for a crashed backup's temporary files.
func TestOpenRemovesWhatABackupLeftBesideABackslash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), `a\b`)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.db")
	left := path + backupSuffix + "1"
	if err := os.WriteFile(left, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: %v, want it removed", left, err)
	}
}

// TestLogStartingPastTheDatabaseIsCorruptEvenToRepair: when the newer log
// file starts past the record after bbolt's last and the older file has no
// header, nothing holds the records between: that is corruption, which
// RepairWAL does not paper over as a damaged record.
func TestLogStartingPastTheDatabaseIsCorruptEvenToRepair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	flushes := new(atomic.Int64)
	st, err := Open(path, Options{NoSync: true, FlushBytes: 4 << 10, OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; flushes.Load() < 2; i++ {
		if err := st.submit(context.Background(), putMeta(fmt.Sprint("k", i), strings.Repeat("x", 1<<10))); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	editBolt(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyApplied, make([]byte, 8)) // bbolt holds no record
	})
	// Tear the older file's header.
	tearWALHeader(t, path, func(gen, best uint64) bool { return gen <= best }, 1<<64-1)
	st, err = Open(path, Options{NoSync: true, RepairWAL: true})
	if err == nil {
		st.Close()
		t.Fatal("opened a store whose log starts past its database")
	}
	if !errors.Is(err, errWALCorrupt) || errors.Is(err, ErrWALDamaged) {
		t.Fatalf("open: %v, want log corruption, not a damaged record", err)
	}
}

// tearWALHeader zeroes the header of the log file of the store at path
// whose generation wins over the others by better, starting from first.
func tearWALHeader(t *testing.T, path string, better func(gen, best uint64) bool, first uint64) {
	t.Helper()
	var pick string
	best := first
	for _, name := range []string{path + "-wal", path + "-wal2"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if h, ok := decodeHeader(b); ok && better(h.gen, best) {
			pick, best = name, h.gen
		}
	}
	f, err := os.OpenFile(pick, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, walHeaderLen), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
