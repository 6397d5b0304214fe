package storetest

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// FdatasyncRateBusy measures FdatasyncRate's loop while a goroutine per
// core keeps every core busy (a benchmark's run keeps most of them busy,
// the syncs it reports as µs/sync fall between the two). On a virtual
// machine whose disk the host serves with the CPU time the guest leaves it
// (the machines these benchmarks ran on), an fdatasync takes two to four
// times as long while all the guest's CPUs are busy, whatever the guest's
// priorities (docs/performance-log.md, thirty-first sitting). It is context for
// a ratio, never its denominator: the ratios divide by FdatasyncRate, the
// disk's idle rate.
func FdatasyncRateBusy(tb testing.TB, dir string, size int) float64 {
	tb.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			n := 0
			for {
				select {
				case <-stop:
					spinSink.Add(int64(n))
					return
				default:
				}
				// Spin, then let the loop's goroutine have a processor as
				// soon as its fdatasync returns, even with one processor.
				for i := range 1000 {
					n += i
				}
				runtime.Gosched()
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	return FdatasyncRate(tb, dir, size)
}

// spinSink keeps FdatasyncRateBusy's spin from being optimized away.
var spinSink atomic.Int64

// Usage returns the process's CPU time so far, user and system, and its
// page faults served without I/O (a first touch of memory it had not
// used): benchmarks take it before and after a run.
func Usage() (cpu time.Duration, faults int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt
}

// Written returns the bytes the process has handed to write system calls
// so far (the wchar of /proc/self/io: the log's records and bbolt's pages
// alike, whether or not the disk has them yet), or -1 where the system
// does not count them. Benchmarks report its growth per operation: on the
// virtual machines these figures come from, the CPU a commit costs grows
// with the bytes it writes (docs/performance-log.md, thirty-fifth sitting).
func Written() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "wchar:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// ReportWritten reports the bytes written per op over a run, from
// Written's figures before and after it, when the system counts them.
func ReportWritten(b *testing.B, before, after int64, ops int, unit string) {
	b.Helper()
	if before < 0 || after < 0 || ops == 0 {
		return
	}
	b.ReportMetric(float64(after-before)/float64(ops), unit)
}

// ReportLogSyncs reports, for a run that took elapsed, the share of it
// the store's write-ahead log spent in fdatasync ("sync-busy", from 0 to
// 1) and the mean fdatasync ("µs/sync"), given their count and total time
// (persistence Options.OnSync). Against FdatasyncRate it shows how much
// slower the disk answers inside the store than in a bare loop, and how
// much of the time it is left idle.
func ReportLogSyncs(b *testing.B, n int64, took, elapsed time.Duration) {
	b.Helper()
	if n == 0 || elapsed <= 0 {
		return
	}
	b.ReportMetric(float64(took)/float64(elapsed), "sync-busy")
	b.ReportMetric(float64(took.Microseconds())/float64(n), "µs/sync")
}
