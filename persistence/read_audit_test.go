package persistence

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
)

// TestReadsAfterCloseFailWithErrClosed: once Close has returned, every read
// fails with ErrClosed, as writes and Log tails do. Watermark answered from
// the memtable Close had just flushed, so a Log opened at the head of its
// Session replayed nothing and reported itself synced (and, without
// follow, ended without an error) on a closed store; the other reads
// failed with bbolt's "database not open", which no caller can tell from
// a broken store.
func TestReadsAfterCloseFailWithErrClosed(t *testing.T) {
	ctx := context.Background()
	st, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, st)
	adm := Admission{ID: "msg_closed", SessionID: sid, Prompt: messages.Prompt{Text: "hi"}}
	if _, _, err := st.Admit(ctx, adm); err != nil {
		t.Fatal(err)
	}
	head, err := st.Watermark(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	reads := []struct {
		name string
		read func() error
	}{
		{"Watermark", func() error { _, err := st.Watermark(ctx, sid); return err }},
		{"Get", func() error { _, err := st.Get(ctx, sid); return err }},
		{"List", func() error { _, err := st.List(ctx); return err }},
		{"History", func() error { _, err := st.History(ctx, sid, Query{After: -1}); return err }},
		{"Messages", func() error { _, err := st.Messages(ctx, sid, Query{After: -1}); return err }},
		{"Message", func() error { _, err := st.Message(ctx, sid, adm.ID); return err }},
		{"Pending", func() error { _, err := st.Pending(ctx, sid); return err }},
		{"Input", func() error { _, err := st.Input(ctx, adm.ID); return err }},
		{"Boundary", func() error { _, err := st.Boundary(ctx, sid, -1); return err }},
		{"Checkpoint", func() error { _, _, err := st.Checkpoint(ctx, sid); return err }},
		{"OpenSteps", func() error { _, err := st.OpenSteps(ctx, sid); return err }},
		{"Entries", func() error { _, err := st.Entries(ctx, sid); return err }},
		{"Approved", func() error { _, err := st.Approved(ctx, "/p", "bash", "ls"); return err }},
		{"Approvals", func() error { _, err := st.Approvals(ctx, "/p"); return err }},
		// An exact retry is answered by a read, without the writer.
		{"Admit retry", func() error { _, _, err := st.Admit(ctx, adm); return err }},
	}
	for _, r := range reads {
		if err := r.read(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", r.name, err)
		}
	}
	for _, follow := range []bool{false, true} {
		for _, after := range []int64{-1, head} {
			var items []LogItem
			var errs []error
			for item, err := range st.Log(ctx, sid, after, follow) {
				items, errs = append(items, item), append(errs, err)
			}
			if len(errs) != 1 || !errors.Is(errs[0], ErrClosed) || items[0].Synced != nil || items[0].Event != nil {
				t.Errorf("Log(after=%d, follow=%v) after Close: %d items %+v, errors %v; want only ErrClosed",
					after, follow, len(items), items, errs)
			}
		}
	}
}

// TestLogFollowersAcrossFlushes is regression coverage (no bug found): many
// followers of one Session, starting at different cursors while admissions
// commit through a flush every few KiB, each see every seq after their
// cursor exactly once and one log.synced marker; a follower that stops
// mid-stream leaves no wake state behind.
func TestLogFollowersAcrossFlushes(t *testing.T) {
	ctx := context.Background()
	st, flushes := openFlushing(t)
	sid := newSession(t, st)
	const writers, per, followers = 4, 150, 8
	const total = int64(writers * per)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprint(w, "/", i)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	type result struct {
		seqs   []int64
		synced int
		err    error
	}
	results := make([]result, followers)
	var rg sync.WaitGroup
	for i := range followers {
		rg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			r := &results[i]
			start := int64(i*9) - 1
			for item, err := range st.Log(c, sid, start, true) {
				if err != nil {
					r.err = err
					return
				}
				if item.Synced != nil {
					r.synced++
					continue
				}
				r.seqs = append(r.seqs, item.Event.Durable.Seq)
				// The last follower stops early, mid-stream.
				if seq := item.Event.Durable.Seq; seq == total || (i == followers-1 && seq == start+50) {
					return
				}
			}
			r.err = errors.New("the log ended before the last event")
		})
	}
	wg.Wait()
	rg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("follower %d: %v", i, r.err)
		}
		if r.synced != 1 {
			t.Fatalf("follower %d saw %d synced markers", i, r.synced)
		}
		for j, seq := range r.seqs {
			if want := int64(i*9) + int64(j); seq != want {
				t.Fatalf("follower %d: seq %d at %d, want %d (lost or repeated)", i, seq, j, want)
			}
		}
	}
	if n := st.Tails(); n != 0 {
		t.Fatalf("%d Sessions keep tail state after every follower ended", n)
	}
	if flushes.Load() == 0 {
		t.Fatal("no flush ran while the followers read")
	}
}
