package persistence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// Errors of the store's life cycle.
var (
	ErrClosed = errors.New("persistence: store closed")
	ErrSchema = errors.New("persistence: unsupported schema version")
	// ErrLocked reports that another process has the store open.
	ErrLocked = errors.New("persistence: store is locked by another process")
)

// Options configures a Bolt store. The zero value is usable.
type Options struct {
	// Clock stamps event envelopes. Default time.Now.
	Clock func() time.Time
	// IDs generates Session, message and event IDs. Default: a generator on
	// Clock and crypto/rand.
	IDs *messages.IDs
	// NoSync skips fsync. Only for tests and benchmarks of CPU cost; a crash
	// may lose acknowledged commits.
	NoSync bool
	// PromptBytes caps prompt text size. Default 1 MiB.
	PromptBytes int
	// InboxBacklog caps unsettled inbox rows per Session; 0 means no cap.
	InboxBacklog int
	// MaxBatch caps operations per group commit. Default 1024.
	MaxBatch int
	// PageSize is the default page size of History and Messages. Default 50.
	PageSize int
	// Timeout bounds waiting for the file lock at Open. Default 1 s.
	Timeout time.Duration
	// Logger receives store diagnostics. Default: disabled.
	Logger *zerolog.Logger
	// OnCommit, when set, observes every group commit: its operation count
	// and duration (for metrics).
	OnCommit func(ops int, d time.Duration)
	// CheckpointBytes is how much WAL accumulates before bbolt is synced
	// and the WAL restarts (wal.go). Default 16 MiB.
	CheckpointBytes int64
	// CheckpointPages is how many freed pages bbolt may hold back before a
	// checkpoint. Until one, bbolt cannot reuse a page the checkpoint can
	// see (wal.go), so this bounds the file's growth and bbolt's pending
	// page bookkeeping, which every write transaction walks. Default 4096.
	CheckpointPages int64
	// MmapBytes is the least address space mapped for the bbolt file
	// (see Bolt.big). Default 64 GiB; it costs no memory.
	MmapBytes int64
}

func (o *Options) fill() {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.IDs == nil {
		o.IDs = messages.NewIDs(o.Clock, nil)
	}
	if o.PromptBytes <= 0 {
		o.PromptBytes = 1 << 20
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1024
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = 16 << 20
	}
	if o.CheckpointPages <= 0 {
		o.CheckpointPages = 4096
	}
	if o.MmapBytes <= 0 {
		o.MmapBytes = 64 << 30
	}
	if o.Logger == nil {
		l := zerolog.Nop()
		o.Logger = &l
	}
}

// Bolt is the bbolt implementation of Store.
type Bolt struct {
	db   *bolt.DB
	dbf  *os.File // the bbolt file, for its meta pages (boltmeta.go)
	wal  *wal
	hold *bolt.Tx // read transaction on the last checkpoint (wal.go)
	opts Options
	ops  chan *op
	quit chan struct{}
	wg   sync.WaitGroup

	// The writer hands committed batches to the syncer, which fdatasyncs
	// the WAL once for all it finds queued and then answers their callers.
	// The channel is unbuffered: one batch syncs while the next commits,
	// and the writer waits before committing a third, so operations pile
	// up into larger batches instead of more commits. (With a deep queue,
	// 100 busy Sessions made 40% more, smaller commits and 25% fewer
	// steps/s.)
	syncq   chan syncJob
	written uint64 // records appended (writer only)

	// Checkpoints run on the checkpointer goroutine (wal.go); the writer
	// starts one at a time and reaps its result.
	ckptq    chan ckptJob
	ckptDone chan ckptResult
	ckptBusy bool // a checkpoint is running (writer only)
	// pendingAt is bbolt's count of held-back pages just after the last
	// checkpoint freed what it could (measured at the first commit after
	// it, once remeasure is set): a long read transaction also holds pages
	// back, and checkpointing again would not free those.
	pendingAt int64
	remeasure bool
	synced    uint64 // records known durable (syncer only)
	rec       []byte // the current transaction's WAL record (writer only)
	open      openCache
	mmap      int64 // bbolt's mmap size (see big)
	hwm       int64 // bytes below bbolt's high-water mark (writer only)

	failMu sync.Mutex
	failed error // a WAL or bbolt failure after which nothing more commits

	mu     sync.Mutex // guards closed and sends on ops against Close
	closed bool

	tails tails
}

