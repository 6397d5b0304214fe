//go:build !linux

package persistence

import "os"

// Datasync makes what was written to f durable, as the store's log does
// after each group commit. Outside Linux it is (*os.File).Sync: on macOS
// that is fcntl(F_FULLFSYNC), since a plain fsync there leaves the data in
// the drive's write cache, where a power loss takes it.
func Datasync(f *os.File) error { return f.Sync() }

// pacedWriteback is false: sync_file_range(2) is Linux's, so a flush's
// pages are written by bbolt's own fsync, all at once.
const pacedWriteback = false

func startWriteback(int) {}
