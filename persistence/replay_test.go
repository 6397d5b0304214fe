package persistence_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/persistence/storetest"
)

// TestReplayEquivalence replays the whole log of a store that saw every
// event type into an empty store and checks that every bucket, projections
// included, is byte-for-byte equal.
func TestReplayEquivalence(t *testing.T) {
	ctx := context.Background()
	src := openBolt(t, persistence.Options{})
	storetest.Scenario(t, src)
	storetest.Scenario(t, src) // a second Session shares the global buckets
	sessions, err := src.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dst := openBolt(t, persistence.Options{})
	for _, s := range sessions {
		evs := logEvents(t, src, s.ID)
		// Replay in several commits to exercise cross-commit projector state.
		for len(evs) > 0 {
			n := min(len(evs), 7)
			if err := dst.Restore(ctx, evs[:n]); err != nil {
				t.Fatal(err)
			}
			evs = evs[n:]
		}
	}
	a, err := persistence.Dump(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := persistence.Dump(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("bucket count %d vs %d", len(a), len(b))
	}
	for name, rows := range a {
		if len(rows) != len(b[name]) {
			t.Fatalf("bucket %s: %d rows vs %d after replay", name, len(rows), len(b[name]))
		}
		for k, v := range rows {
			if b[name][k] != v {
				t.Fatalf("bucket %s key %q differs after replay", name, k)
			}
		}
	}
	for _, st := range []*persistence.Bolt{src, dst} {
		if err := persistence.Check(st); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestoreRejectsGaps checks that Restore refuses an event whose seq is
// not the Session's next.
func TestRestoreRejectsGaps(t *testing.T) {
	ctx := context.Background()
	src := openBolt(t, persistence.Options{})
	sid := storetest.Scenario(t, src)
	h, err := src.History(ctx, sid, persistence.Query{After: -1, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	dst := openBolt(t, persistence.Options{})
	if err := dst.Restore(ctx, []messages.Event{h.Data[0], h.Data[2]}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("gap restore: %v", err)
	}
	if _, err := dst.Get(ctx, sid); messages.TypeOf(err) != messages.ErrSessionNotFound {
		t.Fatalf("failed restore left the session behind: %v", err)
	}
}

// openScenarios opens a store in a temporary directory and runs the
// conformance scenario in two Sessions, which it returns.
func openScenarios(t *testing.T) (string, *persistence.Bolt, []messages.SessionID) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // a second Close does nothing
	return path, st, []messages.SessionID{storetest.Scenario(t, st), storetest.Scenario(t, st)}
}

// reopen closes st and opens its file again, to be closed when t ends.
func reopen(t *testing.T, st *persistence.Bolt, path string) *persistence.Bolt {
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSessionRecordsKeepTheirDecodedForm checks the decoded form the
// writer keeps beside each Session record it writes (memEntry.session):
// after every kind of record update (the scenario commits them all) it is
// exactly the record's bytes decoded, and a Session read from it equals
// the same Session read from bbolt after a restart.
func TestSessionRecordsKeepTheirDecodedForm(t *testing.T) {
	ctx := context.Background()
	path, st, sids := openScenarios(t)
	for _, sid := range sids {
		kept, stored, ok := persistence.MemSessionRecord(st, sid)
		if !ok {
			t.Fatalf("Session %s: no record in the memtable", sid)
		}
		var decoded persistence.Session
		if err := messages.Unmarshal(stored, &decoded); err != nil {
			t.Fatal(err)
		}
		if kept == nil || !reflect.DeepEqual(*kept, decoded) {
			t.Errorf("Session %s: kept %+v, its bytes decode to %+v", sid, kept, decoded)
		}
	}
	var before []persistence.Session
	for _, sid := range sids {
		s, err := st.Get(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, s)
	}
	st = reopen(t, st, path)
	for i, sid := range sids {
		s, err := st.Get(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s, before[i]) {
			t.Errorf("Session %s read from bbolt %+v, from the memtable %+v", sid, s, before[i])
		}
	}
	for _, sid := range sids {
		if _, _, ok := persistence.MemSessionRecord(st, sid); ok {
			t.Fatalf("Session %s: a record in the memtable of a reopened store", sid)
		}
	}
}

// TestWatermarkFromTheMemtables: the watermark answered from the memtables
// alone (memLastSeq) is the seq of the Session's last event in the log,
// after every kind of event, and a store whose memtables hold nothing of
// the Session answers from bbolt.
func TestWatermarkFromTheMemtables(t *testing.T) {
	ctx := context.Background()
	path, st, sids := openScenarios(t)
	lastEvent := func(sid messages.SessionID) int64 {
		h, err := st.History(ctx, sid, persistence.Query{After: -1, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		return h.Data[len(h.Data)-1].Seq()
	}
	for _, sid := range sids {
		w, ok := persistence.MemWatermark(st, sid)
		if !ok || w != lastEvent(sid) {
			t.Fatalf("Session %s: memtables answer %d (%v), its last event is %d", sid, w, ok, lastEvent(sid))
		}
	}
	st = reopen(t, st, path)
	for _, sid := range sids {
		if w, ok := persistence.MemWatermark(st, sid); ok {
			t.Fatalf("Session %s: the memtables of a reopened store answer %d", sid, w)
		}
		if w, err := st.Watermark(ctx, sid); err != nil || w != lastEvent(sid) {
			t.Fatalf("Session %s: watermark %d (%v) from bbolt, last event %d", sid, w, err, lastEvent(sid))
		}
	}
	// An older message rewritten in the memtable, with its log row.
	sid := sids[0]
	page, err := st.Messages(ctx, sid, persistence.Query{After: -1, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var asst persistence.Message
	for _, m := range page.Data {
		if m.Role == persistence.RoleAssistant && !m.Open {
			asst = m
		}
	}
	if _, err := st.Append(ctx, sid, &messages.StepStarted{SessionID: sid, AssistantMessageID: asst.ID, Agent: "build", Attempt: 2}); err != nil {
		t.Fatal(err)
	}
	if w, ok := persistence.MemWatermark(st, sid); !ok || w != lastEvent(sid) || w <= asst.Seq {
		t.Fatalf("after reopening message %s (seq %d): memtables answer %d (%v), last event %d", asst.ID, asst.Seq, w, ok, lastEvent(sid))
	}
}

// TestReplayFragmentWithEmptyMetadata checks that a fragment ended with
// empty (not nil) provider metadata projects what its replay projects:
// the event's encoding omits empty metadata, so the live projector must
// treat it as absent too and keep the metadata the fragment started with.
func TestReplayFragmentWithEmptyMetadata(t *testing.T) {
	ctx := context.Background()
	src := openBolt(t, persistence.Options{})
	s, _, err := src.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	asst := messages.MessageID("msg_" + string(s.ID[4:]))
	for _, p := range []messages.Payload{
		&messages.StepStarted{SessionID: s.ID, AssistantMessageID: asst, Agent: "build", Attempt: 1},
		&messages.TextStarted{SessionID: s.ID, AssistantMessageID: asst, ProviderMetadata: json.RawMessage(`{"a":1}`)},
		&messages.TextEnded{SessionID: s.ID, AssistantMessageID: asst, Text: "x", ProviderMetadata: json.RawMessage{}},
	} {
		if _, err := src.Append(ctx, s.ID, p); err != nil {
			t.Fatal(err)
		}
	}
	dst := openBolt(t, persistence.Options{})
	if err := dst.Restore(ctx, logEvents(t, src, s.ID)); err != nil {
		t.Fatal(err)
	}
	live, err := src.Message(ctx, s.ID, asst)
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := dst.Message(ctx, s.ID, asst)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(live, replayed) || string(live.Parts[0].ProviderMetadata) != `{"a":1}` {
		t.Fatalf("live %+v, replayed %+v", live.Parts, replayed.Parts)
	}
}

// logEvents returns a Session's whole log.
func logEvents(t *testing.T, st persistence.Store, sid messages.SessionID) []messages.Event {
	t.Helper()
	var evs []messages.Event
	for item, err := range st.Log(context.Background(), sid, -1, false) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Event != nil {
			evs = append(evs, *item.Event)
		}
	}
	return evs
}

// TestMoveToAnInvalidLocationIsRefused: session.moved.1 is projected only
// with a valid Location (absolute directory), and its directory is kept
// clean; a refused one leaves the store unchanged.
func TestMoveToAnInvalidLocationIsRefused(t *testing.T) {
	st, err := persistence.Open(filepath.Join(t.TempDir(), "s.db"), persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp/a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range []messages.Location{{Directory: "relative"}, {}, {Directory: "/tmp", WorkspaceID: "bad"}, {Directory: "/tmp/a\x00b"}, {Directory: "/tmp/\xff"}} {
		if _, err := st.Append(ctx, s.ID, &messages.SessionMoved{SessionID: s.ID, Location: loc}); messages.TypeOf(err) != messages.ErrInvalid {
			t.Errorf("move to %+v: %v", loc, err)
		}
	}
	if _, err := st.Append(ctx, s.ID, &messages.SessionMoved{SessionID: s.ID, Location: messages.Location{Directory: "/tmp/b/./c/"}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, s.ID)
	if err != nil || got.Location.Directory != "/tmp/b/c" || got.LastSeq != 1 {
		t.Fatalf("after the moves: %+v, %v", got, err)
	}
}

// TestRestoreWakesTheTailsOfEverySession: one Restore can commit events of
// several Sessions, and a Log follower of each is woken, not only of the
// first Session the events name.
func TestRestoreWakesTheTailsOfEverySession(t *testing.T) {
	ctx := context.Background()
	src := openBolt(t, persistence.Options{NoSync: true})
	var evs [2][]messages.Event
	for i := range evs {
		s, _, err := src.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Append(ctx, s.ID, &messages.ExecutionStarted{SessionID: s.ID}); err != nil {
			t.Fatal(err)
		}
		evs[i] = logEvents(t, src, s.ID)
	}
	first, second := evs[0], evs[1]
	dst := openBolt(t, persistence.Options{NoSync: true})
	if err := dst.Restore(ctx, first[:1]); err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(ctx, second[:1]); err != nil {
		t.Fatal(err)
	}
	// Follow the second Session; restore both Sessions' next events once
	// the follower has replayed (and so subscribed).
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	synced := make(chan struct{})
	got := make(chan error, 1)
	go func() {
		for item, err := range dst.Log(c, second[0].Durable.AggregateID, -1, true) {
			switch {
			case err != nil:
				got <- err
				return
			case item.Synced != nil:
				close(synced)
			case item.Event.Durable.Seq == 1:
				got <- nil
				return
			}
		}
		got <- errors.New("log ended before the restored event")
	}()
	<-synced
	if err := dst.Restore(ctx, []messages.Event{first[1], second[1]}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("follower of the second Session: %v", err)
	}
}
