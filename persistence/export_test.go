package persistence

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// Dump returns every key and value of every bucket, for byte-level
// comparisons in tests.
func Dump(s *Bolt) (map[string]map[string]string, error) { return s.Dump() }

// Check runs bbolt's consistency check.
func Check(s *Bolt) error {
	return s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
}

// MemSessionRecord returns Session sid's record in the published
// memtable: the decoded form kept beside it (nil when none) and its bytes;
// ok is false when the memtable does not hold it.
func MemSessionRecord(s *Bolt, sid messages.SessionID) (kept *Session, stored []byte, ok bool) {
	probe := new(memEntry).set(dataIndex, prefix(sid, kSession))
	for _, m := range s.snap.Load().mems {
		if e, found := m.Get(probe); found && !e.del {
			return e.session, e.v, true
		}
	}
	return nil, nil, false
}

// MemWatermark is Watermark's answer from the published memtables alone;
// ok is false when they hold none of the Session's stream rows.
func MemWatermark(s *Bolt, sid messages.SessionID) (int64, bool) {
	return memLastSeq(s.snap.Load().mems, sid)
}

// SystemMessageID is the ID of the system message an instructions update
// event projects (derivedID).
func SystemMessageID(ev messages.Event) messages.MessageID { return derivedID(ev) }

// FailFlushes makes each flush attempt fail before it writes anything, as
// on a full disk (bbolt left as it was), with probability p, drawn from
// seed, and retries them after 1 to 4 ms; the log may grow without bound
// meanwhile, so no write is refused for it. The test's cleanup undoes it.
// It returns the count of attempts it failed.
func FailFlushes(t testing.TB, p float64, seed uint64) *atomic.Int64 {
	fault, failed := noRoomAt(p, seed, 41)
	injectFlushFailures(t, 1<<40, func(logGen uint64) error {
		if logGen == 0 {
			return nil // Close's flush
		}
		return fault()
	})
	return failed
}

// FailLogStarts makes each attempt to prepare the log's next file before a
// flush fail, as on a full disk, with probability p, drawn from seed, and
// tries again after 1 to 4 ms; no write is refused for the log's growth
// meanwhile. The test's cleanup undoes it. It returns the count of
// attempts it failed.
func FailLogStarts(t testing.TB, p float64, seed uint64) *atomic.Int64 {
	fault, failed := noRoomAt(p, seed, 43)
	injectFlushFailures(t, 1<<40, nil)
	startRefuse = fault
	t.Cleanup(func() { startRefuse = nil })
	return failed
}

// noRoomAt returns a fault that fails with ENOSPC with probability p,
// drawn from seed and stream, and the count of its failures.
func noRoomAt(p float64, seed, stream uint64) (fault func() error, failed *atomic.Int64) {
	var mu sync.Mutex
	failed = new(atomic.Int64)
	rng := rand.New(rand.NewPCG(seed, stream))
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() < p {
			failed.Add(1)
			return fmt.Errorf("injected: %w", syscall.ENOSPC)
		}
		return nil
	}, failed
}

// injectFlushFailures makes refuse the flushes' fault hook (flushRefuse)
// and factor flushFullFactor, with 1 to 4 ms between a failing flush's
// attempts, until the test's cleanup restores them.
func injectFlushFailures(t testing.TB, factor int64, refuse func(logGen uint64) error) {
	minPause, maxPause, was := flushRetryMin, flushRetryMax, flushFullFactor
	flushRefuse, flushRetryMin, flushRetryMax, flushFullFactor = refuse, time.Millisecond, 4*time.Millisecond, factor
	t.Cleanup(func() { flushRefuse, flushRetryMin, flushRetryMax, flushFullFactor = nil, minPause, maxPause, was })
}
