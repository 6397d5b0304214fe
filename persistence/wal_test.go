package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// noCheckpoints keeps the writer from checkpointing on its own, so a test
// knows the checkpoint is the one Open made.
var noCheckpoints = Options{CheckpointBytes: 1 << 40, CheckpointPages: 1 << 40}

// populate creates sessions Sessions and admits n prompts spread over them.
func populate(t *testing.T, st *Bolt, sessions, n int) {
	t.Helper()
	ctx := context.Background()
	var sids []messages.SessionID
	for range sessions {
		s, _, err := st.CreateSession(ctx, CreateSession{Location: messages.Location{Directory: "/tmp"}})
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	for i := range n {
		p := messages.Prompt{Text: fmt.Sprintf("prompt %d %s", i, strings.Repeat("x", i%300))}
		if _, _, err := st.Admit(ctx, Admission{SessionID: sids[i%len(sids)], Prompt: p}); err != nil {
			t.Fatal(err)
		}
	}
}

func dump(t *testing.T, st *Bolt) map[string]map[string]string {
	t.Helper()
	d, err := st.Dump()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// copyStore copies a store's files (bbolt and both WAL files).
func copyStore(t *testing.T, from, to string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal", "-wal2"} {
		copyFile(t, from+suffix, to+suffix)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func openAndCheck(t *testing.T, path string, opts Options) *Bolt {
	t.Helper()
	st, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("consistency check: %v", err)
	}
	return st
}

// TestRecoveryAfterPowerLoss models a power loss: every bbolt page written
// since the last checkpoint may or may not have reached the disk, and either
// meta page may be torn. Recovery must rebuild exactly the acknowledged
// state from the checkpoint and the WAL. It fails if bbolt reuses a page of
// the checkpoint before the next one (the hold), if recovery trusts a newer
// meta page, or if a record is lost or replayed twice.
func TestRecoveryAfterPowerLoss(t *testing.T) {
	for seed := range 8 {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "s.db")
			st, err := Open(path, noCheckpoints)
			if err != nil {
				t.Fatal(err)
			}
			populate(t, st, 3, 50)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st, err = Open(path, noCheckpoints) // checkpoints at open
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			snap, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			populate(t, st, 4, 300)
			want := dump(t, st)
			cur, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ps := st.db.Info().PageSize
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			lost := filepath.Join(t.TempDir(), "s.db")
			if err := os.WriteFile(lost, mixPages(snap, cur, ps, rng), 0o600); err != nil {
				t.Fatal(err)
			}
			copyFile(t, path+"-wal", lost+"-wal")
			copyFile(t, path+"-wal2", lost+"-wal2")
			got := dump(t, openAndCheck(t, lost, noCheckpoints))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("recovered state differs from the acknowledged state")
			}
		})
	}
}

// TestRecoveryAfterPowerLossDuringCheckpoints is the power loss model with
// checkpoints running in the background while the writer goes on: the disk
// holds bbolt as of the last checkpoint's fdatasync, with any page written
// since present or not.
func TestRecoveryAfterPowerLossDuringCheckpoints(t *testing.T) {
	var mu sync.Mutex
	var snap []byte
	checkpointSynced = func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			panic(err)
		}
		mu.Lock()
		snap = b
		mu.Unlock()
	}
	defer func() { checkpointSynced = nil }()
	for seed := range 6 {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			st, err := Open(path, Options{CheckpointPages: 48})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			populate(t, st, 6, 400+seed*37)
			want := dump(t, st)
			lost := filepath.Join(t.TempDir(), "s.db")
			copyStore(t, path, lost) // WAL files as synced; bbolt replaced below
			cur, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			base := snap
			mu.Unlock()
			if base == nil {
				t.Fatal("no background checkpoint ran")
			}
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			if err := os.WriteFile(lost, mixPages(base, cur, st.db.Info().PageSize, rng), 0o600); err != nil {
				t.Fatal(err)
			}
			got := dump(t, openAndCheck(t, lost, Options{}))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("recovered state differs from the acknowledged state")
			}
		})
	}
}

