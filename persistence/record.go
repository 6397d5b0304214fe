package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// A WAL record's payload is the transaction's writes in order, physical and
// not logical: replaying it needs no projector, clock or ID generator, so it
// reproduces the transaction exactly whatever the code version.
//
//	write: op byte | bucket index byte | uvarint key length | key
//	       | (put only) uvarint value length | value
const (
	recPut byte = 1
	recDel byte = 2
)

// bucketIndex returns the index of a bucket name in allBuckets. Callers pass
// the package's own name slices, so comparing the slices' first bytes' addresses
// settles almost every call without comparing contents.
func bucketIndex(name []byte) byte {
	for i, b := range allBuckets {
		if &b[0] == &name[0] || bytes.Equal(b, name) {
			return byte(i)
		}
	}
	panic(fmt.Sprintf("persistence: unknown bucket %q", name))
}

// putBytes writes val at key of bucket and logs the write. val must not
// change afterwards: the memtable keeps it until it is flushed. Every write
// of the writer goes through putBytes or del (TestWritesAreLogged checks).
func (w *wtx) putBytes(bucket, key, val []byte) error {
	if err := checkWrite(bucket, key, len(val)); err != nil {
		return err
	}
	bi := bucketIndex(bucket)
	k, _ := w.s.mem.kv(bi, key, 0)
	w.insert(bi, k, val)
	return nil
}

// putString is putBytes of a string's bytes, copied to the memtable's.
func (w *wtx) putString(bucket, key []byte, val string) error {
	if err := checkWrite(bucket, key, len(val)); err != nil {
		return err
	}
	bi := bucketIndex(bucket)
	k, v := w.s.mem.kv(bi, key, len(val))
	w.insert(bi, k, append(v, val...))
	return nil
}

// put encodes v at key of bucket.
func (w *wtx) put(bucket, key []byte, v any) error {
	_, err := w.putEntry(bucket, key, v)
	return err
}

// putEntry is put returning the new memtable entry.
func (w *wtx) putEntry(bucket, key []byte, v any) (*memEntry, error) {
	bi := bucketIndex(bucket)
	enc, err := w.s.enc.Encode(v)
	if err != nil {
		return nil, fmt.Errorf("persistence: encode %s/%q: %w", bucket, string(key), err)
	}
	if err := checkWrite(bucket, key, len(enc)); err != nil {
		return nil, err
	}
	k, val := w.s.mem.kv(bi, key, len(enc))
	return w.insert(bi, k, append(val, enc...)), nil
}

// checkWrite refuses a write bbolt would refuse when a flush puts it: an
// empty or over-long key, or an over-long value. Refused here, the write
// fails only the operation making it; refused by the flush, it would fail
// the store, and the replay of the WAL record holding it every reopen.
func checkWrite(bucket, key []byte, n int) error {
	switch {
	case len(key) == 0:
		return messages.Errorf(messages.ErrInvalid, "persistence: empty key in %s", bucket)
	case len(key) > bolt.MaxKeySize:
		return messages.Errorf(messages.ErrInvalid, "persistence: a key of %d bytes in %s (at most %d)", len(key), bucket, bolt.MaxKeySize)
	case n > bolt.MaxValueSize:
		return messages.Errorf(messages.ErrInvalid, "persistence: a value of %d bytes in %s (at most %d)", n, bucket, bolt.MaxValueSize)
	}
	return nil
}

// insert writes memtable key k (bucket index byte + key) with val to the
// memtable, logs the write and returns the new entry.
func (w *wtx) insert(bi byte, k, val []byte) *memEntry {
	e := w.s.mem.entry()
	e.k, e.v = k, val
	w.v.mems[0].SetHint(e, &w.s.hints[bi])
	r := append(*w.rec, recPut, bi)
	r = binary.AppendUvarint(r, uint64(len(k)-1))
	r = append(r, k[1:]...)
	r = binary.AppendUvarint(r, uint64(len(val)))
	*w.rec = append(r, val...)
	return e
}

// del deletes key of bucket and logs the write.
//
// When neither bbolt nor an older memtable holds the key, the batch's
// memtable drops its entry instead of covering it with a tombstone: every
// scan over a tombstone's range steps over it until the next flush, and a
// long busy Session deletes a pending row per prompt and an open-step row
// per step (its Log followers each walked all of them after every commit).
func (w *wtx) del(bucket, key []byte) error {
	bi := bucketIndex(bucket)
	if w.shadows(bi, key) {
		e := w.s.mem.entry()
		k, _ := w.s.mem.kv(bi, key, 0)
		e.k, e.del = k, true
		w.v.mems[0].SetHint(e, &w.s.hints[bi])
	} else {
		w.v.mems[0].DeleteHint(w.v.probe.set(bi, key), &w.s.hints[bi])
	}
	r := append(*w.rec, recDel, bi)
	r = binary.AppendUvarint(r, uint64(len(key)))
	*w.rec = append(r, key...)
	return nil
}

// shadows reports whether a delete of key must hide a value below the
// batch's memtable: one an older memtable (a flush's, not yet in bbolt)
// or bbolt holds. It is a lookup in the writer's view without the batch's
// level, so it shares the view's shortcuts for keys bbolt lacks.
func (w *wtx) shadows(bi byte, key []byte) bool {
	below := w.v
	below.mems = w.v.mems[1:]
	_, b := below.lookup(allBuckets[bi], key)
	return b != nil
}

// decodeRecord calls fn for each write of a record payload, refusing any
// payload that is not exactly a sequence of well-formed writes.
func decodeRecord(p []byte, fn func(op byte, bucket, key, val []byte) error) error {
	for len(p) > 0 {
		if len(p) < 2 {
			return fmt.Errorf("%w: truncated write", errWALCorrupt)
		}
		op, bi := p[0], int(p[1])
		if (op != recPut && op != recDel) || bi >= len(allBuckets) {
			return fmt.Errorf("%w: write op %d on bucket %d", errWALCorrupt, op, bi)
		}
		p = p[2:]
		key, rest, err := lengthPrefixed(p)
		if err != nil {
			return err
		}
		p = rest
		var val []byte
		if op == recPut {
			if val, p, err = lengthPrefixed(p); err != nil {
				return err
			}
		}
		if err := fn(op, allBuckets[bi], key, val); err != nil {
			return err
		}
	}
	return nil
}

func lengthPrefixed(p []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, fmt.Errorf("%w: bad length", errWALCorrupt)
	}
	return p[k : k+int(n)], p[k+int(n):], nil
}

// memOfRecords returns a memtable holding the writes of the record
// payloads, applied in order: recovery writes it into bbolt as a flush
// does, in key order, which bbolt takes several times faster than the
// same writes in the order they were made (each Put into a page that is
// not split until the commit moves every entry after it). Its keys and
// values point into the payloads.
func memOfRecords(records [][]byte) (*memTree, error) {
	mem := newMemTree()
	for _, p := range records {
		err := decodeRecord(p, func(op byte, bucket, key, val []byte) error {
			mem.Set(&memEntry{k: append([]byte{bucketIndex(bucket)}, key...), v: val, del: op == recDel})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return mem, nil
}
