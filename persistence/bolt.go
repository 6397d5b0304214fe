package persistence

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/btree"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/messages"
)

// Errors of the store's life cycle.
var (
	ErrClosed = errors.New("persistence: store closed")
	ErrSchema = errors.New("persistence: unsupported schema version")
	// ErrLocked reports that the store is open elsewhere: in another
	// process, or by an earlier Open in this one that was not closed (the
	// file lock is per Open, not per process).
	ErrLocked = errors.New("persistence: store is locked (open in another process, or not closed by an earlier Open in this one)")
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
	// Logger receives store diagnostics. The zero Logger is disabled.
	Logger zerolog.Logger
	// OnCommit, when set, observes every group commit: its operation count
	// and duration (for metrics).
	OnCommit func(ops int, d time.Duration)
	// FlushBytes is how much write-ahead log accumulates before the
	// memtable is flushed into bbolt and the log starts over (wal.go). It
	// bounds the memtable's size and recovery time; larger flushes write
	// each bbolt page once for more commits. Default 8 MiB.
	FlushBytes int64
	// OnFlush, when set, observes every flush: the memtable entries it
	// wrote and its duration, bbolt's fsyncs included (for metrics).
	OnFlush func(entries int, d time.Duration)
	// OnNoRoom, when set, is called for every write refused because the
	// disk had no room for it (storage.full), for metrics.
	OnNoRoom func()
	// OnSync, when set, observes every fdatasync of the write-ahead log
	// that makes batches durable, failed ones included, with its duration
	// (for metrics: it is the disk's share of a commit's latency). None
	// with NoSync. It runs on the goroutine that answers commits and must
	// not block.
	OnSync func(d time.Duration)
	// RepairWAL makes Open recover a store whose write-ahead log is
	// damaged (ErrWALDamaged) up to the damaged record, dropping it and
	// every commit after it, instead of refusing to open. Open logs what
	// it dropped; `sessiond repair` keeps a copy of the log first.
	RepairWAL bool
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
	if o.FlushBytes <= 0 {
		o.FlushBytes = 8 << 20
	}
}

// Bolt is the bbolt implementation of Store.
type Bolt struct {
	db     *bolt.DB
	dbFile *os.File // bbolt's file, for paceWriteback
	wal    *wal
	opts   Options
	ops    chan *op
	quit   chan struct{}
	wg     sync.WaitGroup

	// The writer hands sealed batches to the syncer, which fdatasyncs the
	// WAL once for all it finds queued (a batch and, at most, barriers),
	// publishes their snapshot and then answers their callers. The channel
	// is unbuffered. ready (capacity 1) is the syncer's word that it has
	// answered its last batch and waits for the next: the writer seals its
	// open batch only then, so every record but the one syncing is
	// durable when the next is written (awaitLog is the backstop for the
	// walInFlight bound that recovery's damage check relies on).
	syncq chan syncJob
	ready chan struct{}
	// durable is the number of the last record known synced, written by
	// the syncer; syncedSig (capacity 1) tells the writer (awaitLog) that it
	// moved, or that the store failed.
	durable   atomic.Uint64
	syncedSig chan struct{}
	// snap is what readers see: bbolt at its last flush and the memtables
	// of every commit synced since (see view).
	snap atomic.Pointer[snapshot]

	// Writer state. cur takes the batches since the running flush started
	// (or the last one); imm is the memtable that flush is writing into
	// bbolt, nil when none runs. boltTx is the bbolt transaction of the
	// last completed flush.
	cur    *memTree
	imm    *memTree
	boltTx int
	rec    []byte                        // the current batch's WAL record
	w      wtx                           // each operation's, reset and reused
	mem    memAlloc                      // the memtable's entries and bytes
	enc    *messages.Encoder             // encodes the values the writer puts
	open   writerCache[msgRef, *Message] // see writercache.go
	seqs   writerCache[messages.SessionID, int64]
	pend   writerCache[messages.SessionID, int] // see pendingCount
	absent absentKeys                           // see absentKeys
	// hints speed up memtable inserts per bucket: within one, the writer's
	// keys mostly arrive in order (IDs, inbox rows, a Session's log).
	hints [len(allBuckets)]btree.PathHint
	// maxID is the greatest key of the ID index (bucketIDs) as of open or
	// since claimed: no key of the index is above it, so the writer's views
	// answer a lookup above it without searching. Generated IDs are
	// time-ordered, so nearly every fresh one is above it; a supplied ID,
	// or one from another generator in the same millisecond, takes the
	// search. A batch that is re-run may leave maxID above the index's last
	// key, which only costs searches.
	maxID messages.MessageID
	// compacting holds the manual compactions started since Open and not
	// yet settled (true; a settlement stages false, which commit drops). A
	// barrier whose row shows one running that is not here ran in a
	// process that stopped: no drain will finish it, so a new request does
	// not coalesce into it (see AdmitCompaction). It is a writerCache so
	// that a start or settlement that rolls back changes nothing.
	compacting writerCache[messages.MessageID, bool]

	// One flush runs at a time, on the flusher goroutine.
	flushq    chan flushJob
	flushDone chan flushResult
	flushErr  error // a failed flush's error, once the writer reaped it
	// flushFailing is the error of the running flush's last attempt while
	// the flusher retries it (nil once one succeeds). The log then grows
	// past twice FlushBytes only as far as the writer lets it: see add.
	flushFailing error
	// startFailing is the error of the last attempt to give the log's
	// next file the room it needs before a flush can start (nil once one
	// succeeds); startRetry is when the writer tries again, after a pause
	// from startWait. See startFlush.
	startFailing error
	startRetry   time.Time
	startWait    backoff

	failMu sync.Mutex
	failed error // a WAL or bbolt failure after which nothing more commits

	mu     sync.Mutex // guards closed and sends on ops against Close
	closed bool

	tails tails
}

var _ Store = (*Bolt)(nil)

