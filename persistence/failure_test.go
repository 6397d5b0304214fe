package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// TestFailedAppendLosesNothingAcknowledged checks that a batch whose WAL
// write fails, after the whole record reached the file, fails only its own
// callers: the store goes on, and every admission acknowledged afterwards
// survives a crash (the record after the failed one takes its number, so
// recovery does not stop at a repeated one).
func TestFailedAppendLosesNothingAcknowledged(t *testing.T) {
	defer func() { writeFault = nil }()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sid := newSession(t, st)
	admit := admitter(st, sid)
	if err := admit("a"); err != nil {
		t.Fatal(err)
	}
	writeFault = func(f *os.File, b []byte, off int64) error {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		return errors.New("injected write failure")
	}
	if err := admit("refused"); err == nil || !strings.Contains(err.Error(), "injected write failure") {
		t.Fatalf("admission whose log write failed: %v", err)
	}
	writeFault = nil
	// A crash now must not bring the refused admission back.
	want := dump(t, st)
	crashed := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, crashed)
	sameState(t, "crash right after a failed log write", dump(t, openAndCheck(t, crashed, noFlush)), want)
	for _, text := range []string{"b", "c"} {
		if err := admit(text); err != nil {
			t.Fatalf("admission after a failed write: %v", err)
		}
	}
	want = dump(t, st)
	crashed = filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, crashed)
	sameState(t, "crash after a failed log write", dump(t, openAndCheck(t, crashed, noFlush)), want)
}

// TestRefusedWritesFailOnlyTheirOperation checks that writes bbolt would
// refuse at the next flush (an empty or over-long key) fail the operation
// making them with a typed error, and leave a store that flushes and
// reopens.
func TestRefusedWritesFailOnlyTheirOperation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sid := newSession(t, st)
	// A bash command over 32 KiB answered "always" is such a pattern.
	err = st.SaveApproval(ctx, "/p", "bash", []string{strings.Repeat("x", 40000)})
	if messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("over-long approval pattern: %v", err)
	}
	if err := st.SaveApproval(ctx, "/p", "bash", []string{"a\x00b"}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("approval pattern with NUL: %v", err)
	}
	// A step without an assistant message ID would claim the empty key.
	if _, err := st.Append(ctx, sid, &messages.StepStarted{SessionID: sid}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("step without an assistant message ID: %v", err)
	}
	if err := st.SaveApproval(ctx, "/p", "bash", []string{"ls *"}); err != nil {
		t.Fatal(err)
	}
	want := dump(t, st)
	if err := st.Close(); err != nil {
		t.Fatalf("close (flush): %v", err)
	}
	sameState(t, "reopened after refused writes", dump(t, openAndCheck(t, path, Options{})), want)
}

// TestLongestKeyIsAccepted: the store refuses exactly the keys bbolt
// would: one of bolt.MaxKeySize bytes (here an approval's) is written,
// flushed and read back after a reopen; one byte more is refused.
func TestLongestKeyIsAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, noFlush)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // a second Close does nothing
	ctx := context.Background()
	pattern := strings.Repeat("x", bolt.MaxKeySize-len(approvalKey("/p", "bash", "")))
	if err := st.SaveApproval(ctx, "/p", "bash", []string{pattern + "x"}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("a key one byte over the limit: %v", err)
	}
	if err := st.SaveApproval(ctx, "/p", "bash", []string{pattern}); err != nil {
		t.Fatalf("a key of exactly the limit: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("close (flush): %v", err)
	}
	reopened := openAndCheck(t, path, Options{})
	if ok, err := reopened.Approved(ctx, "/p", "bash", pattern); err != nil || !ok {
		t.Fatalf("approval with the longest key after a reopen: %v %v", ok, err)
	}
}

// openSmallFlushes opens a store at a new path that flushes every 4 KiB
// of log, with one Session; the test closes it.
func openSmallFlushes(t *testing.T) (string, *Bolt, messages.SessionID) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{NoSync: true, FlushBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return path, st, newSession(t, st)
}

