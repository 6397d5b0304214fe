package persistence

import (
	"bytes"

	"github.com/tidwall/btree"
	bolt "go.etcd.io/bbolt"
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
}

type memTree = btree.BTreeG[*memEntry]

func newMemTree() *memTree {
	return btree.NewBTreeGOptions(func(a, b *memEntry) bool { return bytes.Compare(a.k, b.k) < 0 },
		btree.Options{NoLocks: true, Degree: 16})
}

// memKey returns the memtable key of key in bucket.
func memKey(bucket byte, key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = bucket
	copy(k[1:], key)
	return k
}

// view is a consistent read of the store: a bbolt read transaction and the
// memtable that sits on top of exactly the state it sees. Values it returns
// are valid only while the view is open; callers copy what they keep (as
// with bbolt itself).
type view struct {
	tx  *bolt.Tx
	mem *memTree
	// probe is a scratch entry for lookups (a view is used by one
	// goroutine at a time).
	probe memEntry
}

// set makes p the lookup entry of key in bucket bi.
func (p *memEntry) set(bi byte, key []byte) *memEntry {
	p.k = append(append(p.k[:0], bi), key...)
	return p
}

// get returns the value of key in bucket, or nil when absent.
func (v *view) get(bucket, key []byte) []byte {
	bi := bucketIndex(bucket)
	if v.mem != nil && v.mem.Len() > 0 {
		if e, ok := v.mem.Get(v.probe.set(bi, key)); ok {
			if e.del {
				return nil
			}
			return nonNil(e.v)
		}
	}
	return v.tx.Bucket(bucket).Get(key)
}

// nonNil keeps the bbolt convention that a present key with an empty value
// reads as a non-nil empty slice.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// cursor returns a cursor over bucket that merges the memtable over bbolt.
func (v *view) cursor(bucket []byte) *cursor {
	c := &cursor{bc: v.tx.Bucket(bucket).Cursor(), bi: bucketIndex(bucket), probe: &v.probe}
	if v.mem != nil && v.mem.Len() > 0 {
		c.mi = v.mem.Iter()
		c.hasMem = true
	}
	return c
}

// cursor iterates one bucket of a view in key order, the memtable's
// entries replacing (or, as tombstones, hiding) bbolt's. It offers the
// subset of bbolt's cursor the store uses: Seek and First then Next, and
// Last then Prev. Switching direction re-seeks both sides.
type cursor struct {
	bc     *bolt.Cursor
	mi     btree.IterG[*memEntry]
	hasMem bool
	bi     byte
	probe  *memEntry

	// The current candidates of each side: a nil key is exhausted.
	bk, bv []byte
	me     *memEntry
	mok    bool
	fwd    bool
}

// memIn reports whether e is an entry of this cursor's bucket.
func (c *cursor) memIn(e *memEntry) bool { return len(e.k) > 0 && e.k[0] == c.bi }

// memSeek positions the memtable side at the first entry >= key (forward)
// or the last entry < key (backward; key nil means the bucket's end).
func (c *cursor) memSeek(key []byte, fwd bool) {
	c.mok = false
	if !c.hasMem {
		return
	}
	if fwd {
		if c.mi.Seek(c.probe.set(c.bi, key)) && c.memIn(c.mi.Item()) {
			c.me, c.mok = c.mi.Item(), true
		}
		return
	}
	var ok bool
	if key == nil {
		// The first entry of the next bucket, then one back.
		ok = c.mi.Seek(c.probe.set(c.bi+1, nil))
	} else {
		ok = c.mi.Seek(c.probe.set(c.bi, key))
	}
	if ok {
		ok = c.mi.Prev()
	} else {
		ok = c.mi.Last()
	}
	if ok && c.memIn(c.mi.Item()) {
		c.me, c.mok = c.mi.Item(), true
	}
}

func (c *cursor) memStep() {
	var ok bool
	if c.fwd {
		ok = c.mi.Next()
	} else {
		ok = c.mi.Prev()
	}
	c.mok = ok && c.memIn(c.mi.Item())
	if c.mok {
		c.me = c.mi.Item()
	}
}

func (c *cursor) boltStep() {
	if c.fwd {
		c.bk, c.bv = c.bc.Next()
	} else {
		c.bk, c.bv = c.bc.Prev()
	}
}

// pick returns the current merged entry, skipping tombstones and the bbolt
// keys they or newer memtable values shadow.
func (c *cursor) pick() ([]byte, []byte) {
	for {
		if !c.mok {
			return c.bk, c.bv
		}
		mk := c.me.k[1:]
		cmp := 1 // > 0: the memtable entry comes first
		if c.bk != nil {
			cmp = bytes.Compare(c.bk, mk)
			if !c.fwd {
				cmp = -cmp
			}
		}
		if cmp < 0 {
			return c.bk, c.bv
		}
		if cmp == 0 {
			c.boltStep() // shadowed by the memtable
		}
		if !c.me.del {
			return mk, nonNil(c.me.v)
		}
		c.memStep()
	}
}

// advance moves past the entry pick returned.
func (c *cursor) advance(k []byte) {
	if c.mok && bytes.Equal(c.me.k[1:], k) {
		c.memStep()
		return
	}
	c.boltStep()
}

// Seek moves to the first key >= key.
func (c *cursor) Seek(key []byte) ([]byte, []byte) {
	c.fwd = true
	c.bk, c.bv = c.bc.Seek(key)
	c.memSeek(key, true)
	return c.pick()
}

// First moves to the bucket's first key.
func (c *cursor) First() ([]byte, []byte) {
	c.fwd = true
	c.bk, c.bv = c.bc.First()
	c.memSeek(nil, true)
	return c.pick()
}

// Last moves to the bucket's last key.
func (c *cursor) Last() ([]byte, []byte) {
	c.fwd = false
	c.bk, c.bv = c.bc.Last()
	c.memSeek(nil, false)
	return c.pick()
}

// Next moves to the next key.
func (c *cursor) Next() ([]byte, []byte) {
	k, _ := c.pick()
	if k == nil {
		return nil, nil
	}
	if !c.fwd {
		c.Seek(k)
	}
	c.advance(k)
	return c.pick()
}

// Prev moves to the previous key.
func (c *cursor) Prev() ([]byte, []byte) {
	k, _ := c.pick()
	if k == nil {
		return nil, nil
	}
	if c.fwd {
		c.seekBefore(k)
		return c.pick()
	}
	c.advance(k)
	return c.pick()
}

// SeekLT moves to the last key < key.
func (c *cursor) SeekLT(key []byte) ([]byte, []byte) {
	c.seekBefore(key)
	return c.pick()
}

// seekBefore positions backward at the last key < key.
func (c *cursor) seekBefore(key []byte) {
	c.fwd = false
	if k, _ := c.bc.Seek(key); k != nil {
		c.bk, c.bv = c.bc.Prev()
	} else {
		c.bk, c.bv = c.bc.Last()
	}
	c.memSeek(key, false)
}
