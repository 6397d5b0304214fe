package persistence

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"

	"golang.org/x/sys/unix"
)

// bbolt's meta page, as laid out on disk by bbolt file format version 2 in
// the machine's byte order. The WAL checkpoint keeps a copy, and recovery
// writes it back (wal.go explains why). bbolt exposes no API for either, so
// these few offsets are the one place sessiond depends on its file format;
// TestBoltMetaLayout checks them against files bbolt writes.
//
//	page header: id u64 | flags u16 | count u16 | overflow u32
//	meta:        magic u32 | version u32 | pageSize u32 | flags u32 |
//	             root pgid u64 | root sequence u64 | freelist u64 |
//	             high-water pgid u64 | txid u64 | checksum u64 (FNV-64a of
//	             the meta fields before it)
const (
	boltPageHead = 16
	boltMetaLen  = 64
	boltMetaHead = boltPageHead + boltMetaLen
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
)

// boltMeta is one valid meta page head (page header and meta).
type boltMeta struct {
	raw      []byte
	txid     uint64
	pageSize int
}

// parseBoltMeta validates a meta page head the way bbolt does (magic,
// version, checksum).
func parseBoltMeta(b []byte) (boltMeta, bool) {
	if len(b) < boltMetaHead {
		return boltMeta{}, false
	}
	m := b[boltPageHead:boltMetaHead]
	ne := binary.NativeEndian
	if ne.Uint32(m[0:]) != boltMagic || ne.Uint32(m[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != ne.Uint64(m[56:]) {
		return boltMeta{}, false
	}
	return boltMeta{raw: append([]byte(nil), b[:boltMetaHead]...), txid: ne.Uint64(m[48:]), pageSize: int(ne.Uint32(m[8:]))}, true
}

// readBoltMetas reads both meta slots of an open bbolt file. Slot 0 gives
// the page size; when it is unreadable, the OS page size (bbolt's default)
// locates slot 1.
func readBoltMetas(f *os.File) (metas [2]boltMeta, valid [2]bool) {
	head := make([]byte, boltMetaHead)
	if _, err := f.ReadAt(head, 0); err == nil {
		metas[0], valid[0] = parseBoltMeta(head)
	}
	ps := os.Getpagesize()
	if valid[0] {
		ps = metas[0].pageSize
	}
	if _, err := f.ReadAt(head, int64(ps)); err == nil {
		metas[1], valid[1] = parseBoltMeta(head)
	}
	return metas, valid
}

// newestBoltTxid returns the txid bbolt would open at: the higher of the
// valid meta pages.
func newestBoltTxid(f *os.File) (uint64, bool) {
	metas, valid := readBoltMetas(f)
	var txid uint64
	ok := false
	for i := range 2 {
		if valid[i] && (!ok || metas[i].txid > txid) {
			txid, ok = metas[i].txid, true
		}
	}
	return txid, ok
}

// boltMetaOf returns the head of the meta page bbolt wrote for txid (slot
// txid%2), which must be on the file.
func boltMetaOf(f *os.File, pageSize int, txid uint64) ([]byte, error) {
	head := make([]byte, boltMetaHead)
	if _, err := f.ReadAt(head, int64(txid%2)*int64(pageSize)); err != nil {
		return nil, err
	}
	m, ok := parseBoltMeta(head)
	if !ok || m.txid != txid {
		return nil, fmt.Errorf("persistence: meta page of tx %d not found", txid)
	}
	return m.raw, nil
}

// restoreBoltMeta writes meta into both meta slots and syncs the file, so
// bbolt opens at that transaction whatever the slots held.
func restoreBoltMeta(f *os.File, meta []byte) error {
	m, ok := parseBoltMeta(meta)
	if !ok {
		return fmt.Errorf("%w: checkpoint meta page is invalid", errWALCorrupt)
	}
	for slot := range 2 {
		b := append([]byte(nil), m.raw...)
		binary.NativeEndian.PutUint64(b[0:8], uint64(slot))
		if _, err := f.WriteAt(b, int64(slot)*int64(m.pageSize)); err != nil {
			return err
		}
	}
	return unix.Fdatasync(int(f.Fd()))
}
