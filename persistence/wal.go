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
// WAL, the writer fdatasyncs the bbolt file and records that transaction's
// meta page in the WAL header ("checkpoint"); records restart after it.
//
// Recovery never trusts bbolt pages written after the last checkpoint (after
// a power loss any of them may be missing or torn): Open writes the
// checkpoint's meta page back into both of bbolt's meta slots and re-applies
// the WAL records in order. That is sound only if the checkpoint's pages are
// never overwritten before the next checkpoint, so the store keeps a read
// transaction open on the checkpoint: bbolt never reuses a page that an open
// reader can see (pages allocated and freed after it are reused as usual).
//
// File layout: two header slots (at 0 and walSlotSize, written alternately,
// the valid one with the higher generation wins), then records from
// walRecordStart. The file is extended with zeros ahead of the records, so
// a record's fdatasync rewrites data in place instead of also journaling a
// new file size.
//
//	header: magic[8] | generation u64 | meta length u32 | meta | crc32c u32
//	record: length u32 | crc32c u32 (of txid and payload) | txid u64 | payload
//
// A record's txid is the bbolt transaction it describes; records of one
// generation are numbered generation+1, generation+2, ... so a stale record
// of an older generation, still in the file beyond the current end, never
// reads as the next one.
const (
	walSlotSize    = 4096
	walRecordStart = 2 * walSlotSize
	walRecordHead  = 16
	walExtend      = 4 << 20
	walMetaMax     = 256
)

var (
	walMagic = [8]byte{'s', 'd', 'w', 'a', 'l', 0, 0, 1}
	crcTable = crc32.MakeTable(crc32.Castagnoli)

	errWALCorrupt = errors.New("persistence: corrupt write-ahead log")
)

// wal is the open log file. Only the writer goroutine appends or writes
// headers; the syncer goroutine only calls sync.
type wal struct {
	f      *os.File
	nosync bool
	gen    uint64 // bbolt txid of the checkpoint the records follow
	slot   int    // header slot holding gen
	off    int64  // where the next record goes
	next   uint64 // txid the next record must carry
	end    int64  // file size: bytes before end are written (zeros or data)
	buf    []byte
}

// openWAL opens (creating) the log and takes an exclusive lock on it, which
// also guards the bbolt file against a second sessiond while recovery
// rewrites its meta pages.
func openWAL(path string, lockTimeout func() bool) (*wal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if lockTimeout() {
			f.Close()
			return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
		}
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &wal{f: f, end: st.Size()}, nil
}

// walHeader is a decoded header slot.
type walHeader struct {
	gen  uint64
	meta []byte
}

// readHeader returns the newest valid header and its slot, or ok=false when
// neither slot holds one (a new or never-checkpointed file).
func (w *wal) readHeader() (h walHeader, slot int, ok bool) {
	for i := range 2 {
		b := make([]byte, walSlotSize)
		n, _ := w.f.ReadAt(b, int64(i)*walSlotSize)
		c, valid := decodeHeader(b[:n])
		if valid && (!ok || c.gen > h.gen) {
			h, slot, ok = c, i, true
		}
	}
	return h, slot, ok
}

func decodeHeader(b []byte) (walHeader, bool) {
	if len(b) < 20 || [8]byte(b[:8]) != walMagic {
		return walHeader{}, false
	}
	n := int(binary.LittleEndian.Uint32(b[16:20]))
	if n > walMetaMax || len(b) < 20+n+4 {
		return walHeader{}, false
	}
	if crc32.Checksum(b[:20+n], crcTable) != binary.LittleEndian.Uint32(b[20+n:]) {
		return walHeader{}, false
	}
	return walHeader{gen: binary.LittleEndian.Uint64(b[8:16]), meta: append([]byte(nil), b[20:20+n]...)}, true
}

// checkpoint records that bbolt is durable at transaction gen, whose meta
// page head is meta, and restarts the records. The caller has synced bbolt.
func (w *wal) checkpoint(gen uint64, meta []byte) error {
	if len(meta) > walMetaMax {
		return fmt.Errorf("persistence: meta of %d bytes", len(meta))
	}
	b := make([]byte, 0, 24+len(meta))
	b = append(b, walMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, gen)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(meta)))
	b = append(b, meta...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	if w.end < walRecordStart {
		// A new file: lay out both slots and the first records' room.
		if err := w.extend(walRecordStart + walExtend/4); err != nil {
			return err
		}
	}
	slot := 1 - w.slot
	if _, err := w.f.WriteAt(b, int64(slot)*walSlotSize); err != nil {
		return err
	}
	// The header must be durable before any record of the new generation
	// overwrites the old generation's records.
	if err := w.sync(); err != nil {
		return err
	}
	w.gen, w.slot, w.off, w.next = gen, slot, walRecordStart, gen+1
	return nil
}

// zeros is what extend writes, a chunk at a time.
var zeros = make([]byte, walExtend)

// extend writes zeros from the current end of the file up to size.
func (w *wal) extend(size int64) error {
	for w.end < size {
		n := min(size-w.end, int64(len(zeros)))
		if _, err := w.f.WriteAt(zeros[:n], w.end); err != nil {
			return err
		}
		w.end += n
	}
	return nil
}

// append writes the record of bbolt transaction txid. It does not sync.
func (w *wal) append(txid uint64, payload []byte) error {
	if txid != w.next {
		return fmt.Errorf("persistence: WAL record for tx %d, want tx %d", txid, w.next)
	}
	need := int64(walRecordHead + len(payload))
	if w.off+need > w.end {
		if err := w.extend(w.off + need + walExtend); err != nil {
			return err
		}
	}
	b := w.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, txid)
	b = append(b, payload...)
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], crcTable))
	w.buf = b
	if _, err := w.f.WriteAt(b, w.off); err != nil {
		return err
	}
	w.off += need
	w.next++
	return nil
}

// unappend invalidates the record just appended at off (its transaction did
// not commit) and makes that durable, so recovery cannot replay it.
func (w *wal) unappend(off int64, txid uint64) error {
	if _, err := w.f.WriteAt(make([]byte, walRecordHead), off); err != nil {
		return err
	}
	w.off, w.next = off, txid
	return w.sync()
}

// size is the number of record bytes since the last checkpoint.
func (w *wal) size() int64 { return w.off - walRecordStart }

// syncFault, when set by a test before Open, can fail a WAL sync.
var syncFault func() error

func (w *wal) sync() error {
	if syncFault != nil {
		if err := syncFault(); err != nil {
			return err
		}
	}
	if w.nosync {
		return nil
	}
	return unix.Fdatasync(int(w.f.Fd()))
}

func (w *wal) close() error { return w.f.Close() }

// readRecords returns the payloads of the records that follow generation
// gen, in order, stopping at the first that is missing, torn or stale.
func readRecords(r io.ReaderAt, size int64, gen uint64) [][]byte {
	var out [][]byte
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
		if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(head[4:8]) {
			break
		}
		out = append(out, body[8:])
		off += walRecordHead + n
	}
	return out
}
