package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/persistence/storetest"
)

// percentile returns the q-quantile of sorted durations.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// BenchmarkAdmissionsHTTP measures prompt admissions per second over HTTP:
// 64 keep-alive clients on a loopback listener, a store with fsync on, one
// Session per client. admit-only sends resume=false (the durable admission
// alone); admit+wake also wakes the Session, whose runner then commits its
// own events into the same store. Reported: admissions/s, latency p50/p99,
// the raw fdatasync rate of the disk (storetest.FdatasyncRate) and their
// ratio.
func BenchmarkAdmissionsHTTP(b *testing.B) {
	for _, mode := range []struct {
		name   string
		resume bool
	}{{"admit-only", false}, {"admit+wake", true}} {
		b.Run(mode.name, func(b *testing.B) {
			const clients = 64
			be := storeBackend(b, persistence.Options{})
			be.model.Default(script.Text("ok"))
			e := newEnv(b, be, nil)
			sids := make([]messages.SessionID, clients)
			for i := range sids {
				sids[i] = e.createSession()
			}
			limit := storetest.FdatasyncRate(b, filepath.Dir(be.store.Path()), 300)
			bodies := make([][]byte, clients)
			for i := range bodies {
				bodies[i], _ = json.Marshal(map[string]any{"prompt": map[string]string{"text": "benchmark prompt"}, "resume": mode.resume})
			}
			tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			lat := make([][]time.Duration, clients)
			var next atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for c := range clients {
				wg.Go(func() {
					url := e.base + "/api/session/" + string(sids[c]) + "/prompt"
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[c]))
						if err != nil {
							failed.Add(1)
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							failed.Add(1)
						}
						lat[c] = append(lat[c], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d admissions failed", n)
			}
			all := slices.Concat(lat...)
			slices.Sort(all)
			rate := float64(b.N) / elapsed.Seconds()
			b.ReportMetric(rate, "admissions/s")
			b.ReportMetric(float64(percentile(all, 0.50).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(percentile(all, 0.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(limit, "fdatasync/s")
			b.ReportMetric(rate/limit, "admissions/fdatasync")
		})
	}
}

// BenchmarkSSEFanout measures one busy Session's durable log delivered to
// 100 followers over HTTP (GET /log?follow=true). b.N prompts are admitted
// one after another while the runner answers each; every follower reads
// until the final watermark. Reported: events/s delivered (all followers),
// events/s committed, the delivery ratio (delivered / (followers ×
// committed), 1 when no follower falls behind) and lag p50/p99 from commit
// (the event's created time) to receipt. The store runs without fsync so
// the figure is the tail and HTTP path, not the disk.
func BenchmarkSSEFanout(b *testing.B) {
	const followers = 100
	be := storeBackend(b, persistence.Options{NoSync: true})
	be.model.Default(script.Text("a streamed answer of a few words"))
	be.model.SetRecord(false) // a recorded request holds the whole transcript: O(turns²) here
	e := newEnv(b, be, nil)
	sid := e.createSession()
	tr := &http.Transport{MaxIdleConnsPerHost: followers + 8}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	// Each prompt is a full turn (about 5 ms here): the deadline grows
	// with b.N, so a long -benchtime does not run out of it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*actortest.Timeout+time.Duration(b.N)*50*time.Millisecond)
	defer cancel()

	type follower struct {
		events int
		lags   []time.Duration
		last   atomic.Int64 // last seq received
		err    error
	}
	fs := make([]follower, followers)
	var ready, wg sync.WaitGroup
	for i := range fs {
		f := &fs[i]
		f.last.Store(-1)
		ready.Add(1)
		wg.Go(func() {
			synced := false
			defer func() {
				if !synced {
					ready.Done()
				}
			}()
			req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/api/session/"+string(sid)+"/log?follow=true", nil)
			resp, err := client.Do(req)
			if err != nil {
				f.err = err
				return
			}
			defer resp.Body.Close()
			rd := bufio.NewReaderSize(resp.Body, 64<<10)
			for {
				line, err := rd.ReadSlice('\n')
				if err != nil {
					if ctx.Err() == nil {
						f.err = err
					}
					return
				}
				data, ok := bytes.CutPrefix(line, []byte("data: "))
				if !ok {
					continue
				}
				if !synced {
					if bytes.Contains(data, []byte(`"log.synced"`)) {
						synced = true
						ready.Done()
					}
					continue
				}
				var ev struct {
					Created int64 `json:"created"`
					Durable struct {
						Seq int64 `json:"seq"`
					} `json:"durable"`
				}
				if err := json.Unmarshal(data, &ev); err != nil {
					f.err = err
					return
				}
				f.lags = append(f.lags, time.Since(time.UnixMilli(ev.Created)))
				f.events++
				f.last.Store(ev.Durable.Seq)
			}
		})
	}
	ready.Wait()
	start0, err := be.store.Watermark(ctx, sid)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		r := e.do("POST", "/api/session/"+string(sid)+"/prompt",
			map[string]any{"prompt": map[string]string{"text": fmt.Sprintf("prompt %d", i)}, "delivery": "queue"})
		if r.status != http.StatusOK {
			b.Fatalf("prompt: %d %s", r.status, r.body)
		}
	}
	e.waitIdle(sid)
	w, err := be.store.Watermark(ctx, sid)
	if err != nil {
		b.Fatal(err)
	}
	eventually(b, "every follower at the watermark", func() bool {
		for i := range fs {
			if fs[i].last.Load() < w {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	wg.Wait()
	committed := w - start0
	delivered := 0
	var lags []time.Duration
	for i := range fs {
		if fs[i].err != nil {
			b.Fatalf("follower %d: %v", i, fs[i].err)
		}
		delivered += fs[i].events
		lags = append(lags, fs[i].lags...)
	}
	slices.Sort(lags)
	b.ReportMetric(float64(delivered)/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(float64(committed)/elapsed.Seconds(), "committed/s")
	b.ReportMetric(float64(delivered)/float64(followers)/float64(committed), "delivery-ratio")
	b.ReportMetric(float64(percentile(lags, 0.50).Microseconds())/1000, "lag-p50-ms")
	b.ReportMetric(float64(percentile(lags, 0.99).Microseconds())/1000, "lag-p99-ms")
}
