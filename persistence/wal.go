package persistence

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// The write-ahead log is where a commit becomes durable: one record per
// group commit, fdatasynced once for the whole group, before any caller in
// it is answered. bbolt is written only by flushes (bolt.go), each a bbolt
// transaction with bbolt's own fsyncs that also stores the number of the
// last record it contains ("applied"). Recovery opens bbolt, which is
// always consistent at its last flush, and re-applies the records after
// applied.
//
// Records are numbered 1, 2, 3, ... across runs and their checksums are
// chained (as SQLite's WAL does): each record's CRC starts from the
// previous record's, the first from the file header's seed. The log is two
// files, path-wal and path-wal2, used in turn: when a flush starts, the
// writer starts the other file with a header {generation, first record
// number, fresh random seed}, synced before any record goes into it, and
// the flush's records stay in the older file until bbolt has them (one
// flush runs at a time, so that file is not reused before). Recovery reads
// from the older file on when bbolt lacks its records, then the newer one
// (by generation: the first numbers of both can be equal, as a run that
// wrote nothing starts the log over at the same number). A reused file still holds the previous run's records behind the
// new ones; under the new seed they no longer chain, so they end the log
// instead of being replayed.
//
// A file the log leaves for the other also gets a note in its header slot
// naming the generation and first record of the file the log goes on in,
// synced before any record goes there: a log that lacks that file has
// lost it (recover), even while bbolt, whose flush has not committed,
// names only the file that holds the note.
//
// Each file is a header (one slot at offset 0) then records from
// walRecordStart, and is extended with zeros ahead of the records, so a
// record's fdatasync rewrites data in place instead of also journaling a
// new file size.
//
//	header: magic[8] | generation u64 | first record number u64 | seed u32
//	        | crc32c u32
//	note (at walNoteAt): next generation u64 | its first record number u64
//	        | crc32c u32 (of the note's first 16 bytes, chained from the
//	        header's crc, so that a note outlives no header)
//	record: length u32 | chained crc32c u32 (of number and payload)
//	        | number u64 | payload
const (
	walSlotSize    = 4096
	walRecordStart = walSlotSize
	walRecordHead  = 16
	walHeaderLen   = 32
	walNoteAt      = 64
	walNoteLen     = 20
	walExtend      = 4 << 20
	// walPrepared is the least size of a file the log has started: prepare
	// extends it so far before its header is written and synced (and
	// nothing shrinks a log file), so a started file that is smaller was
	// cut short.
	walPrepared = walRecordStart + walExtend/4
)

var (
	walMagic = [8]byte{'s', 'd', 'w', 'a', 'l', 0, 0, 5}
	crcTable = crc32.MakeTable(crc32.Castagnoli)

	errWALCorrupt = errors.New("persistence: corrupt write-ahead log")
	errWALTorn    = errors.New("persistence: write-ahead log record partly written")

	// ErrWALDamaged reports a record in the write-ahead log that fails its
	// checksum although records after it are intact: a commit that was
	// acknowledged has been damaged on the disk since (a crash tears only
	// the few records not yet synced; see the package doc).
	// Open refuses such a store unless Options.RepairWAL is set, because
	// recovery would have to drop it and every commit after it. The error
	// is a *WALDamage.
	ErrWALDamaged = errors.New("persistence: damaged write-ahead log")
)

// walInFlight is how many records can be written and not yet synced at
// once (Bolt.awaitLog holds the writer to it): the writer writes record
// k+walInFlight only once record k is synced. (As built it writes record
// k+1 only once the syncer has answered record k's batch.) A crash can therefore leave
// at most the last walInFlight records torn, or missing while later ones
// reached the disk. A bad record followed by walInFlight whole ones was
// synced before it went bad.
const walInFlight = 4

