package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The write-ahead log makes a group commit cost one fdatasync instead of
// bbolt's two, and lets the next batch run while the previous one syncs.
//
// bbolt runs with NoSync. Every write transaction's key/value writes are
// appended to the WAL as one record before bbolt commits, and a batch is
// acknowledged only once the WAL is fdatasynced. Every CheckpointBytes of
// WAL (or CheckpointPages of pages bbolt holds back), a checkpoint makes
// bbolt durable at a transaction and records that transaction's meta page
// in a WAL header.
//
// Recovery never trusts bbolt pages written after the last checkpoint (after
// a power loss any of them may be missing or torn): Open writes the
// checkpoint's meta page back into both of bbolt's meta slots and re-applies
// the WAL records in order. That is sound only if the checkpoint's pages are
// never overwritten before the next checkpoint is durable, so the store
// keeps a read transaction open on it ("the hold"): bbolt never reuses a
// page that an open reader can see (pages allocated and freed after it are
// reused as usual).
//
// The log is two files, path-wal and path-wal2, used in turn, so that a
// checkpoint never stops the writer. At transaction L the writer opens a
// hold on L, copies L's meta page, and switches its records to the other
// file (numbered from L+1); a checkpointer goroutine then fdatasyncs bbolt,
// writes the header {L, meta} into that file and syncs it, and only then
// drops the hold on the previous checkpoint. Recovery starts from the file
// whose header has the higher generation, replays its records, and
// continues into the other file if that file's first record is the next
// transaction.
//
// Records are numbered by bbolt txid, and their checksums are chained (as
// SQLite's WAL does): each record's CRC starts from the previous record's,
// the first from a seed. A checkpoint started beside the writer seeds the
// new file with the chain so far, so recovery can continue into it before
// its header exists; one that runs at Open or Close (the writer stopped)
// draws a fresh random seed. Txids alone do not tell stale records from new
// ones: recovery commits everything it replays as one transaction, so the
// next run numbers from one past the checkpoint again and writes over the
// records it replayed, which then sit behind the new ones with the very
// numbers the new run's next records would carry. Under a fresh seed they
// no longer chain.
//
// Each file is a header (one slot at offset 0) then records from
// walRecordStart, and is extended with zeros ahead of the records, so a
// record's fdatasync rewrites data in place instead of also journaling a
// new file size.
//
//	header: magic[8] | generation u64 | seed u32 | meta length u32 | meta
//	        | crc32c u32
//	record: length u32 | chained crc32c u32 (of txid and payload) | txid u64
//	        | payload
const (
	walSlotSize    = 4096
	walRecordStart = walSlotSize
	walRecordHead  = 16
	walExtend      = 4 << 20
	walMetaMax     = 256
)

var (
	walMagic = [8]byte{'s', 'd', 'w', 'a', 'l', 0, 0, 3}
	crcTable = crc32.MakeTable(crc32.Castagnoli)

	errWALCorrupt = errors.New("persistence: corrupt write-ahead log")
)

// walFile is one of the two log files.
type walFile struct {
	f   *os.File
	end int64 // file size: bytes before end are written (zeros or data)
}

// wal is the open log. The writer goroutine appends and switches files; the
// checkpointer writes only header regions; the syncer only syncs.
type wal struct {
	files  [2]walFile
	nosync bool
	base   int    // file whose header is the checkpoint recovery starts from
	cur    int    // file receiving records
	off    int64  // where the next record goes in cur
	next   uint64 // txid the next record must carry
	chain  uint32 // checksum of the last record in cur (its seed before any)
	prev   uint32 // chain before the last append, for unappend
	buf    []byte
}

// openWAL opens (creating) both log files and takes an exclusive lock on
// the first, which also guards the bbolt file against a second sessiond
// while recovery rewrites its meta pages.
func openWAL(path string, lockTimeout func() bool) (*wal, error) {
	w := &wal{}
	for i, name := range []string{path + "-wal", path + "-wal2"} {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			w.close()
			return nil, err
		}
		w.files[i].f = f
		if i == 0 {
			if err := lock(f, name, lockTimeout); err != nil {
				w.close()
				return nil, err
			}
		}
		st, err := f.Stat()
		if err != nil {
			w.close()
			return nil, err
		}
		w.files[i].end = st.Size()
		// Lay out the header and the first records' room now, so header
		// writes never change a file's size.
		if err := w.extend(i, walRecordStart+walExtend/4); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

func lock(f *os.File, name string, lockTimeout func() bool) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != unix.EWOULDBLOCK {
			return fmt.Errorf("lock %s: %w", name, err)
		}
		if lockTimeout() {
			return fmt.Errorf("%w (%s)", ErrLocked, name)
		}
	}
}

// walHeader is a decoded header.
type walHeader struct {
	gen  uint64
	seed uint32
	meta []byte
}

// readHeader returns file i's header, or ok=false when it has none (a new
// file, or one whose header write was torn).
func (w *wal) readHeader(i int) (walHeader, bool) {
	b := make([]byte, walSlotSize)
	n, _ := w.files[i].f.ReadAt(b, 0)
	return decodeHeader(b[:n])
}

func decodeHeader(b []byte) (walHeader, bool) {
	const fixed = 24 // magic, generation, seed, meta length
	if len(b) < fixed || [8]byte(b[:8]) != walMagic {
		return walHeader{}, false
	}
	n := int(binary.LittleEndian.Uint32(b[20:24]))
	if n > walMetaMax || len(b) < fixed+n+4 {
		return walHeader{}, false
	}
	if crc32.Checksum(b[:fixed+n], crcTable) != binary.LittleEndian.Uint32(b[fixed+n:]) {
		return walHeader{}, false
	}
	return walHeader{
		gen:  binary.LittleEndian.Uint64(b[8:16]),
		seed: binary.LittleEndian.Uint32(b[16:20]),
		meta: append([]byte(nil), b[fixed:fixed+n]...),
	}, true
}