var _ Store = (*Bolt)(nil)

// syncJob is one committed batch awaiting durability.
type syncJob struct {
	ops   []*op
	seq   uint64 // records written up to and including this batch
	file  int    // the WAL file holding its record
	start time.Time
}

// ckptJob asks the checkpointer to make bbolt durable at transaction gen
// and record it in WAL file file; old is the hold on the checkpoint it
// replaces, released once the new one is durable.
type ckptJob struct {
	gen  uint64
	meta []byte
	seed uint32
	file int
	old  *bolt.Tx
}

type ckptResult struct {
	file int
	err  error
}

// Open opens or creates the store file at path (and its write-ahead log,
// path-wal), recovers from the log if the last run did not close cleanly,
// and starts the writer.
func Open(path string, opts Options) (*Bolt, error) {
	opts.fill()
	s, err := open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", path, err)
	}
	return s, nil
}

func open(path string, opts Options) (_ *Bolt, err error) {
	deadline := time.Now().Add(opts.Timeout)
	w, err := openWAL(path, func() bool {
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(20 * time.Millisecond) // polling a file lock, as bbolt does
		return false
	})
	if err != nil {
		return nil, err
	}
	w.nosync = opts.NoSync
	s := &Bolt{wal: w, opts: opts, ops: make(chan *op, 4096), quit: make(chan struct{}), syncq: make(chan syncJob),
		ckptq: make(chan ckptJob, 1), ckptDone: make(chan ckptResult, 1)}
	defer func() {
		if err != nil {
			s.closeFiles()
		}
	}()
	replay, err := s.prepare(path)
	if err != nil {
		return nil, err
	}
	s.mmap = max(opts.MmapBytes, 4*fileSize(s.dbf))
	s.db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         opts.Timeout,
		NoSync:          opts.NoSync,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: int(s.mmap),
	})
	if err != nil {
		return nil, err
	}
	// Opening writes with bbolt's own syncs; from the first checkpoint on,
	// the WAL carries durability.
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, p := range replay {
			if err := replayRecord(tx, p); err != nil {
				return err
			}
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keySchema); v != nil {
			if len(v) != 1 || v[0] != schemaVersion {
				return fmt.Errorf("%w: file has %v, want %d", ErrSchema, v, schemaVersion)
			}
			return nil
		}
		return meta.Put(keySchema, []byte{schemaVersion})
	})
	if err != nil {
		return nil, err
	}
	s.db.NoSync = true
	if err := s.checkpointNow(); err != nil {
		return nil, err
	}
	if len(replay) > 0 {
		opts.Logger.Info().Int("records", len(replay)).Msg("recovered commits from the write-ahead log")
	}
	s.tails.init()
	s.wg.Go(s.writer)
	s.wg.Go(s.syncer)
	s.wg.Go(s.checkpointer)
	return s, nil
}

// prepare opens the bbolt file beside the WAL and, when the WAL holds a
// checkpoint the file has moved past or records after it, rolls the file
// back to the checkpoint and returns the records to re-apply.
func (s *Bolt) prepare(path string) ([][]byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	hdr, replay, ok := s.wal.recover()
	if errors.Is(err, os.ErrNotExist) {
		if ok {
			return nil, fmt.Errorf("%w: %s-wal has no database file beside it", errWALCorrupt, path)
		}
		// bbolt creates the file; keep our own handle for its meta pages.
		if f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return nil, err
		}
		s.dbf = f
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.dbf = f
	if !ok {
		// No checkpoint yet: the file was written with bbolt's own syncs.
		return nil, nil
	}
	// After a power loss either meta slot may hold any transaction written
	// since the checkpoint, an older one, or garbage: only a file that
	// closed cleanly (at the checkpoint, nothing after it) is used as is.
	if txid, ok := newestBoltTxid(f); ok && txid == hdr.gen && len(replay) == 0 {
		return nil, nil
	}
	if err := restoreBoltMeta(f, hdr.meta); err != nil {
		return nil, err
	}
	return replay, nil
}

func fileSize(f *os.File) int64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

