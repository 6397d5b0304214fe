package persistence

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTornRecordIsAnUnknownOutcome: when a log write fails and so does the
// invalidation of what it wrote (here its fdatasync: the zeros need not be
// on the disk, the record may be), the record can be replayed by the next
// Open. Its callers must be told the outcome is unknown, as for a batch
// whose fdatasync failed; they were told it failed, and a retry of a
// write that is not idempotent would then be applied twice.
func TestTornRecordIsAnUnknownOutcome(t *testing.T) {
	var failSync atomic.Bool
	var torn struct {
		name string
		off  int64
		rec  []byte
	}
	writeFault = func(f *os.File, b []byte, off int64) error {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("torn write")) {
			return nil
		}
		torn.name, torn.off, torn.rec = f.Name(), off, bytes.Clone(b)
		failSync.Store(true) // the next sync is the writer's, of its invalidation
		return errors.New("injected write failure")
	}
	syncFault = func() error {
		if failSync.CompareAndSwap(true, false) {
			return errors.New("injected EIO")
		}
		return nil
	}
	defer func() { writeFault, syncFault = nil, nil }()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, st)
	admit := admitter(st, sid)
	if err := admit("acknowledged"); err != nil {
		t.Fatal(err)
	}
	err = admit("torn write")
	if err == nil || !strings.Contains(err.Error(), "injected write failure") {
		t.Fatalf("admission whose write and invalidation failed: %v", err)
	}
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("admission whose record may be in the log: %v, want an unknown outcome", err)
	}
	if err := st.Failed(); err == nil {
		t.Fatal("the store goes on writing after a torn log record")
	}
	_ = st.Close() // reports the failure; bbolt is not flushed
	writeFault, syncFault = nil, nil

	// The disk as the failed fdatasync may have left it: the record whole,
	// the zeros that invalidated it never written back.
	f, err := os.OpenFile(torn.name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(torn.rec, torn.off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p, err := openAndCheck(t, path, noFlush).Pending(context.Background(), sid)
	if err != nil || len(p) != 2 {
		t.Fatalf("after reopening: %d pending, %v (the torn write is replayed)", len(p), err)
	}
}

// TestOpenAfterAFailedOpenSyncsTheDirectory: an Open that created the
// store's files and was killed before its directory fsync (here the fsync
// fails, and the test puts back the log files the failed Open removes)
// leaves their names not durable. The next Open finds the files and must still make their names
// durable before it acknowledges a commit in them: a power loss could
// otherwise take a log file, with the acknowledged commits in it, away.
func TestOpenAfterAFailedOpenSyncsTheDirectory(t *testing.T) {
	var syncs atomic.Int32
	var failing atomic.Bool
	failing.Store(true)
	dirSyncFault = func() error {
		if failing.Load() {
			return errors.New("injected EIO")
		}
		syncs.Add(1)
		return nil
	}
	defer func() { dirSyncFault = nil }()
	path := filepath.Join(t.TempDir(), "s.db")
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("open whose directory fsync failed: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the failed open left no %s: %v", path, err)
	}
	// A failed Open removes the empty log files it created (dropCreated);
	// one killed at that point leaves them, unsynced, as here.
	for _, name := range []string{path + "-wal", path + "-wal2"} {
		if _, err := os.Stat(name); err == nil {
			t.Fatalf("the failed open left %s, which it created empty", name)
		}
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	failing.Store(false)
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if syncs.Load() == 0 {
		t.Fatal("the store's directory was never fsynced: its files' names are not durable")
	}
	if err := admitter(st, newSession(t, st))("hi"); err != nil {
		t.Fatal(err)
	}
}

// TestRecoveryFailsOnAReadError: a log file that cannot be read (an I/O
// error, such as a bad sector or a network disk's transient failure) is
// not a log without records. Recovery took a failed read of the newest
// file's header for a missing header, and of a record for the end of the
// log: Open then went on without the acknowledged commits behind it, and
// the next start of the log over that file destroyed them for good.
func TestRecoveryFailsOnAReadError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.start(1, 1, 7); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two", "three"} {
		if _, err := w.append([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if replay, last, err := w.recover(0, 0); err != nil || len(replay) != 3 || last != 3 {
		t.Fatalf("readable log: %q, last %d, %v", replay, last, err)
	}
	// The file as one whose every read fails.
	rw := w.files[1].f
	wo, err := os.OpenFile(rw.Name(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wo.Close()
	w.files[1].f = wo
	replay, last, err := w.recover(0, 0)
	w.files[1].f = rw
	if err == nil {
		t.Fatalf("unreadable log recovered as %d records, last %d: a read error is not the end of the log", len(replay), last)
	}

	// A read failing past the first record.
	b, err := os.ReadFile(rw.Name())
	if err != nil {
		t.Fatal(err)
	}
	second := int64(walRecordStart + walRecordHead + len("one"))
	recs, err := readRecords(failingReader{bytes.NewReader(b), second}, int64(len(b)), 1, 7)
	if err == nil {
		t.Fatalf("a failed read ended the log after %d records without an error", len(recs))
	}
}

// failingReader fails every read that reaches from on.
type failingReader struct {
	r    *bytes.Reader
	from int64
}

func (f failingReader) ReadAt(b []byte, off int64) (int, error) {
	if off+int64(len(b)) > f.from {
		return 0, errors.New("injected EIO")
	}
	return f.r.ReadAt(b, off)
}
