package persistence

import (
	"context"
	"errors"
	"fmt"
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
	if o.Logger == nil {
		l := zerolog.Nop()
		o.Logger = &l
	}
}

// Bolt is the bbolt implementation of Store.
type Bolt struct {
	db   *bolt.DB
	opts Options
	ops  chan *op
	quit chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex // guards closed and sends on ops against Close
	closed bool

	tails tails
}

var _ Store = (*Bolt)(nil)

// Open opens or creates the store file at path and starts its writer.
func Open(path string, opts Options) (*Bolt, error) {
	opts.fill()
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        opts.Timeout,
		NoSync:         opts.NoSync,
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("persistence: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
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
		_ = db.Close()
		return nil, fmt.Errorf("persistence: open %s: %w", path, err)
	}
	s := &Bolt{db: db, opts: opts, ops: make(chan *op, 4096), quit: make(chan struct{})}
	s.tails.init()
	s.wg.Go(s.writer)
	return s, nil
}

// Path returns the store file's path.
func (s *Bolt) Path() string { return s.db.Path() }

// Close stops accepting writes, waits for queued commits, and closes the
// file. Active Log tails end with ErrClosed.
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
	return s.db.Close()
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
	touched []messages.SessionID
	// msgs caches messages an operation loads and updates, so a batch of
	// events that all touch one assistant message decodes and encodes it
	// once; flush writes them when the operation succeeds.
	msgs  map[string]*Message
	dirty []string
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
// queue once Close is called.
func (s *Bolt) writer() {
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

// commit runs ops in one transaction. A failing op is answered with its
// error and the rest are re-run without it.
func (s *Bolt) commit(ops []*op) {
	start := time.Now()
	for len(ops) > 0 {
		failed := -1
		var failErr error
		err := s.db.Update(func(tx *bolt.Tx) error {
			fill(tx)
			for i, o := range ops {
				w := &wtx{tx: tx, s: s}
				err := runOp(o, w)
				if err == nil {
					err = w.flush()
				}
				if err != nil {
					failed, failErr = i, err
					return err
				}
				o.touched = w.touched
			}
			return nil
		})
		if failed >= 0 {
			ops[failed].done <- failErr
			ops = append(ops[:failed:failed], ops[failed+1:]...)
			continue
		}
		if err != nil {
			err = fmt.Errorf("persistence: commit: %w", err)
			s.opts.Logger.Error().Err(err).Int("ops", len(ops)).Msg("commit failed")
		}
		// OnCommit observes the commit before any caller learns of it, so
		// a caller that counts commits sees its own.
		if err == nil && s.opts.OnCommit != nil {
			s.opts.OnCommit(len(ops), time.Since(start))
		}
		for _, o := range ops {
			o.done <- err
		}
		if err == nil {
			for _, o := range ops {
				for _, sid := range o.touched {
					s.tails.notify(sid)
				}
			}
		}
		return
	}
}

// fillPercent is how full bbolt packs a page when it splits one. Almost
// every write appends at the end of a key range (a Session's log, its
// messages, time-ordered IDs), so bbolt's default of half-full pages would
// leave every page behind the append point half empty forever: twice the
// pages, a deeper tree and more pages to write per commit.
const fillPercent = 0.9

// fill sets the split fill of every bucket of a write transaction (bbolt
// keeps the setting per Bucket handle, and caches handles per transaction).
func fill(tx *bolt.Tx) {
	for _, name := range allBuckets {
		if b := tx.Bucket(name); b != nil {
			b.FillPercent = fillPercent
		}
	}
}

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