// holdLast opens the hold on the last committed transaction and copies its
// meta page.
func (s *Bolt) holdLast() (*bolt.Tx, []byte, error) {
	hold, err := s.db.Begin(false)
	if err != nil {
		return nil, nil, err
	}
	meta, err := boltMetaOf(s.dbf, s.db.Info().PageSize, uint64(hold.ID()))
	if err != nil {
		_ = hold.Rollback()
		return nil, nil, err
	}
	return hold, meta, nil
}

// startCheckpoint checkpoints the last commit on the checkpointer while the
// writer goes on: records switch to the other file now, and the old hold
// is dropped once the new header is durable.
func (s *Bolt) startCheckpoint() error {
	hold, meta, err := s.holdLast()
	if err != nil {
		return err
	}
	// The new file continues the chain, so that recovery reads on into it
	// if this checkpoint never writes its header.
	gen, target, seed := uint64(hold.ID()), 1-s.wal.base, s.wal.chain
	s.ckptq <- ckptJob{gen: gen, meta: meta, seed: seed, file: target, old: s.hold}
	s.hold, s.ckptBusy = hold, true
	s.wal.switchTo(target, gen, seed)
	return nil
}

// reapCheckpoint collects the running checkpoint's result, waiting for it
// when wait is set. Afterwards its file is the base of recovery.
func (s *Bolt) reapCheckpoint(wait bool) error {
	if !s.ckptBusy {
		return nil
	}
	var r ckptResult
	if wait {
		r = <-s.ckptDone
	} else {
		select {
		case r = <-s.ckptDone:
		default:
			return nil
		}
	}
	s.ckptBusy = false
	if r.err != nil {
		s.fail(r.err)
		return s.fatal()
	}
	s.wal.base, s.remeasure = r.file, true
	return nil
}

// checkpointSynced, when set by a test before Open, observes the bbolt file
// right after a background checkpoint synced it.
var checkpointSynced func(path string)

// checkpointer runs checkpoints: bbolt's fdatasync, then the header.
func (s *Bolt) checkpointer() {
	for job := range s.ckptq {
		var err error
		if !s.opts.NoSync {
			err = s.db.Sync()
		}
		if err == nil && checkpointSynced != nil {
			checkpointSynced(s.db.Path())
		}
		if err == nil {
			err = s.wal.writeHeader(job.file, job.gen, job.meta, job.seed)
		}
		if job.old != nil {
			_ = job.old.Rollback()
		}
		s.ckptDone <- ckptResult{file: job.file, err: err}
	}
}

// checkpointNow checkpoints the last commit before returning: at Open, at
// Close, and for a store too big to hold (see big). The writer must not be
// running a transaction.
func (s *Bolt) checkpointNow() error {
	if err := s.reapCheckpoint(true); err != nil {
		return err
	}
	if !s.opts.NoSync {
		if err := s.db.Sync(); err != nil {
			return err
		}
	}
	hold, meta, err := s.holdLast()
	if err != nil {
		return err
	}
	// A fresh seed: the records after this checkpoint must not chain with
	// any already on disk (see wal.go).
	gen, target, seed := uint64(hold.ID()), 1-s.wal.base, rand.Uint32()
	if err := s.wal.writeHeader(target, gen, meta, seed); err != nil {
		_ = hold.Rollback()
		return err
	}
	if s.hold != nil {
		_ = s.hold.Rollback()
	}
	s.hold = hold
	s.wal.base, s.remeasure = target, true
	s.wal.switchTo(target, gen, seed)
	return nil
}

// big reports whether the file has grown to half of bbolt's mmap. bbolt
// remaps inside a commit when the file outgrows the mmap, and a remap waits
// for every open read transaction, the hold included: so past this size
// each commit runs without a hold and is checkpointed at once. Open maps
// four times the file (at least MmapBytes), so only a store that grows
// twofold within one run gets here.
func (s *Bolt) big() bool {
	return s.hwm > s.mmap/2
}

// Path returns the store file's path.
func (s *Bolt) Path() string { return s.db.Path() }