// recover finds the checkpoint to start from (and makes its file the base)
// and the records to replay after it. ok is false when neither file has a
// header.
func (w *wal) recover() (h walHeader, replay [][]byte, ok bool) {
	var hs [2]walHeader
	var valid [2]bool
	for i := range 2 {
		hs[i], valid[i] = w.readHeader(i)
	}
	switch {
	case valid[0] && (!valid[1] || hs[0].gen >= hs[1].gen):
		w.base = 0
	case valid[1]:
		w.base = 1
	default:
		return walHeader{}, nil, false
	}
	h = hs[w.base]
	replay, chain := readRecords(w.files[w.base].f, w.files[w.base].end, h.gen, h.seed)
	other := w.files[1-w.base]
	more, _ := readRecords(other.f, other.end, h.gen+uint64(len(replay)), chain)
	return h, append(replay, more...), true
}

// writeHeader records, durably, that bbolt is durable at transaction gen,
// whose meta page head is meta, in file i, whose records chain from seed.
// The caller has synced bbolt.
func (w *wal) writeHeader(i int, gen uint64, meta []byte, seed uint32) error {
	if len(meta) > walMetaMax {
		return fmt.Errorf("persistence: meta of %d bytes", len(meta))
	}
	b := make([]byte, 0, 28+len(meta))
	b = append(b, walMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, gen)
	b = binary.LittleEndian.AppendUint32(b, seed)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	if _, err := w.files[i].f.WriteAt(b, 0); err != nil {
		return err
	}
	return w.sync(i)
}

// switchTo makes file i receive the records that follow transaction gen,
// from the start of its record area, chained from seed.
func (w *wal) switchTo(i int, gen uint64, seed uint32) {
	w.cur, w.off, w.next, w.chain = i, walRecordStart, gen+1, seed
}

// zeros is what extend writes, a chunk at a time.
var zeros = make([]byte, walExtend)

// extend writes zeros from the current end of file i up to size.
func (w *wal) extend(i int, size int64) error {
	f := &w.files[i]
	for f.end < size {
		n := min(size-f.end, int64(len(zeros)))
		if _, err := f.f.WriteAt(zeros[:n], f.end); err != nil {
			return err
		}
		f.end += n
	}
	return nil
}

// append writes the record of bbolt transaction txid to the current file.
// It does not sync.
func (w *wal) append(txid uint64, payload []byte) error {
	if txid != w.next {
		return fmt.Errorf("persistence: WAL record for tx %d, want tx %d", txid, w.next)
	}
	need := int64(walRecordHead + len(payload))
	if w.off+need > w.files[w.cur].end {
		if err := w.extend(w.cur, w.off+need+walExtend); err != nil {
			return err
		}
	}
	b := w.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, txid)
	b = append(b, payload...)
	chain := crc32.Update(w.chain, crcTable, b[8:])
	binary.LittleEndian.PutUint32(b[4:8], chain)
	w.buf = b
	if _, err := w.files[w.cur].f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.prev, w.chain = w.chain, chain
	w.off += need
	w.next++
	return nil
}

// unappend invalidates the record just appended at off (its transaction did
// not commit) and makes that durable, so recovery cannot replay it.
func (w *wal) unappend(off int64, txid uint64) error {
	if _, err := w.files[w.cur].f.WriteAt(make([]byte, walRecordHead), off); err != nil {
		return err
	}
	w.off, w.next, w.chain = off, txid, w.prev
	return w.sync(w.cur)
}

// size is the number of record bytes in the current file.
func (w *wal) size() int64 { return w.off - walRecordStart }

// syncFault, when set by a test before Open, can fail a WAL sync.
var syncFault func() error

// sync fdatasyncs file i.
func (w *wal) sync(i int) error {
	if syncFault != nil {
		if err := syncFault(); err != nil {
			return err
		}
	}
	if w.nosync {
		return nil
	}
	return unix.Fdatasync(int(w.files[i].f.Fd()))
}

func (w *wal) close() error {
	var errs []error
	for i := range w.files {
		if w.files[i].f != nil {
			errs = append(errs, w.files[i].f.Close())
		}
	}
	return errors.Join(errs...)
}

// readRecords returns the payloads of the records that follow generation
// gen chained from seed, in order, stopping at the first that is missing,
// torn or stale, and the chain after the last.
func readRecords(r io.ReaderAt, size int64, gen uint64, seed uint32) (out [][]byte, chain uint32) {
	chain = seed
	head := make([]byte, walRecordHead)
	for off, want := int64(walRecordStart), gen+1; off+walRecordHead <= size; want++ {
		if _, err := r.ReadAt(head, off); err != nil {
			break
		}
		n := int64(binary.LittleEndian.Uint32(head[0:4]))
		if binary.LittleEndian.Uint64(head[8:16]) != want || off+walRecordHead+n > size {
			break
		}
		body := make([]byte, 8+n)
		if _, err := r.ReadAt(body, off+8); err != nil {
			break
		}
		next := crc32.Update(chain, crcTable, body)
		if next != binary.LittleEndian.Uint32(head[4:8]) {
			break
		}
		out, chain = append(out, body[8:]), next
		off += walRecordHead + n
	}
	return out, chain
}
