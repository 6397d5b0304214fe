package persistence

import (
	"bytes"
	"iter"

	"github.com/tidwall/btree"
	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// The memtable holds every write committed since the last flush into bbolt
// (see doc.go, "Durability"). It is an ordered tree of entries keyed by
// bucket index + key; a deletion is a tombstone entry, since the key may
// still be in bbolt. Trees are copy-on-write: Copy is O(1), and a copy that
// is never written again is safe to read from any number of goroutines
// while the writer goes on writing its own copy. Each committed batch
// leaves one such immutable tree behind, which readers use as their
// snapshot together with a bbolt read transaction.
//
// The tree holds pointers: entries never change once inserted (a write
// replaces the pointer), and copy-on-write then copies 8 bytes per item
// instead of the entry, which matters because every batch's first write
// to a node copies it.
type memEntry struct {
	k   []byte // bucket index byte + key
	v   []byte
	del bool
	// session is v decoded, on a Session record: every step reads its
	// Session's record at the boundary and rewrites it at its end, and
	// copying this costs nothing next to decoding v.
	session *Session
}

type memTree = btree.BTreeG[*memEntry]

// memDegree is the memtable tree's degree (nodes of up to 63 entries, the
// library's default). Against 16, interleaved on two cores, it took less
// CPU in 13 of 14 pairs of runs: 256 admitters up to 4 µs less an
// admission, 100 Sessions of steps up to 14 µs less a step without
// fsync; a level less to search outweighs copying larger nodes on write
// (docs/performance-log.md, thirty-first sitting).
const memDegree = 32

func newMemTree() *memTree {
	return btree.NewBTreeGOptions(func(a, b *memEntry) bool { return bytes.Compare(a.k, b.k) < 0 },
		btree.Options{NoLocks: true, Degree: memDegree})
}

// memAlloc hands out the writer's memtable entries and their bytes from
// chunks, an allocation per chunk rather than per entry, key and value:
// the memtable keeps what it is given until a flush drops it, so a chunk
// lives about as long as its entries would (a superseded entry's bytes
// wait for the flush). Every byte given out was also written to the log
// since the older memtable began, which bounds them by a small multiple
// of FlushBytes.
type memAlloc struct {
	entries []memEntry
	bytes   []byte
}

const (
	memEntryChunk = 256
	memByteChunk  = 64 << 10
)

// entry returns a zero entry.
func (a *memAlloc) entry() *memEntry {
	if len(a.entries) == cap(a.entries) {
		a.entries = make([]memEntry, 0, memEntryChunk)
	}
	a.entries = a.entries[:len(a.entries)+1]
	return &a.entries[len(a.entries)-1]
}

// kv returns the memtable key of key in bucket bi and, right after it in
// the same chunk, an empty value with room for n bytes.
func (a *memAlloc) kv(bi byte, key []byte, n int) (k, v []byte) {
	b := a.alloc(1 + len(key) + n)
	k = append(append(b, bi), key...)
	return k[:len(k):len(k)], b[len(k):len(k)]
}

// alloc returns an empty slice with room for n bytes.
func (a *memAlloc) alloc(n int) []byte {
	if n > memByteChunk/8 {
		return make([]byte, 0, n) // large values get their own
	}
	if n > cap(a.bytes)-len(a.bytes) {
		a.bytes = make([]byte, 0, memByteChunk)
	}
	off := len(a.bytes)
	a.bytes = a.bytes[:off+n]
	return a.bytes[off : off : off+n]
}

// view is a consistent read of the store: a bbolt read transaction and the
// memtables that sit on top of the state it sees, newest first (the active
// one, and during a flush the one being flushed). Values it returns are
// valid only while the view is open; callers copy what they keep (as with
// bbolt itself).
type view struct {
	tx   *bolt.Tx
	mems []*memTree
	// last is the number of the last log record the view holds.
	last uint64
	// bks caches the transaction's opened buckets, shared by the views
	// of one transaction: opening a bucket searches the root and
	// allocates, and a read or an operation opens the same ones often.
	bks *openBuckets
	// absent, in the writer's views, remembers keys bbolt lacks (see
	// absentKeys).
	absent absentKeys
	// maxID, in the writer's views, points at the greatest key of the ID
	// index (Bolt.maxID): a key above it is absent without a lookup.
	maxID *messages.MessageID
	// probe is a scratch entry for lookups (a view is used by one
	// goroutine at a time).
	probe memEntry
}

// openBuckets caches a transaction's opened buckets and, per bucket, one
// cursor that every point lookup reuses: bbolt's Get makes a new cursor
// and grows its stack on every call, four allocations a lookup.
type openBuckets struct {
	b   [len(allBuckets)]*bolt.Bucket
	get [len(allBuckets)]*bolt.Cursor
}

// bucket returns bucket bi of the view's transaction.
func (v *view) bucket(bi byte) *bolt.Bucket {
	if v.bks == nil {
		v.bks = new(openBuckets)
	}
	b := v.bks.b[bi]
	if b == nil {
		b = v.tx.Bucket(allBuckets[bi])
		v.bks.b[bi] = b
	}
	return b
}

// boltGet returns bbolt's value of key in bucket bi, or nil when absent,
// as Bucket.Get does (the store has no nested buckets).
func (v *view) boltGet(bi byte, key []byte) []byte {
	b := v.bucket(bi)
	c := v.bks.get[bi]
	if c == nil {
		c = b.Cursor()
		v.bks.get[bi] = c
	}
	k, val := c.Seek(key)
	if k == nil || !bytes.Equal(k, key) {
		return nil
	}
	return val
}

// set makes p the lookup entry of key in bucket bi.
func (p *memEntry) set(bi byte, key []byte) *memEntry {
	p.k = append(append(p.k[:0], bi), key...)
	return p
}

// get returns the value of key in bucket, or nil when absent.
func (v *view) get(bucket, key []byte) []byte {
	_, b := v.lookup(bucket, key)
	return b
}

// lookup is get that also returns the memtable entry holding the value,
// or nil when the value is bbolt's.
func (v *view) lookup(bucket, key []byte) (*memEntry, []byte) {
	bi := bucketIndex(bucket)
	if bi == idsIndex && v.maxID != nil && string(key) > string(*v.maxID) {
		return nil, nil
	}
	probe := v.probe.set(bi, key)
	for _, m := range v.mems {
		if m.Len() == 0 {
			continue
		}
		if e, ok := m.Get(probe); ok {
			if e.del {
				return nil, nil
			}
			return e, nonNil(e.v)
		}
	}
	remember := v.absent != nil && bi == dataIndex
	if remember {
		if _, ok := v.absent[string(probe.k)]; ok {
			return nil, nil
		}
	}
	b := v.boltGet(bi, key)
	if b == nil && remember {
		v.absent.add(probe.k)
	}
	return nil, b
}

// absentKeys is the writer's memory of keys of the data bucket (bucket
// index byte + key) that bbolt does not hold, so a key every step looks up
// (a Session's retry row, usually absent) costs one bbolt search per flush
// instead of one per step. (Not the other buckets: most of their absent
// lookups are of fresh IDs, never looked up again.)
//
// bbolt changes only when a flush commits, and a key reaches bbolt only
// through a flushed memtable, which shadows it until the writer drops that
// memtable; the writer therefore forgets everything when it collects a
// flush (reapFlush). Lookups check the memtables first, so a key written
// since it was remembered reads its new value.
type absentKeys map[string]struct{}

// absentCap bounds the memory between flushes; past it the set starts over.
const absentCap = 1 << 16

// Indexes of the buckets the writer's views treat specially.
var (
	dataIndex = bucketIndex(bucketData)
	idsIndex  = bucketIndex(bucketIDs)
)

func (a absentKeys) add(k []byte) {
	if len(a) >= absentCap {
		clear(a)
	}
	a[string(k)] = struct{}{}
}

// nonNil keeps the bbolt convention that a present key with an empty value
// reads as a non-nil empty slice.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// cursor returns a cursor over bucket that merges the memtables over bbolt.
func (v *view) cursor(bucket []byte) *cursor {
	bi := bucketIndex(bucket)
	c := &cursor{bc: v.bucket(bi).Cursor(), bi: bi, probe: &v.probe}
	c.mem = c.levels[:0]
	for _, m := range v.mems {
		if m.Len() > 0 {
			c.mem = append(c.mem, level{it: m.Iter()})
		}
	}
	return c
}

// cursor iterates one bucket of a view in key order, newer memtables'
// entries replacing (or, as tombstones, hiding) older ones' and bbolt's.
// It offers the subset of bbolt's cursor the store uses: Seek or First
// then Next, and SeekLT (a single position: lastSeq's).
type cursor struct {
	bc    *bolt.Cursor
	bk    []byte // bbolt's current key; nil when exhausted
	bv    []byte
	mem   []level // newest first
	bi    byte
	probe *memEntry
	fwd   bool
	// within, when set, ends a forward walk at the first key without it
	// as a prefix, live or deleted (see view.prefixed).
	within []byte
	// levels holds mem for the usual one or two memtables.
	levels [2]level
}

// level is one memtable's position.
type level struct {
	it btree.IterG[*memEntry]
	e  *memEntry // current entry; nil when exhausted
}

// key returns the level's current key without the bucket byte.
func (l *level) key() []byte { return l.e.k[1:] }

func (c *cursor) in(e *memEntry) bool { return len(e.k) > 0 && e.k[0] == c.bi }

// seekLevel positions l at the first entry >= key (forward) or the last
// entry < key (backward).
func (c *cursor) seekLevel(l *level, key []byte, fwd bool) {
	l.e = nil
	ok := l.it.Seek(c.probe.set(c.bi, key))
	if fwd {
		if ok && c.in(l.it.Item()) {
			l.e = l.it.Item()
		}
		return
	}
	if ok {
		ok = l.it.Prev()
	} else {
		ok = l.it.Last()
	}
	if ok && c.in(l.it.Item()) {
		l.e = l.it.Item()
	}
}

func (c *cursor) stepLevel(l *level) {
	var ok bool
	if c.fwd {
		ok = l.it.Next()
	} else {
		ok = l.it.Prev()
	}
	l.e = nil
	if ok && c.in(l.it.Item()) {
		l.e = l.it.Item()
	}
}

func (c *cursor) stepBolt() {
	if c.fwd {
		c.bk, c.bv = c.bc.Next()
	} else {
		c.bk, c.bv = c.bc.Prev()
	}
}

// before reports whether a comes before b in the cursor's direction.
func (c *cursor) before(a, b []byte) bool {
	if c.fwd {
		return bytes.Compare(a, b) < 0
	}
	return bytes.Compare(a, b) > 0
}

// pick returns the current merged entry: the next key in the cursor's
// direction among all sources, from the newest source that has it. Older
// sources at the same key are stepped past it, and tombstones are skipped
// with them. Calling it again without a move returns the same entry.
func (c *cursor) pick() ([]byte, []byte) {
	for {
		var best []byte
		win := -1 // index of the winning level; -1 is bbolt
		for i := range c.mem {
			l := &c.mem[i]
			if l.e != nil && (best == nil || c.before(l.key(), best)) {
				best, win = l.key(), i
			}
		}
		if c.bk != nil && (best == nil || c.before(c.bk, best)) {
			if c.past(c.bk) {
				return nil, nil
			}
			return c.bk, c.bv
		}
		if best == nil || c.past(best) {
			return nil, nil
		}
		// Older levels and bbolt at the same key are shadowed.
		for i := win + 1; i < len(c.mem); i++ {
			if l := &c.mem[i]; l.e != nil && bytes.Equal(l.key(), best) {
				c.stepLevel(l)
			}
		}
		if c.bk != nil && bytes.Equal(c.bk, best) {
			c.stepBolt()
		}
		if l := &c.mem[win]; !l.e.del {
			return best, nonNil(l.e.v)
		} else {
			c.stepLevel(l)
		}
	}
}

// past reports whether a forward walk bounded by within has left it at k.
func (c *cursor) past(k []byte) bool {
	return c.fwd && c.within != nil && !bytes.HasPrefix(k, c.within)
}

// prefixed yields the keys of bucket that start with p, with their values,
// from the first key >= from (p when from is nil). The walk ends at the
// first key past p's range, live or deleted: without the bound, the merged
// cursor would first step over every tombstone after the range (a busy
// Session's deleted pending and open-step rows follow its stream) to find
// the next live key.
func (v *view) prefixed(bucket, p, from []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		c := v.cursor(bucket)
		c.within = p
		if from == nil {
			from = p
		}
		for k, val := c.Seek(from); k != nil; k, val = c.Next() {
			if !yield(k, val) {
				return
			}
		}
	}
}

