package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// TestOpenRefusesAnotherSchemaVersion: Open refuses a file whose schema
// byte is another version's, or not one byte, with ErrSchema, and opens
// the file again once it holds this version's.
func TestOpenRefusesAnotherSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	setSchema := func(v []byte) {
		t.Helper()
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keySchema, v) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range [][]byte{{schemaVersion + 1}, {schemaInbox - 1}, {schemaVersion, 0}, {}} {
		setSchema(v)
		st, err := Open(path, Options{NoSync: true})
		if !errors.Is(err, ErrSchema) {
			if err == nil {
				_ = st.Close()
			}
			t.Fatalf("schema %v: Open = %v, want ErrSchema", v, err)
		}
	}
	setSchema([]byte{schemaVersion})
	st, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("schema %d: %v", schemaVersion, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// putMeta returns an operation that writes key = val in the meta bucket.
func putMeta(key, val string) func(w *wtx) error {
	return func(w *wtx) error { return w.putBytes(bucketMeta, []byte(key), []byte(val)) }
}

// TestOnCommitObservesEachCommitFirst: OnCommit sees every group commit
// with its operation count before any of its callers is answered, and
// never a batch whose every operation was refused.
func TestOnCommitObservesEachCommitFirst(t *testing.T) {
	var mu sync.Mutex
	var counts []int
	st := openTemp(t, Options{NoSync: true, OnCommit: func(n int, _ time.Duration) {
		mu.Lock()
		counts = append(counts, n)
		mu.Unlock()
	}})
	ctx := context.Background()
	seen := func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(counts)
	}
	for i := range 3 {
		if err := st.submit(ctx, putMeta("k", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if got := seen(); len(got) != i+1 || got[i] != 1 {
			t.Fatalf("after commit %d OnCommit saw %v, want %d commits of one operation", i, got, i+1)
		}
	}
	refusal := errors.New("refused")
	if err := st.submit(ctx, func(*wtx) error { return refusal }); !errors.Is(err, refusal) {
		t.Fatalf("refused operation: %v", err)
	}
	if err := st.submit(ctx, putMeta("k", "last")); err != nil {
		t.Fatal(err)
	}
	if got := seen(); !slices.Equal(got, []int{1, 1, 1, 1}) {
		t.Fatalf("OnCommit saw %v, want four commits of one operation (none for the refusal)", got)
	}
}

// TestAcknowledgedWritesAreSynced: every write is answered only after an
// fdatasync of the log that follows its commit.
func TestAcknowledgedWritesAreSynced(t *testing.T) {
	var syncs atomic.Int64
	syncFault = func() error { syncs.Add(1); return nil }
	t.Cleanup(func() { syncFault = nil })
	st := openTemp(t, Options{NoSync: true})
	ctx := context.Background()
	for i := range 5 {
		before := syncs.Load()
		if err := st.submit(ctx, putMeta("k", fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if syncs.Load() == before {
			t.Fatalf("write %d was acknowledged without a sync of the log", i)
		}
	}
}

// TestOnSyncTimesEveryLogSync: OnSync observes the fdatasync that makes
// each batch durable, before the batch is answered, and observes nothing
// when NoSync leaves the log unsynced.
func TestOnSyncTimesEveryLogSync(t *testing.T) {
	t.Run("failed", func(t *testing.T) {
		var failNext atomic.Bool
		syncFault = func() error {
			if failNext.Load() {
				return errors.New("disk gone")
			}
			return nil
		}
		t.Cleanup(func() { syncFault = nil })
		var n atomic.Int64
		st := openTemp(t, Options{OnSync: func(time.Duration) { n.Add(1) }})
		ctx := context.Background()
		if err := st.submit(ctx, putMeta("k", "1")); err != nil {
			t.Fatal(err)
		}
		before := n.Load()
		failNext.Store(true)
		if err := st.submit(ctx, putMeta("k", "2")); err == nil {
			t.Fatal("a write whose sync failed was acknowledged")
		}
		if n.Load() != before+1 {
			t.Fatalf("the failed sync was observed %d times, want once", n.Load()-before)
		}
	})
	for _, nosync := range []bool{false, true} {
		t.Run(fmt.Sprint("NoSync=", nosync), func(t *testing.T) {
			var mu sync.Mutex
			var took []time.Duration
			st := openTemp(t, Options{NoSync: nosync, OnSync: func(d time.Duration) {
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}})
			observed := func() []time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(took)
			}
			ctx := context.Background()
			for i := range 3 {
				if err := st.submit(ctx, putMeta("k", fmt.Sprint(i))); err != nil {
					t.Fatal(err)
				}
				got := observed()
				switch {
				case nosync && len(got) != 0:
					t.Fatalf("NoSync: %d syncs observed", len(got))
				case !nosync && len(got) != i+1:
					t.Fatalf("write %d answered after %d observed syncs, want %d", i, len(got), i+1)
				case !nosync && got[i] <= 0:
					t.Fatalf("sync %d took %v", i, got[i])
				}
			}
		})
	}
}

// TestGroupCommitTakesQueuedOperations: operations that arrive while a
// batch syncs go into the next batches together, MaxBatch at a time (by
// default, all of these): the writer runs them into its open batch, up to
// MaxBatch, and the rest queue.
func TestGroupCommitTakesQueuedOperations(t *testing.T) {
	const n = 7
	for maxBatch, filled := range map[int]int{0: n, 2: 2} {
		t.Run(fmt.Sprint("MaxBatch=", maxBatch), func(t *testing.T) {
			var mu sync.Mutex
			var counts []int
			refused := make(chan struct{}, 1)
			refuseHook = func() { refused <- struct{}{} }
			t.Cleanup(func() { refuseHook = nil })
			st := openTemp(t, Options{NoSync: true, MaxBatch: maxBatch, OnCommit: func(n int, _ time.Duration) {
				mu.Lock()
				counts = append(counts, n)
				mu.Unlock()
			}})
			held, release := holdNextSync(t)
			defer release()
			ctx := context.Background()
			errs := make(chan error, n+2)
			go func() { errs <- st.submit(ctx, putMeta("first", "")) }()
			<-held
			// The first batch syncs; the writer runs a refusal into its open
			// batch, then the rest.
			refusal := errors.New("refused")
			go func() {
				if err := st.submit(ctx, func(*wtx) error { return refusal }); !errors.Is(err, refusal) {
					errs <- fmt.Errorf("refusal answered %v", err)
					return
				}
				errs <- nil
			}()
			<-refused
			var ran atomic.Int64
			for i := range n {
				go func() {
					errs <- st.submit(ctx, func(w *wtx) error {
						ran.Add(1)
						return putMeta(fmt.Sprint("k", i), "")(w)
					})
				}()
			}
			for ran.Load() < int64(filled) || len(st.ops) < n-filled {
				runtime.Gosched() // polling: they run into the open batch until it is full, then queue
			}
			release()
			for range n + 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			// The first, then the batch that filled while it synced; the
			// rest go as the syncer takes them, none above MaxBatch.
			sum := 0
			for _, c := range counts {
				sum += c
				if maxBatch > 0 && c > maxBatch {
					t.Fatalf("commits of %v operations: one above MaxBatch", counts)
				}
			}
			if len(counts) < 2 || counts[0] != 1 || counts[1] != filled || sum != n+1 {
				t.Fatalf("commits of %v operations, want 1, then %d, then the rest", counts, filled)
			}
		})
	}
}

// TestNothingWrittenInAFailedBatchIsNotUnknown: when the store fails before
// a batch is durable, an operation of it that wrote nothing (so logged
// nothing) gets the failure, not an unknown outcome, while a logged write
// of the batch before it gets the unknown outcome.
func TestNothingWrittenInAFailedBatchIsNotUnknown(t *testing.T) {
	armed, held, release := failHeldSync(t)
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	armed.Store(true)
	logged, readOnly := make(chan error, 1), make(chan error, 1)
	go func() { logged <- st.submit(ctx, putMeta("k", "v")) }()
	<-held
	ran := make(chan struct{})
	var once sync.Once
	go func() {
		readOnly <- st.submit(ctx, func(w *wtx) error {
			once.Do(func() { close(ran) }) // past the writer's check for a failed store
			_ = w.v.get(bucketMeta, []byte("k"))
			return nil
		})
	}()
	<-ran
	close(release)
	if err := <-logged; !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("logged write: %v, want an unknown outcome", err)
	}
	if err := <-readOnly; err == nil || errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, st.Failed()) {
		t.Fatalf("operation that wrote nothing: %v, want the store's failure %v", err, st.Failed())
	}
}

// TestDefaultFlushBytes: with the default FlushBytes a few small commits
// stay in the log and the memtable (Close's own flush is not reported);
// with a small one they are flushed.
func TestDefaultFlushBytes(t *testing.T) {
	for flushBytes, want := range map[int64]bool{0: false, 1: true} {
		var flushes atomic.Int64
		st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true, FlushBytes: flushBytes,
			OnFlush: func(int, time.Duration) { flushes.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := st.submit(context.Background(), putMeta("k", fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if got := flushes.Load() > 0; got != want {
			t.Fatalf("FlushBytes %d: %d flushes, want any: %v", flushBytes, flushes.Load(), want)
		}
	}
}

// TestReadRetakesASnapshotThatFlushesOutgrew: a read whose snapshot was
// taken before flushes moved bbolt past it takes both again, instead of
// reading its old memtables over the newer bbolt: a mix of two keys never
// committed together.
func TestReadRetakesASnapshotThatFlushesOutgrew(t *testing.T) {
	var armed atomic.Bool
	paused, resume := make(chan struct{}), make(chan struct{})
	viewHook = func() {
		if armed.CompareAndSwap(true, false) {
			close(paused)
			<-resume
		}
	}
	t.Cleanup(func() { viewHook = nil })
	st := openTemp(t, Options{NoSync: true, FlushBytes: 1}) // a flush after every commit
	put := func(kv ...string) {
		t.Helper()
		err := st.submit(context.Background(), func(w *wtx) error {
			for i := 0; i < len(kv); i += 2 {
				if err := w.putBytes(bucketMeta, []byte(kv[i]), []byte(kv[i+1])); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("j", "1", "k", "1")
	put("k", "1") // flushing when the read takes its snapshot: k only in it, j only in bbolt
	armed.Store(true)
	got := make(chan string, 1)
	go func() {
		var j, k []byte
		err := st.view(func(v *view) error {
			j, k = slices.Clone(v.get(bucketMeta, []byte("j"))), slices.Clone(v.get(bucketMeta, []byte("k")))
			return nil
		})
		got <- fmt.Sprintf("j=%s k=%s %v", j, k, err)
	}()
	<-paused
	put("j", "2", "k", "2")
	// Two more commits: the writer has collected the flush of the one
	// above, which bbolt now holds, by the time the second is answered.
	put("x", "")
	put("x", "")
	close(resume)
	if g := <-got; g != "j=2 k=2 <nil>" {
		t.Fatalf("read %s, want j=2 k=2", g)
	}
}

// TestOptionsDefaults pins the defaults Options documents, and that a set
// value is kept. The lock Timeout only changes how long Open waits on the
// wall clock, so no behaviour test sees it.
func TestOptionsDefaults(t *testing.T) {
	var o Options
	o.fill()
	set := Options{PromptBytes: 1, MaxBatch: 2, PageSize: 3, Timeout: 4, FlushBytes: 5}
	set.fill()
	for _, w := range []struct {
		name         string
		got, want    int64
		gotSet, kept int64
	}{
		{"PromptBytes", int64(o.PromptBytes), 1 << 20, int64(set.PromptBytes), 1},
		{"MaxBatch", int64(o.MaxBatch), 1024, int64(set.MaxBatch), 2},
		{"PageSize", int64(o.PageSize), 50, int64(set.PageSize), 3},
		{"Timeout", int64(o.Timeout), int64(time.Second), int64(set.Timeout), 4},
		{"FlushBytes", o.FlushBytes, 8 << 20, set.FlushBytes, 5},
	} {
		if w.got != w.want || w.gotSet != w.kept {
			t.Errorf("%s: default %d, want %d; set %d, want %d", w.name, w.got, w.want, w.gotSet, w.kept)
		}
	}
	if o.Clock == nil || o.IDs == nil {
		t.Errorf("Options without them got clock %v, IDs %v", o.Clock != nil, o.IDs)
	}
}

// TestFlushStopsAtAFailedWrite: a flush whose bbolt write fails returns
// that error and commits nothing, neither the writes after it nor the
// applied watermark (which would tell the next Open to skip records
// bbolt lacks).
func TestFlushStopsAtAFailedWrite(t *testing.T) {
	st := openTemp(t, Options{NoSync: true})
	readApplied := func() (v []byte) {
		if err := st.db.View(func(tx *bolt.Tx) error {
			v = slices.Clone(tx.Bucket(bucketMeta).Get(keyApplied))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := readApplied()
	mem := newMemTree()
	mem.Set(&memEntry{k: []byte{1}, v: []byte("no key: bbolt refuses it")})
	mem.Set(&memEntry{k: []byte{1, 'k'}, v: []byte("after it")})
	if _, err := st.flushInto(mem, 1000, 0); err == nil {
		t.Fatal("a flush with a write bbolt refuses succeeded")
	}
	if err := st.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(allBuckets[1]).Get([]byte("k")); v != nil {
			t.Errorf("the write after the failed one was committed: %q", v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if after := readApplied(); !slices.Equal(after, before) {
		t.Errorf("applied watermark %x after the failed flush, was %x", after, before)
	}
}

// TestReopenAfterCloseReplaysNothing: Close flushes everything into bbolt
// with the number of the last log record, background flushes too, so the
// next Open finds nothing in the log to re-apply.
func TestReopenAfterCloseReplaysNothing(t *testing.T) {
	for _, flushBytes := range []int64{0, 1} {
		path := filepath.Join(t.TempDir(), "s.db")
		var logs bytes.Buffer
		logger := zerolog.New(&logs)
		for round := range 3 {
			st, err := Open(path, Options{NoSync: true, FlushBytes: flushBytes, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := st.submit(context.Background(), putMeta("k", fmt.Sprint(round, i))); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if strings.Contains(logs.String(), "recovered") {
			t.Fatalf("FlushBytes %d: an Open after a clean Close replayed records: %s", flushBytes, logs.String())
		}
	}
}

// TestCloseCommitsWhatWasQueued: operations queued when Close begins are
// committed, not refused: each caller was told nothing yet, and Close
// promises to wait for queued commits. With MaxBatch 1 the writer takes
// them one at a time, nearly always on the path that notices Close.
func TestCloseCommitsWhatWasQueued(t *testing.T) {
	const n = 20
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{NoSync: true, MaxBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	holding, release := make(chan struct{}), make(chan struct{})
	errs := make(chan error, n+1)
	go func() {
		errs <- st.submit(ctx, func(w *wtx) error {
			close(holding)
			<-release
			return putMeta("first", "")(w)
		})
	}()
	<-holding
	for i := range n {
		go func() { errs <- st.submit(ctx, putMeta(fmt.Sprint("k", i), "")) }()
	}
	for len(st.ops) < n {
		runtime.Gosched() // polling: they queue behind the held writer
	}
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	for {
		st.mu.Lock()
		c := st.closed
		st.mu.Unlock()
		if c {
			break
		}
		runtime.Gosched()
	}
	close(release)
	for range n + 1 {
		if err := <-errs; err != nil {
			t.Fatalf("an operation queued before Close: %v", err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	st, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.db.View(func(tx *bolt.Tx) error {
		for i := range n {
			if tx.Bucket(bucketMeta).Get([]byte(fmt.Sprint("k", i))) == nil {
				t.Errorf("k%d, acknowledged before Close returned, is not in the reopened store", i)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFlushStartsAtFlushBytes: a flush starts once the log has grown to
// FlushBytes, not later: the log's size bounds memory and recovery time.
func TestFlushStartsAtFlushBytes(t *testing.T) {
	var started atomic.Bool
	flushHook = func(stage string, _ *Bolt) {
		if stage == "start" {
			started.Store(true)
		}
	}
	t.Cleanup(func() { flushHook = nil }) // after the store's Close
	const flushBytes = 64 << 10
	st := openTemp(t, Options{NoSync: true, FlushBytes: flushBytes})
	value := strings.Repeat("v", 1<<10)
	// Three halves of FlushBytes in values alone: the log, with its
	// framing, is past FlushBytes and short of twice it.
	for i := range flushBytes * 3 / 2 / len(value) {
		if err := st.submit(context.Background(), putMeta(fmt.Sprint("k", i), value)); err != nil {
			t.Fatal(err)
		}
	}
	// The writer starts a flush after it hands a batch to the syncer,
	// before it takes the next one.
	if err := st.submit(context.Background(), putMeta("last", "")); err != nil {
		t.Fatal(err)
	}
	if !started.Load() {
		t.Fatalf("no flush started with %d bytes in the log (FlushBytes %d)", st.wal.size(), flushBytes)
	}
}