// snapshot is one consistent state for readers: memtables (newest first)
// over bbolt at any transaction from lo to hi. While a flush runs, the
// memtable it writes is one of them and shadows everything the flush
// changes, so bbolt before and after it reads the same; otherwise lo = hi.
type snapshot struct {
	mems   []*memTree
	lo, hi int
	last   uint64 // the number of the last log record it holds
}

// flushJob asks the flusher to write mem into bbolt, recording applied as
// the last WAL record bbolt then holds.
type flushJob struct {
	mem     *memTree
	applied uint64
	logGen  uint64 // the generation of the log file the records after applied go to
}

type flushResult struct {
	boltTx  int
	entries int
	took    time.Duration
	err     error
	// retrying: the flush failed with bbolt unchanged (a full disk, say),
	// and the flusher tries it again; another result follows.
	retrying bool
}

// syncJob is one committed batch awaiting durability, or (with barrier
// set) a request to report once every batch before it is published.
type syncJob struct {
	ops     []*op
	refused []*op                // ops that failed, answered with their own error
	touched []messages.SessionID // the Sessions its operations wrote
	seq     uint64               // the batch's WAL record number (0: it wrote nothing)
	file    int                  // the WAL file holding its record
	snap    *snapshot
	start   time.Time
	barrier chan struct{}
}

// keyApplied in the meta bucket holds the number of the last WAL record a
// flush wrote into bbolt (big-endian uint64).
var keyApplied = []byte("applied")

// keyLogGen in the meta bucket holds the generation of the log file that
// receives the records after applied (big-endian uint64): recovery needs
// that file or a later one, and a log without it has lost them (see
// wal.recover). Absent, or zero, when the log holds nothing bbolt lacks:
// after a clean Close, in a backup, and in stores older than the key.
var keyLogGen = []byte("loggen")

// Open opens or creates the store file at path (and its write-ahead log,
// path-wal and path-wal2), re-applies the log's records that the last run
// did not flush, and starts the writer.
func Open(path string, opts Options) (*Bolt, error) {
	if path == "" {
		return nil, errors.New("persistence: open: empty path")
	}
	opts.fill()
	s, err := open(path, opts)
	if err != nil {
		// Nothing was changed: what the log holds stays there for the
		// next Open, which may need room to write it into bbolt.
		return nil, noRoom(fmt.Errorf("persistence: open %s: %w", path, err), "the store opens once there is room")
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
	w.nosync, w.repair = opts.NoSync, opts.RepairWAL
	removeBackupFiles(path) // the lock is ours: no backup of this store runs
	s := &Bolt{wal: w, opts: opts, ops: make(chan *op, 4096), quit: make(chan struct{}), syncq: make(chan syncJob), ready: make(chan struct{}, 1),
		syncedSig: make(chan struct{}, 1), flushq: make(chan flushJob, 1), flushDone: make(chan flushResult, 1)}
	defer func() {
		if err != nil {
			w.dropCreated()
			s.closeFiles()
		}
	}()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		for i := range w.files {
			_, ok, err := w.readHeader(i)
			if err != nil {
				return nil, err
			}
			if ok {
				return nil, fmt.Errorf("%w: %s has no database file beside it", errWALCorrupt, w.files[i].f.Name())
			}
		}
	}
	s.db, s.dbFile, err = openBolt(path, &bolt.Options{
		Timeout: opts.Timeout,
		NoSync:  opts.NoSync,
		// The freelist is written with every bbolt commit (bbolt's
		// default; only flushes commit here). Without it, every Open
		// walks every page of the file to rebuild the list: 2.8 s with a
		// cold cache for a 209 MB store against 3-4 ms (BenchmarkOpenBig),
		// and a restart after a crash waits for it. Its cost at 256
		// admitters with fsync on is within the disk's noise: eight
		// interleaved pairs, 45-57k admissions/s with it and 41-61k
		// without (docs/performance-log.md, twenty-second sitting).
		FreelistType: bolt.FreelistMapType,
		// Address space only: fewer remaps, each of which waits for the
		// open read transactions.
		InitialMmapSize: initialMmapSize,
		// bbolt's statistics are counted under one lock that every
		// transaction's end takes; nothing here reads them.
		NoStatistics: true,
	})
	if err != nil {
		return nil, err
	}
	// The files' directory entries must be durable before a commit in them
	// is acknowledged: fdatasync of a file does not promise its name
	// (POSIX), and a log lost that way would be started over. Every Open
	// syncs them, not only one that creates a file: the Open that created
	// them may have failed, or been killed, before its sync.
	if err = syncDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	var applied, last uint64
	started := false // the log's first file, when it had none
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		migrate := false
		if v := meta.Get(keySchema); v == nil {
			if err := meta.Put(keySchema, []byte{schemaVersion}); err != nil {
				return err
			}
		} else if len(v) == 1 && v[0] == schemaInbox {
			migrate = true
		} else if len(v) != 1 || v[0] != schemaVersion {
			return fmt.Errorf("%w: file has %v, want %d", ErrSchema, v, schemaVersion)
		}
		if v := meta.Get(keyApplied); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		var need uint64
		if v := meta.Get(keyLogGen); len(v) == 8 {
			need = binary.BigEndian.Uint64(v)
		}
		replay, n, err := w.recover(applied, need)
		if err != nil {
			return err
		}
		if need == 0 || w.damage != nil {
			// The store stopped cleanly (or is new), or a repair started
			// its log over: from now on it needs the log as it goes on. Named before it is started (below, once this
			// transaction has put the records it replays into bbolt),
			// the file may never come to exist, which recovery tells
			// from a lost one by the note its predecessor lacks (see
			// wal.recover); a log that has no file yet starts now, as
			// nothing in it can be lost.
			gen := w.gen + 1
			if w.gen == 0 {
				if err := w.start(w.older(), n+1, rand.Uint32()); err != nil {
					return err
				}
				started = true
			} else if err := w.unnote(w.cur); err != nil {
				// The file the start leaves must not name gen already:
				// see unnote.
				return err
			}
			if err := putLogGen(tx, gen); err != nil {
				return err
			}
		}
		last = n
		mem, err := memOfRecords(replay)
		if err != nil {
			return err
		}
		if err := writeMem(tx, mem); err != nil {
			return err
		}
		if migrate {
			if err := migrateInbox(tx); err != nil {
				return err
			}
			opts.Logger.Info().Int("from", schemaInbox).Int("to", schemaVersion).Msg("migrated the store's schema")
		}
		if len(replay) > 0 {
			opts.Logger.Info().Int("records", len(replay)).Msg("recovered commits from the write-ahead log")
		}
		if d := w.damage; d != nil && d.Missing {
			opts.Logger.Warn().Str("file", d.File).Uint64("generation", d.Gen).Uint64("recovered_through", last).
				Msg("repaired the write-ahead log: went on without its missing file and the commits it held")
		} else if d != nil && d.Short > 0 {
			opts.Logger.Warn().Str("file", d.File).Int64("size", d.Short).Uint64("recovered_through", last).
				Msg("repaired the write-ahead log: went on without the end its cut-short file lost")
		} else if d != nil {
			opts.Logger.Warn().Str("file", d.File).Uint64("record", d.Record).Int64("offset", d.Offset).
				Int("dropped_after", d.Intact).Uint64("recovered_through", last).
				Msg("repaired the write-ahead log: dropped a damaged record and every commit after it")
		}
		s.boltTx = tx.ID()
		if k, _ := tx.Bucket(bucketIDs).Cursor().Last(); k != nil {
			s.maxID = messages.MessageID(k)
		}
		return meta.Put(keyApplied, binary.BigEndian.AppendUint64(nil, last))
	})
	if err != nil {
		return nil, err
	}
	// Every record so far is in bbolt now: the log starts over, in the file
	// the older of the two (recovery read the newer).
	if !started {
		if openFault != nil {
			if err := openFault(); err != nil {
				return nil, err
			}
		}
		if err := w.start(w.older(), last+1, rand.Uint32()); err != nil {
			return nil, err
		}
	}
	s.durable.Store(last)
	s.cur = newMemTree()
	s.enc = messages.NewEncoder()
	s.absent = absentKeys{}
	s.snap.Store(&snapshot{mems: []*memTree{s.cur}, lo: s.boltTx, hi: s.boltTx, last: last})
	s.tails.init()
	s.wg.Go(s.writer)
	s.wg.Go(s.syncer)
	s.wg.Go(s.flusher)
	return s, nil
}