// TestCloseAfterFailedFlush checks that Close returns, reporting the
// failure, once a background flush has failed, and that the log still
// holds everything acknowledged.
func TestCloseAfterFailedFlush(t *testing.T) {
	var fail atomic.Bool
	flushFault = func() error {
		if fail.Load() {
			return errors.New("injected flush failure")
		}
		return nil
	}
	defer func() { flushFault = nil }()
	path, st, sid := openSmallFlushes(t)
	ctx := context.Background()
	fail.Store(true)
	// Admit until the writer has collected the failed flush.
	for i := 0; ; i++ {
		_, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "p"}})
		if err != nil {
			if !strings.Contains(err.Error(), "injected flush failure") {
				t.Fatalf("admission %d: %v", i, err)
			}
			break
		}
		if i == 100_000 {
			t.Fatal("the flush never failed")
		}
		runtime.Gosched()
	}
	want := dump(t, st)
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "injected flush failure") {
			t.Fatalf("close after a failed flush: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close hangs after a failed flush")
	}
	fail.Store(false)
	sameState(t, "reopened after a failed flush", dump(t, openAndCheck(t, path, Options{})), want)
}

// holdFirstFlushFailure makes the first flush to commit wait, after its
// commit, until release is closed and then fail (entered closes when it
// waits); later flushes succeed. The caller resets flushFault.
func holdFirstFlushFailure() (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	flushFault = func() error {
		failed := false
		once.Do(func() {
			close(entered)
			<-release
			failed = true
		})
		if failed {
			return errors.New("injected flush failure")
		}
		return nil
	}
	return entered, release
}

// TestCloseCollectsARunningFlush: Close waits for a flush still running
// and reports its failure; it must not write the applied watermark past
// records that flush failed to bring into bbolt, so the reopened store has
// everything that was acknowledged.
func TestCloseCollectsARunningFlush(t *testing.T) {
	entered, release := holdFirstFlushFailure()
	var started atomic.Bool
	flushHook = func(stage string, _ *Bolt) {
		if stage == "start" {
			started.Store(true)
		}
	}
	defer func() { flushFault, flushHook = nil, nil }()
	path, st, sid := openSmallFlushes(t)
	ctx := context.Background()
	// Not beyond the flush's start: at twice FlushBytes the writer would
	// wait for the flush, which waits for the test.
	for !started.Load() {
		if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	want := dump(t, st)
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	close(release)
	if err := <-closed; err == nil || !strings.Contains(err.Error(), "injected flush failure") {
		t.Fatalf("close with a flush failing: %v", err)
	}
	sameState(t, "reopened after a flush failed under Close", dump(t, openAndCheck(t, path, Options{})), want)
}

// TestRefusalWaitsForWhatItRead checks that an operation refused because
// of an earlier commit is answered only once that commit is durable: a
// conflict with an admission whose fdatasync is still running must not
// reach its caller before a reader can see the admission.
func TestRefusalWaitsForWhatItRead(t *testing.T) {
	refused := make(chan struct{}, 1)
	refuseHook = func() {
		select {
		case refused <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { refuseHook = nil }) // after the store below has closed
	st := openTemp(t, Options{})
	ctx := context.Background()
	sid := newSession(t, st)
	held, release := holdNextSync(t)
	t.Cleanup(release) // before the store closes, should the test fail first
	first := make(chan error, 1)
	go func() {
		_, _, err := st.Admit(ctx, Admission{ID: "msg_x", SessionID: sid, Prompt: messages.Prompt{Text: "first"}})
		first <- err
	}()
	<-held // the first admission is in the log, its fdatasync running
	second := make(chan error, 1)
	go func() {
		_, _, err := st.Admit(ctx, Admission{ID: "msg_x", SessionID: sid, Prompt: messages.Prompt{Text: "second"}})
		second <- err
	}()
	// The writer refuses the second admission; only the syncer, held in
	// the first one's fdatasync, may answer it.
	select {
	case err := <-second:
		t.Fatalf("the conflicting admission was answered (%v) before the one it conflicts with was durable", err)
	case <-refused:
	case <-time.After(time.Minute):
		t.Fatal("the conflicting admission was neither refused nor answered")
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; messages.TypeOf(err) != messages.ErrPromptConflict {
		t.Fatalf("second admission: %v", err)
	}
	if _, err := st.Input(ctx, "msg_x"); err != nil {
		t.Fatalf("the admission the refusal rests on: %v", err)
	}
}

// TestCloseAnswersEverySubmitter checks that Close with the operation
// queue full answers every caller, those waiting for room included: each
// gets its answer or ErrClosed, none waits forever.
func TestCloseAnswersEverySubmitter(t *testing.T) {
	st := openTemp(t, Options{NoSync: true})
	ctx := context.Background()
	sid := newSession(t, st)
	release := make(chan struct{})
	running := make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		blocked <- st.submit(ctx, func(*wtx) error {
			close(running)
			<-release // holds the writer while the queue fills
			return nil
		})
	}()
	<-running
	n := cap(st.ops) + 8 // some wait for room
	answers := make(chan error, n)
	for range n {
		go func() {
			_, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "p"}})
			answers <- err
		}()
	}
	for len(st.ops) < cap(st.ops) {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	close(release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for i := range n {
		select {
		case err := <-answers:
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("answer %d: %v", i, err)
			}
		case <-timeout:
			t.Fatalf("%d of %d submitters never answered", n-i, n)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestCloseEndsABusyTail: a Log whose consumer is busy, mid-replay, when
// the store closes ends with ErrClosed, as an idle tail does, not with
// whatever the next read on the closed database fails with.
func TestCloseEndsABusyTail(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, st)
	for range logPage + 88 { // more than one replay page
		if _, err := st.Append(context.Background(), sid, &messages.ExecutionStarted{SessionID: sid}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan error, 1)
	inYield, release := make(chan struct{}), make(chan struct{})
	go func() {
		for item, err := range st.Log(context.Background(), sid, -1, true) {
			if err != nil {
				got <- err
				return
			}
			if item.Event != nil && item.Event.Durable.Seq == 10 {
				close(inYield)
				<-release
			}
		}
		got <- errors.New("the log ended without an error")
	}()
	<-inYield
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("the tail ended with %v, want ErrClosed", err)
	}
}

// TestFailedWritesOfUnknownOutcome: a write answered with a store failure
// after its record reached the log says its outcome is unknown (the next
// Open replays what reached the disk intact), unlike a
// write refused before it was logged.
func TestFailedWritesOfUnknownOutcome(t *testing.T) {
	armed, held, release := failHeldSync(t)
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sid := newSession(t, st)
	admit := admitter(st, sid)
	armed.Store(true)
	r1, r2 := make(chan error, 1), make(chan error, 1)
	go func() { r1 <- admit("first, its sync fails") }()
	<-held
	// The second runs while the first syncs, but its record waits for the
	// syncer: when the first's sync fails, nothing of it is logged.
	go func() { r2 <- admit("second, waiting behind it") }()
	close(release)
	if err := <-r1; !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a logged write answered %v, want an unknown outcome", err)
	}
	for _, err := range []error{<-r2, admit("refused")} {
		if err == nil || errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("a write refused before logging: %v", err)
		}
	}
	if walHolds(path, "second, waiting behind it") {
		t.Fatal("the write behind the failed sync reached the log")
	}
	_ = st.Close()
	syncFault = nil
	p, err := openAndCheck(t, path, Options{}).Pending(ctx, sid)
	if err != nil || len(p) != 1 {
		t.Fatalf("after reopening: %d pending, %v (the logged write is replayed)", len(p), err)
	}
}