// WALDamage describes a damaged write-ahead log record (ErrWALDamaged).
type WALDamage struct {
	File   string // the log file
	Record uint64 // the damaged record's number
	Offset int64  // its offset in File
	// Intact is how many records after it are whole: those chained from
	// it in File and, when File is the older of the two log files, the
	// newer file's. When the records right after it are damaged too (a
	// lost sector), they are counted with the whole ones beyond them:
	// Intact is what recovery would drop after it.
	Intact int
	// Header reports that File's header is what is damaged (Offset 0):
	// Record, the file's first record, and every one after it cannot be
	// checked without it.
	Header bool
	// Missing reports that neither log file holds generation Gen of the
	// log, where the last run wrote every commit from Record on, or a
	// later one that goes on from it: since that run, which did not stop
	// cleanly, the file was deleted, replaced or emptied. File is the
	// first of the two; how many commits the missing file held is
	// unknown. Intact counts the records of a later file that is there
	// but starts after the missing one's (a flush was running), which
	// recovery would drop with it; otherwise it is 0.
	Missing bool
	Gen     uint64
	// Short, when not 0, is the size of File, the log's newest file,
	// which is smaller than any file the log has started (each is
	// extended with zeros before its header is written, walPrepared):
	// it was cut short since the last run, which did not stop cleanly,
	// wrote to it (a copy that stopped early, a truncation). How many
	// commits from Record on went with its end is unknown; recovery
	// keeps the whole records before Record.
	Short int64

	fileIndex int // which of the two files File is
}

// Error says what is damaged or missing, what a repair would drop, and
// how to repair it.
func (d *WALDamage) Error() string {
	if d.Missing {
		return fmt.Sprintf("%v: neither %s nor %s2 holds generation %d of the log, to which the last run wrote its commits "+
			"from record %d on: it did not stop cleanly, and the file was deleted, replaced or emptied since; "+
			"recovery would go on without those commits", ErrWALDamaged, d.File, d.File, d.Gen, d.Record)
	}
	if d.Short > 0 {
		return fmt.Sprintf("%v: %s is %d bytes, smaller than any log file sessiond has started (%d): it was cut short "+
			"since the last run, which did not stop cleanly, wrote to it; the commits from record %d on that it held, if any, are lost, "+
			"and recovery would go on without them", ErrWALDamaged, d.File, d.Short, walPrepared, d.Record)
	}
	if d.Header {
		return fmt.Sprintf("%v: %s: its header is damaged, and it holds record %d and %d more after it, "+
			"which cannot be checked without it; recovery would drop them and every commit after them",
			ErrWALDamaged, d.File, d.Record, d.Intact)
	}
	return fmt.Sprintf("%v: %s: record %d at offset %d is damaged, and %d records after it are whole; "+
		"recovery would drop it and every commit after it", ErrWALDamaged, d.File, d.Record, d.Offset, d.Intact)
}

// Is makes errors.Is(d, ErrWALDamaged) hold; damage is also corruption.
func (d *WALDamage) Is(target error) bool { return target == ErrWALDamaged || target == errWALCorrupt }

// walFile is one of the two log files.
type walFile struct {
	f   *os.File
	end int64 // file size: bytes before end are written (zeros or data)
}

// wal is the open log. Only the writer goroutine appends and starts files;
// the syncer only syncs.
type wal struct {
	files  [2]walFile
	nosync bool
	gen    uint64 // generation of the current file's header
	cur    int    // file receiving records
	off    int64  // where the next record goes in cur
	next   uint64 // number the next record must carry
	chain  uint32 // checksum of the last record in cur (its seed before any)
	buf    []byte
	// repair makes recover drop a damaged record and everything after it
	// instead of failing; damage then describes what it dropped.
	repair bool
	damage *WALDamage
	// created names the files this open created (dropCreated).
	created []string
}

// openWAL opens (creating) both log files and takes an exclusive lock on
// the first, which also guards the bbolt file against a second sessiond.
func openWAL(path string, lockTimeout func() bool) (w *wal, err error) {
	w = &wal{}
	defer func() {
		if err != nil {
			w.dropCreated()
			w.close()
		}
	}()
	for i, name := range []string{path + "-wal", path + "-wal2"} {
		f, created, err := openOrCreate(name)
		if err != nil {
			return w, err
		}
		w.files[i].f = f
		if i == 0 {
			if err := lock(f, name, lockTimeout); err != nil {
				return w, err
			}
			// A failed Open removes the first file when it created it
			// (dropCreated), and another Open may have been waiting for
			// its lock meanwhile: the lock it then gets is on a file no
			// longer at name. Start over on the file that is.
			for !sameFile(f, name) {
				f.Close()
				if f, created, err = openOrCreate(name); err != nil {
					w.files[0].f = nil
					return w, err
				}
				w.files[0].f = f
				if err := lock(f, name, lockTimeout); err != nil {
					return w, err
				}
			}
		}
		if created {
			w.created = append(w.created, name)
		}
		st, err := f.Stat()
		if err != nil {
			return w, err
		}
		w.files[i].end = st.Size()
	}
	return w, nil
}