// startFlush hands the active memtable to the flusher and starts a new one.
// Once the syncer has published every committed batch, readers get the
// flushing memtable as part of their snapshot, valid over bbolt before
// and after the flush; the log starts over in the other file, so the
// records the flush holds stay intact until bbolt has them.
//
// The log's next file gets the room it needs first. When the disk has none
// (the file has not grown that far before), no flush starts: the log goes
// on in its current file, the writer tries again after a pause (backoff,
// as a failing flush is retried), and flushFull refuses writes once the
// log has grown to flushFullFactor times FlushBytes.
func (s *Bolt) startFlush() error {
	if s.startFailing != nil && time.Now().Before(s.startRetry) {
		return nil
	}
	err := s.wal.prepare(s.wal.older())
	if err == nil && startRefuse != nil {
		err = startRefuse()
	}
	if err != nil {
		if s.startFailing == nil {
			s.opts.Logger.Error().Err(err).Msg("no room for the log's next file; the flush waits (writes go on into the log)")
			s.startWait = 0
		}
		s.startFailing, s.startRetry = err, time.Now().Add(s.startWait.next())
		return nil
	}
	if s.startFailing != nil {
		s.opts.Logger.Info().Msg("the log's next file has room again; the flush starts")
		s.startFailing = nil
	}
	s.barrier()
	// A batch whose fdatasync failed is in the memtable but was answered
	// as failed: it must neither reach readers nor be flushed into bbolt.
	if err := s.fatal(); err != nil {
		return err
	}
	if flushHook != nil {
		flushHook("start", s)
	}
	applied := s.wal.next - 1
	if err := s.wal.start(s.wal.older(), applied+1, rand.Uint32()); err != nil {
		return err
	}
	s.imm, s.cur = s.cur, newMemTree()
	s.seqs.age()
	s.pend.age()
	s.snap.Store(s.snapshot())
	s.flushq <- flushJob{mem: s.imm, applied: applied, logGen: s.wal.gen}
	return nil
}

// reapFlush collects the running flush's result, waiting for it when wait
// is set. Afterwards bbolt holds the flushed memtable, and batches no
// longer read through it.
func (s *Bolt) reapFlush(wait bool) error {
	if s.imm == nil {
		return nil
	}
	if s.flushErr != nil {
		return s.flushErr // reaped already: no other result will come
	}
	var r flushResult
	if wait {
		r = <-s.flushDone
	} else {
		select {
		case r = <-s.flushDone:
		default:
			return nil
		}
	}
	if r.retrying {
		if s.flushFailing == nil {
			s.opts.Logger.Error().Err(r.err).Msg("flush failed; retrying (writes go on into the log)")
		}
		s.flushFailing = r.err
		return nil
	}
	if r.err != nil {
		// The store fails; the memtable stays readable, and its records
		// stay in the log for the next Open to re-apply.
		s.flushErr = r.err
		return r.err
	}
	if s.flushFailing != nil {
		s.opts.Logger.Info().Msg("flush succeeded after failing")
		s.flushFailing = nil
	}
	s.imm, s.boltTx = nil, r.boltTx
	clear(s.absent) // bbolt now holds the flushed memtable's keys
	if s.opts.OnFlush != nil {
		s.opts.OnFlush(r.entries, r.took)
	}
	return nil
}