// walHolds reports whether either log file of the store at path holds text.
func walHolds(path, text string) bool {
	for _, name := range []string{path + "-wal", path + "-wal2"} {
		if b, err := os.ReadFile(name); err == nil && bytes.Contains(b, []byte(text)) {
			return true
		}
	}
	return false
}

// TestRefusedWriteInAFailedBatchIsNotUnknown: when the store fails before a
// batch is durable, a write of it that was refused (and so never logged)
// gets the failure, not an unknown outcome, while a logged one gets the
// unknown outcome.
func TestRefusedWriteInAFailedBatchIsNotUnknown(t *testing.T) {
	var syncs atomic.Int32
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	syncFault = func() error {
		if !armed.Load() {
			return nil
		}
		switch syncs.Add(1) {
		case 1: // the first batch's: held while the next one fills
			close(held)
			<-release
		case 2: // the next batch's
			return errors.New("injected EIO")
		}
		return nil
	}
	refusedRan := make(chan struct{}, 1)
	refuseHook = func() {
		select {
		case refusedRan <- struct{}{}:
		default:
		}
	}
	defer func() { syncFault, refuseHook = nil, nil }()
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	sid := newSession(t, st)
	armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- st.submit(ctx, putMeta("first", "1")) }()
	<-held
	// Both run into the writer's open batch while the first one syncs.
	loggedRan := make(chan struct{})
	var once sync.Once
	logged, refused := make(chan error, 1), make(chan error, 1)
	go func() {
		logged <- st.submit(ctx, func(w *wtx) error {
			defer once.Do(func() { close(loggedRan) }) // a refusal runs the batch again
			return putMeta("logged", "2")(w)
		})
	}()
	<-loggedRan
	go func() {
		_, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: "msg_nope"})
		refused <- err
	}()
	<-refusedRan
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := <-logged; !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("logged: %v", err)
	}
	// It is answered with the store's failure, not with its own refusal
	// (a not-found input), which the failed batch never made durable.
	if err := <-refused; err == nil || errors.Is(err, ErrOutcomeUnknown) || st.Failed() == nil || !errors.Is(err, st.Failed()) {
		t.Fatalf("refused, never logged: %v, want the store's failure %v", err, st.Failed())
	}
}

