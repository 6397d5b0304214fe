package persistence_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/persistence/storetest"
)

// boltCommitRate measures bbolt's own floor in dir: sequential one-key
// transactions with fsync on. A bbolt commit writes its dirty pages and
// fdatasyncs, then writes the meta page and fdatasyncs again, so this rate
// is at most half the raw fdatasync rate; a single admitter cannot beat it.
func boltCommitRate(b *testing.B, dir string, size int) float64 {
	db, err := bolt.Open(filepath.Join(dir, "floor.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	val := make([]byte, size)
	const n = 200
	start := time.Now()
	for i := range n {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return bk.Put(fmt.Appendf(nil, "%08d", i), val)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return n / time.Since(start).Seconds()
}

// warmUp bounds BenchmarkAdmit's warm-up.
const warmUp = 5 * time.Second

// BenchmarkAdmit measures durable admission (fsync on) with concurrent
// admitters, reporting admissions/s, p50/p99 latency, and the ratio of
// admissions/s to a raw fdatasync loop measured in the same run, plus the
// rate of bare one-key bbolt commits (bbolt's floor) for context.
func BenchmarkAdmit(b *testing.B) {
	for _, admitters := range []int{1, 8, 64, 256} {
		b.Run(fmt.Sprintf("admitters=%d", admitters), func(b *testing.B) {
			dir := b.TempDir()
			var commits, ops, commitNs, flushes, syncs, syncNs atomic.Int64
			// The daemon caps each Session's backlog (1,000 by default);
			// a cap above the warm-up's and the run's admissions checks it on
			// every admission, refusing none.
			st, err := persistence.Open(filepath.Join(dir, "bench.db"), persistence.Options{InboxBacklog: b.N + 1<<20, NoSync: os.Getenv("BENCH_NOSYNC") != "", OnCommit: func(n int, d time.Duration) {
				commits.Add(1)
				ops.Add(int64(n))
				commitNs.Add(int64(d))
			}, OnFlush: func(int, time.Duration) { flushes.Add(1) }, OnSync: func(d time.Duration) {
				syncs.Add(1)
				syncNs.Add(int64(d))
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			// One Session per admitter, as independent clients would have.
			sids := make([]messages.SessionID, admitters)
			for i := range sids {
				s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
				if err != nil {
					b.Fatal(err)
				}
				sids[i] = s.ID
			}
			prompt := messages.Prompt{Text: fmt.Sprintf("%0200d", 7)}
			// admit makes admissions spread over the admitters for as long
			// as more says yes to the next one's number (from 1), and returns
			// each admitter's latencies.
			admit := func(more func(i int64) bool) [][]time.Duration {
				lat := make([][]time.Duration, admitters)
				var next atomic.Int64
				var wg sync.WaitGroup
				for g := range admitters {
					wg.Go(func() {
						for more(next.Add(1)) {
							t0 := time.Now()
							if _, _, err := st.Admit(ctx, persistence.Admission{SessionID: sids[g], Prompt: prompt}); err != nil {
								b.Error(err)
								return
							}
							lat[g] = append(lat[g], time.Since(t0))
						}
					})
				}
				wg.Wait()
				return lat
			}
			// The disk's fsync rate drifts; measure it before and after the
			// run and divide by the faster one, so the ratio is a lower bound.
			// The first measurement comes before the warm-up, whose writeback
			// would slow it.
			rawBefore := storetest.FdatasyncRate(b, dir, 300)
			// The figure is the steady state of a store that has been
			// running: an untimed warm-up, until the memtable has been
			// flushed twice or for at most warmUp, lets the process's heap
			// grow to its working size. A fresh process's first touch of
			// that memory, a page fault per 4 KB, cost about a sixth of the
			// CPU of a cold run at 256 admitters (faults/op shows what is
			// left). BENCH_COLD_HEAP=1 skips it.
			if os.Getenv("BENCH_COLD_HEAP") == "" {
				until := time.Now().Add(warmUp)
				admit(func(int64) bool { return flushes.Load() < 2 && time.Now().Before(until) })
			}
			commits.Store(0)
			ops.Store(0)
			commitNs.Store(0)
			syncs.Store(0)
			syncNs.Store(0)
			cpu0, faults0 := storetest.Usage()
			written0 := storetest.Written()
			b.ResetTimer()
			start := time.Now()
			lat := admit(func(i int64) bool { return i <= int64(b.N) })
			elapsed := time.Since(start)
			b.StopTimer()
			cpu1, faults1 := storetest.Usage()
			// The log's records and the flushes' bbolt pages: each byte
			// costs CPU in the kernel, and the disk's time.
			storetest.ReportWritten(b, written0, storetest.Written(), b.N, "written-B/op")
			storetest.ReportLogSyncs(b, syncs.Load(), time.Duration(syncNs.Load()), elapsed)
			b.ReportMetric(float64(faults1-faults0)/float64(b.N), "faults/op")
			// The CPU an admission took in all (every goroutine, the
			// kernel's share included) and how many cores were busy: with
			// two, a figure near 2 says the CPU bounds the rate.
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
			b.ReportMetric((cpu1-cpu0).Seconds()/elapsed.Seconds(), "cores")
			all := slices.Concat(lat...)
			slices.Sort(all)
			rate := float64(len(all)) / elapsed.Seconds()
			raw := max(rawBefore, storetest.FdatasyncRate(b, dir, 300))
			floor := boltCommitRate(b, dir, 300)
			b.ReportMetric(rate, "admits/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(raw, "fdatasync/s")
			b.ReportMetric(rate/raw, "ratio")
			// The disk with every core busy: context for the ratio and
			// for µs/sync (storetest.FdatasyncRateBusy), not a divisor.
			b.ReportMetric(storetest.FdatasyncRateBusy(b, dir, 300), "fdatasync/s-busy")
			b.ReportMetric(floor, "bolt-commits/s")
			if c := commits.Load(); c > 0 {
				b.ReportMetric(float64(ops.Load())/float64(c), "ops/commit")
				b.ReportMetric(float64(commitNs.Load())/float64(c)/1e3, "µs/commit")
			}
		})
	}
}

var (
	bigOnce sync.Once
	bigPath string
	bigSID  messages.SessionID
	bigErr  error
)

// bigSession builds, once per process, a store with one 1,000,000-event
// Session (fsync off while building; reads do not depend on it), and
// closes it so that every row is in bbolt, as a long-lived Session's are.
func bigSession(b *testing.B) (string, messages.SessionID) {
	bigOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sessiond-bench-")
		if err != nil {
			bigErr = err
			return
		}
		bigPath = filepath.Join(dir, "big.db")
		st, err := persistence.Open(bigPath, persistence.Options{NoSync: true})
		if err != nil {
			bigErr = err
			return
		}
		defer st.Close()
		ctx := context.Background()
		s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
		if err != nil {
			bigErr = err
			return
		}
		bigSID = s.ID
		// Three events per Append, so per log row, as a step's commits
		// write them (logrow.go).
		batch := make([]messages.Payload, 0, 3)
		for i := 1; i < 1_000_000; i++ {
			var p messages.Payload = &messages.ExecutionStarted{SessionID: s.ID}
			if i%2 == 0 {
				p = &messages.ExecutionSucceeded{SessionID: s.ID}
			}
			batch = append(batch, p)
			if len(batch) == cap(batch) || i == 999_999 {
				if _, err := st.Append(ctx, s.ID, batch...); err != nil {
					bigErr = err
					return
				}
				batch = batch[:0]
			}
		}
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	return bigPath, bigSID
}

// BenchmarkHistoryTail reads the last page (limit 100) of a 1,000,000-event
// Session and reports p99 latency.
func BenchmarkHistoryTail(b *testing.B) {
	path, sid := bigSession(b)
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		p, err := st.History(ctx, sid, persistence.Query{After: 999_999 - 100, Limit: 100})
		if err != nil || len(p.Data) != 100 {
			b.Fatalf("page: %d events, %v", len(p.Data), err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
}

// BenchmarkLogReplay replays the whole 1,000,000-event Session through Log
// and reports decoded events per second.
func BenchmarkLogReplay(b *testing.B) {
	path, sid := bigSession(b)
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	total := 0
	for range b.N {
		for item, err := range st.Log(ctx, sid, -1, false) {
			if err != nil {
				b.Fatal(err)
			}
			if item.Event != nil {
				total++
			}
		}
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkOpenBig opens and closes the store of the 1,000,000-event
// Session (about 200 MB) and reports how long an Open takes: what a
// restart waits for before recovery of the log begins. BENCH_COLD=1 drops
// the page cache before each Open (it needs root), as after a reboot.
func BenchmarkOpenBig(b *testing.B) {
	path, _ := bigSession(b)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	var took time.Duration
	b.ResetTimer()
	for range b.N {
		if os.Getenv("BENCH_COLD") != "" {
			b.StopTimer()
			if err := exec.Command("sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches").Run(); err != nil {
				b.Fatalf("drop the page cache: %v", err)
			}
			b.StartTimer()
		}
		took += timeOpen(b, path)
	}
	b.ReportMetric(float64(took.Microseconds())/float64(b.N), "open-µs")
	b.ReportMetric(float64(fi.Size())/1e6, "MB")
}

// timeOpen opens the store at path and returns how long Open took; the
// Close after it is off the benchmark's clock.
func timeOpen(b *testing.B, path string) time.Duration {
	t0 := time.Now()
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(t0)
	b.StopTimer()
	defer b.StartTimer()
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	return took
}

// BenchmarkRecover opens a store as a crash left it with 9,000 admissions
// (64 Sessions, 200-byte prompts, about 9 MB) in its write-ahead log and
// none in bbolt, the most a log holds between two flushes at the default
// FlushBytes, and reports how long the Open takes: what a restart after a
// crash waits for.
func BenchmarkRecover(b *testing.B) {
	live := filepath.Join(b.TempDir(), "s.db")
	st, err := persistence.Open(live, persistence.Options{FlushBytes: 1 << 40, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var sids []messages.SessionID
	for range 64 {
		s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
		if err != nil {
			b.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	for i := range 9000 {
		if _, _, err := st.Admit(ctx, persistence.Admission{SessionID: sids[i%len(sids)], Prompt: messages.Prompt{Text: fmt.Sprintf("%0200d", i)}}); err != nil {
			b.Fatal(err)
		}
	}
	files := map[string][]byte{}
	logBytes := 0
	for _, suffix := range []string{"", "-wal", "-wal2"} {
		if files[suffix], err = os.ReadFile(live + suffix); err != nil {
			b.Fatal(err)
		}
		if suffix != "" {
			logBytes += len(files[suffix])
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	var took time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "s.db")
		for suffix, data := range files {
			if err := os.WriteFile(path+suffix, data, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		took += timeOpen(b, path)
	}
	b.ReportMetric(float64(took.Microseconds())/1e3/float64(b.N), "open-ms")
	b.ReportMetric(float64(logBytes)/1e6, "log-MB")
}

// BenchmarkBackupBig makes a backup of the store of the 1,000,000-event
// Session (about 200 MB) and reads it through, as GET /api/backup sends
// it, and reports how long that takes.
func BenchmarkBackupBig(b *testing.B) {
	path, _ := bigSession(b)
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var size int64
	b.ResetTimer()
	for range b.N {
		r, n, err := st.Backup(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
		size = n
	}
	b.ReportMetric(float64(size)/1e6, "MB")
	b.ReportMetric(float64(size)/1e6/(b.Elapsed().Seconds()/float64(b.N)), "MB/s")
}