// flusher writes memtables into bbolt, one flush at a time, beside the
// writer.
//
// A flush that fails leaving bbolt as it was (its file could not grow on a
// full disk, a page write failed) is tried again after a pause, doubling
// up to flushRetryMax, until it succeeds or the store closes, and the
// store goes on meanwhile: the memtable stays readable and the log holds
// its records. A failure after which bbolt may hold the flush's
// transaction (its meta page written, then a failed fdatasync) fails the
// store instead, as the transaction may or may not be on the disk.
func (s *Bolt) flusher() {
	for job := range s.flushq {
		var wait backoff
		for {
			start := time.Now()
			stop := s.paceWriteback()
			txid, err := s.flushInto(job.mem, job.applied, job.logGen)
			stop()
			if flushFault != nil && err == nil {
				err = flushFault()
			}
			if err == nil && flushHook != nil {
				flushHook("committed", s)
			}
			retry := false
			if err != nil && s.flushUndone(txid) {
				select {
				case <-s.quit: // closing: this attempt was the last
				default:
					retry = true
				}
			}
			// A notice of an earlier failed attempt the writer has not
			// taken is stale now: this result replaces it, and the send
			// never waits, so attempts go on while the writer is idle.
			select {
			case <-s.flushDone:
			default:
			}
			s.flushDone <- flushResult{boltTx: txid, entries: job.mem.Len(), took: time.Since(start), err: err, retrying: retry}
			if !retry {
				break
			}
			t := time.NewTimer(wait.next())
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
			}
		}
	}
}

// flushRefuse, when set by a test, can fail a flush before it writes
// anything, leaving bbolt as it was (as a full disk does). It is given the
// flush's log generation (0 for the one Close makes).
var flushRefuse func(logGen uint64) error

// startRefuse, when set by a test, can fail the preparation of the log's
// next file before a flush starts, as a full disk does (the log as it
// was).
var startRefuse func() error

// flushFullFactor times FlushBytes is how far the log grows while a flush
// is retried before writes are refused; a test raises it so that no
// write is refused.
var flushFullFactor int64 = 2

// The pauses between attempts of a failing flush, or of a failing start of
// the log's next file.
var flushRetryMin, flushRetryMax = 50 * time.Millisecond, 5 * time.Second

// backoff gives the pauses between attempts of something that fails for
// want of room: flushRetryMin, then twice the last, up to flushRetryMax.
// Its zero value starts over.
type backoff time.Duration

// next returns the pause before the next attempt.
func (b *backoff) next() time.Duration {
	p := max(time.Duration(*b), flushRetryMin)
	*b = backoff(min(2*p, flushRetryMax))
	return p
}

// flushUndone reports whether bbolt is as it was before the failed flush
// whose write transaction was txid (0: it never began): its meta page
// still names an earlier transaction, so nothing of the flush is in it.
func (s *Bolt) flushUndone(txid int) bool {
	if txid == 0 {
		return true
	}
	cur := -1
	_ = s.db.View(func(tx *bolt.Tx) error { cur = tx.ID(); return nil })
	return cur >= 0 && cur < txid
}