// admitter returns a function that admits a prompt of the given text to
// sid, for tests that only need to know whether each one was acknowledged.
func admitter(st *Bolt, sid messages.SessionID) func(text string) error {
	return func(text string) error {
		_, _, err := st.Admit(context.Background(), Admission{SessionID: sid, Prompt: messages.Prompt{Text: text}})
		return err
	}
}

// failHeldSync makes the next log sync once armed is set fail with EIO,
// after closing held and waiting for release to be closed.
func failHeldSync(t *testing.T) (armed *atomic.Bool, held, release chan struct{}) {
	armed = new(atomic.Bool)
	held, release = make(chan struct{}), make(chan struct{})
	syncFault = func() error {
		if armed.CompareAndSwap(true, false) {
			close(held)
			<-release
			return errors.New("injected EIO")
		}
		return nil
	}
	t.Cleanup(func() { syncFault = nil })
	return armed, held, release
}

// TestSubmitRefusals: a write whose context has already ended is refused
// with the context's error and writes nothing, and a write after Close is
// refused with ErrClosed rather than queued for a writer that has gone.
func TestSubmitRefusals(t *testing.T) {
	st := openTemp(t, Options{NoSync: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.submit(ctx, putMeta("late", "v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("a write with an ended context: %v", err)
	}
	if err := st.view(func(v *view) error {
		if got := v.get(bucketMeta, []byte("late")); got != nil {
			t.Errorf("the refused write is in the store: %q", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() { answered <- st.submit(context.Background(), putMeta("closed", "v")) }()
	select {
	case err := <-answered:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("a write after Close: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a write after Close waits for a writer that has gone")
	}
}

// TestSubmitterWaitingForRoomCanGiveUp: a caller waiting for room in a
// full queue returns when its context ends (it queued nothing, so nothing
// is left unanswered).
func TestSubmitterWaitingForRoomCanGiveUp(t *testing.T) {
	st := openTemp(t, Options{NoSync: true})
	bg := context.Background()
	running, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	go func() {
		_ = st.submit(bg, func(*wtx) error {
			close(running)
			<-release // holds the writer while the queue fills
			return nil
		})
	}()
	<-running
	for range cap(st.ops) {
		go func() { _ = st.submit(bg, putMeta("k", "v")) }()
	}
	for len(st.ops) < cap(st.ops) {
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(bg)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- st.submit(ctx, putMeta("waiting", "v")) }()
	for st.mu.TryLock() { // it waits for room with the lock held
		st.mu.Unlock()
		runtime.Gosched()
	}
	cancel()
	select {
	case err := <-gaveUp:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("a caller that gave up waiting for room: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a caller waiting for room ignores its context")
	}
}

// What refuseFlushes refuses.
const (
	refuseNone     = iota
	refuseAll      // every flush
	refuseNotClose // every flush but the one Close makes
)

// refuseFlushes makes flushes fail before they write anything, as a full
// disk does, as the returned mode says, and counts the attempts. It
// shortens the pause between attempts; the test's cleanup restores both.
func refuseFlushes(t *testing.T) (refuse *atomic.Int32, attempts *atomic.Int64) {
	refuse, attempts = new(atomic.Int32), new(atomic.Int64)
	injectFlushFailures(t, flushFullFactor, func(logGen uint64) error {
		attempts.Add(1)
		if m := refuse.Load(); m == refuseAll || m == refuseNotClose && logGen != 0 {
			return errors.New("injected: no room for the flush")
		}
		return nil
	})
	return refuse, attempts
}

// admitUntilRefused admits prompts until one is refused, and checks that it
// was refused for the failing flush.
func admitUntilRefused(t *testing.T, st *Bolt, sid messages.SessionID) {
	t.Helper()
	for i := 0; ; i++ {
		_, _, err := st.Admit(context.Background(), Admission{SessionID: sid, Prompt: messages.Prompt{Text: "p"}})
		if err != nil {
			if !strings.Contains(err.Error(), "cannot flush") || !strings.Contains(err.Error(), "no room for the flush") {
				t.Fatalf("admission %d: %v", i, err)
			}
			return
		}
		if i == 100_000 {
			t.Fatal("no admission was refused")
		}
	}
}

// TestFlushRetriedAfterFailure: a flush that fails leaving bbolt as it was
// is retried while the store goes on. Writes go into the log until it has
// grown to twice FlushBytes, are then refused with the flush's error, and
// succeed again, without a reopen, once a retry succeeds; reads go on
// throughout, nothing is lost, and the store never fails.
func TestFlushRetriedAfterFailure(t *testing.T) {
	refuse, attempts := refuseFlushes(t)
	path, st, sid := openSmallFlushes(t)
	ctx := context.Background()
	refuse.Store(refuseAll)
	admitUntilRefused(t, st, sid)
	if err := st.Failed(); err != nil {
		t.Fatalf("the store failed for a flush it can retry: %v", err)
	}
	// The flusher keeps trying.
	for n := attempts.Load(); attempts.Load() < n+3; {
		runtime.Gosched()
	}
	want := dump(t, st) // reads go on
	refuse.Store(refuseNone)
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err := st.Admit(ctx, Admission{ID: "msg_room", SessionID: sid, Prompt: messages.Prompt{Text: "room"}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes did not resume once the flush could: %v", err)
		}
		runtime.Gosched()
	}
	if _, err := st.Input(ctx, "msg_room"); err != nil {
		t.Fatal(err)
	}
	// Everything read while the flush failed is still there.
	got := dump(t, st)
	for bucket, rows := range want {
		for k, v := range rows {
			if got[bucket][k] != v {
				t.Fatalf("%s/%q changed after the flush succeeded", bucket, k)
			}
		}
	}
	want = got
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	sameState(t, "reopened after a flush that succeeded on a retry", dump(t, openAndCheck(t, path, Options{})), want)
}

// TestCloseWhileAFlushIsRetried: Close waits for the flush being retried,
// which makes its last attempt; whether that succeeds or fails, the
// reopened store has everything acknowledged. (Close must not take a
// result of an earlier attempt for the last one, nor write the newer
// memtable alone into bbolt when the last attempt failed, calling the log
// unneeded: that flush may fit where the older one did not.)
func TestCloseWhileAFlushIsRetried(t *testing.T) {
	for _, last := range []string{"succeeds", "fails"} {
		t.Run("the last attempt "+last, func(t *testing.T) {
			refuse, _ := refuseFlushes(t)
			path, st, sid := openSmallFlushes(t)
			refuse.Store(refuseAll)
			admitUntilRefused(t, st, sid)
			// A failed attempt's result waits for the writer.
			for len(st.flushDone) == 0 {
				runtime.Gosched()
			}
			want := dump(t, st)
			if last == "fails" {
				refuse.Store(refuseNotClose)
			} else {
				refuse.Store(refuseNone)
			}
			err := st.Close()
			if last == "fails" && (err == nil || !strings.Contains(err.Error(), "no room for the flush")) {
				t.Fatalf("close with the flush failing: %v", err)
			}
			if last == "succeeds" && err != nil {
				t.Fatalf("close: %v", err)
			}
			refuse.Store(refuseNone)
			sameState(t, "reopened after Close during a failing flush", dump(t, openAndCheck(t, path, Options{})), want)
		})
	}
}

// TestFlushRefusalsLeaveNoTrace: writers on four Sessions at once, while
// flushes fail with ENOSPC (leaving bbolt as it was) or succeed, switching
// at random between phases and within them, and the store is sometimes
// closed in the middle and reopened. Every admission is acknowledged or
// refused as storage.full; each Session's log then holds exactly the
// acknowledged ones, in order,
// with no gap, and no refused one leaves a trace, before and after the
// last reopen.
func TestFlushRefusalsLeaveNoTrace(t *testing.T) {
	refusing := new(atomic.Bool)
	injectFlushFailures(t, flushFullFactor, func(uint64) error {
		if refusing.Load() {
			return fmt.Errorf("injected: %w", syscall.ENOSPC)
		}
		return nil
	})

	path := filepath.Join(t.TempDir(), "s.db")
	opts := Options{NoSync: true, FlushBytes: 4 << 10}
	st, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	const writers, phases, perPhase = 4, 24, 40
	sids := make([]messages.SessionID, writers)
	for i := range sids {
		sids[i] = newSession(t, st)
	}
	acked := make([][]messages.MessageID, writers)
	var refused []messages.MessageID
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 7))
	fulls := 0
	for phase := range phases {
		refusing.Store(rng.IntN(2) == 0)
		flipAt := rng.IntN(2 * perPhase) // within the phase half the time
		var wg sync.WaitGroup
		for g := range writers {
			wg.Go(func() {
				for i := range perPhase {
					if g == 0 && i == flipAt {
						refusing.Store(!refusing.Load())
					}
					id := messages.MessageID(fmt.Sprintf("msg_p%02d_g%d_%03d", phase, g, i))
					_, _, err := st.Admit(context.Background(), Admission{ID: id, SessionID: sids[g], Prompt: messages.Prompt{Text: strings.Repeat("p", 200)}})
					mu.Lock()
					switch {
					case err == nil:
						acked[g] = append(acked[g], id)
					case messages.TypeOf(err) == messages.ErrStorageFull && errors.Is(err, syscall.ENOSPC):
						refused = append(refused, id)
					default:
						t.Errorf("admission %s: %v", id, err)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if err := st.Failed(); err != nil {
			t.Fatalf("phase %d: the store failed: %v", phase, err)
		}
		if refusing.Load() || flipAt < perPhase {
			fulls++
		}
		checkAdmitted(t, st, sids, acked, refused)
		if rng.IntN(3) == 0 {
			// Close in the middle: with the flush still failing, its last
			// attempt fails and Close says so; the reopened store has it
			// all from the log.
			cerr := st.Close()
			if cerr != nil && !refusing.Load() {
				t.Fatalf("phase %d: close: %v", phase, cerr)
			}
			refusing.Store(false) // Open's own recovery is not refused
			if st, err = Open(path, opts); err != nil {
				t.Fatal(err)
			}
			checkAdmitted(t, st, sids, acked, refused)
		}
	}
	refusing.Store(false)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(path, opts); err != nil {
		t.Fatal(err)
	}
	if err := Check(st); err != nil {
		t.Fatal(err)
	}
	checkAdmitted(t, st, sids, acked, refused)
	if fulls == 0 || len(refused) == 0 {
		t.Fatalf("%d phases with flushes refused, %d admissions refused: nothing was tested", fulls, len(refused))
	}
	t.Logf("%d phases, %d with flushes refused in some of it; %d admissions acknowledged, %d refused", phases, fulls, writers*phases*perPhase-len(refused), len(refused))
}

// checkAdmitted checks that each Session's log is its creation and then
// exactly its acknowledged admissions, in order, and that no refused one
// is anywhere.
func checkAdmitted(t *testing.T, st *Bolt, sids []messages.SessionID, acked [][]messages.MessageID, refused []messages.MessageID) {
	t.Helper()
	ctx := context.Background()
	for g, sid := range sids {
		var got []messages.MessageID
		for after := int64(-1); ; {
			page, err := st.History(ctx, sid, Query{After: after, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range page.Data {
				if ev.Durable.Seq != after+1 {
					t.Fatalf("%s: seq %d after %d", sid, ev.Durable.Seq, after)
				}
				after = ev.Durable.Seq
				if p, ok := ev.Data.(*messages.PromptAdmitted); ok {
					got = append(got, p.InputID)
				}
			}
			if !page.HasMore {
				break
			}
		}
		if !slices.Equal(got, acked[g]) {
			t.Fatalf("%s: %d admissions in the log, %d acknowledged", sid, len(got), len(acked[g]))
		}
	}
	for _, id := range refused {
		if _, err := st.Input(ctx, id); messages.TypeOf(err) != messages.ErrNotFound {
			t.Fatalf("refused %s: %v", id, err)
		}
	}
}

// TestBackoff: the pauses between attempts of a flush or a log start that
// fail for want of room start at flushRetryMin, double, stop at
// flushRetryMax, and start over from the zero value.
func TestBackoff(t *testing.T) {
	var b backoff
	var got []time.Duration
	for range 9 {
		got = append(got, b.next())
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
	b = 0
	if p := b.next(); p != flushRetryMin {
		t.Fatalf("after a reset: %v", p)
	}
}
