package persistence

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Backup makes a copy of the store as readers see it when it starts:
// every commit durable by then, and none after. The copy is one bbolt file
// that Open takes as a store of its own, put alone in a data directory (no
// write-ahead log beside it) under the store's file name. Writes go on
// meanwhile.
//
// It copies bbolt as of a read transaction (bbolt's WriteTo) into a
// temporary file beside the store and writes into that what the memtables
// of the same snapshot hold, as a flush would: the directory needs room
// for a copy of the store. The read transaction is held while bbolt is
// copied, which a flush that must grow the file's mapping waits for.
//
// It returns the copy, read from its start, and its size; closing it
// removes the file.
func (s *Bolt) Backup(ctx context.Context) (io.ReadCloser, int64, error) {
	f, err := os.CreateTemp(filepath.Dir(s.Path()), filepath.Base(s.Path())+backupSuffix+"*")
	if err != nil {
		return nil, 0, fmt.Errorf("persistence: backup: %w", err)
	}
	b := &backupFile{f}
	var mems []*memTree
	var last uint64
	err = s.view(func(v *view) error {
		mems, last = v.mems, v.last
		_, err := v.tx.WriteTo(f)
		return err
	})
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = applyMems(f.Name(), mems, last)
	}
	var size int64
	if err == nil {
		size, err = f.Seek(0, io.SeekEnd)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		b.Close()
		return nil, 0, fmt.Errorf("persistence: backup: %w", err)
	}
	return b, size, nil
}

// backupSuffix ends the store's file name in its backups' temporary
// files.
const backupSuffix = ".backup-"

// verifySuffix ends the store's file name in the directories Verify
// rebuilds it in.
const verifySuffix = ".verify-"

// removeBackupFiles removes the temporary files of backups of the store
// at path, and the directories a check of it rebuilt the store in beside
// it, that a process ended before it could (a crash, a kill), which would
// otherwise hold a copy of the store's size each. Only the holder of the
// store's lock may call it.
func removeBackupFiles(path string) {
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		name := e.Name()
		for _, suffix := range []string{backupSuffix, verifySuffix} {
			if strings.HasPrefix(name, filepath.Base(path)+suffix) {
				os.RemoveAll(filepath.Join(filepath.Dir(path), name))
			}
		}
	}
}

// backupFile is a backup's temporary file, removed when it is closed.
type backupFile struct{ *os.File }

func (b *backupFile) Close() error {
	err := b.File.Close()
	if rerr := os.Remove(b.Name()); err == nil {
		err = rerr
	}
	return err
}

// applyMems writes the memtables, oldest first, into the bbolt file at
// path (mems as a snapshot lists them, newest first), and last as the
// number of the last log record the file holds. Writing a memtable that
// bbolt holds already changes nothing.
func applyMems(path string, mems []*memTree, last uint64) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := len(mems) - 1; i >= 0; i-- {
			if err := writeMem(tx, mems[i]); err != nil {
				return err
			}
		}
		// The copy holds every commit it is to have: it opens without
		// a log, whatever log the store's own file asks for. Restored
		// beside log files all the same, it must not take their records
		// up to its own point for newer than itself: replayed over it,
		// an older copy of the log would write older values back (the
		// store's own applied number is its last flush's).
		if err := tx.Bucket(bucketMeta).Put(keyApplied, binary.BigEndian.AppendUint64(nil, last)); err != nil {
			return err
		}
		return putLogGen(tx, 0)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}