// mixPages returns a file where each page comes from the checkpoint's
// snapshot or from the current file at random, meta pages may be garbage,
// and pages the snapshot did not have may be zeros.
func mixPages(snap, cur []byte, ps int, rng *rand.Rand) []byte {
	out := make([]byte, len(cur))
	for off := 0; off < len(cur); off += ps {
		page := out[off : off+ps]
		switch choice := rng.IntN(3); {
		case off < 2*ps && choice == 2:
			for i := range page {
				page[i] = byte(rng.Uint32())
			}
		case choice == 0 && off+ps <= len(snap):
			copy(page, snap[off:])
		case choice == 0:
			// Never written before the power loss.
		default:
			copy(page, cur[off:])
		}
	}
	return out
}

// TestRecoveryAfterProcessCrash copies the files of a running store, as a
// SIGKILL would leave them (bbolt's unsynced pages are in the page cache),
// including checkpoints taken while it ran.
func TestRecoveryAfterProcessCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{CheckpointPages: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	populate(t, st, 5, 400)
	want := dump(t, st)
	crashed := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, crashed)
	if got := dump(t, openAndCheck(t, crashed, Options{})); !reflect.DeepEqual(got, want) {
		t.Fatal("recovered state differs from the acknowledged state")
	}
}

// TestBigStoreCommitsWithoutHold runs a store whose file outgrows half its
// mmap, where each commit is checkpointed and runs unheld, and checks that
// it still commits and recovers.
func TestBigStoreCommitsWithoutHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{MmapBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	populate(t, st, 2, 400)
	if !st.big() {
		t.Fatalf("high-water mark %d of mmap %d: not big", st.hwm, st.mmap)
	}
	want := dump(t, st)
	crashed := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, crashed)
	if got := dump(t, openAndCheck(t, crashed, Options{})); !reflect.DeepEqual(got, want) {
		t.Fatal("recovered state differs from the acknowledged state")
	}
}

func TestWALRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if _, _, ok := w.recover(); ok {
		t.Fatal("new WAL has a header")
	}
	appendAll := func(from, to uint64) {
		t.Helper()
		for txid := from; txid <= to; txid++ {
			if err := w.append(txid, fmt.Appendf(nil, "payload %d", txid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	recovered := func(wantGen uint64, want ...uint64) {
		t.Helper()
		h, got, ok := w.recover()
		if !ok || h.gen != wantGen {
			t.Fatalf("recover: gen %d ok %v, want gen %d", h.gen, ok, wantGen)
		}
		var names []string
		for _, p := range got {
			names = append(names, string(p))
		}
		var wantNames []string
		for _, txid := range want {
			wantNames = append(wantNames, fmt.Sprint("payload ", txid))
		}
		if !reflect.DeepEqual(names, wantNames) {
			t.Fatalf("recovered %q, want %q", names, wantNames)
		}
	}

	// Checkpoint 10 in file 1, records 11-13 after it.
	if err := w.writeHeader(1, 10, []byte("meta 10"), 1); err != nil {
		t.Fatal(err)
	}
	w.base = 1
	w.switchTo(1, 10, 1)
	appendAll(11, 13)
	if err := w.append(15, nil); err == nil {
		t.Fatal("append out of order: no error")
	}
	recovered(10, 11, 12, 13)

	// A checkpoint at 13 in progress: records move to file 0 before its
	// header is written; recovery chains from file 1 into file 0.
	seed13 := w.chain
	w.switchTo(0, 13, seed13)
	appendAll(14, 15)
	recovered(10, 11, 12, 13, 14, 15)
	if err := w.writeHeader(0, 13, []byte("meta 13"), seed13); err != nil {
		t.Fatal(err)
	}
	recovered(13, 14, 15) // file 1's records are older and not chained

	// Had that header write been torn, file 1's checkpoint is the base and
	// everything still chains.
	if _, err := w.files[0].f.WriteAt([]byte{0xff}, 9); err != nil {
		t.Fatal(err)
	}
	recovered(10, 11, 12, 13, 14, 15)
	if err := w.writeHeader(0, 13, []byte("meta 13"), seed13); err != nil {
		t.Fatal(err)
	}
	recovered(13, 14, 15)

	// The next checkpoint overwrites file 1 from the start; its stale
	// records after the new ones (same lengths, so aligned) must not read
	// as their continuation.
	seed15 := w.chain
	w.switchTo(1, 15, seed15)
	appendAll(16, 16)
	recovered(13, 14, 15, 16)

	// Unappend invalidates a record whose transaction did not commit.
	off := w.off
	appendAll(17, 17)
	if err := w.unappend(off, 17); err != nil {
		t.Fatal(err)
	}
	recovered(13, 14, 15, 16)
	appendAll(17, 17)
	recovered(13, 14, 15, 16, 17)

	// A torn record ends the log.
	b, err := os.ReadFile(path + "-wal2")
	if err != nil {
		t.Fatal(err)
	}
	b[walRecordStart+walRecordHead] ^= 0xff
	if got, _ := readRecords(bytes.NewReader(b), int64(len(b)), 15, seed15); len(got) != 0 {
		t.Fatalf("torn record read back: %q", got)
	}
}

// TestWALLocksStore checks that a second Open of the same store waits for
// the WAL's lock and gives up after Timeout.
func TestWALLocksStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := Open(path, Options{Timeout: 50e6}); err == nil || !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

// TestWALWithoutDatabase refuses a WAL whose database file is missing
// rather than starting an empty store beside it.
func TestWALWithoutDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "no database file") {
		t.Fatalf("open: %v", err)
	}
}

// TestBoltMetaLayout checks boltmeta.go's reading of bbolt's meta pages
// against what bbolt itself reports.
func TestBoltMetaLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 3 {
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte{byte(i)}, []byte("v"))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var txid uint64
	_ = db.View(func(tx *bolt.Tx) error { txid = uint64(tx.ID()); return nil })
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	metas, valid := readBoltMetas(f)
	if !valid[0] || !valid[1] {
		t.Fatalf("meta pages not valid: %v", valid)
	}
	if metas[0].pageSize != db.Info().PageSize {
		t.Fatalf("page size %d, bbolt says %d", metas[0].pageSize, db.Info().PageSize)
	}
	if got, _ := newestBoltTxid(f); got != txid {
		t.Fatalf("newest txid %d, bbolt says %d", got, txid)
	}
	if _, err := boltMetaOf(f, metas[0].pageSize, txid); err != nil {
		t.Fatal(err)
	}
	if _, err := boltMetaOf(f, metas[0].pageSize, txid+1); err == nil {
		t.Fatal("meta of a future tx found")
	}
	// Corrupting one field breaks the checksum.
	raw := append([]byte(nil), metas[txid%2].raw...)
	binary.NativeEndian.PutUint64(raw[boltPageHead+48:], txid+7)
	if _, ok := parseBoltMeta(raw); ok {
		t.Fatal("meta with a changed txid still validates")
	}
}

