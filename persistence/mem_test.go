package persistence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestMergedView checks the memtable-over-bbolt view against a model (a
// map) on random contents: point reads, and cursor walks that seek forward
// and step on, or seek backward, with tombstones, shadowed keys, empty
// values and neighbouring buckets in the memtable.
func TestMergedView(t *testing.T) {
	for seed := range 40 {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { checkMergedView(t, uint64(seed)) })
	}
}

func checkMergedView(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	db, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := func() []byte { return fmt.Appendf(nil, "k%02d", rng.IntN(40)) }
	model := map[string]map[string]string{} // bucket -> key -> value
	names := [][]byte{bucketData, bucketIDs, bucketInbox}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			b, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			model[string(name)] = map[string]string{}
			if !slices.ContainsFunc(names, func(n []byte) bool { return string(n) == string(name) }) {
				continue
			}
			for range rng.IntN(30) {
				k, v := key(), fmt.Sprint("bolt", rng.IntN(9))
				if rng.IntN(5) == 0 {
					v = "" // empty value: present
				}
				if err := b.Put(k, []byte(v)); err != nil {
					return err
				}
				model[string(name)][string(k)] = v
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Two memtables, as during a flush: the older one applied first.
	older, mem := newMemTree(), newMemTree()
	nOlder := rng.IntN(40)
	if seed%5 == 0 {
		nOlder = 0 // and sometimes just one
	}
	for range nOlder {
		name := names[rng.IntN(len(names))]
		k := key()
		e := &memEntry{k: memKey(bucketIndex(name), k)}
		if rng.IntN(3) == 0 {
			e.del = true
			delete(model[string(name)], string(k))
		} else {
			e.v = fmt.Appendf(nil, "old%d", rng.IntN(9))
			model[string(name)][string(k)] = string(e.v)
		}
		older.Set(e)
	}
	for range rng.IntN(60) {
		name := names[rng.IntN(len(names))]
		k := key()
		e := &memEntry{k: memKey(bucketIndex(name), k)}
		switch rng.IntN(4) {
		case 0:
			e.del = true
			delete(model[string(name)], string(k))
		case 1:
			model[string(name)][string(k)] = "" // empty value: present
		default:
			e.v = fmt.Appendf(nil, "mem%d", rng.IntN(9))
			model[string(name)][string(k)] = string(e.v)
		}
		mem.Set(e)
	}
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	levels := []*memTree{mem, older}
	if seed%5 == 0 {
		levels = levels[:1]
	}
	v := &view{tx: tx, mems: levels}
	for _, name := range names {
		want := model[string(name)]
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		// Every key, and keys that share a prefix with one without being
		// it (shorter, longer), which a lookup must not take for it.
		for i := range 40 {
			for _, k := range []string{fmt.Sprintf("k%02d", i), fmt.Sprintf("k%d", i/10), fmt.Sprintf("k%02dx", i)} {
				got := v.get(name, []byte(k))
				w, ok := want[k]
				if (got != nil) != ok || string(got) != w {
					t.Fatalf("%s get %s = %q (present %v), want %q (present %v)", name, k, got, got != nil, w, ok)
				}
			}
		}
		// Walks bounded by a prefix ("k0".."k3"), from its start or from a
		// key inside it, return exactly the model's keys in the range.
		for d := range 4 {
			p := fmt.Sprintf("k%d", d)
			from := fmt.Sprintf("k%d%d", d, rng.IntN(10))
			for _, start := range []string{"", from} {
				var got, exp []string
				var fromKey []byte
				if start != "" {
					fromKey = []byte(start)
				}
				for k, val := range v.prefixed(name, []byte(p), fromKey) {
					got = append(got, string(k)+"="+string(val))
				}
				for _, k := range keys {
					if strings.HasPrefix(k, p) && k >= start {
						exp = append(exp, k+"="+want[k])
					}
				}
				if !slices.Equal(got, exp) {
					t.Fatalf("%s walk of %q from %q: %v, want %v", name, p, start, got, exp)
				}
			}
		}
		// A random walk: each move's result must match the model's
		// neighbour of the previous position.
		c := v.cursor(name)
		pos := -1 // index in keys; -1 or len(keys) is off the end
		at := func(step string, k, val []byte) {
			t.Helper()
			if pos < 0 || pos >= len(keys) {
				if k != nil {
					t.Fatalf("%s %s: got %q, want the end", name, step, k)
				}
				return
			}
			if string(k) != keys[pos] || string(val) != want[keys[pos]] || val == nil {
				t.Fatalf("%s %s: got %q=%q, want %q=%q", name, step, k, val, keys[pos], want[keys[pos]])
			}
		}
		fwd := false // Next only steps on from Seek or First
		for range 80 {
			switch op := rng.IntN(5); {
			case op == 0:
				s := fmt.Sprintf("k%02d", rng.IntN(42))
				pos, _ = slices.BinarySearch(keys, s)
				pos--
				k, val := c.SeekLT([]byte(s))
				at("seek before "+s, k, val)
				fwd = false
			case op == 1:
				s := fmt.Sprintf("k%02d", rng.IntN(42))
				pos, _ = slices.BinarySearch(keys, s)
				k, val := c.Seek([]byte(s))
				at("seek "+s, k, val)
				fwd = true
			case op == 2:
				pos = 0
				k, val := c.First()
				at("first", k, val)
				fwd = true
			case fwd && pos < len(keys):
				pos++
				k, val := c.Next()
				at("next", k, val)
			case !fwd:
				if k, _ := c.Next(); k != nil {
					t.Fatalf("%s: Next after SeekLT returned %q", name, k)
				}
			}
		}
	}
}

// TestWriterForgetsAbsentKeysAfterAFlush checks the writer's memory of
// keys bbolt lacks (absentKeys): a key remembered as absent, then written
// and flushed into bbolt, must read back once the flushed memtable is gone.
func TestWriterForgetsAbsentKeysAfterAFlush(t *testing.T) {
	st, flushes := openFlushing(t)
	ctx := context.Background()
	key, val := []byte("remembered"), []byte("value")
	run := func(fn func(w *wtx) error) {
		t.Helper()
		if err := st.submit(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	run(func(w *wtx) error {
		if v := w.v.get(bucketData, key); v != nil {
			return fmt.Errorf("fresh key reads %q", v)
		}
		if _, ok := w.v.absent[string(append([]byte{bucketIndex(bucketData)}, key...))]; !ok {
			return errors.New("a key bbolt lacks was not remembered")
		}
		return nil
	})
	run(func(w *wtx) error {
		// Enough log for a flush to start after this commit.
		if err := w.putBytes(bucketData, key, val); err != nil {
			return err
		}
		return w.putBytes(bucketMeta, []byte("filler"), make([]byte, 8<<10))
	})
	for i := 0; flushes.Load() == 0; i++ {
		// Commits collect the finished flush; the filler keeps key out of
		// the new memtable, so only bbolt has it afterwards.
		run(func(w *wtx) error { return w.putBytes(bucketMeta, []byte("tick"), []byte{byte(i)}) })
	}
	run(func(w *wtx) error {
		for _, m := range w.v.mems {
			if _, ok := m.Get(&memEntry{k: append([]byte{bucketIndex(bucketData)}, key...)}); ok {
				return errors.New("key still in a memtable: the test does not reach bbolt")
			}
		}
		if v := w.v.get(bucketData, key); string(v) != string(val) {
			return fmt.Errorf("flushed key reads %q, want %q", v, val)
		}
		return nil
	})
}

// memKey returns the memtable key of key in bucket.
func memKey(bucket byte, key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = bucket
	copy(k[1:], key)
	return k
}

// TestDeletesHideOnlyWhatIsBelow: a delete leaves a tombstone in the
// batch's memtable only over a value an older memtable (a running flush's)
// or bbolt holds; a key only the batch's memtable holds, or none, is
// dropped. Either way no read sees the key, and the log records each
// delete.
func TestDeletesHideOnlyWhatIsBelow(t *testing.T) {
	s := openTemp(t, Options{NoSync: true})
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketData).Put([]byte("inbolt"), []byte("v")) })
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	batch, imm := newMemTree(), newMemTree()
	imm.Set(&memEntry{k: memKey(dataIndex, []byte("inimm")), v: []byte("v")})
	batch.Set(&memEntry{k: memKey(dataIndex, []byte("inbatch")), v: []byte("v")})
	var rec []byte
	w := &wtx{v: view{tx: tx, mems: []*memTree{batch, imm}, absent: absentKeys{}}, s: s, rec: &rec}
	keys := map[string]bool{"inbolt": true, "inimm": true, "inbatch": false, "nowhere": false} // tombstone?
	for k := range keys {
		if err := w.del(bucketData, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for k, tomb := range keys {
		e, ok := batch.Get(&memEntry{k: memKey(dataIndex, []byte(k))})
		if ok != tomb || (ok && !e.del) {
			t.Errorf("%s: entry in the batch's memtable %v (tombstone %v), want a tombstone %v", k, ok, ok && e.del, tomb)
		}
		if v := w.v.get(bucketData, []byte(k)); v != nil {
			t.Errorf("%s reads %q after its delete", k, v)
		}
	}
	n := 0
	if err := decodeRecord(rec, func(op byte, _, _, _ []byte) error {
		if op == recDel {
			n++
		}
		return nil
	}); err != nil || n != len(keys) {
		t.Fatalf("the log has %d deletes (%v), want %d", n, err, len(keys))
	}
}

// bareBolt returns a read transaction, open until the test ends, of a new
// bbolt file with every bucket and what fill puts in them.
func bareBolt(t *testing.T, fill func(tx *bolt.Tx) error) *bolt.Tx {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if fill != nil {
			return fill(tx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() }) // before the Close above
	return tx
}

// TestPrefixedWalkStopsAtItsRange: a walk bounded by a prefix ends at the
// first key past the range even when it is a tombstone, instead of
// stepping over every tombstone that follows to find the next live key.
func TestPrefixedWalkStopsAtItsRange(t *testing.T) {
	tx := bareBolt(t, nil)
	mem := newMemTree()
	mem.Set(&memEntry{k: memKey(dataIndex, []byte("a1")), v: []byte("v")})
	for i := range 100 {
		mem.Set(&memEntry{k: memKey(dataIndex, fmt.Appendf(nil, "b%03d", i)), del: true})
	}
	mem.Set(&memEntry{k: memKey(dataIndex, []byte("c")), v: []byte("v")})
	v := &view{tx: tx, mems: []*memTree{mem}}
	c := v.cursor(bucketData)
	c.within = []byte("a")
	var got []string
	for k, _ := c.Seek([]byte("a")); k != nil; k, _ = c.Next() {
		got = append(got, string(k))
	}
	if !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("walk of a: %v", got)
	}
	if e := c.mem[0].e; e == nil || string(e.k[1:]) != "b000" {
		t.Fatalf("the walk went on past the first tombstone after its range, to %v", e)
	}
}
