package persistence

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
)

// rawAppend builds an append operation the way Append does, for tests that
// hand batches to the writer's commit directly.
func rawAppend(s *Bolt, sid messages.SessionID, ps ...messages.Payload) *op {
	ids := make([]messages.EventID, len(ps))
	for i := range ids {
		ids[i] = s.opts.IDs.Event()
	}
	return &op{done: make(chan error, 1), fn: func(w *wtx) error {
		last, err := w.lastSeq(sid)
		if err != nil {
			return err
		}
		for i, p := range ps {
			ev := messages.Event{ID: ids[i], Created: 1, Type: p.Type(), Data: p,
				Durable: &messages.Durable{AggregateID: sid, Seq: last + 1 + int64(i), Version: messages.VersionOf(p.Type())}}
			if err := w.apply(ev); err != nil {
				return err
			}
		}
		return nil
	}}
}

// openStep opens a store with a Session whose step is open with tool call
// c1 pending, and returns them with the assistant message ID.
func openStep(t *testing.T) (*Bolt, messages.SessionID, messages.MessageID) {
	t.Helper()
	ctx := context.Background()
	s := openTemp(t, Options{NoSync: true})
	sess, _, err := s.CreateSession(ctx, CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	asst := s.opts.IDs.Message()
	if _, err := s.Append(ctx, sess.ID, &messages.StepStarted{SessionID: sess.ID, AssistantMessageID: asst, Agent: "build", Attempt: 1},
		&messages.ToolInputStarted{SessionID: sess.ID, AssistantMessageID: asst, CallID: "c1", Name: "read"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.open.committed[msgRef{sess.ID, asst}]; !ok {
		t.Fatal("the open step's message is not cached")
	}
	return s, sess.ID, asst
}

// commitBatch has the writer commit ops as one batch: it holds the writer
// in a gate operation while they queue up behind it.
func commitBatch(s *Bolt, ops ...*op) []error {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate := &op{done: make(chan error, 1), fn: func(*wtx) error {
		once.Do(func() { close(started) })
		<-release
		return nil
	}}
	s.ops <- gate
	<-started
	for _, o := range ops {
		s.ops <- o
	}
	close(release)
	<-gate.done
	errs := make([]error, len(ops))
	for i, o := range ops {
		errs[i] = <-o.done
	}
	return errs
}

// TestWriterCachesDropRolledBackStaging: when an operation fails, the batch
// re-runs without it; the operations before it must not see their own
// first run's updates, in the open-message cache or the seq cache.
func TestWriterCachesDropRolledBackStaging(t *testing.T) {
	s, sid, asst := openStep(t)
	a := rawAppend(s, sid, &messages.TextStarted{SessionID: sid, AssistantMessageID: asst, Ordinal: 0})
	bad := rawAppend(s, sid, &messages.ToolSucceeded{SessionID: sid, AssistantMessageID: asst, CallID: "c9"})
	c := rawAppend(s, sid, &messages.TextEnded{SessionID: sid, AssistantMessageID: asst, Ordinal: 0, Text: "hi"})
	errs := commitBatch(s, a, bad, c)
	if errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("batch results %v, want only the middle operation to fail", errs)
	}
	m, err := s.Message(context.Background(), sid, asst)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Parts) != 2 || m.Parts[1].Text != "hi" || !m.Parts[1].Ended {
		t.Fatalf("parts %+v", m.Parts)
	}
	// The re-run numbers its events from the committed last seq, not the
	// one the discarded run had reached.
	h, err := s.History(context.Background(), sid, Query{After: -1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range h.Data {
		if ev.Seq() != int64(i) {
			t.Fatalf("event %d has seq %d", i, ev.Seq())
		}
	}
	if len(h.Data) != 5 {
		t.Fatalf("%d events, want 5", len(h.Data))
	}
}

// TestOpenCacheCopiesArePrivate: a failed operation's in-place updates of
// a cached message never reach the cache.
func TestOpenCacheCopiesArePrivate(t *testing.T) {
	s, sid, asst := openStep(t)
	// Calls c1 (changing its part in place), then fails on c9.
	bad := rawAppend(s, sid,
		&messages.ToolCalled{SessionID: sid, AssistantMessageID: asst, CallID: "c1", Name: "read", Input: json.RawMessage(`{}`)},
		&messages.ToolSucceeded{SessionID: sid, AssistantMessageID: asst, CallID: "c9"})
	if errs := commitBatch(s, bad); errs[0] == nil {
		t.Fatal("the bad operation committed")
	}
	good := rawAppend(s, sid,
		&messages.ToolCalled{SessionID: sid, AssistantMessageID: asst, CallID: "c1", Name: "read", Input: json.RawMessage(`{}`)},
		&messages.ToolSucceeded{SessionID: sid, AssistantMessageID: asst, CallID: "c1", Output: "ok"},
		&messages.StepEnded{SessionID: sid, AssistantMessageID: asst, Finish: "tool-calls"})
	if errs := commitBatch(s, good); errs[0] != nil {
		t.Fatalf("calling c1 after the failed operation: %v", errs[0])
	}
	if len(s.open.committed) != 0 {
		t.Fatalf("a closed step's message stays cached: %v", s.open.committed)
	}
	m, err := s.Message(context.Background(), sid, asst)
	if err != nil {
		t.Fatal(err)
	}
	if m.Open || m.Parts[0].Tool.State != ToolCompleted || m.Parts[0].Tool.Output != "ok" {
		t.Fatalf("message %+v, tool %+v", m, m.Parts[0].Tool)
	}
}

// TestBacklogCountDropsRolledBackStaging: the kept count of pending inputs
// (pendingCount) counts only the admissions of a batch's final run.
func TestBacklogCountDropsRolledBackStaging(t *testing.T) {
	s := openTemp(t, Options{NoSync: true, InboxBacklog: 3})
	ctx := context.Background()
	sid := newSession(t, s)
	admit := func(text string) *op {
		return rawAppend(s, sid, &messages.PromptAdmitted{SessionID: sid, InputID: s.opts.IDs.Message(),
			Prompt: messages.Prompt{Text: text}, Delivery: messages.Queue})
	}
	bad := rawAppend(s, sid, &messages.PromptPromoted{SessionID: sid, InputID: "msg_nosuchinput"})
	if errs := commitBatch(s, admit("a"), bad, admit("b")); errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("batch results %v, want only the middle operation to fail", errs)
	}
	if _, _, err := s.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "c"}}); err != nil {
		t.Fatalf("third pending input: %v", err)
	}
	if _, _, err := s.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "d"}}); messages.TypeOf(err) != messages.ErrInboxFull {
		t.Fatalf("fourth pending input: %v, want %s", err, messages.ErrInboxFull)
	}
}