// paceWriteback makes the kernel write bbolt's dirty pages out every
// millisecond while a flush commits (sync_file_range, as RocksDB's
// bytes_per_sync does), until the returned stop is called. Otherwise the
// flush's fdatasync hands the device about 10 MB at once, and every log
// fdatasync queued behind it stalls for milliseconds: the p99 of an
// admission. Measured interleaved at 64 admitters: +5% admissions/s, p99
// -10%. It only starts writes early; bbolt's own fsyncs still order them.
func (s *Bolt) paceWriteback() (stop func()) {
	if s.opts.NoSync || !pacedWriteback {
		return func() {}
	}
	fd := int(s.dbFile.Fd())
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				startWriteback(fd)
				if writebackHook != nil {
					writebackHook()
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// writebackHook, when set by a test before a pacer starts, observes each
// paced writeback.
var writebackHook func()

// flushInto writes mem into bbolt in one transaction (with bbolt's own
// fsyncs) together with applied, the number of the last log record it
// then holds, and logGen, the generation of the log file holding the
// records after it (0: there are none), and returns the transaction's ID.
// Its writes are already in the log, so they do not go through wtx.
func (s *Bolt) flushInto(mem *memTree, applied, logGen uint64) (int, error) {
	var txid int
	err := s.db.Update(func(tx *bolt.Tx) error {
		txid = tx.ID()
		if flushRefuse != nil {
			if err := flushRefuse(logGen); err != nil {
				return err
			}
		}
		if err := writeMem(tx, mem); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(keyApplied, binary.BigEndian.AppendUint64(nil, applied)); err != nil {
			return err
		}
		return putLogGen(tx, logGen)
	})
	return txid, err
}

// putLogGen records gen as the log file generation recovery needs
// (keyLogGen); 0 deletes the key.
func putLogGen(tx *bolt.Tx, gen uint64) error {
	if gen == 0 {
		return tx.Bucket(bucketMeta).Delete(keyLogGen)
	}
	return tx.Bucket(bucketMeta).Put(keyLogGen, binary.BigEndian.AppendUint64(nil, gen))
}

// writeMem writes the memtable's entries into bbolt, in key order.
func writeMem(tx *bolt.Tx, mem *memTree) error {
	buckets := make([]*bolt.Bucket, len(allBuckets))
	for i, name := range allBuckets {
		buckets[i] = tx.Bucket(name)
		buckets[i].FillPercent = fillPercent
	}
	var err error
	mem.Walk(func(items []*memEntry) bool {
		if len(items) > 1 {
			runtime.KeepAlive(touchEntries(items))
		}
		for _, e := range items {
			b := buckets[e.k[0]]
			if e.del {
				err = b.Delete(e.k[1:])
			} else {
				err = b.Put(e.k[1:], nonNil(e.v))
			}
			if err != nil {
				return false
			}
		}
		return true
	})
	return err
}

// touchEntries loads the first byte of each entry's key and value, for
// writeMem to do before it puts them. The entries of a memtable node lie
// scattered in memory, and a walk that puts each in turn waits for two
// dependent cache misses an entry (the entry, then its key; in a profile
// at 256 admitters 7% of the process's CPU), where these loads,
// independent of each other, overlap. The result only keeps the loads
// from being optimized away.
func touchEntries(items []*memEntry) byte {
	var x byte
	for _, e := range items {
		x += e.k[0]
		if len(e.v) > 0 {
			x += e.v[0]
		}
	}
	return x
}

// initialMmapSize is bbolt's first mapping of the file; a test lowers it
// so that flushes remap bbolt as the file grows.
var initialMmapSize = 1 << 30

// refuseHook, when set by a test before Open, observes the writer refusing
// an operation, which the syncer answers only once what it read is
// durable, after the open batch: from then on, a test knows a refusal
// waits for the syncer instead of guessing it with a timer.
var refuseHook func()

// flushHook, when set by a test before Open, observes a flush as it starts
// (on the writer: everything committed is synced, bbolt and the log not
// yet touched) and once its bbolt transaction committed (on the flusher).
var flushHook func(stage string, s *Bolt)

// openFault, when set by a test, can fail Open after its recovery
// transaction committed and before it starts the log's next file, where a
// crash leaves bbolt naming a file that does not exist yet.
var openFault func() error

// flushFault, when set by a test before Open, can fail a flush after its
// bbolt transaction (which a flush that fails may or may not have
// committed).
var flushFault func() error

// Path returns the store file's path.
func (s *Bolt) Path() string { return s.db.Path() }

// Close stops accepting writes, waits for queued commits, flushes the
// memtable, and closes the files. Active Log tails end with ErrClosed,
// and reads from then on fail with it.
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
	// A failed store is not flushed: its log holds what bbolt lacks, for
	// the next Open to re-apply, and Close reports the failure. Otherwise
	// bbolt ends up holding every record, and says the log is no longer
	// needed (log generation 0): a store closed cleanly opens without its
	// log files, as a copy of the database file alone.
	err := s.fatal()
	if err == nil {
		_, err = s.flushInto(s.cur, s.wal.next-1, 0)
	}
	return errors.Join(err, s.closeFiles())
}

// ErrCorrupt is wrapped into Open's error when bbolt finds the database
// file damaged as it opens it.
var ErrCorrupt = errors.New("persistence: corrupt database file")

// openBolt is bolt.Open that also returns bbolt's file (it opens it once;
// paceWriteback needs it) and turns a panic into ErrCorrupt. bbolt
// panics, in the goroutine that opens the file, on some damage it reads
// there (a freelist page that is not one), and reading a page past the
// end of a file cut short faults the mapping, which SetPanicOnFault makes
// a panic too instead of the process's end. The file is unlocked and
// closed then; the read-only mapping of it bbolt may have made stays until
// the process ends, as bbolt gives no way to reach it (and holds the file
// open, which is why closing it alone would not release the lock).
//
// A file cut short that Open happens not to read past is refused too: any
// later read there would fault on a goroutine of the store or a reader's,
// and end the process.
func openBolt(path string, o *bolt.Options) (db *bolt.DB, file *os.File, err error) {
	o.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				_ = unix.Flock(int(file.Fd()), unix.LOCK_UN)
				file.Close()
			}
			if _, fault := r.(interface{ Addr() uintptr }); fault {
				r = "a read of it faulted (is it cut short?)"
			}
			db, file, err = nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, o)
	if err != nil {
		return db, file, metaError(err)
	}
	if err := checkLength(db, file); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, file, nil
}

// metaError wraps ErrCorrupt into an error of bolt.Open that says neither
// meta page of the file is usable: bbolt falls back to the other page when
// one is damaged, and reports the first page's fault (bad magic, another
// format version, a checksum that does not match) only when both are. Those
// are damage to the file, and the caller must be able to tell them from
// other failures to open it (a lock held, a permission missing) to say what
// to do about them.
func metaError(err error) error {
	for _, meta := range []error{berrors.ErrInvalid, berrors.ErrVersionMismatch, berrors.ErrChecksum} {
		if errors.Is(err, meta) {
			return fmt.Errorf("%w: neither meta page can be read (bbolt: %w)", ErrCorrupt, err)
		}
	}
	return err
}

// checkLength refuses a bbolt file shorter than its pages reach.
func checkLength(db *bolt.DB, file *os.File) error {
	fi, err := file.Stat()
	if err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if fi.Size() < tx.Size() {
			return fmt.Errorf("%w: the file holds %d bytes and its pages reach %d: it was cut short", ErrCorrupt, fi.Size(), tx.Size())
		}
		return nil
	})
}

// closeFiles closes bbolt and the WAL (dropping the WAL's lock last).
func (s *Bolt) closeFiles() error {
	var errs []error
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	errs = append(errs, s.wal.close())
	return errors.Join(errs...)
}

// ErrOutcomeUnknown is wrapped into the error of a write whose log record
// was written when the store failed before making it durable: it may or
// may not be there after the store reopens (recovery replays what reached
// the disk intact). Read before retrying a write that is not idempotent.
var ErrOutcomeUnknown = errors.New("persistence: this write's outcome is unknown: its log record was written and may be replayed when the store reopens")

// Failed returns the failure that stopped the store from writing (a log
// write that could not be undone, a failed fdatasync), or nil while it
// writes. Such a store refuses every write until it is reopened, which
// recovers from the write-ahead log.
func (s *Bolt) Failed() error { return s.fatal() }

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
	fn   func(w *wtx) error
	done chan error
	err  error // its own error, when it failed: answered once what it read is durable
}