// TestWritesAreLogged fails when code in this package writes to bbolt
// without going through wtx.putBytes or wtx.del, whose writes reach the
// WAL: such a write would be lost in recovery.
func TestWritesAreLogged(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"record.go": true}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || allowed[name] {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || (name == "bolt.go" && fn.Name.Name == "open") {
				continue // open writes the schema with bbolt's own syncs
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					switch sel.Sel.Name {
					case "Put", "Delete", "CreateBucket", "CreateBucketIfNotExists", "DeleteBucket", "NextSequence", "SetSequence":
						t.Errorf("%s: %s calls %s directly; use wtx.putBytes or wtx.del", fset.Position(call.Pos()), fn.Name.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

// FuzzDecodeRecord checks that no payload panics the decoder and that a
// payload it accepts is exactly a sequence of writes: encoding those writes
// again gives a payload that decodes to the same writes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte{recPut, 1, 3, 'k', 'e', 'y', 2, 'v', 'v', recDel, 2, 1, 'k'})
	f.Add([]byte{recPut, 9, 1, 'k', 0})
	f.Add([]byte{recPut, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	writes := func(p []byte) ([]string, []byte, error) {
		var out []string
		var again []byte
		err := decodeRecord(p, func(op byte, bucket, key, val []byte) error {
			out = append(out, fmt.Sprintf("%d %s %q %q", op, bucket, key, val))
			again = append(again, op, bucketIndex(bucket))
			again = binary.AppendUvarint(again, uint64(len(key)))
			again = append(again, key...)
			if op == recPut {
				again = binary.AppendUvarint(again, uint64(len(val)))
				again = append(again, val...)
			}
			return nil
		})
		return out, again, err
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		first, again, err := writes(p)
		if err != nil {
			return
		}
		second, _, err := writes(again)
		if err != nil || !reflect.DeepEqual(first, second) {
			t.Fatalf("re-encoded writes differ: %v %q vs %q", err, first, second)
		}
	})
}

func FuzzReadWAL(f *testing.F) {
	path := filepath.Join(f.TempDir(), "s.db")
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		f.Fatal(err)
	}
	_ = w.writeHeader(0, 5, []byte("m"), 9)
	w.switchTo(0, 5, 9)
	_ = w.append(6, []byte{recPut, 1, 1, 'k', 1, 'v'})
	_ = w.append(7, []byte{recDel, 1, 1, 'k'})
	b, _ := os.ReadFile(path + "-wal")
	w.close()
	f.Add(b[:walRecordStart+64])
	f.Add([]byte("sdwal"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, _ := decodeHeader(b)
		got, _ := readRecords(bytes.NewReader(b), int64(len(b)), 5, h.seed)
		for _, p := range got {
			_ = decodeRecord(p, func(byte, []byte, []byte, []byte) error { return nil })
		}
	})
}

// TestFailedSyncStopsWrites checks that a write whose WAL fdatasync fails
// is reported failed, that the store then refuses every write (after a
// failed fsync the page cache can no longer be trusted to match the disk),
// and that reopening recovers everything acknowledged before.
func TestFailedSyncStopsWrites(t *testing.T) {
	var failing atomic.Bool
	syncFault = func() error {
		if failing.Load() {
			return errors.New("injected EIO")
		}
		return nil
	}
	defer func() { syncFault = nil }()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	populate(t, st, 2, 20)
	want := dump(t, st)
	ctx := context.Background()
	s, _, err := st.CreateSession(ctx, CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	if _, _, err := st.Admit(ctx, Admission{SessionID: s.ID, Prompt: messages.Prompt{Text: "not durable"}}); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("admission whose sync failed: %v", err)
	}
	failing.Store(false)
	_, _, err = st.Admit(ctx, Admission{SessionID: s.ID, Prompt: messages.Prompt{Text: "refused"}})
	if err == nil || !strings.Contains(err.Error(), "store failed") {
		t.Fatalf("write after a failed sync: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("close after failure: %v", err)
	}
	got := dump(t, openAndCheck(t, path, Options{}))
	for b, rows := range want {
		for k, v := range rows {
			if got[b][k] != v {
				t.Fatalf("acknowledged row %s/%q lost after a failed sync", b, k)
			}
		}
	}
}

// TestLongReaderDoesNotCauseCheckpointStorm checks that a long read
// transaction, which keeps bbolt from reusing pages just as the hold does,
// does not make every commit start a checkpoint that cannot free them.
func TestLongReaderDoesNotCauseCheckpointStorm(t *testing.T) {
	var checkpoints atomic.Int64
	checkpointSynced = func(string) { checkpoints.Add(1) }
	defer func() { checkpointSynced = nil }()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{NoSync: true, CheckpointPages: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	populate(t, st, 4, 40)
	reader, err := st.db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	before := checkpoints.Load()
	populate(t, st, 4, 400)
	during := checkpoints.Load() - before
	if err := reader.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Each admission is a commit here; a storm is a checkpoint for most.
	if during > 60 {
		t.Fatalf("%d checkpoints during 404 commits with a reader open", during)
	}
	t.Logf("%d checkpoints during 404 commits with a reader open", during)
}

// TestWALStaleRecordsAfterRecovery: recovery replays every record it finds
// as one bbolt transaction, so the next run numbers its transactions from
// one past the checkpoint again, and checkpoints into the file that holds
// the records it just replayed. Those stale records sit behind the new
// ones, aligned when the lengths match and numbered as the new run's next
// transactions; after a second crash they must not read as the new
// records' continuation.
func TestWALStaleRecordsAfterRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	w, err := openWAL(path, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	appendAll := func(prefix string, from, to uint64) {
		t.Helper()
		for txid := from; txid <= to; txid++ {
			if err := w.append(txid, fmt.Appendf(nil, "%s %d", prefix, txid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Checkpoint 10 in file 0 and one record; a checkpoint at 11 switched
	// to file 1 and died before writing its header.
	if err := w.writeHeader(0, 10, []byte("meta 10"), 7); err != nil {
		t.Fatal(err)
	}
	w.base = 0
	w.switchTo(0, 10, 7)
	appendAll("old", 11, 11)
	w.switchTo(1, 11, w.chain)
	appendAll("old", 12, 20)
	if _, replay, _ := w.recover(); len(replay) != 10 {
		t.Fatalf("recovered %d records, want 10", len(replay))
	}
	// Recovery commits them as transaction 11 and checkpoints it into
	// file 1 with a fresh seed; the new run writes two records and dies.
	if err := w.writeHeader(1, 11, []byte("meta 11"), 8); err != nil {
		t.Fatal(err)
	}
	w.switchTo(1, 11, 8)
	appendAll("new", 12, 13)
	h, replay, ok := w.recover()
	var got []string
	for _, p := range replay {
		got = append(got, string(p))
	}
	if !ok || h.gen != 11 || !reflect.DeepEqual(got, []string{"new 12", "new 13"}) {
		t.Fatalf("second recovery: gen %d ok %v records %q, want gen 11 and the two new records", h.gen, ok, got)
	}
}

// TestCrashAfterRecoveryIgnoresStaleRecords is the same through the store:
// a process dies while a background checkpoint is between switching files
// and writing its header, is recovered, writes records of the same size as
// the stale ones, and dies again.
func TestCrashAfterRecoveryIgnoresStaleRecords(t *testing.T) {
	release := make(chan struct{})
	checkpointSynced = func(string) { <-release }
	defer func() { checkpointSynced = nil }()
	ctx := context.Background()
	admit := func(st *Bolt, sid messages.SessionID, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			p := messages.Prompt{Text: fmt.Sprintf("prompt %03d", i)}
			if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{CheckpointBytes: 1}) // the first commit starts a checkpoint
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := st.CreateSession(ctx, CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	admit(st, s.ID, 0, 20) // into the other file, whose header the blocked checkpoint never writes
	first := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, path, first)
	close(release)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openAndCheck(t, first, noCheckpoints)
	admit(st, s.ID, 20, 25)
	want := dump(t, st)
	second := filepath.Join(t.TempDir(), "s.db")
	copyStore(t, first, second)
	w, err := openWAL(second, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	_, replay, _ := w.recover()
	w.close()
	if len(replay) != 5 {
		t.Fatalf("second recovery replays %d records, want the 5 written since the first", len(replay))
	}
	if got := dump(t, openAndCheck(t, second, noCheckpoints)); !reflect.DeepEqual(got, want) {
		t.Fatal("second recovery differs from the acknowledged state")
	}
}
