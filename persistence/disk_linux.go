package persistence

import (
	"os"

	"golang.org/x/sys/unix"
)

// Datasync makes what was written to f durable, as the store's log does
// after each group commit: fdatasync(2), which flushes the data and the
// device's write cache, and of the metadata only what reading the data
// back needs.
func Datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// pacedWriteback says whether paceWriteback can start writeback early.
const pacedWriteback = true

// startWriteback asks the kernel to start writing the file's dirty pages
// out, without waiting for them (sync_file_range(2)).
func startWriteback(fd int) { _ = unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE) }