// opPool recycles operations and their answer channels: submit returns an
// operation once it has its answer, after which neither the writer nor the
// syncer touches it.
var opPool = sync.Pool{New: func() any { return &op{done: make(chan error, 1)} }}

// wtx is the writer's view of one batch for one operation: reads see bbolt
// at its last flush under the batch's memtable, which takes every write.
type wtx struct {
	v       view
	s       *Bolt
	rec     *[]byte // the batch's WAL record (record.go)
	touched []messages.SessionID
	// msgs holds the messages an operation loads and updates, so a batch
	// of events that all touch one assistant message decodes and encodes
	// it once; flush writes them when the operation succeeds.
	msgs []opMsg
	// logs are the events the operation appended, by Session, written as
	// one log row each by flush.
	logs []pendingLog
	// evs holds the stored bytes of those events until flush copies them
	// into their log rows. When it grows, earlier events keep the old array.
	evs []byte
	// record is the Session record the operation last wrote, as written.
	record *Session
	// restoring is set by Restore: its events ran in another process.
	restoring bool
}

// submit queues fn for the writer and waits for its commit. It does not
// abandon a submitted operation when ctx ends: the caller always learns
// whether its write committed.
func (s *Bolt) submit(ctx context.Context, fn func(w *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := opPool.Get().(*op)
	o.fn = fn
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		putOp(o)
		return ErrClosed
	}
	// A full queue is waited on with the lock held: Close needs it to
	// begin, so the writer, which drains the queue until Close and then
	// once more before it exits, is still there to take the operation.
	// (Waiting without it, a sender could find room only after the
	// writer's last look at the queue, and wait forever for an answer.)
	select {
	case s.ops <- o:
	default:
		select {
		case s.ops <- o:
		case <-ctx.Done():
			s.mu.Unlock()
			putOp(o)
			return ctx.Err()
		}
	}
	s.mu.Unlock()
	err := <-o.done
	putOp(o)
	if s.opts.OnNoRoom != nil && err != nil && messages.TypeOf(err) == messages.ErrStorageFull {
		s.opts.OnNoRoom()
	}
	return err
}

// putOp returns an answered or never queued operation to opPool.
func putOp(o *op) {
	o.fn, o.err = nil, nil
	opPool.Put(o)
}

// writer is the single goroutine that commits. It keeps one batch open:
// each operation runs into it as it arrives, and the batch is sealed (its
// record written to the log) and handed to the syncer once the syncer is
// ready for it. So the operations that arrive while one batch syncs are
// already run when that sync ends, and the next sync starts at once; the
// writer never waits for the syncer with work in hand. (A writer that ran
// a batch and then waited to hand it over, while operations piled up,
// took turns with the syncer instead of overlapping: docs/performance.md.)
// It exits after draining the queue once Close is called, closing the
// syncer's queue behind it.
func (s *Bolt) writer() {
	defer close(s.flushq)
	defer close(s.syncq)
	var b batch
	for {
		if !b.open {
			select {
			case o := <-s.ops:
				s.add(&b, o)
			case <-s.quit:
				s.drainQueue(&b)
				return
			}
			continue
		}
		if len(b.ops) >= s.opts.MaxBatch {
			<-s.ready
			s.seal(&b)
			continue
		}
		// The syncer first, then what is queued: under load the queue is
		// rarely empty, and the sync must not wait for it to be.
		select {
		case <-s.ready:
			s.seal(&b)
			continue
		default:
		}
		select {
		case o := <-s.ops:
			s.add(&b, o)
			continue
		default:
		}
		select {
		case <-s.ready:
			s.seal(&b)
		case o := <-s.ops:
			s.add(&b, o)
		case <-s.quit:
			s.drainQueue(&b)
			return
		}
	}
}

// drainQueue commits what was queued before Close, then waits for the
// syncer and the running flush.
func (s *Bolt) drainQueue(b *batch) {
	for queued := true; queued; {
		select {
		case o := <-s.ops:
			if len(b.ops) >= s.opts.MaxBatch {
				<-s.ready
				s.seal(b)
			}
			s.add(b, o)
		default:
			queued = false
		}
	}
	if b.open {
		<-s.ready
		s.seal(b)
	}
	s.barrier()
	// Until the running flush ends: a failing one makes its last attempt
	// now that the store is closing, and Close must not write the newer
	// memtable alone and call the log unneeded.
	for s.imm != nil {
		if err := s.reapFlush(true); err != nil {
			s.fail(err)
			break
		}
	}
}

// barrier returns once the syncer has published every batch committed so
// far.
func (s *Bolt) barrier() {
	done := make(chan struct{})
	s.syncq <- syncJob{barrier: done}
	<-done
}

// batch is the writer's open batch: its operations have run on a copy of
// the memtable, and their writes wait in s.rec for the log.
type batch struct {
	open    bool
	tx      *bolt.Tx // a bbolt read transaction, held until the batch is sealed
	mem     *memTree
	mems    []*memTree
	bks     *openBuckets
	ops     []*op // run, in order
	refused []*op // failed on their own: answered by the syncer after the batch
	touched []messages.SessionID
	start   time.Time
}