// Close stops accepting writes, waits for queued commits, checkpoints, and
// closes the files. Active Log tails end with ErrClosed.
func (s *Bolt) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.quit)
	s.mu.Unlock()
	s.wg.Wait()
	s.tails.closeAll()
	var err error
	if s.fatal() == nil {
		err = s.checkpointNow()
	}
	return errors.Join(err, s.closeFiles())
}

// closeFiles releases the hold and closes bbolt, its meta handle and the
// WAL (dropping the WAL's lock last).
func (s *Bolt) closeFiles() error {
	var errs []error
	if s.hold != nil {
		errs = append(errs, s.hold.Rollback())
		s.hold = nil
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	if s.dbf != nil {
		errs = append(errs, s.dbf.Close())
	}
	errs = append(errs, s.wal.close())
	return errors.Join(errs...)
}

// fatal returns the failure after which the store accepts no more writes.
func (s *Bolt) fatal() error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return s.failed
}

func (s *Bolt) fail(err error) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.failed == nil {
		s.failed = fmt.Errorf("persistence: store failed, restart to recover from the write-ahead log: %w", err)
		s.opts.Logger.Error().Err(err).Msg("store failed")
	}
}

// op is one write operation. fn runs inside the writer's transaction; it
// must be a deterministic function of the transaction's state, because a
// batch is re-run when another operation in it fails.
type op struct {
	fn      func(w *wtx) error
	done    chan error
	touched []messages.SessionID
}

// wtx is the writer's view of one transaction for one operation.
type wtx struct {
	tx      *bolt.Tx
	s       *Bolt
	rec     *[]byte // the transaction's WAL record (record.go)
	touched []messages.SessionID
	// msgs caches messages an operation loads and updates, so a batch of
	// events that all touch one assistant message decodes and encodes it
	// once; flush writes them when the operation succeeds.
	msgs  map[string]*Message
	dirty []string
	// indexed holds, per cached message, the seq its ID entry is known to
	// point at (read through it, or claimed with it).
	indexed map[string]int64
}

