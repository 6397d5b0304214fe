package storetest_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sessiond/sessiond/persistence/storetest"
)

// Written counts what the process writes, so that benchmarks can report
// the bytes a commit costs; where the system does not count, it says so.
func TestWrittenCountsWrites(t *testing.T) {
	before := storetest.Written()
	if runtime.GOOS != "linux" {
		if before != -1 {
			t.Fatalf("Written = %d on %s, want -1 (no /proc/self/io)", before, runtime.GOOS)
		}
		return
	}
	if before < 0 {
		t.Fatalf("Written = %d on Linux", before)
	}
	const n = 1 << 20
	if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), make([]byte, n), 0o600); err != nil {
		t.Fatal(err)
	}
	if after := storetest.Written(); after-before < n {
		t.Fatalf("Written grew by %d over a write of %d bytes", after-before, n)
	}
}