// add runs o into the open batch, opening one when none is. An operation
// that fails is refused: it is answered with its own error by the syncer,
// after what it read is durable (a refusal such as a conflict may rest on
// a batch whose fdatasync is still running), and the batch is run again
// without it, since its writes may have reached the memtable copy.
func (s *Bolt) add(b *batch, o *op) {
	if !b.open {
		if err := s.reapFlush(false); err != nil {
			s.fail(err)
		}
		if err := s.fatal(); err != nil {
			o.done <- err
			return
		}
		if err := s.flushFull(); err != nil {
			o.done <- err
			return
		}
		b.start = time.Now()
		if err := s.begin(b); err != nil {
			o.done <- fmt.Errorf("persistence: commit: %w", err)
			return
		}
		b.open = true
	}
	err := s.runInto(b, o)
	if err == nil {
		b.ops = append(b.ops, o)
		return
	}
	o.err = err
	b.refused = append(b.refused, o)
	if refuseHook != nil {
		refuseHook()
	}
	for {
		_ = b.tx.Rollback()
		if err := s.begin(b); err != nil {
			// Nothing can run: the operations run so far fail, the refused
			// ones wait for the syncer as ever.
			err = fmt.Errorf("persistence: commit: %w", err)
			s.opts.Logger.Error().Err(err).Int("ops", len(b.ops)).Msg("commit failed")
			for _, p := range b.ops {
				p.done <- err
			}
			b.ops = b.ops[:0]
			return
		}
		failed := -1
		for i, p := range b.ops {
			if err := s.runInto(b, p); err != nil {
				p.err, failed = err, i
				break
			}
		}
		if failed < 0 {
			return
		}
		b.refused = append(b.refused, b.ops[failed])
		b.ops = append(b.ops[:failed:failed], b.ops[failed+1:]...)
		if refuseHook != nil {
			refuseHook()
		}
	}
}

// begin starts the batch's state over: a read transaction, a copy of the
// memtable, an empty record and no staged cache entries. A read
// transaction lives only as long as one batch: a flush's commit may need
// to remap bbolt, which waits for every open reader.
func (s *Bolt) begin(b *batch) error {
	b.tx, b.mem = nil, nil
	s.rec = s.rec[:0]
	s.open.begin()
	s.seqs.begin()
	s.pend.begin()
	s.compacting.begin()
	b.touched = make([]messages.SessionID, 0, 16)
	tx, err := s.db.Begin(false)
	if err != nil {
		return err
	}
	b.tx, b.mem, b.bks = tx, s.cur.Copy(), new(openBuckets)
	b.mems = s.levels(b.mem)
	return nil
}

// runInto runs one operation into the batch.
func (s *Bolt) runInto(b *batch, o *op) error {
	// The scratch slices of the previous operation are kept.
	w := &s.w
	*w = wtx{v: view{tx: b.tx, mems: b.mems, bks: b.bks, absent: s.absent, maxID: &s.maxID, probe: memEntry{k: w.v.probe.k}},
		s: s, rec: &s.rec, msgs: w.msgs[:0], logs: w.logs[:0], evs: w.evs[:0], touched: b.touched[len(b.touched):]}
	err := runOp(o, w)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return err
	}
	b.touched = append(b.touched, w.touched...) // in place unless touch outgrew the room
	return nil
}

// seal writes the batch's record to the log and hands the batch to the
// syncer, which answers its callers once the record is durable; the
// memtable copy becomes the writer's. When the log has grown past
// FlushBytes, the memtable is flushed into bbolt in the background.
func (s *Bolt) seal(b *batch) {
	b.open = false
	var seq uint64
	// A store that failed since the batch opened refuses it as it is.
	err := s.fatal()
	if err == nil && len(s.rec) > 0 {
		// Nothing written, no record: the callers are still answered by
		// the syncer, after what they may have read is durable.
		if err = s.awaitLog(); err == nil {
			if seq, err = s.wal.append(s.rec); err != nil && errors.Is(err, errWALTorn) {
				s.fail(err)
				// Its invalidation may not be on the disk, and the record
				// may be, whole: the next Open may replay it.
				err = fmt.Errorf("%w: %w", err, ErrOutcomeUnknown)
			}
		}
		if err != nil {
			err = noRoom(fmt.Errorf("persistence: commit: %w", err), writesResume)
			s.opts.Logger.Error().Err(err).Int("ops", len(b.ops)).Msg("commit failed")
		} else {
			s.cur = b.mem
			s.open.commit(stillOpen)
			s.seqs.commit(keepAll)
			s.pend.commit(keepAll)
			s.compacting.commit(func(running bool) bool { return running })
		}
	}
	ops := b.ops
	if err != nil {
		for _, o := range ops {
			o.done <- err
		}
		ops = nil
	}
	// The read transaction ends before anything below may wait for the
	// flusher: a flush whose commit remaps bbolt waits for every reader.
	if b.tx != nil {
		_ = b.tx.Rollback()
	}
	s.syncq <- syncJob{ops: slices.Clone(ops), refused: b.refused, touched: b.touched, seq: seq, file: s.wal.cur, start: b.start, snap: s.snapshot()}
	b.ops, b.refused, b.touched, b.tx, b.mem = b.ops[:0], nil, nil, nil, nil
	if err != nil || s.wal.size() < s.opts.FlushBytes {
		return
	}
	// One flush at a time; the writer waits for a running one only once
	// the log has grown twice as far, bounding memory. A flush being
	// retried is not waited for: add refuses writes instead (flushFull).
	if s.imm != nil && s.flushFailing == nil && s.wal.size() >= 2*s.opts.FlushBytes {
		if err := s.reapFlush(true); err != nil {
			s.fail(err)
		}
	}
	if s.imm == nil {
		if err := s.startFlush(); err != nil {
			s.fail(err)
		}
	}
}

// flushFull refuses a write while the running flush is being retried and
// the log has grown to twice FlushBytes: the memtable would otherwise grow
// for as long as the flush fails. Writes resume once it succeeds.
//
// The same holds while the log's next file has no room (startFlush). A
// refused write opens no batch, so the retry is made here too, once its
// pause is over: nothing else would make it.
func (s *Bolt) flushFull() error {
	if s.startFailing != nil && s.imm == nil {
		if err := s.startFlush(); err != nil {
			s.fail(err)
			return err
		}
	}
	if s.wal.size() < flushFullFactor*s.opts.FlushBytes {
		return nil
	}
	switch {
	case s.flushFailing != nil:
		return noRoom(fmt.Errorf("persistence: commit: the store cannot flush into its database file, and refuses writes until it can: %w", s.flushFailing), writesResume)
	case s.startFailing != nil:
		return noRoom(fmt.Errorf("persistence: commit: the store has no room for its log's next file, cannot flush without it, and refuses writes until it can: %w", s.startFailing), writesResume)
	}
	return nil
}