// advance moves past key k, the entry pick returned.
func (c *cursor) advance(k []byte) {
	for i := range c.mem {
		if l := &c.mem[i]; l.e != nil && bytes.Equal(l.key(), k) {
			c.stepLevel(l)
			return
		}
	}
	c.stepBolt()
}

// position sets the direction and bbolt's entry, positions every memtable
// level relative to key the same way, and returns the merged entry.
func (c *cursor) position(fwd bool, bk, bv, key []byte) ([]byte, []byte) {
	c.fwd, c.bk, c.bv = fwd, bk, bv
	for i := range c.mem {
		c.seekLevel(&c.mem[i], key, fwd)
	}
	return c.pick()
}

// Seek moves to the first key >= key.
func (c *cursor) Seek(key []byte) ([]byte, []byte) {
	k, v := c.bc.Seek(key)
	return c.position(true, k, v, key)
}

// First moves to the bucket's first key.
func (c *cursor) First() ([]byte, []byte) {
	k, v := c.bc.First()
	return c.position(true, k, v, nil)
}

// SeekLT moves to the last key < key. The cursor cannot step on from there
// (nothing needs it).
func (c *cursor) SeekLT(key []byte) ([]byte, []byte) {
	var k, v []byte
	if at, _ := c.bc.Seek(key); at != nil {
		k, v = c.bc.Prev()
	} else {
		k, v = c.bc.Last()
	}
	return c.position(false, k, v, key)
}

// Next moves to the next key after a Seek or First.
func (c *cursor) Next() ([]byte, []byte) {
	k, _ := c.pick()
	if k == nil || !c.fwd {
		return nil, nil
	}
	c.advance(k)
	return c.pick()
}
