package storetest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/persistence"
)

// FdatasyncRate measures the physical limit every durability benchmark is
// compared with: a raw loop of size-byte appends, each followed by
// fdatasync (persistence.Datasync, what the store's log uses), in dir (so on the same filesystem as the store under test).
// Disks drift; benchmarks call it before and after a run and divide by the
// faster rate, so their ratios are lower bounds.
func FdatasyncRate(tb testing.TB, dir string, size int) float64 {
	tb.Helper()
	f, err := os.Create(filepath.Join(dir, "fdatasync.probe"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, size)
	const n = 200
	start := time.Now()
	for range n {
		if _, err := f.Write(buf); err != nil {
			tb.Fatal(err)
		}
		if err := persistence.Datasync(f); err != nil {
			tb.Fatal(err)
		}
	}
	return n / time.Since(start).Seconds()
}