// noRoom types err storage.full when the disk had no room for a write
// (ENOSPC, EDQUOT, or EFBIG past a file size limit), saying what follows
// (then), and keeps err in the chain for errors.Is. bbolt formats the
// error of its file's growth with %s, so for that one only the text names
// the cause.
func noRoom(err error, then string) error {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG} {
		if errors.Is(err, errno) || strings.Contains(err.Error(), errno.Error()) {
			return fmt.Errorf("%w: %w", messages.Errorf(messages.ErrStorageFull,
				"the disk has no room for sessiond's store (%s): %s", errno.Error(), then), err)
		}
	}
	return err
}

const writesResume = "writes succeed again once there is room"

// awaitLog holds the writer until the next record can be written with at
// most walInFlight records unsynced, the last of them included. It almost
// never waits: that takes the syncer taking more than one batch for a sync
// again and again while the writer commits.
func (s *Bolt) awaitLog() error {
	for s.wal.next > s.durable.Load()+walInFlight {
		if err := s.fatal(); err != nil {
			return err
		}
		<-s.syncedSig
	}
	return nil
}

// snapshot is what readers may see once the last committed batch is
// durable.
func (s *Bolt) snapshot() *snapshot {
	sn := &snapshot{mems: s.levels(s.cur), lo: s.boltTx, hi: s.boltTx, last: s.wal.next - 1}
	if s.imm != nil {
		sn.hi++ // the flush's transaction
	}
	return sn
}

// levels returns the memtables a read goes through: top, then the one a
// running flush is writing into bbolt.
func (s *Bolt) levels(top *memTree) []*memTree {
	if s.imm != nil {
		return []*memTree{top, s.imm}
	}
	return []*memTree{top}
}

// syncer makes committed batches durable with one fdatasync for all that
// are queued, publishes the newest snapshot among them, then answers their
// callers in commit order and wakes tails. Readers therefore never see a
// commit before it is durable.
func (s *Bolt) syncer() {
	var jobs []syncJob
	s.ready <- struct{}{} // idle: the writer may seal its first batch
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
		var snap *snapshot
		for _, j := range jobs {
			files[j.file] = files[j.file] || j.seq > s.durable.Load()
			if j.snap != nil {
				snap = j.snap
			}
		}
		for i := range files {
			if err == nil && files[i] {
				if err = s.syncLog(i); err != nil {
					s.fail(err)
					err = s.fatal()
				}
			}
		}
		if err == nil {
			// The store may have failed while this sync ran (a flush the
			// writer reaped): a failed store acknowledges nothing more.
			// (No other write or fdatasync of the log runs beside this
			// one: the writer writes its next record only once this
			// batch is answered, which matters because Linux reports a
			// writeback error to one fdatasync of a file only.)
			err = s.fatal()
		}
		if err == nil {
			synced := s.durable.Load()
			for _, j := range jobs {
				synced = max(synced, j.seq)
			}
			s.durable.Store(synced)
			if snap != nil {
				s.snap.Store(snap)
			}
		}
		select {
		case s.syncedSig <- struct{}{}:
		default:
		}
		for _, j := range jobs {
			if j.barrier != nil {
				close(j.barrier)
				continue
			}
			// OnCommit observes the commit before any caller learns of it,
			// so a caller that counts commits sees its own.
			if err == nil && s.opts.OnCommit != nil && len(j.ops) > 0 {
				s.opts.OnCommit(len(j.ops), time.Since(j.start))
			}
			jerr := err
			if err != nil && j.seq > 0 {
				// Its record is in the log: the next Open may replay it.
				jerr = fmt.Errorf("%w: %w", err, ErrOutcomeUnknown)
			}
			for _, o := range j.ops {
				o.done <- jerr
			}
			for _, o := range j.refused {
				o.done <- cmp.Or(err, o.err) // never logged: no unknown outcome
			}
		}
		if err == nil {
			for _, j := range jobs {
				for _, sid := range j.touched {
					s.tails.notify(sid)
				}
			}
		}
		// Last, so that the writer is the goroutine this one readied
		// last, which runs first once it waits.
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
}

// syncLog fdatasyncs log file i for the syncer, timing it for OnSync.
func (s *Bolt) syncLog(i int) error {
	if s.opts.OnSync == nil || s.opts.NoSync {
		return s.wal.sync(i)
	}
	start := time.Now()
	err := s.wal.sync(i)
	s.opts.OnSync(time.Since(start))
	return err
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

// viewHook, when set by a test before Open, runs in every read between
// taking the snapshot and beginning the bbolt transaction.
var viewHook func()

// view runs fn on a consistent snapshot: the published memtables and a
// bbolt read transaction on a state beneath them. A flush that completes
// between the two reads (a bbolt transaction the snapshot does not cover)
// makes it take both again.
func (s *Bolt) view(fn func(v *view) error) error {
	for {
		// A closed store reads nothing, as it writes nothing: Close's last
		// flush moves bbolt past every snapshot (this loop would spin
		// until the file closes), and then bbolt fails with an error of
		// its own.
		if s.tails.done() {
			return ErrClosed
		}
		sn := s.snap.Load()
		if viewHook != nil {
			viewHook()
		}
		tx, err := s.db.Begin(false)
		if err != nil {
			if s.tails.done() {
				return ErrClosed
			}
			return err
		}
		if id := tx.ID(); id < sn.lo || id > sn.hi {
			_ = tx.Rollback()
			runtime.Gosched()
			continue
		}
		err = fn(&view{tx: tx, mems: sn.mems, last: sn.last})
		_ = tx.Rollback()
		return err
	}
}