// TestWriterCachesAgeAtFlushes: the writer's per-Session seqs and pending
// counts keep only the Sessions written since the flush before last, so a
// daemon that has written to many Sessions does not keep one value of each
// forever; a Session forgotten this way is read back from the store, its
// seqs continuing and its backlog still counted.
func TestWriterCachesAgeAtFlushes(t *testing.T) {
	flushes := new(atomic.Int64)
	s := openTemp(t, Options{NoSync: true, InboxBacklog: 2, FlushBytes: 16 << 10,
		OnFlush: func(int, time.Duration) { flushes.Add(1) }})
	ctx := context.Background()
	admit := func(sid messages.SessionID, text string) error {
		_, _, err := s.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: text}})
		return err
	}
	const many = 300
	sids := make([]messages.SessionID, many)
	for i := range sids {
		sids[i] = newSession(t, s)
		if err := admit(sids[i], "first"); err != nil {
			t.Fatal(err)
		}
	}
	full := sids[0]
	if err := admit(full, "second"); err != nil {
		t.Fatal(err)
	}
	// Another Session's writes, until two flushes have started after the
	// admissions above: each start ages the caches once. One flush runs at
	// a time, so of three more completed, at most one started before.
	hot := newSession(t, s)
	started := flushes.Load()
	for i := 0; flushes.Load() < started+3; i++ {
		if i == 100_000 {
			t.Fatal("no flushes")
		}
		if _, err := s.Commit(ctx, hot, &messages.ExecutionStarted{SessionID: hot}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.Watermark(ctx, sids[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := admit(sids[1], "again"); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Watermark(ctx, sids[1]); err != nil || w != before+1 {
		t.Fatalf("watermark after re-reading the seq: %d %v, want %d", w, err, before+1)
	}
	if err := admit(full, "third"); messages.TypeOf(err) != messages.ErrInboxFull {
		t.Fatalf("a third pending input after the count was forgotten: %v, want %s", err, messages.ErrInboxFull)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed, the writer has stopped: its caches can be read.
	if n := s.seqs.len(); n > 10 {
		t.Fatalf("the writer still keeps the last seqs of %d Sessions", n)
	}
	if n := s.pend.len(); n > 10 {
		t.Fatalf("the writer still keeps the pending counts of %d Sessions", n)
	}
}

// TestWriterCacheGenerations: a value outlives one age, one written since
// outlives the next, one only read does not, and a value a commit drops
// is gone from both generations.
func TestWriterCacheGenerations(t *testing.T) {
	var c writerCache[string, int]
	put := func(k string, v int) { c.begin(); c.stage(k, v); c.commit(func(v int) bool { return v >= 0 }) }
	put("written", 1)
	put("read", 2)
	put("dropped", 3)
	c.age()
	for k, want := range map[string]int{"written": 1, "read": 2, "dropped": 3} {
		if v, ok := c.get(k); !ok || v != want {
			t.Fatalf("%s after one age: %d %v", k, v, ok)
		}
	}
	put("written", 4)
	put("dropped", -1)
	if _, ok := c.get("dropped"); ok {
		t.Fatal("a dropped value is still read from the older generation")
	}
	c.age()
	if v, ok := c.get("written"); !ok || v != 4 {
		t.Fatalf("written since the first age: %d %v", v, ok)
	}
	if _, ok := c.get("read"); ok || c.len() != 1 {
		t.Fatalf("a value only read outlived two ages (%d kept)", c.len())
	}
}