// openOrCreate opens the file name for reading and writing, creating it
// when it does not exist, and reports whether it did.
func openOrCreate(name string) (*os.File, bool, error) {
	for {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if !errors.Is(err, os.ErrNotExist) {
			return f, false, err
		}
		f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, os.ErrExist) {
			return f, err == nil, err
		}
		// Another Open created it in between: open theirs.
	}
}

// sameFile reports whether f is still the file at name.
func sameFile(f *os.File, name string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(name)
	return err == nil && os.SameFile(a, b)
}

// dropCreated removes each file this open created that is still empty,
// when the Open fails, so that an Open that refuses a store (a missing log
// file, damage, a lock held) leaves its directory as it found it: an empty
// file where recovery asks for the lost one to be put back would be copied
// along by a backup or a `cp -n` of the directory. It runs while the lock
// is held, before the files close, so that no other Open can take up a
// file it is about to remove (see openWAL for the first file).
func (w *wal) dropCreated() {
	for _, name := range w.created {
		if st, err := os.Stat(name); err == nil && st.Size() == 0 {
			_ = os.Remove(name) // best effort: the next Open copes with an empty file
		}
	}
}

// dirSyncFault, when set by a test before Open, can fail a directory
// fsync.
var dirSyncFault func() error

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	if dirSyncFault != nil {
		if err := dirSyncFault(); err != nil {
			return err
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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

// walHeader is a decoded header, with its file's note when it has one.
type walHeader struct {
	gen   uint64
	first uint64
	seed  uint32
	// nextGen and nextFirst are the note's: the log went on in the file
	// of generation nextGen from record nextFirst (0 without a note).
	nextGen, nextFirst uint64
}

// readHeader returns file i's header, or ok=false when it has none (a new
// file, or one whose header write was torn). A file that cannot be read
// is an error, not one without a header.
func (w *wal) readHeader(i int) (walHeader, bool, error) {
	b := make([]byte, walNoteAt+walNoteLen)
	n, err := w.files[i].f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return walHeader{}, false, err
	}
	h, ok := decodeHeader(b[:n])
	if ok && n == len(b) {
		note := b[walNoteAt:]
		crc := crc32.Update(binary.LittleEndian.Uint32(b[28:32]), crcTable, note[:16])
		if crc == binary.LittleEndian.Uint32(note[16:20]) {
			h.nextGen, h.nextFirst = binary.LittleEndian.Uint64(note[0:8]), binary.LittleEndian.Uint64(note[8:16])
		}
	}
	return h, ok, nil
}

func decodeHeader(b []byte) (walHeader, bool) {
	if len(b) < walHeaderLen || [8]byte(b[:8]) != walMagic {
		return walHeader{}, false
	}
	if crc32.Checksum(b[:28], crcTable) != binary.LittleEndian.Uint32(b[28:32]) {
		return walHeader{}, false
	}
	return walHeader{gen: binary.LittleEndian.Uint64(b[8:16]), first: binary.LittleEndian.Uint64(b[16:24]),
		seed: binary.LittleEndian.Uint32(b[24:28])}, true
}

// recover returns the payloads of the records numbered after applied, in
// order, and the number of the newest record (applied when none is newer).
// need is the generation of the file holding the records after applied,
// as bbolt records it (keyLogGen; 0 when the log holds nothing bbolt
// lacks).
// The newer file (by header generation) holds the records since the last
// flush started; while that flush had not completed, the ones it was
// writing are still in the older file, and recovery reads on from there.
// A log that does not reach back to applied+1, or has a hole, means bbolt
// or the log lost something they relied on, which is corruption. A read
// that fails fails recovery: taken for the end of the log, it would drop
// the acknowledged records after it.
func (w *wal) recover(applied, need uint64) (replay [][]byte, last uint64, err error) {
	var hs [2]walHeader
	var valid [2]bool
	for i := range 2 {
		if hs[i], valid[i], err = w.readHeader(i); err != nil {
			return nil, 0, err
		}
	}
	// A file without a valid header is new, or its header write was torn
	// when it was started again: its records, if any, are an earlier
	// run's, all in bbolt already. One that holds a record after applied
	// had its header synced before that record was written (start), so
	// the header was damaged since: taken for a torn one, the file would
	// be started over and every commit in it dropped.
	for i := range 2 {
		if valid[i] {
			continue
		}
		d, err := w.headless(i, applied, hs[1-i], valid[1-i])
		if err != nil {
			return nil, 0, err
		}
		if d == nil {
			continue
		}
		if o := 1 - i; d.Record > applied+1 && (!valid[o] || hs[o].first > applied+1) {
			// Not even its header would bridge bbolt and the log.
			return nil, 0, fmt.Errorf("%w: the log starts at record %d but the database holds only up to %d", errWALCorrupt, d.Record, applied)
		}
		if !w.repair {
			return nil, 0, d
		}
		if err := w.drop(i, walRecordStart); err != nil {
			return nil, 0, err
		}
		if w.damage == nil || d.Record < w.damage.Record {
			w.damage = d
		}
	}
	// A log that lacks the file bbolt names has lost it since: read on,
	// the log would seem to end where the other file does, and the commits
	// after that would vanish without a word. (A file whose damaged header
	// is all that is wrong with it was reported above.) A file's note
	// names a later file than bbolt does while the flush that started it
	// has not committed. A store that stopped cleanly (need 0) holds
	// everything in bbolt, and its notes name nothing it lacks.
	from, named := applied+1, need
	for i := range 2 {
		if need > 0 && valid[i] && hs[i].nextGen > need {
			need, from = hs[i].nextGen, hs[i].nextFirst
		}
	}
	// Open names the file it is about to start before starting it; a file
	// of the generation before that the log never left (it has no note,
	// which is synced before any record goes on) shows that the named one
	// never received a record, whether or not it was started.
	has, neverLeft := false, false
	for i := range 2 {
		if valid[i] {
			has = has || hs[i].gen >= need
			neverLeft = neverLeft || hs[i].gen+1 == need && hs[i].nextGen == 0
		}
	}
	if need > 0 && w.damage == nil && !has && !neverLeft {
		d := &WALDamage{File: w.files[0].f.Name(), Record: from, Missing: true, Gen: need}
		if !w.repair {
			return nil, 0, d
		}
		w.damage = d // and recover what there is
	}
	if w.damage != nil && !w.damage.Missing {
		// Repairing: the records before the damaged file's are recovered
		// from the other file, when it holds them from applied+1 on.
		o := 1 - w.damage.fileIndex
		if !valid[o] || hs[o].first > applied+1 || hs[o].first >= w.damage.Record {
			// Nothing after applied is recovered: the damaged file is
			// started over next, as the newest.
			w.cur = o
			for i := range 2 {
				if valid[i] {
					w.gen = max(w.gen, hs[i].gen)
				}
			}
			return nil, applied, nil
		}
	}
	n := 1
	switch {
	case valid[0] && (!valid[1] || hs[0].gen > hs[1].gen):
		n = 0
	case !valid[1]:
		w.cur = 0 // no log yet: the first start takes file 1
		return nil, applied, nil
	}
	w.gen, w.cur = hs[n].gen, n
	last = applied
	var end int64 // where the records take read end
	take := func(i int) error {
		recs, err := readRecords(&readAhead{r: w.files[i].f}, w.files[i].end, hs[i].first, hs[i].seed)
		var d *WALDamage
		if errors.As(err, &d) {
			d.File = w.files[i].f.Name()
			if !w.repair {
				return d
			}
			w.damage, err = d, w.drop(i, d.Offset)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", w.files[i].f.Name(), err)
		}
		end = walRecordStart
		for j, p := range recs {
			end += walRecordHead + int64(len(p))
			if num := hs[i].first + uint64(j); num == last+1 {
				replay, last = append(replay, p), num
			}
		}
		return nil
	}
	if hs[n].first > applied+1 {
		o := 1 - n
		if !valid[o] || hs[o].first > applied+1 {
			if named > 0 && w.damage == nil && (!valid[o] || hs[o].gen+1 != hs[n].gen) {
				// The store did not stop cleanly, and the file the newer
				// one follows, which holds the records after applied, is
				// gone: killed while a flush ran (bbolt still names that
				// file), and the older file deleted, emptied or replaced
				// since. That is a missing file, as above, which a repair
				// goes on without; the newer file's records would follow
				// a hole, so the repair drops them with it.
				d := &WALDamage{File: w.files[0].f.Name(), Record: applied + 1, Missing: true, Gen: hs[n].gen - 1, Intact: w.count(n, hs[n])}
				if !w.repair {
					return nil, 0, d
				}
				w.damage = d
				if err := w.drop(n, walRecordStart); err != nil {
					return nil, 0, err
				}
				return nil, applied, nil
			}
			return nil, 0, fmt.Errorf("%w: the log starts at record %d but the database holds only up to %d", errWALCorrupt, hs[n].first, applied)
		}
		if err := take(o); err != nil {
			if d := (*WALDamage)(nil); errors.As(err, &d) {
				d.Intact += w.count(n, hs[n])
			}
			return nil, 0, err
		}
		if w.damage == nil && last+1 != hs[n].first {
			// Every record of the older file was synced before the newer
			// one started: one it lacks was lost after it was
			// acknowledged, whatever follows it.
			d := &WALDamage{File: w.files[o].f.Name(), Record: last + 1, Offset: end, Intact: w.after(o, end, last+1) + w.count(n, hs[n])}
			if !w.repair {
				return nil, 0, d
			}
			w.damage = d
			if err := w.drop(o, end); err != nil {
				return nil, 0, err
			}
			if err := w.drop(n, walRecordStart); err != nil {
				return nil, 0, err
			}
			return replay, last, nil
		}
		if w.damage != nil {
			// Repairing the older file: the newer one's records would
			// follow a hole, so they are dropped with the rest.
			w.damage.Intact += w.count(n, hs[n])
			if err := w.drop(n, walRecordStart); err != nil {
				return nil, 0, err
			}
			return replay, last, nil
		}
	}
	if err := take(n); err != nil {
		return nil, 0, err
	}
	if named > 0 && w.damage == nil && w.files[n].end < walPrepared {
		// Its records read as a log that ends early: a torn end is
		// followed by the zeros prepare wrote, this one by nothing. (A
		// cut in the older file leaves a hole before the newer one's
		// first record, found above.)
		d := &WALDamage{File: w.files[n].f.Name(), Record: last + 1, Offset: end, Short: w.files[n].end, fileIndex: n}
		if !w.repair {
			return nil, 0, d
		}
		w.damage = d
	}
	return replay, last, nil
}

// headless returns the damage of file i, whose header is not valid, when
// its first record is numbered after applied; nil when it holds none. A
// valid header o of the other file whose records follow that record adds
// them to the count of those dropped with it. A read that fails is an
// error, as in recover.
func (w *wal) headless(i int, applied uint64, o walHeader, valid bool) (*WALDamage, error) {
	f := w.files[i]
	head := make([]byte, walRecordHead)
	if f.end < walRecordStart+walRecordHead {
		return nil, nil
	}
	if _, err := f.f.ReadAt(head, walRecordStart); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.f.Name(), err)
	}
	num := binary.LittleEndian.Uint64(head[8:16])
	if binary.LittleEndian.Uint32(head[0:4]) == 0 || num <= applied {
		return nil, nil
	}
	body, stored, ok, err := readRecord(f.f, f.end, walRecordStart, num)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.f.Name(), err)
	}
	if !ok {
		return nil, nil
	}
	d := &WALDamage{File: f.f.Name(), Record: num, Header: true, fileIndex: i}
	if d.Intact, err = chained(f.f, f.end, walRecordStart+walRecordHead+int64(len(body))-8, num+1, stored); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.f.Name(), err)
	}
	if valid && o.first > num {
		d.Intact += w.count(1-i, o)
	}
	return d, nil
}