// submit queues fn for the writer and waits for its commit. It does not
// abandon a submitted operation when ctx ends: the caller always learns
// whether its write committed.
func (s *Bolt) submit(ctx context.Context, fn func(w *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{fn: fn, done: make(chan error, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	select {
	case s.ops <- o:
		s.mu.Unlock()
	default:
		// The queue is full: wait for room without holding the lock, but
		// never past Close.
		s.mu.Unlock()
		select {
		case s.ops <- o:
		case <-s.quit:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return <-o.done
}

// writer is the single goroutine that commits. It exits after draining the
// queue once Close is called, closing the syncer's queue behind it.
func (s *Bolt) writer() {
	defer close(s.ckptq)
	defer close(s.syncq)
	batch := make([]*op, 0, s.opts.MaxBatch)
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.quit:
			// Drain what was queued before Close.
			for {
				select {
				case o := <-s.ops:
					s.commit(append(batch[:0], o))
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		s.commit(batch)
	}
}

// commit runs ops in one transaction, appends its writes to the WAL and
// commits bbolt without syncing; the syncer answers the callers once the
// WAL is durable. A failing op is answered with its error and the rest are
// re-run without it.
func (s *Bolt) commit(ops []*op) {
	start := time.Now()
	answer := func(ops []*op, err error) {
		for _, o := range ops {
			o.done <- err
		}
	}
	if err := s.fatal(); err != nil {
		answer(ops, err)
		return
	}
	for len(ops) > 0 {
		failed, err := s.run(ops)
		if failed >= 0 {
			ops[failed].done <- err
			ops = append(ops[:failed:failed], ops[failed+1:]...)
			continue
		}
		if err != nil {
			err = fmt.Errorf("persistence: commit: %w", err)
			s.opts.Logger.Error().Err(err).Int("ops", len(ops)).Msg("commit failed")
			answer(ops, err)
			return
		}
		s.syncq <- syncJob{ops: slices.Clone(ops), seq: s.written, file: s.wal.cur, start: start}
		// Measured before reaping: this commit's write transaction released
		// what a checkpoint reaped earlier freed.
		pending := int64(s.db.Stats().PendingPageN)
		if s.remeasure {
			s.pendingAt, s.remeasure = pending, false
		}
		if err := s.reapCheckpoint(false); err != nil {
			return
		}
		var err2 error
		switch {
		case s.hold == nil: // big: checkpoint each commit (see run)
			err2 = s.checkpointNow()
		case s.ckptBusy:
		case s.wal.size() >= s.opts.CheckpointBytes || pending-s.pendingAt >= s.opts.CheckpointPages:
			err2 = s.startCheckpoint()
		}
		if err2 != nil {
			s.fail(err2)
		}
		return
	}
}

// run runs ops in one write transaction and commits it. failed is the index
// of an op whose own error rolled the transaction back, or -1.
func (s *Bolt) run(ops []*op) (failed int, err error) {
	tx, err := s.db.Begin(true)
	if err != nil {
		return -1, err
	}
	if s.hwm = tx.Size(); s.big() && s.hold != nil {
		// Let bbolt remap (see big): checkpoint, then commit unheld.
		if err := s.checkpointNow(); err != nil {
			_ = tx.Rollback()
			s.fail(err)
			return -1, err
		}
		_ = s.hold.Rollback()
		s.hold = nil
	}
	s.rec = s.rec[:0]
	s.open.begin()
	for i, o := range ops {
		w := &wtx{tx: tx, s: s, rec: &s.rec}
		err := runOp(o, w)
		if err == nil {
			err = w.flush()
		}
		if err != nil {
			_ = tx.Rollback()
			return i, err
		}
		o.touched = w.touched
	}
	if len(s.rec) == 0 {
		// Nothing written: no record, no commit. The callers are still
		// answered by the syncer, after what they may have read is durable.
		return -1, tx.Rollback()
	}
	// From here on, a failure discards what this transaction staged in the
	// open-message cache: begin does so at the next run.
	txid, off := uint64(tx.ID()), s.wal.off
	if err := s.wal.append(txid, s.rec); err != nil {
		_ = tx.Rollback()
		// A partly written record may be complete enough to replay.
		if uerr := s.wal.unappend(off, txid); uerr != nil {
			s.fail(uerr)
		}
		return -1, err
	}
	if err := tx.Commit(); err != nil {
		if uerr := s.wal.unappend(off, txid); uerr != nil {
			s.fail(uerr)
		}
		return -1, err
	}
	s.open.commit()
	s.written++
	return -1, nil
}

// syncer makes committed batches durable with one fdatasync for all that
// are queued, then answers their callers in commit order and wakes tails.
func (s *Bolt) syncer() {
	var jobs []syncJob
	for job := range s.syncq {
		jobs = append(jobs[:0], job)
	more:
		for {
			select {
			case j, ok := <-s.syncq:
				if !ok {
					break more
				}
				jobs = append(jobs, j)
			default:
				break more
			}
		}
		err := s.fatal()
		var files [2]bool
		for _, j := range jobs {
			files[j.file] = files[j.file] || j.seq > s.synced
		}
		for i := range files {
			if err == nil && files[i] {
				if err = s.wal.sync(i); err != nil {
					s.fail(err)
					err = s.fatal()
				}
			}
		}
		if err == nil {
			s.synced = jobs[len(jobs)-1].seq
		}
		for _, j := range jobs {
			// OnCommit observes the commit before any caller learns of it,
			// so a caller that counts commits sees its own.
			if err == nil && s.opts.OnCommit != nil {
				s.opts.OnCommit(len(j.ops), time.Since(j.start))
			}
			for _, o := range j.ops {
				o.done <- err
			}
		}
		if err == nil {
			for _, j := range jobs {
				for _, o := range j.ops {
					for _, sid := range o.touched {
						s.tails.notify(sid)
					}
				}
			}
		}
	}
}

// fillPercent is how full bbolt packs a page when it splits one. Almost
// every write appends at the end of a key range (a Session's log, its
// messages, time-ordered IDs), so bbolt's default of half-full pages would
// leave every page behind the append point half empty forever: twice the
// pages, a deeper tree and more pages to write per commit.
const fillPercent = 0.9

// runOp runs one operation, turning a panic into its error so a bug in one
// projector cannot take the writer down.
func runOp(o *op, w *wtx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("persistence: operation panicked: %v", r)
		}
	}()
	return o.fn(w)
}

// view runs a read-only transaction.
func (s *Bolt) view(fn func(tx *bolt.Tx) error) error {
	return s.db.View(fn)
}
