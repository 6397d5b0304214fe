package persistence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// backup returns a backup of st, and checks that closing it removes its
// file.
func backup(t *testing.T, st *Bolt) []byte {
	t.Helper()
	r, size, err := st.Backup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil || int64(len(b)) != size {
		t.Fatalf("read %d bytes of %d: %v", len(b), size, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(st.Path() + ".backup-*"); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	return b
}

// restore writes a backup as the store of a new data directory and opens
// it, closed when the test ends.
func restore(t *testing.T, backup []byte) *Bolt {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	if err := os.WriteFile(path, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestBackupIsTheStoreAsReadersSeeIt: a backup holds what bbolt holds and
// what the memtables hold over it (here a promotion that deleted a row
// bbolt has, and admissions since the last flush), opens as a store of its
// own and verifies; the live store goes on unchanged.
func TestBackupIsTheStoreAsReadersSeeIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, st, 3, 30)
	if err := st.Close(); err != nil { // everything into bbolt
		t.Fatal(err)
	}
	st, err = Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	sids, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sid := sids[0].ID
	rows, err := st.Pending(ctx, sid)
	if err != nil || len(rows) == 0 {
		t.Fatalf("pending %v, %v", rows, err)
	}
	if _, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: rows[0].ID}); err != nil {
		t.Fatal(err)
	}
	populate(t, st, 2, 10)
	want := dump(t, st)

	copied := restore(t, backup(t, st))
	sameState(t, "the backup", dump(t, copied), want)
	if r, err := copied.Verify(ctx, t.TempDir()); err != nil || len(r.Problems) != 0 {
		t.Fatalf("verify the backup: %+v, %v", r, err)
	}
	sameState(t, "the store after its backup", dump(t, st), want)
}

// TestBackupWhileAdmitting: a backup taken while prompts are admitted and
// flushed holds every admission acknowledged before it began, and is
// whole.
func TestBackupWhileAdmitting(t *testing.T) {
	st := openTemp(t, Options{FlushBytes: 16 << 10})
	ctx := context.Background()
	sids := []messages.SessionID{newSession(t, st), newSession(t, st)}
	admit := func(i int) messages.MessageID {
		r, _, err := st.Admit(ctx, Admission{SessionID: sids[i%2], Prompt: messages.Prompt{Text: fmt.Sprintf("prompt %d", i)}})
		if err != nil {
			t.Error(err)
		}
		return r.ID
	}
	var before []messages.MessageID
	for i := range 100 {
		before = append(before, admit(i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 100; ; i++ {
			select {
			case <-stop:
				return
			default:
				admit(i)
			}
		}
	})
	b := backup(t, st)
	close(stop)
	wg.Wait()
	copied := restore(t, b)
	for _, id := range before {
		if _, err := copied.Input(ctx, id); err != nil {
			t.Fatalf("admission %s acknowledged before the backup: %v", id, err)
		}
	}
	if r, err := copied.Verify(ctx, t.TempDir()); err != nil || len(r.Problems) != 0 {
		t.Fatalf("verify the backup: %+v, %v", r, err)
	}
}

// TestBackupStopsWithItsContext: a cancelled backup returns nothing and
// leaves no file behind.
func TestBackupStopsWithItsContext(t *testing.T) {
	st := openTemp(t, Options{})
	newSession(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := st.Backup(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("backup: %v, want cancelled", err)
	}
	if left, _ := filepath.Glob(st.Path() + ".backup-*"); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestBackupWritesTheNewerMemtableLast: while a flush has committed but
// the writer has not collected it, readers see the flushed memtable under
// the newer one; a backup taken then has a key's newer value, which the
// flushed memtable (and bbolt) hold an older one of.
func TestBackupWritesTheNewerMemtableLast(t *testing.T) {
	st := flushHeldAfterItsCommit(t)
	want := dump(t, st)
	sameState(t, "the backup", dump(t, restore(t, backup(t, st))), want)
}

// TestOpenRemovesWhatABackupLeft: a backup's temporary file that a crash
// left beside the store is removed when the store next opens, and nothing
// else is, in a directory whose name holds glob characters too.
func TestOpenRemovesWhatABackupLeft(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a[b]*?")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s.db.backup-123", "s.db.other", "x.db.backup-1"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// What a killed check left: the store it was rebuilding.
	for _, name := range []string{"s.db.verify-77", "x.db.verify-1"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "rebuilt.db"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"s.db", "s.db-wal", "s.db-wal2", "s.db.other", "x.db.backup-1", "x.db.verify-1"}; !slices.Equal(names, want) {
		t.Fatalf("files %q, want %q", names, want)
	}
}

// flushHeldAfterItsCommit returns a store whose flush of a meta key "k"
// ("old" repeated past FlushBytes) has committed into bbolt and is held
// there, not yet collected by the writer, until the test ends; "k" has
// been written again since ("new"), in the memtable above it.
func flushHeldAfterItsCommit(t *testing.T) *Bolt {
	t.Helper()
	var armed atomic.Bool
	committed, release := make(chan struct{}), make(chan struct{})
	flushHook = func(stage string, _ *Bolt) {
		if stage == "committed" && armed.CompareAndSwap(true, false) {
			committed <- struct{}{}
			<-release
		}
	}
	t.Cleanup(func() { flushHook = nil }) // after the store's Close
	const flushBytes = 64 << 10
	st := openTemp(t, Options{NoSync: true, FlushBytes: flushBytes})
	t.Cleanup(sync.OnceFunc(func() { close(release) })) // before the store's Close
	ctx := context.Background()
	armed.Store(true)
	if err := st.submit(ctx, putMeta("k", strings.Repeat("old", flushBytes/3+1))); err != nil {
		t.Fatal(err)
	}
	<-committed
	if err := st.submit(ctx, putMeta("k", "new")); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestBackupBesideAnOlderLog: a backup records the last log record it
// holds, not its store's last flush, so restored beside log files copied
// before it was made (an older copy of the data directory), it takes none
// of their records for newer than itself. Taken for newer, they wrote the
// values they held back over the backup's.
func TestBackupBesideAnOlderLog(t *testing.T) {
	st := openTemp(t, noFlush)
	ctx := context.Background()
	if err := st.submit(ctx, putMeta("k", "old")); err != nil {
		t.Fatal(err)
	}
	older := t.TempDir()
	for _, suffix := range []string{"-wal", "-wal2"} {
		copyFile(t, st.Path()+suffix, filepath.Join(older, "s.db"+suffix))
	}
	if err := st.submit(ctx, putMeta("k", "new")); err != nil {
		t.Fatal(err)
	}
	want := dump(t, st)
	b := backup(t, st)
	path := filepath.Join(older, "s.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sameState(t, "the backup beside an older log", dump(t, openAndCheck(t, path, noFlush)), want)
}