// drop zeroes file i from off on and syncs it, for a repair: the records
// it dropped must not read as damage, or as whole, once their numbers are
// used again (the caller kept a copy of the log).
func (w *wal) drop(i int, off int64) error {
	for f := &w.files[i]; off < f.end; {
		n := min(f.end-off, int64(len(zeros)))
		if _, err := f.f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return w.sync(i)
}

// count returns how many records file i holds under header h (for a
// damage report; a read error counts as the end).
func (w *wal) count(i int, h walHeader) int {
	recs, _ := readRecords(w.files[i].f, w.files[i].end, h.first, h.seed)
	return len(recs)
}

// after returns how many whole records follow record num at off in file
// i, chained from the checksum its head stores (for a damage report; a
// missing head or a read error counts as the end).
func (w *wal) after(i int, off int64, num uint64) int {
	f := w.files[i]
	body, stored, ok, err := readRecord(f.f, f.end, off, num)
	if err != nil || !ok {
		return 0
	}
	n, _ := chained(f.f, f.end, off+walRecordHead+int64(len(body))-8, num+1, stored)
	return n
}

// older returns the file that is not the current one, where the log
// starts over.
func (w *wal) older() int { return 1 - w.cur }

// start makes file i receive the records from number first on, chained
// from a fresh seed, and durably records that in its header before any
// record is written to it. The caller has made every earlier record
// redundant (flushed into bbolt and synced).
func (w *wal) start(i int, first uint64, seed uint32) error {
	if err := w.prepare(i); err != nil {
		return err
	}
	// The header, and zeros over the note the file got when the log last
	// left it (which its checksum, chained from the old header's, would
	// refuse anyway).
	b := make([]byte, 0, walNoteAt+walNoteLen)
	b = append(b, walMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, w.gen+1)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint32(b, seed)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	b = b[:cap(b)]
	if _, err := w.files[i].f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := w.sync(i); err != nil {
		return err
	}
	if err := w.note(1-i, w.gen+1, first); err != nil {
		return err
	}
	w.gen++
	w.cur, w.off, w.next, w.chain = i, walRecordStart, first, seed
	return nil
}

// prepare gives file i the room start needs. It writes only past the
// file's end, which nothing reads, so when it fails (a disk with no room
// for a file that has not grown that far before) the log is as it was and
// goes on in the current file.
func (w *wal) prepare(i int) error { return w.extend(i, walPrepared) }

// note records in file i's header slot, durably, that the log goes on in
// the file of generation gen from record first, when file i holds the
// generation before (the log leaves it; not so when there was no log, or
// a repair started it over).
func (w *wal) note(i int, gen, first uint64) error {
	f := w.files[i].f
	head := make([]byte, walHeaderLen)
	if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if h, ok := decodeHeader(head); !ok || h.gen+1 != gen {
		return nil
	}
	b := binary.LittleEndian.AppendUint64(make([]byte, 0, walNoteLen), gen)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint32(b, crc32.Update(binary.LittleEndian.Uint32(head[28:32]), crcTable, b))
	if _, err := f.WriteAt(b, walNoteAt); err != nil {
		return err
	}
	return w.sync(i)
}

// unnote removes file i's note, durably, when it has one. Open does so
// before it names the file it is about to start after i: a note left from
// an earlier run (its file deleted once the store had stopped cleanly, or
// lost and repaired) names that same generation, and a crash before the
// start would leave the store refused as if the named file had been lost,
// when the note's absence shows that it never received a record.
func (w *wal) unnote(i int) error {
	h, ok, err := w.readHeader(i)
	if err != nil || !ok || h.nextGen == 0 {
		return err
	}
	if _, err := w.files[i].f.WriteAt(make([]byte, walNoteLen), walNoteAt); err != nil {
		return err
	}
	return w.sync(i)
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

// append writes the next record to the current file and returns its
// number. It does not sync. When it fails nothing is appended: the log's
// position, numbering and chain stay as they were, and a record the write
// may have left partly on disk is invalidated (a zero header, synced), so
// recovery cannot replay it and the next record takes its place. If even
// that fails the error wraps errWALTorn, after which the log must not be
// appended to again.
func (w *wal) append(payload []byte) (uint64, error) {
	if len(payload) > math.MaxUint32 {
		// The header holds a 32-bit length: a longer record would be read
		// back as garbage, and recovery would drop it and all after it.
		return 0, fmt.Errorf("persistence: a log record of %d bytes is over the 4 GiB a record can hold", len(payload))
	}
	need := int64(walRecordHead + len(payload))
	if w.off+need > w.files[w.cur].end {
		if err := w.extend(w.cur, w.off+need+walExtend); err != nil {
			return 0, err
		}
	}
	b := w.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, w.next)
	b = append(b, payload...)
	chain := crc32.Update(w.chain, crcTable, b[8:])
	binary.LittleEndian.PutUint32(b[4:8], chain)
	w.buf = b
	if err := w.write(b); err != nil {
		if _, zerr := w.files[w.cur].f.WriteAt(make([]byte, walRecordHead), w.off); zerr != nil {
			return 0, fmt.Errorf("%w: %w (invalidating it: %w)", errWALTorn, err, zerr)
		}
		if serr := w.sync(w.cur); serr != nil {
			return 0, fmt.Errorf("%w: %w (syncing its invalidation: %w)", errWALTorn, err, serr)
		}
		return 0, err
	}
	w.chain = chain
	w.off += need
	w.next++
	return w.next - 1, nil
}

// writeFault, when set by a test, replaces the write of a record: it can
// write part or all of it and fail, as a full disk or an I/O error can.
var writeFault func(f *os.File, b []byte, off int64) error

func (w *wal) write(b []byte) error {
	f := w.files[w.cur].f
	if writeFault != nil {
		return writeFault(f, b, w.off)
	}
	_, err := f.WriteAt(b, w.off)
	return err
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
	return syncFile(w.files[i].f)
}

// syncFile is how the log makes a file durable; a test wraps it to learn
// what each sync covered.
var syncFile = Datasync

func (w *wal) close() error {
	var errs []error
	for i := range w.files {
		if w.files[i].f != nil {
			errs = append(errs, w.files[i].f.Close())
		}
	}
	return errors.Join(errs...)
}

// readRecords returns the payloads of the records numbered first, first+1,
// ... chained from seed, in order, stopping at the first that is missing,
// torn or stale, or at a failed read, whose error it returns (the reads
// stay within size, so even a short one is an error).
//
// A record that fails its checksum, or whose head is not what it should
// be, may have been damaged after it was acknowledged. When walInFlight
// records after it check out (wholeAfter), the damage cannot be a torn
// write, and readRecords returns the records before it with a *WALDamage
// (File unset).
func readRecords(r io.ReaderAt, size int64, first uint64, seed uint32) (out [][]byte, err error) {
	chain := seed
	for off, want := int64(walRecordStart), first; ; want++ {
		body, stored, ok, err := readRecord(r, size, off, want)
		if err != nil {
			return out, err
		}
		if ok {
			if next := crc32.Update(chain, crcTable, body); next == stored {
				out, chain = append(out, body[8:]), next
				off += walRecordHead + int64(len(body)) - 8
				continue
			}
		}
		run, err := wholeAfter(r, size, off, want, chain)
		if err != nil {
			return out, err
		}
		if run.n >= walInFlight {
			return out, &WALDamage{Record: want, Offset: off, Intact: run.n}
		}
		return out, nil
	}
}

// wholeRun is where the whole records after a damaged one resume: the
// head of the first at offset at, numbered num, whose checksum chains
// from chain; n counts the records after the damaged one up to the last
// whole one (damaged ones between included). n is 0 when none was found.
type wholeRun struct {
	n     int
	at    int64
	num   uint64
	chain uint32
}

// wholeAfter returns how many whole records follow record want at off,
// which is missing or fails its checksum, chain being the checksum of
// the record before it. The next record is looked for by its number
// anywhere after off's head, not only where off's length says: a damaged
// head (its length, number or checksum) must not hide the records after
// it. From there the records must check out chained from the checksum
// off's head stores (the payload is what was damaged) or from the one its
// payload, up to that record, makes (the head was): a torn write, a
// zeroed end or a reused file's older records leave nothing that does.
// The run returned is the longest found (the first with walInFlight).
func wholeAfter(r io.ReaderAt, size, off int64, want uint64, chain uint32) (wholeRun, error) {
	var stored []uint32
	head := make([]byte, walRecordHead)
	if off+walRecordHead <= size {
		if _, err := r.ReadAt(head, off); err != nil {
			return wholeRun{}, err
		}
		stored = append(stored, binary.LittleEndian.Uint32(head[4:8]))
	}
	pat := binary.LittleEndian.AppendUint64(nil, want+1)
	const chunk = 1 << 20
	buf := make([]byte, chunk+len(pat)-1)
	var best wholeRun
	for base := off + walRecordHead + 8; base+int64(len(pat)) <= size; base += chunk {
		b := buf[:min(int64(len(buf)), size-base)]
		if _, err := r.ReadAt(b, base); err != nil {
			return wholeRun{}, err
		}
		for i := 0; ; {
			j := bytes.Index(b[i:], pat)
			if j < 0 || i+j >= chunk {
				break
			}
			i += j
			next := base + int64(i) - 8 // the head of the record numbered want+1
			i++
			payload := make([]byte, next-off-walRecordHead)
			if _, err := r.ReadAt(payload, off+walRecordHead); err != nil {
				return wholeRun{}, err
			}
			made := crc32.Update(crc32.Update(chain, crcTable, binary.LittleEndian.AppendUint64(nil, want)), crcTable, payload)
			for _, c := range append(stored, made) {
				n, err := chained(r, size, next, want+1, c)
				if err != nil {
					return wholeRun{}, err
				}
				if n > best.n {
					best = wholeRun{n: n, at: next, num: want + 1, chain: c}
				}
				if best.n >= walInFlight {
					return best, nil
				}
			}
		}
	}
	if best.n > 0 {
		return best, nil
	}
	return wholeBeyond(r, size, off, want)
}

// wholeBeyond is wholeAfter when the record after want is damaged too (a
// lost sector or page can take several): it looks for any later record m
// (by its number, from want+2 on) from which walInFlight records check
// out chained from the checksum m's head stores, and returns them as a
// run from the record after m, which itself cannot be checked.
func wholeBeyond(r io.ReaderAt, size, off int64, want uint64) (wholeRun, error) {
	const chunk = 1 << 20
	buf := make([]byte, chunk+walRecordHead-1)
	for base := off + walRecordHead; base+walRecordHead <= size; base += chunk {
		b := buf[:min(int64(len(buf)), size-base)]
		if _, err := r.ReadAt(b, base); err != nil {
			return wholeRun{}, err
		}
		for i := 0; i < chunk && i+walRecordHead <= len(b); i++ {
			m := binary.LittleEndian.Uint64(b[i+8:])
			if m == 0 {
				// The zeros a file is extended with: skip them a word at a
				// time. b[i+8:j+8] is zero, so the next number that can be
				// nonzero starts past j-8.
				j := i + 8
				for j+16 <= len(b) && binary.LittleEndian.Uint64(b[j+8:]) == 0 {
					j += 8
				}
				i = j - 8
				continue
			}
			if m <= want+1 || m-want > 1<<32 {
				continue
			}
			n := int64(binary.LittleEndian.Uint32(b[i:]))
			at := base + int64(i)
			if at+walRecordHead+n > size {
				continue
			}
			k, err := chained(r, size, at+walRecordHead+n, m+1, binary.LittleEndian.Uint32(b[i+4:]))
			if err != nil {
				return wholeRun{}, err
			}
			if k >= walInFlight { // the damaged ones between count too
				return wholeRun{n: int(m-want) + k, at: at + walRecordHead + n, num: m + 1, chain: binary.LittleEndian.Uint32(b[i+4:])}, nil
			}
		}
	}
	return wholeRun{}, nil
}

// readAhead reads r a window of readAheadBytes at a time, so that reading
// a log record by record (two reads each) costs a system call per window
// rather than two per record.
type readAhead struct {
	r      io.ReaderAt
	window int // readAheadBytes when 0
	off    int64
	buf    []byte
}

const readAheadBytes = 1 << 20

func (a *readAhead) ReadAt(p []byte, off int64) (int, error) {
	if off < a.off || off+int64(len(p)) > a.off+int64(len(a.buf)) {
		if n := max(len(p), cmp.Or(a.window, readAheadBytes)); cap(a.buf) < n {
			a.buf = make([]byte, n)
		}
		n, err := a.r.ReadAt(a.buf[:cap(a.buf)], off)
		a.off, a.buf = off, a.buf[:n]
		if n < len(p) {
			return 0, err // err is not nil when n is short (io.ReaderAt)
		}
	}
	return copy(p, a.buf[off-a.off:]), nil
}

// readRecord reads the record at off if its head says it is record want
// and it fits in size: its number and payload, and the checksum its head
// stores. ok is false when there is no such record.
func readRecord(r io.ReaderAt, size, off int64, want uint64) (body []byte, stored uint32, ok bool, err error) {
	if off+walRecordHead > size {
		return nil, 0, false, nil
	}
	head := make([]byte, walRecordHead)
	if _, err := r.ReadAt(head, off); err != nil {
		return nil, 0, false, err
	}
	n := int64(binary.LittleEndian.Uint32(head[0:4]))
	if binary.LittleEndian.Uint64(head[8:16]) != want || off+walRecordHead+n > size {
		return nil, 0, false, nil
	}
	body = make([]byte, 8+n)
	if _, err := r.ReadAt(body, off+8); err != nil {
		return nil, 0, false, err
	}
	return body, binary.LittleEndian.Uint32(head[4:8]), true, nil
}

// chained counts the records from off on, numbered from want, that check
// out chained from chain.
func chained(r io.ReaderAt, size, off int64, want uint64, chain uint32) (int, error) {
	n := 0
	for ; ; want++ {
		body, stored, ok, err := readRecord(r, size, off, want)
		if err != nil || !ok {
			return n, err
		}
		if chain = crc32.Update(chain, crcTable, body); chain != stored {
			return n, nil
		}
		n++
		off += walRecordHead + int64(len(body)) - 8
	}
}
