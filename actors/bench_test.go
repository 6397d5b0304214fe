package actors_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence/storetest"
)

// stepsPerSession bounds each Session's chain of steps, so the benchmark
// measures per-step cost rather than ever-growing transcripts.
const stepsPerSession = 20

// stepRun is what runSteps measured over its timed pass.
type stepRun struct {
	steps, events int
	syncs         int64 // fdatasyncs of the log
	elapsed, cpu  time.Duration
	synced        time.Duration // time in them
	allocs        uint64
	faults        int64
	written       [2]int64 // storetest.Written before and after
}

// runSteps runs about total steps (one local tool call per step, the
// scripted model answering at once) on waves of `parallel` concurrent
// Sessions, and measures steps, durable events, time, CPU, allocations and
// page faults.
//
// An untimed pass of as many steps on other Sessions comes first, so the
// figure is a running process's steady state: the heap has grown to its
// working size (a fresh process's first touch of that memory costs a page
// fault per 4 KB) and the store's memtable has been through its flushes.
// BENCH_COLD_HEAP=1 skips it.
func runSteps(b *testing.B, h *actortest.Harness, parallel, total int) stepRun {
	h.Tools.Add("noop", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	h.Model.Default(script.ToolCall("call_1", "noop", `{}`))
	h.Model.SetRecord(false) // the daemon keeps no request copies; neither does this measurement
	waves := max(total/(parallel*stepsPerSession), 1)
	sessions := func() [][]messages.SessionID {
		all := make([][]messages.SessionID, waves)
		for w := range all {
			for range parallel {
				all[w] = append(all[w], h.Session())
			}
		}
		return all
	}
	run := func(all [][]messages.SessionID) {
		for _, wave := range all {
			var wg sync.WaitGroup
			for _, sid := range wave {
				wg.Go(func() {
					h.Prompt(sid, "loop")
					h.WaitIdle(sid)
				})
			}
			wg.Wait()
		}
	}
	events := func(all [][]messages.SessionID) (n int) {
		for _, wave := range all {
			for _, sid := range wave {
				w, _ := h.Store.Watermark(context.Background(), sid)
				n += int(w) + 1
			}
		}
		return n
	}
	if os.Getenv("BENCH_COLD_HEAP") == "" {
		run(sessions())
	}
	all := sessions()
	before, requests := events(all), h.Model.Count()
	b.ResetTimer()
	cpu0, faults0 := storetest.Usage()
	written0 := storetest.Written()
	mallocs0 := mallocs()
	syncs0, synced0 := h.LogSyncs()
	start := time.Now()
	run(all)
	elapsed := time.Since(start)
	cpu1, faults1 := storetest.Usage()
	written1 := storetest.Written()
	allocs := mallocs() - mallocs0
	syncs, synced := h.LogSyncs()
	b.StopTimer()
	return stepRun{
		syncs:   syncs - syncs0,
		synced:  synced - synced0,
		steps:   h.Model.Count() - requests,
		events:  events(all) - before,
		elapsed: elapsed,
		cpu:     cpu1 - cpu0,
		allocs:  allocs,
		faults:  faults1 - faults0,
		written: [2]int64{written0, written1},
	}
}

// BenchmarkSteps reports steps/s and durable events/s with fsync on, the
// ratio of events/s to a raw fdatasync loop measured in the same run, and
// CPU per step (the target, runtime CPU excluding fsync, is the nosync
// variant's). Each Session runs a chain of 20 steps.
func BenchmarkSteps(b *testing.B) {
	// The tests check every boundary served from a runner's mirror against
	// a read; the daemon does not.
	defer actors.CheckMirror(actors.CheckMirror(false))
	for _, sessions := range []int{1, 100} {
		for _, sync := range []bool{true, false} {
			name := fmt.Sprintf("sessions=%d/fsync=%v", sessions, sync)
			b.Run(name, func(b *testing.B) {
				h := actortest.New(b, actortest.Options{Steps: stepsPerSession, Sync: sync})
				dir := b.TempDir()
				raw := 0.0
				if sync {
					raw = storetest.FdatasyncRate(b, dir, 300)
				}
				r := runSteps(b, h, sessions, b.N)
				steps, events, elapsed := r.steps, r.events, r.elapsed
				b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
				b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
				b.ReportMetric(float64(events)/float64(steps), "events/step")
				// CPU per step is the whole process's, user and system: without
				// fsync it is the runtime's own cost; with fsync it adds the
				// kernel's work for each fdatasync and the wakeups around it.
				// Allocations are the steadier proxy for CPU when the machine's
				// speed drifts between runs.
				b.ReportMetric(float64(r.cpu.Microseconds())/float64(steps), "cpu-µs/step")
				// How many of the cores were busy: near their number, the CPU
				// bounds the rate; well under it, waits do.
				b.ReportMetric(r.cpu.Seconds()/elapsed.Seconds(), "cores")
				b.ReportMetric(float64(r.allocs)/float64(steps), "allocs/step")
				b.ReportMetric(float64(r.faults)/float64(steps), "faults/step")
				storetest.ReportWritten(b, r.written[0], r.written[1], steps, "written-B/step")
				if sync {
					raw = max(raw, storetest.FdatasyncRate(b, dir, 300))
					b.ReportMetric(raw, "fdatasync/s")
					b.ReportMetric(float64(events)/elapsed.Seconds()/raw, "ratio")
					// The disk with every core busy: context for the ratio and
					// for µs/sync (storetest.FdatasyncRateBusy), not a divisor.
					b.ReportMetric(storetest.FdatasyncRateBusy(b, dir, 300), "fdatasync/s-busy")
					storetest.ReportLogSyncs(b, r.syncs, r.synced, elapsed)
				}
			})
		}
	}
}

// mallocs returns the process's heap allocations so far.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSessionMemory measures heap per idle live Session actor and per
// passivated Session with 10,000 Sessions.
func BenchmarkSessionMemory(b *testing.B) {
	const n = 10_000
	for range b.N {
		h := actortest.New(b, actortest.Options{Config: func(c *actors.Config) { c.IdleTimeout = time.Hour }})
		sids := make([]messages.SessionID, n)
		for i := range sids {
			sids[i] = h.Session()
		}
		base := heap()
		ctx := context.Background()
		for _, sid := range sids {
			if err := h.Runtime.Wake(ctx, sid); err != nil {
				b.Fatal(err)
			}
		}
		for _, sid := range sids {
			// One context for every wait: the harness's per-call contexts
			// would otherwise be counted as Session memory.
			if err := h.Runtime.Wait(ctx, sid); err != nil {
				b.Fatal(err)
			}
		}
		if h.Runtime.Live() != n {
			b.Fatalf("%d live actors", h.Runtime.Live())
		}
		live := heap()
		b.ReportMetric(float64(live-base)/n, "B/live-session")
		// Passivate all by shrinking the timeout through a restart is not
		// possible, so stop them the way passivation does: idle actors are
		// stopped and their bookkeeping removed.
		h2 := actortest.New(b, actortest.Options{Config: func(c *actors.Config) { c.IdleTimeout = time.Millisecond }})
		sids2 := make([]messages.SessionID, n)
		for i := range sids2 {
			sids2[i] = h2.Session()
		}
		base2 := heap()
		for _, sid := range sids2 {
			if err := h2.Runtime.Wake(ctx, sid); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(time.Minute)
		for h2.Runtime.Live() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		passive := heap()
		b.ReportMetric(float64(int64(passive)-int64(base2))/n, "B/passivated-session")
	}
}
