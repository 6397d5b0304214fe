package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// Factory opens a fresh, empty store for one subtest and arranges its
// Close with t.Cleanup. The suite relies on the store honouring these
// fields of opts: Clock (the events' Created and IDs' time), PromptBytes
// and InboxBacklog (the admission limits).
type Factory func(t *testing.T, opts persistence.Options) persistence.Store

// Run runs the conformance suite against stores made by open.
func Run(t *testing.T, open Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"CreateGeneratedSuppliedReuse", testCreate},
		{"CreateBadInput", testCreateBadInput},
		{"ListInCreationOrder", testListOrder},
		{"SessionUpdatedAtItsLastEvent", testSessionUpdated},
		{"AdmitIdempotent", testAdmitIdempotent},
		{"AdmitConcurrentRetries", testAdmitConcurrentRetries},
		{"AdmitConflicts", testAdmitConflicts},
		{"AdmitBadInputLeavesStoreUnchanged", testAdmitBadInput},
		{"AdmitBacklog", testAdmitBacklog},
		{"AdmitPromptAtTheLimit", testAdmitPromptAtTheLimit},
		{"AdmitConflictOnDroppedFiles", testAdmitConflictOnDroppedFiles},
		{"MessageIDsUniqueAcrossSessionsAndMessages", testIDsUnique},
		{"PendingOrderAndPromotion", testPendingAndPromotion},
		{"InputNotFound", testInputNotFound},
		{"PromotionRaceCommitsOnce", testPromotionRace},
		{"AppendSeqDense", testAppendSeqDense},
		{"MissingSessionBesideAnotherHasNoLog", testMissingSessionBesideAnother},
		{"ProjectorErrorRollsBack", testProjectorRollback},
		{"StepInvariants", testStepInvariants},
		{"ToolInputEndsOnlyWhileStreaming", testToolInputEnded},
		{"ToolCalledOnceWithoutInput", testToolCalledOnceWithoutInput},
		{"RetryClearedByTerminalsAndSteps", testRetryCleared},
		{"StepStartedReopensItsMessage", testStepReopens},
		{"FragmentOrdinalsCountPerKind", testFragmentOrdinals},
		{"CompactionSettlesOnlyWhileRunning", testCompactionSettlesOnlyWhileRunning},
		{"CompactionBarrierCoalesces", testCompactionBarrier},
		{"CompactionBarrierCoalescesBehindPrompts", testCompactionBarrierBehindPrompts},
		{"RolledBackSettlementLeavesTheCompactionRunning", testRolledBackSettlement},
		{"HistoryPaging", testHistoryPaging},
		{"MessagesPaging", testMessagesPaging},
		{"LogReplaySynced", testLogReplay},
		{"LogFollowRace", testLogFollowRace},
		{"LogSyncedAtSeqZero", testLogSyncedAtSeqZero},
		{"LogAndHistoryCursorsBelowZero", testCursorsBelowZero},
		{"LogReplayEndsAtItsWatermark", testLogReplayEndsAtItsWatermark},
		{"LogFollowerReadsALongCommit", testLogFollowerReadsALongCommit},
		{"LogFollowerGetsACommitMadeDuringReplay", testLogFollowerGetsACommitMadeDuringReplay},
		{"LogFollowerEndsWithItsContext", testLogFollowerEndsWithItsContext},
		{"ScenarioProjections", testScenarioProjections},
		{"OpenSteps", testOpenSteps},
		{"BoundaryIsOneSnapshotOfTheReads", testBoundary},
		{"CommitReturnsWhatItProjected", testCommit},
		{"EntriesAndApprovals", testEntriesApprovals},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

var ctx = context.Background()

func loc() messages.Location { return messages.Location{Directory: "/tmp/project"} }

func newSession(t *testing.T, st persistence.Store) messages.SessionID {
	t.Helper()
	s, created, err := st.CreateSession(ctx, persistence.CreateSession{Location: loc()})
	must(t, err)
	if !created {
		t.Fatal("new session not created")
	}
	return s.ID
}

func wantType(t *testing.T, err error, typ messages.ErrorType) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got nil", typ)
	}
	if got := messages.TypeOf(err); got != typ {
		t.Fatalf("want error %s, got %s (%v)", typ, got, err)
	}
}

func testCreate(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	a, created, err := st.CreateSession(ctx, persistence.CreateSession{Location: loc(), Title: "t"})
	must(t, err)
	if !created || !strings.HasPrefix(string(a.ID), "ses_") || a.LastSeq != 0 {
		t.Fatalf("generated session: %+v created=%v", a, created)
	}
	b, created, err := st.CreateSession(ctx, persistence.CreateSession{ID: "ses_fixed", Location: loc(), Title: "first"})
	must(t, err)
	if !created || b.ID != "ses_fixed" {
		t.Fatalf("supplied: %+v %v", b, created)
	}
	c, created, err := st.CreateSession(ctx, persistence.CreateSession{ID: "ses_fixed", Location: messages.Location{Directory: "/other"}, Title: "second"})
	must(t, err)
	if created || c.Title != "first" || c.Location != loc() || c.Created != b.Created {
		t.Fatalf("reuse returned %+v created=%v", c, created)
	}
	got, err := st.Get(ctx, "ses_fixed")
	must(t, err)
	if got.ID != "ses_fixed" || got.Title != "first" {
		t.Fatalf("get: %+v", got)
	}
	list, err := st.List(ctx)
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("list: %d sessions", len(list))
	}
	_, err = st.Get(ctx, "ses_missing")
	wantType(t, err, messages.ErrSessionNotFound)
	h, err := st.History(ctx, "ses_fixed", persistence.Query{After: -1})
	must(t, err)
	if len(h.Data) != 1 || h.Data[0].Type != messages.TypeSessionCreated {
		t.Fatalf("history after reuse: %+v", h.Data)
	}
}

// testListOrder: List orders by creation time, whatever the IDs, and
// Sessions created in the same millisecond by ID.
func testListOrder(t *testing.T, open Factory) {
	var now atomic.Int64
	now.Store(1000)
	st := open(t, persistence.Options{Clock: func() time.Time { return time.UnixMilli(now.Load()) }})
	create := func(id messages.SessionID, at int64) messages.SessionID {
		now.Store(at)
		s, _, err := st.CreateSession(ctx, persistence.CreateSession{ID: id, Location: loc()})
		must(t, err)
		return s.ID
	}
	want := []messages.SessionID{create("ses_zeta", 1000), create("ses_alpha", 2000), create("", 3000), create("ses_beta", 3000)}
	list, err := st.List(ctx)
	must(t, err)
	var got []messages.SessionID
	for _, s := range list {
		got = append(got, s.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("list order %v, want %v", got, want)
	}
}

// testSessionUpdated: a Session's Updated is the time of its last event
// and LastSeq that event's seq, wherever the Session is read: Get, List,
// and CreateSession reusing its ID.
func testSessionUpdated(t *testing.T, open Factory) {
	var now atomic.Int64
	now.Store(1000)
	st := open(t, persistence.Options{Clock: func() time.Time { return time.UnixMilli(now.Load()) }})
	sid := newSession(t, st)
	now.Store(2000)
	_, err := st.Append(ctx, sid, &messages.ExecutionStarted{SessionID: sid})
	must(t, err)
	now.Store(3000)
	got, err := st.Get(ctx, sid)
	must(t, err)
	list, err := st.List(ctx)
	must(t, err)
	reused, created, err := st.CreateSession(ctx, persistence.CreateSession{ID: sid, Location: loc()})
	must(t, err)
	for name, s := range map[string]persistence.Session{"get": got, "list": list[0], "reuse": reused} {
		if s.Created != 1000 || s.Updated != 2000 || s.LastSeq != 1 {
			t.Fatalf("%s: created %d, updated %d, last seq %d; want 1000, 2000, 1", name, s.Created, s.Updated, s.LastSeq)
		}
	}
	if created {
		t.Fatal("reuse created a session")
	}
}

func testCreateBadInput(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	for _, req := range []persistence.CreateSession{
		{ID: "bad", Location: loc()},
		{ID: "ses_", Location: loc()},
		{ID: "ses_a b", Location: loc()},
		{ID: messages.SessionID("ses_" + strings.Repeat("x", 65)), Location: loc()},
		{Location: messages.Location{}},
		{Location: messages.Location{Directory: "relative"}},
		{Location: messages.Location{Directory: "/tmp/a\x00b"}},
		{Location: messages.Location{Directory: "/tmp/\xff"}},
	} {
		_, _, err := st.CreateSession(ctx, req)
		wantType(t, err, messages.ErrInvalid)
	}
	list, err := st.List(ctx)
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("bad creates left %d sessions", len(list))
	}
}

func testAdmitIdempotent(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	gen, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "hi"}})
	must(t, err)
	if !strings.HasPrefix(string(gen.ID), "msg_") || gen.Delivery != messages.DefaultDelivery || gen.AdmittedSeq != 1 {
		t.Fatalf("generated receipt %+v", gen)
	}
	req := persistence.Admission{ID: "msg_one", SessionID: sid, Prompt: messages.Prompt{Text: "hello"}, Delivery: messages.Queue}
	a, created, err := st.Admit(ctx, req)
	must(t, err)
	b, again, err := st.Admit(ctx, req)
	must(t, err)
	if !created || again {
		t.Fatalf("created flags %v then %v, want true then false", created, again)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("exact reuse receipts differ:\n%+v\n%+v", a, b)
	}
	// An empty attachment list is no attachments, on the first receipt too.
	noFiles := persistence.Admission{ID: "msg_nofiles", SessionID: sid, Prompt: messages.Prompt{Text: "x", Files: []messages.File{}}}
	c, _, err := st.Admit(ctx, noFiles)
	must(t, err)
	d, _, err := st.Admit(ctx, noFiles)
	must(t, err)
	if !reflect.DeepEqual(c, d) {
		t.Fatalf("exact reuse receipts differ:\n%#v\n%#v", c.Prompt, d.Prompt)
	}
	w, err := st.Watermark(ctx, sid)
	must(t, err)
	if w != 3 {
		t.Fatalf("watermark %d after three admissions and two retries, want 3", w)
	}
	// The facade schedules a wake on every exact retry unless resume=false,
	// and reports that a retry created nothing.
	no, yes := false, true
	for _, tc := range []struct {
		resume *bool
		wake   bool
	}{{nil, true}, {&no, false}, {&yes, true}} {
		res, err := persistence.Prompt(ctx, st, persistence.PromptRequest{ID: req.ID, SessionID: sid, Prompt: req.Prompt, Delivery: req.Delivery, Resume: tc.resume})
		must(t, err)
		if res.Wake != tc.wake || res.Created || !reflect.DeepEqual(res.Admitted, a) {
			t.Fatalf("prompt resume=%v: %+v", tc.resume, res)
		}
	}
}

func testAdmitConcurrentRetries(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	req := persistence.Admission{ID: "msg_race", SessionID: sid, Prompt: messages.Prompt{Text: "same"}}
	const n = 20
	receipts := make([]persistence.Admitted, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			receipts[i], _, errs[i] = st.Admit(ctx, req)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		must(t, errs[i])
		if !reflect.DeepEqual(receipts[i], receipts[0]) {
			t.Fatalf("receipt %d differs: %+v vs %+v", i, receipts[i], receipts[0])
		}
	}
	rows, err := st.Pending(ctx, sid)
	must(t, err)
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	h, err := st.History(ctx, sid, persistence.Query{After: -1, Limit: 100})
	must(t, err)
	admitted := 0
	for _, ev := range h.Data {
		if ev.Type == messages.TypePromptAdmitted {
			admitted++
		}
	}
	if admitted != 1 {
		t.Fatalf("%d admitted events, want 1", admitted)
	}
}

func testAdmitConflicts(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	other := newSession(t, st)
	base := persistence.Admission{ID: "msg_c", SessionID: sid, Prompt: messages.Prompt{Text: "x"}, Delivery: messages.Steer}
	_, _, err := st.Admit(ctx, base)
	must(t, err)
	for name, req := range map[string]persistence.Admission{
		"text":     {ID: base.ID, SessionID: sid, Prompt: messages.Prompt{Text: "y"}, Delivery: messages.Steer},
		"delivery": {ID: base.ID, SessionID: sid, Prompt: base.Prompt, Delivery: messages.Queue},
		"session":  {ID: base.ID, SessionID: other, Prompt: base.Prompt, Delivery: messages.Steer},
		"files":    {ID: base.ID, SessionID: sid, Prompt: messages.Prompt{Text: "x", Files: []messages.File{{Mime: "a/b", URL: "u"}}}},
	} {
		_, _, err := st.Admit(ctx, req)
		if messages.TypeOf(err) != messages.ErrPromptConflict {
			t.Fatalf("%s: want conflict, got %v", name, err)
		}
	}
	for _, s := range []messages.SessionID{sid, other} {
		rows, err := st.Pending(ctx, s)
		must(t, err)
		if want := map[messages.SessionID]int{sid: 1, other: 0}[s]; len(rows) != want {
			t.Fatalf("session %s: %d rows, want %d", s, len(rows), want)
		}
	}
}

func testAdmitBadInput(t *testing.T, open Factory) {
	st := open(t, persistence.Options{PromptBytes: 16})
	sid := newSession(t, st)
	before, err := st.History(ctx, sid, persistence.Query{After: -1})
	must(t, err)
	cases := []struct {
		name string
		req  persistence.Admission
		typ  messages.ErrorType
	}{
		{"empty", persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "  "}}, messages.ErrInvalid},
		{"oversized", persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: strings.Repeat("a", 17)}}, messages.ErrTooLarge},
		{"delivery", persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "a"}, Delivery: "later"}, messages.ErrInvalid},
		{"unknown session", persistence.Admission{SessionID: "ses_nope", Prompt: messages.Prompt{Text: "a"}}, messages.ErrSessionNotFound},
		{"malformed session", persistence.Admission{SessionID: "nope", Prompt: messages.Prompt{Text: "a"}}, messages.ErrInvalid},
		{"malformed id", persistence.Admission{ID: "ses_wrongprefix", SessionID: sid, Prompt: messages.Prompt{Text: "a"}}, messages.ErrInvalid},
		{"bad utf8", persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "\xff"}}, messages.ErrInvalid},
		{"bad file", persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "a", Files: []messages.File{{URL: "x"}}}}, messages.ErrInvalid},
		{"blank file url", persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Files: []messages.File{{Mime: "text/plain", URL: " "}}}}, messages.ErrInvalid},
		{"blank file mime", persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "a", Files: []messages.File{{Mime: "\t", URL: "file:///a"}}}}, messages.ErrInvalid},
	}
	for _, tc := range cases {
		_, _, err := st.Admit(ctx, tc.req)
		if messages.TypeOf(err) != tc.typ {
			t.Fatalf("%s: want %s, got %v", tc.name, tc.typ, err)
		}
	}
	after, err := st.History(ctx, sid, persistence.Query{After: -1})
	must(t, err)
	rows, err := st.Pending(ctx, sid)
	must(t, err)
	if len(after.Data) != len(before.Data) || len(rows) != 0 {
		t.Fatalf("bad input changed the store: %d -> %d events, %d rows", len(before.Data), len(after.Data), len(rows))
	}
}

// testAdmitPromptAtTheLimit: PromptBytes is the largest text admitted, not
// the first refused, so a prompt of exactly that size is admitted.
func testAdmitPromptAtTheLimit(t *testing.T, open Factory) {
	st := open(t, persistence.Options{PromptBytes: 16})
	sid := newSession(t, st)
	_, created, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: strings.Repeat("a", 16)}})
	must(t, err)
	if !created {
		t.Fatal("a prompt of exactly PromptBytes was not admitted")
	}
}

// testAdmitConflictOnDroppedFiles: a retry that drops the attachments of an
// admitted prompt is another prompt, a conflict, even with the same text;
// a retry with the same attachments is an exact reuse.
func testAdmitConflictOnDroppedFiles(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	files := []messages.File{{Mime: "text/plain", URL: "file:///a.txt"}}
	req := persistence.Admission{ID: "msg_files", SessionID: sid, Prompt: messages.Prompt{Text: "x", Files: files}}
	a, _, err := st.Admit(ctx, req)
	must(t, err)
	b, created, err := st.Admit(ctx, req)
	must(t, err)
	if created || !reflect.DeepEqual(a, b) {
		t.Fatalf("exact reuse with files: created=%v\n%+v\n%+v", created, a, b)
	}
	_, _, err = st.Admit(ctx, persistence.Admission{ID: req.ID, SessionID: sid, Prompt: messages.Prompt{Text: "x"}})
	wantType(t, err, messages.ErrPromptConflict)
}

func testAdmitBacklog(t *testing.T, open Factory) {
	st := open(t, persistence.Options{InboxBacklog: 2})
	sid := newSession(t, st)
	for i := range 2 {
		_, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprint(i)}})
		must(t, err)
	}
	_, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "3"}})
	wantType(t, err, messages.ErrInboxFull)
	w, err := st.Watermark(ctx, sid)
	must(t, err)
	if w != 2 {
		t.Fatalf("watermark %d after a refused admission, want 2", w)
	}
	// Another Session has its own backlog.
	_, _, err = st.Admit(ctx, persistence.Admission{SessionID: newSession(t, st), Prompt: messages.Prompt{Text: "elsewhere"}})
	must(t, err)
	// Promoting a row frees its slot, once; a refused admission took none.
	rows, err := st.Pending(ctx, sid)
	must(t, err)
	_, err = st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: rows[0].ID})
	must(t, err)
	_, err = st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: rows[0].ID})
	wantType(t, err, messages.ErrInputPromoted)
	_, _, err = st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "4"}})
	must(t, err)
	_, _, err = st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "5"}})
	wantType(t, err, messages.ErrInboxFull)
}

func testIDsUnique(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	a, b := newSession(t, st), newSession(t, st)
	_, err := st.Append(ctx, a, &messages.StepStarted{SessionID: a, AssistantMessageID: "msg_asst", Attempt: 1})
	must(t, err)
	_, _, err = st.Admit(ctx, persistence.Admission{ID: "msg_asst", SessionID: a, Prompt: messages.Prompt{Text: "x"}})
	wantType(t, err, messages.ErrPromptConflict)
	_, err = st.Append(ctx, b, &messages.StepStarted{SessionID: b, AssistantMessageID: "msg_asst", Attempt: 1})
	wantType(t, err, messages.ErrPromptConflict)
	_, _, err = st.Admit(ctx, persistence.Admission{ID: "msg_in", SessionID: a, Prompt: messages.Prompt{Text: "x"}})
	must(t, err)
	_, err = st.Append(ctx, b, &messages.StepStarted{SessionID: b, AssistantMessageID: "msg_in", Attempt: 1})
	wantType(t, err, messages.ErrPromptConflict)
	// A prompt for a Session that does not exist is refused as such, not
	// as a conflict with the ID it reuses (an input's or a message's).
	for _, id := range []messages.MessageID{"msg_in", "msg_asst"} {
		_, _, err = st.Admit(ctx, persistence.Admission{ID: id, SessionID: "ses_missing", Prompt: messages.Prompt{Text: "x"}})
		wantType(t, err, messages.ErrSessionNotFound)
	}
}

func testPendingAndPromotion(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	var ids []messages.MessageID
	var receipts []persistence.Admitted
	for i, d := range []messages.Delivery{messages.Queue, messages.Steer, messages.Queue, messages.Steer} {
		r, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprint(i)}, Delivery: d})
		must(t, err)
		ids = append(ids, r.ID)
		receipts = append(receipts, r)
	}
	rows, err := st.Pending(ctx, sid)
	must(t, err)
	var got []messages.MessageID
	for i, r := range rows {
		got = append(got, r.ID)
		if i > 0 && r.AdmittedSeq <= rows[i-1].AdmittedSeq {
			t.Fatal("pending rows not in admission order")
		}
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("pending %v, want %v", got, ids)
	}
	evs, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: ids[1]})
	must(t, err)
	in, err := st.Input(ctx, ids[1])
	must(t, err)
	if in.PromotedSeq == nil || *in.PromotedSeq != evs[0].Durable.Seq {
		t.Fatalf("promoted row %+v", in)
	}
	m, err := st.Message(ctx, sid, ids[1])
	must(t, err)
	if m.Role != persistence.RoleUser || m.Seq != evs[0].Durable.Seq || m.Prompt.Text != "1" {
		t.Fatalf("user message %+v", m)
	}
	rows, err = st.Pending(ctx, sid)
	must(t, err)
	if len(rows) != 3 {
		t.Fatalf("%d pending after one promotion", len(rows))
	}
	// Exact retry after promotion returns the same receipt as before it.
	r, _, err := st.Admit(ctx, persistence.Admission{ID: ids[1], SessionID: sid, Prompt: messages.Prompt{Text: "1"}, Delivery: messages.Steer})
	must(t, err)
	if !reflect.DeepEqual(r, receipts[1]) {
		t.Fatalf("receipt after promotion %+v, want %+v", r, receipts[1])
	}
	// Unknown input and other Session's input cannot be promoted.
	_, err = st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: "msg_nope"})
	wantType(t, err, messages.ErrNotFound)
	other := newSession(t, st)
	theirs, _, err := st.Admit(ctx, persistence.Admission{SessionID: other, Prompt: messages.Prompt{Text: "theirs"}})
	must(t, err)
	before, err := st.Watermark(ctx, sid)
	must(t, err)
	_, err = st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: theirs.ID})
	wantType(t, err, messages.ErrNotFound)
	if w, err := st.Watermark(ctx, sid); err != nil || w != before {
		t.Fatalf("watermark %d (%v) after a refused promotion, want %d", w, err, before)
	}
	if in, err := st.Input(ctx, theirs.ID); err != nil || in.SessionID != other || in.PromotedSeq != nil {
		t.Fatalf("the other Session's input after a refused promotion: %+v, %v", in, err)
	}
	if rows, err := st.Pending(ctx, other); err != nil || len(rows) != 1 || rows[0].ID != theirs.ID {
		t.Fatalf("the other Session's pending rows %+v, %v; want %s", rows, err, theirs.ID)
	}
	_, err = st.Message(ctx, sid, theirs.ID)
	wantType(t, err, messages.ErrNotFound)
}

// testInputNotFound: Input of an ID no admission used is not-found, not an
// empty row.
func testInputNotFound(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	_, err := st.Input(ctx, "msg_never")
	wantType(t, err, messages.ErrNotFound)
}

func testPromotionRace(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	r, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "x"}})
	must(t, err)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: r.ID})
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch messages.TypeOf(err) {
		case messages.ErrUnknown:
			if err == nil {
				ok++
				continue
			}
			t.Fatalf("unexpected error %v", err)
		case messages.ErrInputPromoted:
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d promotions committed, want 1", ok)
	}
	page, err := st.Messages(ctx, sid, persistence.Query{After: -1})
	must(t, err)
	if len(page.Data) != 1 {
		t.Fatalf("%d messages, want 1", len(page.Data))
	}
}

func testAppendSeqDense(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sids := []messages.SessionID{newSession(t, st), newSession(t, st)}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			sid := sids[g%2]
			for range 10 {
				if _, err := st.Append(ctx, sid, &messages.ExecutionStarted{SessionID: sid}, &messages.ExecutionSucceeded{SessionID: sid}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, sid := range sids {
		h, err := st.History(ctx, sid, persistence.Query{After: -1, Limit: 1000})
		must(t, err)
		if len(h.Data) != 161 {
			t.Fatalf("%d events, want 161", len(h.Data))
		}
		for i, ev := range h.Data {
			if ev.Durable.Seq != int64(i) || ev.Durable.AggregateID != sid || ev.Durable.Version != 1 {
				t.Fatalf("event %d has durable %+v", i, ev.Durable)
			}
			// A call's events are consecutive.
			if i > 0 && ev.Type == messages.TypeExecutionSucceeded && h.Data[i-1].Type != messages.TypeExecutionStarted {
				t.Fatalf("append batch split at seq %d", i)
			}
		}
	}
}

// testMissingSessionBesideAnother: a Session that does not exist has no
// log, whatever the Sessions whose IDs sort next to it hold; here the
// Session before it has an ID nine characters longer, so its rows have the
// length the missing Session's log rows would have.
func testMissingSessionBesideAnother(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	_, _, err := st.CreateSession(ctx, persistence.CreateSession{ID: "ses_0123456789", Location: loc()})
	must(t, err)
	const missing = messages.SessionID("ses_a")
	_, err = st.Watermark(ctx, missing)
	wantType(t, err, messages.ErrSessionNotFound)
	_, err = st.Append(ctx, missing, &messages.ExecutionStarted{SessionID: missing})
	wantType(t, err, messages.ErrSessionNotFound)
	_, _, err = st.Admit(ctx, persistence.Admission{SessionID: missing, Prompt: messages.Prompt{Text: "x"}})
	wantType(t, err, messages.ErrSessionNotFound)
}

func testProjectorRollback(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	// The second event is invalid (text on an unknown message): the first
	// must not commit either.
	_, err := st.Append(ctx, sid,
		&messages.ExecutionStarted{SessionID: sid},
		&messages.TextStarted{SessionID: sid, AssistantMessageID: "msg_ghost"})
	wantType(t, err, messages.ErrNotFound)
	w, err := st.Watermark(ctx, sid)
	must(t, err)
	if w != 0 {
		t.Fatalf("watermark %d after rolled-back append", w)
	}
	for _, p := range []messages.Payload{
		&messages.SessionCreated{SessionID: sid},
		&messages.TextDelta{SessionID: sid},
		&messages.ExecutionStarted{SessionID: "ses_other"},
	} {
		_, err := st.Append(ctx, sid, p)
		wantType(t, err, messages.ErrInvalid)
	}
	_, err = st.Append(ctx, "ses_missing", &messages.ExecutionStarted{SessionID: "ses_missing"})
	wantType(t, err, messages.ErrSessionNotFound)
}

// appender opens a store with a new Session and returns a function that
// appends one event to that Session's log.
func appender(t *testing.T, open Factory) (persistence.Store, messages.SessionID, func(messages.Payload) error) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	return st, sid, func(p messages.Payload) error { _, err := st.Append(ctx, sid, p); return err }
}

func testStepInvariants(t *testing.T, open Factory) {
	st, sid, app := appender(t, open)
	m := messages.MessageID("msg_a")
	must(t, app(&messages.StepStarted{SessionID: sid, AssistantMessageID: m, Attempt: 1}))
	wantType(t, app(&messages.StepStarted{SessionID: sid, AssistantMessageID: m, Attempt: 2}), messages.ErrInvalid)
	must(t, app(&messages.TextStarted{SessionID: sid, AssistantMessageID: m, Ordinal: 0}))
	// A second open fragment of one kind, or a wrong ordinal, is refused.
	wantType(t, app(&messages.TextStarted{SessionID: sid, AssistantMessageID: m, Ordinal: 1}), messages.ErrInvalid)
	must(t, app(&messages.TextEnded{SessionID: sid, AssistantMessageID: m, Ordinal: 0, Text: "a"}))
	wantType(t, app(&messages.TextStarted{SessionID: sid, AssistantMessageID: m, Ordinal: 0}), messages.ErrInvalid)
	must(t, app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: m, CallID: "c1", Name: "bash", Input: []byte(`{}`)}))
	wantType(t, app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: m, CallID: "c1", Name: "bash", Input: []byte(`{}`)}), messages.ErrAlreadyPublished)
	// Settlement first: the step cannot end while c1 runs.
	wantType(t, app(&messages.StepEnded{SessionID: sid, AssistantMessageID: m, Finish: "stop"}), messages.ErrInvalid)
	must(t, app(&messages.ToolFailed{SessionID: sid, AssistantMessageID: m, CallID: "c1", Error: messages.Error{Type: messages.ErrAborted, Message: "x"}}))
	wantType(t, app(&messages.ToolSucceeded{SessionID: sid, AssistantMessageID: m, CallID: "c1"}), messages.ErrAlreadyPublished)
	// Nor while a fragment is open.
	must(t, app(&messages.ReasoningStarted{SessionID: sid, AssistantMessageID: m, Ordinal: 0}))
	wantType(t, app(&messages.StepFailed{SessionID: sid, AssistantMessageID: m, Error: messages.Error{Type: messages.ErrAborted}}), messages.ErrInvalid)
	must(t, app(&messages.ReasoningEnded{SessionID: sid, AssistantMessageID: m, Ordinal: 0, Text: "r"}))
	must(t, app(&messages.StepFailed{SessionID: sid, AssistantMessageID: m, Error: messages.Error{Type: messages.ErrAborted}}))
	// Exactly one terminal per step, and nothing of the step after it.
	wantType(t, app(&messages.StepEnded{SessionID: sid, AssistantMessageID: m}), messages.ErrInvalid)
	wantType(t, app(&messages.TextEnded{SessionID: sid, AssistantMessageID: m, Ordinal: 0, Text: "late"}), messages.ErrInvalid)
	// callID is unique only within its assistant message.
	m2 := messages.MessageID("msg_b")
	must(t, app(&messages.StepStarted{SessionID: sid, AssistantMessageID: m2, Attempt: 1}))
	must(t, app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: m2, CallID: "c1", Name: "read", Input: []byte(`{}`)}))
	must(t, app(&messages.ToolSucceeded{SessionID: sid, AssistantMessageID: m2, CallID: "c1", Output: "ok"}))
	must(t, app(&messages.StepEnded{SessionID: sid, AssistantMessageID: m2, Finish: "tool-calls"}))
	a, err := st.Message(ctx, sid, m)
	must(t, err)
	b, err := st.Message(ctx, sid, m2)
	must(t, err)
	if a.Parts[1].Tool.State != persistence.ToolError || b.Parts[0].Tool.State != persistence.ToolCompleted {
		t.Fatalf("tool states %+v %+v", a.Parts[1].Tool, b.Parts[0].Tool)
	}
}

// testToolInputEnded: a tool's streamed input ends only while the call is
// pending (started and not yet called); an unknown call, or one already
// called, is refused and leaves the call as it was.
func testToolInputEnded(t *testing.T, open Factory) {
	st, sid, app := appender(t, open)
	m := messages.MessageID("msg_in")
	must(t, app(&messages.StepStarted{SessionID: sid, AssistantMessageID: m, Attempt: 1}))
	wantType(t, app(&messages.ToolInputEnded{SessionID: sid, AssistantMessageID: m, CallID: "nope", Text: "{}"}), messages.ErrInvalid)
	must(t, app(&messages.ToolInputStarted{SessionID: sid, AssistantMessageID: m, CallID: "c", Name: "read"}))
	must(t, app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: m, CallID: "c", Name: "read", Input: []byte(`{"a":1}`)}))
	wantType(t, app(&messages.ToolInputEnded{SessionID: sid, AssistantMessageID: m, CallID: "c", Text: "late"}), messages.ErrInvalid)
	got, err := st.Message(ctx, sid, m)
	must(t, err)
	if len(got.Parts) != 1 || got.Parts[0].Tool.InputText != "" {
		t.Fatalf("parts after refused input ends: %+v", got.Parts)
	}
}

// testToolCalledOnceWithoutInput: a call is published once even when its
// input is empty; a second session.tool.called.1 for it is refused.
func testToolCalledOnceWithoutInput(t *testing.T, open Factory) {
	_, sid, app := appender(t, open)
	m := messages.MessageID("msg_noin")
	must(t, app(&messages.StepStarted{SessionID: sid, AssistantMessageID: m, Attempt: 1}))
	must(t, app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: m, CallID: "c", Name: "now"}))
	wantType(t, app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: m, CallID: "c", Name: "again"}), messages.ErrAlreadyPublished)
}

// testRetryCleared: a scheduled retry is live UI state (SEED.md): the next
// step started, of any message, or a terminal of the busy period clears it,
// and a failed step clears only its own message's retry.
func testRetryCleared(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	a, b := messages.MessageID("msg_ra"), messages.MessageID("msg_rb")
	app := func(ps ...messages.Payload) { t.Helper(); _, err := st.Append(ctx, sid, ps...); must(t, err) }
	failed := messages.Error{Type: messages.ErrProviderRateLimit, Message: "slow down"}
	schedule := func(attempt int) {
		t.Helper()
		app(&messages.StepStarted{SessionID: sid, AssistantMessageID: a, Attempt: attempt},
			&messages.StepFailed{SessionID: sid, AssistantMessageID: a, Error: failed},
			&messages.RetryScheduled{SessionID: sid, AssistantMessageID: a, Attempt: attempt + 1, At: 1, Error: failed})
	}
	retry := func(when string, want bool) {
		t.Helper()
		m, err := st.Message(ctx, sid, a)
		must(t, err)
		if (m.Retry != nil) != want {
			t.Fatalf("%s: retry %+v, want live=%v", when, m.Retry, want)
		}
	}
	schedule(1)
	retry("scheduled", true)
	app(&messages.ExecutionInterrupted{SessionID: sid, Reason: messages.ReasonUser})
	retry("after an interruption", false)

	schedule(2)
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: b, Attempt: 1})
	retry("after another message's step started", false)

	app(&messages.RetryScheduled{SessionID: sid, AssistantMessageID: a, Attempt: 4, At: 2, Error: failed})
	app(&messages.StepFailed{SessionID: sid, AssistantMessageID: b, Error: failed})
	retry("after another message's step failed", true)
	app(&messages.ExecutionFailed{SessionID: sid, Error: failed})
	retry("after the busy period failed", false)

	// A retry scheduled for another message replaces the live one, whose
	// projection would otherwise outlive every step start after it.
	app(&messages.RetryScheduled{SessionID: sid, AssistantMessageID: a, Attempt: 5, At: 3, Error: failed})
	app(&messages.RetryScheduled{SessionID: sid, AssistantMessageID: b, Attempt: 2, At: 4, Error: failed})
	retry("after a retry of another message", false)
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: "msg_rc", Attempt: 1})
	if m, err := st.Message(ctx, sid, b); err != nil || m.Retry != nil {
		t.Fatalf("after a step started: retry of %s %+v (%v), want none", b, m.Retry, err)
	}
}

// testStepReopens: a repeated session.step.started.1 reopens the same
// assistant message (SEED.md: retry attempts reuse one message ID), in an
// operation of its own and with no retry scheduled: the step is open again,
// counts the attempt and drops the failed attempt's error.
func testStepReopens(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	a := messages.MessageID("msg_again")
	app := func(ps ...messages.Payload) { t.Helper(); _, err := st.Append(ctx, sid, ps...); must(t, err) }
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: a, Attempt: 1})
	app(&messages.StepFailed{SessionID: sid, AssistantMessageID: a, Error: messages.Error{Type: messages.ErrProviderInternal, Message: "x"}})
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: a, Attempt: 2})
	m, err := st.Message(ctx, sid, a)
	must(t, err)
	if !m.Open || m.Attempts != 2 || m.Error != nil {
		t.Fatalf("reopened message %+v", m)
	}
	steps, err := st.OpenSteps(ctx, sid)
	must(t, err)
	if len(steps) != 1 || steps[0].ID != a {
		t.Fatalf("open steps %+v", steps)
	}
}

// testCompactionSettlesOnlyWhileRunning: a compaction starts only from a
// queued barrier (or as a new automatic row) and is settled once, while it
// runs; any other start or settlement is refused, not projected.
func testCompactionSettlesOnlyWhileRunning(t *testing.T, open Factory) {
	st, sid, app := appender(t, open)
	failed := messages.Error{Type: messages.ErrCompactionFailed, Message: "no"}
	barrier, _, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	// Settling a barrier that has not started.
	wantType(t, app(&messages.CompactionFailed{SessionID: sid, Reason: messages.CompactionManual, InputID: barrier.ID, Error: failed}), messages.ErrInvalid)
	must(t, app(&messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionManual, InputID: barrier.ID}))
	// Starting it twice.
	wantType(t, app(&messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionManual, InputID: barrier.ID}), messages.ErrInvalid)
	auto := messages.MessageID("msg_auto")
	must(t, app(&messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionAuto, InputID: auto}))
	must(t, app(&messages.CompactionEnded{SessionID: sid, Reason: messages.CompactionAuto, InputID: auto, Text: "s"}))
	// Settling or restarting a settled automatic compaction.
	wantType(t, app(&messages.CompactionFailed{SessionID: sid, Reason: messages.CompactionAuto, InputID: auto, Error: failed}), messages.ErrInvalid)
	wantType(t, app(&messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionAuto, InputID: auto}), messages.ErrInvalid)
	// Settling an unknown row, or starting one that is not a compaction.
	wantType(t, app(&messages.CompactionEnded{SessionID: sid, Reason: messages.CompactionAuto, InputID: "msg_unknown", Text: "s"}), messages.ErrInvalid)
	must(t, app(&messages.StepStarted{SessionID: sid, AssistantMessageID: "msg_step", Attempt: 1}))
	wantType(t, app(&messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionAuto, InputID: "msg_step"}), messages.ErrInvalid)
	m, err := st.Message(ctx, sid, auto)
	must(t, err)
	if m.Compaction.State != persistence.CompactionCompleted || m.Compaction.Error != nil {
		t.Fatalf("settled automatic compaction %+v", m.Compaction)
	}
}

// testFragmentOrdinals: text and reasoning fragments are numbered per kind,
// so interleaved kinds each count from zero and a second fragment of a kind
// takes ordinal 1.
func testFragmentOrdinals(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	m := messages.MessageID("msg_frag")
	app := func(ps ...messages.Payload) { t.Helper(); _, err := st.Append(ctx, sid, ps...); must(t, err) }
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: m, Attempt: 1})
	for ord := range 2 {
		app(&messages.ReasoningStarted{SessionID: sid, AssistantMessageID: m, Ordinal: ord},
			&messages.ReasoningEnded{SessionID: sid, AssistantMessageID: m, Ordinal: ord, Text: "r"})
		app(&messages.TextStarted{SessionID: sid, AssistantMessageID: m, Ordinal: ord},
			&messages.TextEnded{SessionID: sid, AssistantMessageID: m, Ordinal: ord, Text: "t"})
	}
	app(&messages.StepEnded{SessionID: sid, AssistantMessageID: m, Finish: "stop"})
	got, err := st.Message(ctx, sid, m)
	must(t, err)
	var parts []string
	for _, p := range got.Parts {
		parts = append(parts, fmt.Sprintf("%s%d", p.Kind, p.Ordinal))
	}
	if want := []string{"reasoning0", "text0", "reasoning1", "text1"}; !slices.Equal(parts, want) {
		t.Fatalf("parts %v, want %v", parts, want)
	}
}

func testCompactionBarrier(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	a, created, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	b, created2, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	if !created || created2 || a.ID != b.ID || a.Kind != persistence.InputCompaction {
		t.Fatalf("barrier not coalesced: %+v %v / %+v %v", a, created, b, created2)
	}
	m, err := st.Message(ctx, sid, a.ID)
	must(t, err)
	if m.Compaction == nil || m.Compaction.State != persistence.CompactionQueued {
		t.Fatalf("queued row %+v", m)
	}
	_, err = st.Append(ctx, sid, &messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionManual, InputID: a.ID})
	must(t, err)
	// A request while it runs coalesces into it: it is running here.
	r, created, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	if created || r.ID != a.ID {
		t.Fatalf("a request during the running compaction made a new barrier: %+v", r)
	}
	_, err = st.Append(ctx, sid, &messages.CompactionEnded{SessionID: sid, Reason: messages.CompactionManual, InputID: a.ID, Text: "s"})
	must(t, err)
	rows, err := st.Pending(ctx, sid)
	must(t, err)
	if len(rows) != 0 {
		t.Fatalf("barrier still pending after ended: %+v", rows)
	}
	c, created, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	if !created || c.ID == a.ID {
		t.Fatal("a settled barrier must not absorb a new request")
	}
	_, _, err = st.AdmitCompaction(ctx, "ses_missing")
	wantType(t, err, messages.ErrSessionNotFound)
}

// testCompactionBarrierBehindPrompts: a request coalesces into the pending
// barrier whatever inbox rows were admitted before it; prompts waiting
// ahead of the barrier do not hide it.
func testCompactionBarrierBehindPrompts(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	_, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "before"}})
	must(t, err)
	a, _, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	b, created, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	if created || b.ID != a.ID {
		t.Fatalf("a second request behind a pending prompt made a new barrier: %+v created=%v, want %s", b, created, a.ID)
	}
}

// testRolledBackSettlement: a compaction's settlement that rolls back (here
// with an invalid event committed beside it) leaves the compaction
// running, so a request still coalesces into its barrier.
func testRolledBackSettlement(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	a, _, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	_, err = st.Append(ctx, sid, &messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionManual, InputID: a.ID})
	must(t, err)
	_, err = st.Append(ctx, sid, &messages.CompactionEnded{SessionID: sid, Reason: messages.CompactionManual, InputID: a.ID, Text: "s"},
		&messages.TextStarted{SessionID: sid, AssistantMessageID: "msg_ghost"})
	wantType(t, err, messages.ErrNotFound)
	b, created, err := st.AdmitCompaction(ctx, sid)
	must(t, err)
	if created || b.ID != a.ID {
		t.Fatalf("a request after the rolled-back settlement made barrier %s (created=%v), want %s", b.ID, created, a.ID)
	}
}

func appendN(t *testing.T, st persistence.Store, sid messages.SessionID, n int) {
	t.Helper()
	for i := 0; i < n; i += 2 {
		_, err := st.Append(ctx, sid, &messages.ExecutionStarted{SessionID: sid}, &messages.ExecutionSucceeded{SessionID: sid})
		must(t, err)
	}
}

func testHistoryPaging(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	appendN(t, st, sid, 120) // seqs 0..120
	var seqs []int64
	after := int64(-1)
	for pages := 0; ; pages++ {
		p, err := st.History(ctx, sid, persistence.Query{After: after, Limit: 50})
		must(t, err)
		for _, ev := range p.Data {
			seqs = append(seqs, ev.Durable.Seq)
		}
		if !p.HasMore {
			if pages != 2 || len(p.Data) != 21 {
				t.Fatalf("last page %d has %d events", pages, len(p.Data))
			}
			break
		}
		after = p.Data[len(p.Data)-1].Durable.Seq
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("seq %d at %d", s, i)
		}
	}
	p, err := st.History(ctx, sid, persistence.Query{After: 120})
	must(t, err)
	if len(p.Data) != 0 || p.HasMore {
		t.Fatalf("after the head: %+v", p)
	}
	p, err = st.History(ctx, sid, persistence.Query{After: 119, Limit: 1})
	must(t, err)
	if len(p.Data) != 1 || p.HasMore {
		t.Fatalf("exact last page: %d events hasMore=%v", len(p.Data), p.HasMore)
	}
	_, err = st.History(ctx, "ses_missing", persistence.Query{After: -1})
	wantType(t, err, messages.ErrSessionNotFound)
}

func testMessagesPaging(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	for i := range 5 {
		r, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprint(i)}})
		must(t, err)
		_, err = st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: r.ID})
		must(t, err)
	}
	p, err := st.Messages(ctx, sid, persistence.Query{After: -1, Limit: 3})
	must(t, err)
	if len(p.Data) != 3 || !p.HasMore {
		t.Fatalf("first page %d hasMore=%v", len(p.Data), p.HasMore)
	}
	p2, err := st.Messages(ctx, sid, persistence.Query{After: p.Data[2].Seq, Limit: 3})
	must(t, err)
	if len(p2.Data) != 2 || p2.HasMore || p2.Data[0].Prompt.Text != "3" {
		t.Fatalf("second page %+v", p2)
	}
}

// collect drains a finite Log.
func collect(t *testing.T, st persistence.Store, sid messages.SessionID, after int64) ([]int64, *messages.Synced) {
	t.Helper()
	var seqs []int64
	var synced *messages.Synced
	for item, err := range st.Log(ctx, sid, after, false) {
		must(t, err)
		if item.Synced != nil {
			if synced != nil {
				t.Fatal("two synced markers")
			}
			synced = item.Synced
			continue
		}
		if synced != nil {
			t.Fatal("event after synced without follow")
		}
		seqs = append(seqs, item.Event.Durable.Seq)
	}
	return seqs, synced
}

func testLogReplay(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	appendN(t, st, sid, 1200)
	seqs, synced := collect(t, st, sid, -1)
	if len(seqs) != 1201 || synced == nil || synced.Seq == nil || *synced.Seq != 1200 || synced.Type != messages.TypeLogSynced {
		t.Fatalf("replay %d events, synced %+v", len(seqs), synced)
	}
	seqs, synced = collect(t, st, sid, 1200)
	if len(seqs) != 0 || synced == nil || *synced.Seq != 1200 {
		t.Fatalf("replay from head: %v %+v", seqs, synced)
	}
	seqs, _ = collect(t, st, sid, 1000)
	if len(seqs) != 200 || seqs[0] != 1001 {
		t.Fatalf("replay after 1000: %d from %v", len(seqs), seqs[:1])
	}
	// The log of a missing Session is its one error, not an empty log.
	items := 0
	for _, err := range st.Log(ctx, "ses_missing", -1, false) {
		items++
		wantType(t, err, messages.ErrSessionNotFound)
	}
	if items != 1 {
		t.Fatalf("log of a missing session yielded %d items, want its one error", items)
	}
}

func testLogFollowRace(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	appendN(t, st, sid, 100)
	const writers, per = 4, 50
	total := int64(100 + writers*per*2)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range per {
				if _, err := st.Append(ctx, sid, &messages.ExecutionStarted{SessionID: sid}, &messages.ExecutionSucceeded{SessionID: sid}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// Several followers subscribe while the writers run.
	type result struct {
		seqs   []int64
		synced *int64
		err    error
	}
	results := make([]result, 6)
	var rg sync.WaitGroup
	for i := range results {
		rg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			r := &results[i]
			for item, err := range st.Log(c, sid, int64(i*10)-1, true) {
				if err != nil {
					r.err = err
					return
				}
				if item.Synced != nil {
					r.synced = item.Synced.Seq
					continue
				}
				r.seqs = append(r.seqs, item.Event.Durable.Seq)
				if item.Event.Durable.Seq == total {
					return
				}
			}
			r.err = errors.New("log ended before the last event")
		})
	}
	wg.Wait()
	rg.Wait()
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("follower %d: %v", i, r.err)
		}
		start := int64(i * 10)
		if int64(len(r.seqs)) != total-start+1 {
			t.Fatalf("follower %d got %d events, want %d", i, len(r.seqs), total-start+1)
		}
		for j, s := range r.seqs {
			if s != start+int64(j) {
				t.Fatalf("follower %d: seq %d at %d (lost or repeated)", i, s, j)
			}
		}
		if r.synced == nil {
			t.Fatalf("follower %d saw no synced marker", i)
		}
	}
	if n := tailCount(st); n >= 0 && n != 0 {
		t.Fatalf("%d tails remain after followers ended", n)
	}
}

// testLogSyncedAtSeqZero: a Session whose log holds only session.created.1
// has a non-empty watermark, seq 0, and its synced marker carries it.
func testLogSyncedAtSeqZero(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	seqs, synced := collect(t, st, sid, -1)
	if len(seqs) != 1 || synced == nil || synced.Seq == nil || *synced.Seq != 0 {
		t.Fatalf("log of a new session: %v, synced %+v", seqs, synced)
	}
}

// testCursorsBelowZero: an after of 0 excludes seq 0, and any after below
// -1 reads like -1, from seq 0, in Log, History, Messages and Boundary
// alike.
func testCursorsBelowZero(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	appendN(t, st, sid, 2) // seqs 0..2
	for _, tc := range []struct {
		after int64
		first int64
	}{{0, 1}, {-1, 0}, {-5, 0}} {
		seqs, _ := collect(t, st, sid, tc.after)
		if len(seqs) != int(3-tc.first) || seqs[0] != tc.first {
			t.Fatalf("log after %d: %v, want seqs %d..2", tc.after, seqs, tc.first)
		}
		h, err := st.History(ctx, sid, persistence.Query{After: tc.after})
		must(t, err)
		if len(h.Data) != int(3-tc.first) || h.Data[0].Durable.Seq != tc.first {
			t.Fatalf("history after %d: %d events from %+v, want seqs %d..2", tc.after, len(h.Data), h.Data[0].Durable, tc.first)
		}
	}
	// Messages too: the first message, at seq 1, is after -1 and below.
	other := newSession(t, st)
	_, err := st.Append(ctx, other, &messages.StepStarted{SessionID: other, AssistantMessageID: "msg_first", Attempt: 1})
	must(t, err)
	for _, after := range []int64{-1, -5} {
		p, err := st.Messages(ctx, other, persistence.Query{After: after})
		must(t, err)
		if len(p.Data) != 1 || p.Data[0].Seq != 1 {
			t.Fatalf("messages after %d: %+v, want the one at seq 1", after, p.Data)
		}
		b, err := st.Boundary(ctx, other, after)
		must(t, err)
		if len(b.Messages) != 1 || b.Messages[0].Seq != 1 {
			t.Fatalf("boundary after %d: %+v, want the message at seq 1", after, b.Messages)
		}
	}
}

// testLogReplayEndsAtItsWatermark: replay stops at the watermark captured
// when the log opened, however it pages: events committed during replay
// (here by the consumer itself, while it reads the first events) never
// come before the synced marker, and a log that does not follow ends there.
func testLogReplayEndsAtItsWatermark(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	appendN(t, st, sid, 600) // seqs 0..600
	var seqs []int64
	var synced *messages.Synced
	for item, err := range st.Log(ctx, sid, -1, false) {
		must(t, err)
		if item.Synced != nil {
			synced = item.Synced
			continue
		}
		seqs = append(seqs, item.Event.Durable.Seq)
		if item.Event.Durable.Seq == 100 {
			appendN(t, st, sid, 10)
		}
	}
	if synced == nil || synced.Seq == nil || *synced.Seq != 600 {
		t.Fatalf("synced %+v, want seq 600", synced)
	}
	if len(seqs) != 601 || seqs[600] != 600 {
		t.Fatalf("replayed %d events up to %d, want 0..600", len(seqs), seqs[len(seqs)-1])
	}
}

// testLogFollowerGetsACommitMadeDuringReplay: a follower subscribes
// before it captures the watermark it replays to (DESIGN.md §4, SEED.md
// sessions.log), so a commit made while it replays, and never followed by
// another, is delivered after log.synced. A follower that subscribed
// after its replay would have missed that commit's signal and wait for
// the next commit.
func testLogFollowerGetsACommitMadeDuringReplay(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	appendN(t, st, sid, 10) // seqs 0..10
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seqs []int64
	var synced *messages.Synced
	for item, err := range st.Log(c, sid, -1, true) {
		must(t, err)
		if item.Synced != nil {
			synced = item.Synced
			continue
		}
		seq := item.Event.Durable.Seq
		seqs = append(seqs, seq)
		if seq == 5 {
			appendN(t, st, sid, 1) // seqs 11 and 12, above the captured watermark
		}
		if seq == 11 {
			break
		}
	}
	if synced == nil || synced.Seq == nil || *synced.Seq != 10 {
		t.Fatalf("synced %+v, want seq 10 (the watermark captured before the replay)", synced)
	}
	if len(seqs) != 12 || seqs[11] != 11 {
		t.Fatalf("follower got %v, want 0..11: the commit made during the replay never reached the tail", seqs)
	}
}

// testLogFollowerReadsALongCommit: one commit of more events than a
// follower reads at once reaches the follower whole, on the one signal it
// raised.
func testLogFollowerReadsALongCommit(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	const n = 1200
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	synced := make(chan struct{})
	last := make(chan int64, 1)
	go func() {
		seq := int64(-1)
		defer func() { last <- seq }()
		for item, err := range st.Log(c, sid, -1, true) {
			if err != nil {
				return
			}
			if item.Synced != nil {
				close(synced)
				continue
			}
			seq = item.Event.Durable.Seq
			if seq == n {
				return
			}
		}
	}()
	select {
	case <-synced:
	case got := <-last:
		t.Fatalf("log ended at seq %d before its synced marker", got)
	}
	ps := make([]messages.Payload, n)
	for i := range ps {
		ps[i] = &messages.ExecutionStarted{SessionID: sid}
	}
	_, err := st.Append(ctx, sid, ps...)
	must(t, err)
	if got := <-last; got != n {
		t.Fatalf("follower stopped at seq %d, want %d", got, n)
	}
}

// testLogFollowerEndsWithItsContext: a follower that has caught up with a
// commit ends when its context is cancelled, and leaves no tail behind.
func testLogFollowerEndsWithItsContext(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	synced, read := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for item, err := range st.Log(c, sid, -1, true) {
			switch {
			case err != nil:
				done <- err
				return
			case item.Synced != nil:
				close(synced)
			case item.Event.Durable.Seq == 1:
				close(read)
			}
		}
		done <- nil
	}()
	wait := func(ch chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case err := <-done:
			t.Fatalf("log ended early: %v", err)
		}
	}
	wait(synced)
	_, err := st.Append(ctx, sid, &messages.ExecutionStarted{SessionID: sid})
	must(t, err)
	wait(read)
	cancel()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not end with its context")
	}
	if n := tailCount(st); n > 0 {
		t.Fatalf("%d tails remain after the follower ended", n)
	}
}

// tailCount reports active tails when the store exposes them, else -1.
func tailCount(st persistence.Store) int {
	if c, ok := st.(interface{ Tails() int }); ok {
		return c.Tails()
	}
	return -1
}

func testScenarioProjections(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := Scenario(t, st)
	s, err := st.Get(ctx, sid)
	must(t, err)
	if s.Agent != "plan" || s.Model.ID != "other" || s.Location.Directory != "/tmp/elsewhere" ||
		s.Tokens.Input != 11 || s.Tokens.Cache.Read != 3 || s.Cost != 0.25 {
		t.Fatalf("session record %+v", s)
	}
	if _, ok, err := st.Checkpoint(ctx, sid); err != nil || ok {
		t.Fatalf("move must reset the checkpoint (ok=%v err=%v)", ok, err)
	}
	page, err := st.Messages(ctx, sid, persistence.Query{After: -1, Limit: 100})
	must(t, err)
	var roles []string
	for _, m := range page.Data {
		roles = append(roles, m.Role)
	}
	want := []string{"compaction", "user", "assistant", "system", "compaction", "user", "assistant"}
	if !slices.Equal(roles, want) {
		t.Fatalf("roles %v, want %v", roles, want)
	}
	a := page.Data[2]
	if a.Attempts != 2 || a.Retry != nil || a.Error != nil || a.Finish != "tool-calls" || len(a.Parts) != 4 || a.Open {
		t.Fatalf("assistant %+v", a)
	}
	hosted := a.Parts[3].Tool
	if string(hosted.CallMetadata) != `{"signature":"sig"}` || string(hosted.ResultMetadata) != `{"r":1}` {
		t.Fatalf("hosted tool metadata %+v", hosted)
	}
	if c := page.Data[0].Compaction; c.State != persistence.CompactionCompleted || c.Summary == "" {
		t.Fatalf("manual compaction row %+v", c)
	}
	if c := page.Data[4].Compaction; c.State != persistence.CompactionFailed || c.Reason != messages.CompactionAuto {
		t.Fatalf("auto compaction row %+v", c)
	}
	rows, err := st.Pending(ctx, sid)
	must(t, err)
	if len(rows) != 0 {
		t.Fatalf("pending after scenario: %+v", rows)
	}
	h, err := st.History(ctx, sid, persistence.Query{After: -1, Limit: 100})
	must(t, err)
	seen := map[string]bool{}
	for _, ev := range h.Data {
		seen[ev.Type] = true
	}
	for _, typ := range messages.DurableTypes() {
		if !seen[typ] {
			t.Errorf("scenario does not cover %s", typ)
		}
	}
}

func testOpenSteps(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	_, err := st.Append(ctx, sid, &messages.StepStarted{SessionID: sid, AssistantMessageID: "msg_o1", Attempt: 1},
		&messages.ToolCalled{SessionID: sid, AssistantMessageID: "msg_o1", CallID: "c", Name: "bash", Input: []byte(`{}`)})
	must(t, err)
	steps, err := st.OpenSteps(ctx, sid)
	must(t, err)
	if len(steps) != 1 || steps[0].ID != "msg_o1" || steps[0].Parts[0].Tool.State != persistence.ToolRunning {
		t.Fatalf("open steps %+v", steps)
	}
	_, err = st.Append(ctx, sid, &messages.ToolFailed{SessionID: sid, AssistantMessageID: "msg_o1", CallID: "c", Error: messages.Error{Type: messages.ErrAborted}},
		&messages.StepFailed{SessionID: sid, AssistantMessageID: "msg_o1", Error: messages.Error{Type: messages.ErrAborted}})
	must(t, err)
	steps, err = st.OpenSteps(ctx, sid)
	must(t, err)
	if len(steps) != 0 {
		t.Fatalf("closed step still open: %+v", steps)
	}
}

func testEntriesApprovals(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	must(t, st.PutEntry(ctx, sid, "style", "be brief"))
	must(t, st.PutEntry(ctx, sid, "lang", "go"))
	e, err := st.Entries(ctx, sid)
	must(t, err)
	if len(e) != 2 || e["style"] != "be brief" {
		t.Fatalf("entries %v", e)
	}
	must(t, st.DeleteEntry(ctx, sid, "style"))
	wantType(t, st.DeleteEntry(ctx, sid, "style"), messages.ErrNotFound)
	wantType(t, st.PutEntry(ctx, "ses_missing", "k", "v"), messages.ErrSessionNotFound)
	wantType(t, st.DeleteEntry(ctx, "ses_missing", "k"), messages.ErrSessionNotFound)
	_, err = st.Entries(ctx, "ses_missing")
	wantType(t, err, messages.ErrSessionNotFound)
	wantType(t, st.PutEntry(ctx, sid, "", "v"), messages.ErrInvalid)
	// Keys are counted in characters: 200 of two bytes each are one too.
	must(t, st.PutEntry(ctx, sid, strings.Repeat("é", 200), "v"))
	wantType(t, st.PutEntry(ctx, sid, strings.Repeat("é", 201), "v"), messages.ErrInvalid)
	must(t, st.DeleteEntry(ctx, sid, strings.Repeat("é", 200)))
	must(t, st.SaveApproval(ctx, "/p", "bash", []string{"ls *", "git status"}))
	ok, err := st.Approved(ctx, "/p", "bash", "git status")
	must(t, err)
	no, err := st.Approved(ctx, "/other", "bash", "git status")
	must(t, err)
	if !ok || no {
		t.Fatalf("approved %v in project, %v elsewhere", ok, no)
	}
	all, err := st.Approvals(ctx, "/p")
	must(t, err)
	if len(all["bash"]) != 2 {
		t.Fatalf("approvals %v", all)
	}
}

// testBoundary: a step-boundary read returns what Get, Pending, Checkpoint
// and Messages return separately, and only the messages after its cursor.
func testBoundary(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := Scenario(t, st)
	_, err := st.Append(ctx, sid, &messages.InstructionsBaselined{SessionID: sid, Text: "base", Applied: map[string]string{"k": "v"}})
	must(t, err)
	_, _, err = st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "later"}, Delivery: messages.Queue})
	must(t, err)
	b, err := st.Boundary(ctx, sid, -1)
	must(t, err)
	s, err := st.Get(ctx, sid)
	must(t, err)
	s.LastSeq, s.Updated = 0, 0
	if !reflect.DeepEqual(b.Session, s) {
		t.Fatalf("boundary session %+v, Get %+v", b.Session, s)
	}
	pending, err := st.Pending(ctx, sid)
	must(t, err)
	if len(pending) != 1 || !reflect.DeepEqual(b.Pending, pending) {
		t.Fatalf("boundary pending %+v, Pending %+v", b.Pending, pending)
	}
	cp, ok, err := st.Checkpoint(ctx, sid)
	must(t, err)
	if !ok || b.Checkpoint == nil || !reflect.DeepEqual(*b.Checkpoint, cp) {
		t.Fatalf("boundary checkpoint %+v, Checkpoint %+v", b.Checkpoint, cp)
	}
	page, err := st.Messages(ctx, sid, persistence.Query{After: -1, Limit: 100})
	must(t, err)
	if !reflect.DeepEqual(b.Messages, page.Data) {
		t.Fatalf("boundary has %d messages, Messages %d", len(b.Messages), len(page.Data))
	}
	if w, err := st.Watermark(ctx, sid); err != nil || b.Seq != w {
		t.Fatalf("boundary seq %d, watermark %d (%v)", b.Seq, w, err)
	}
	after := page.Data[3].Seq
	later, err := st.Boundary(ctx, sid, after)
	must(t, err)
	if !reflect.DeepEqual(later.Messages, page.Data[4:]) {
		t.Fatalf("boundary after %d: %d messages, want %d", after, len(later.Messages), len(page.Data)-4)
	}
	if _, err := st.Boundary(ctx, "ses_nosuchsession00000000000", -1); messages.TypeOf(err) != messages.ErrSessionNotFound {
		t.Fatalf("unknown session: %v", err)
	}
}

// testCommit: Commit returns the events Append would, every message the
// commit created or changed exactly as a read returns it afterwards, and
// the Session record as a boundary read returns it when the commit changed
// it; what it returns is the caller's to change.
func testCommit(t *testing.T, open Factory) {
	st := open(t, persistence.Options{})
	sid := newSession(t, st)
	in, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "go"}})
	must(t, err)
	asst := messages.MessageID("msg_commit_asst")
	steps := [][]messages.Payload{
		{&messages.ExecutionStarted{SessionID: sid}, &messages.PromptPromoted{SessionID: sid, InputID: in.ID}},
		{&messages.StepStarted{SessionID: sid, AssistantMessageID: asst, Agent: "build", Attempt: 1},
			&messages.TextStarted{SessionID: sid, AssistantMessageID: asst}},
		{&messages.TextEnded{SessionID: sid, AssistantMessageID: asst, Text: "reading"},
			&messages.ToolCalled{SessionID: sid, AssistantMessageID: asst, CallID: "c1", Name: "read", Input: json.RawMessage(`{"path":"a"}`)}},
		{&messages.ToolSucceeded{SessionID: sid, AssistantMessageID: asst, CallID: "c1", Output: "text"},
			&messages.StepEnded{SessionID: sid, AssistantMessageID: asst, Finish: "tool-calls", Tokens: messages.Tokens{Input: 10, Output: 2}, Cost: 0.5}},
		{&messages.ExecutionSucceeded{SessionID: sid}},
	}
	read := func() map[messages.MessageID]persistence.Message {
		page, err := st.Messages(ctx, sid, persistence.Query{After: -1, Limit: 100})
		must(t, err)
		out := map[messages.MessageID]persistence.Message{}
		for _, m := range page.Data {
			out[m.ID] = m
		}
		return out
	}
	first, err := st.Boundary(ctx, sid, -1)
	must(t, err)
	record := first.Session
	for i, ps := range steps {
		before := read()
		c, err := st.Commit(ctx, sid, ps...)
		must(t, err)
		after := read()
		if len(c.Events) != len(ps) {
			t.Fatalf("commit %d: %d events for %d payloads", i, len(c.Events), len(ps))
		}
		h, err := st.History(ctx, sid, persistence.Query{After: c.Events[0].Seq() - 1, Limit: 100})
		must(t, err)
		if !reflect.DeepEqual(h.Data, c.Events) {
			t.Fatalf("commit %d: events %+v, history %+v", i, c.Events, h.Data)
		}
		returned := map[messages.MessageID]bool{}
		for _, m := range c.Messages {
			returned[m.ID] = true
		}
		for id, m := range after {
			if old, ok := before[id]; (!ok || !reflect.DeepEqual(old, m)) && !returned[id] {
				t.Fatalf("commit %d changed message %s and did not return it", i, id)
			}
		}
		for j, m := range c.Messages {
			if j > 0 && m.Seq <= c.Messages[j-1].Seq {
				t.Fatalf("commit %d: messages out of seq order", i)
			}
			if !reflect.DeepEqual(m, after[m.ID]) {
				t.Fatalf("commit %d returned %+v, a read %+v", i, m, after[m.ID])
			}
			for _, p := range m.Parts {
				if p.Tool != nil {
					p.Tool.Output, p.Tool.Input[0] = "changed", '!'
				}
			}
		}
		if !reflect.DeepEqual(read(), after) {
			t.Fatalf("commit %d: changing what it returned changed the store", i)
		}
		b, err := st.Boundary(ctx, sid, -1)
		must(t, err)
		if b.Seq != c.Events[len(c.Events)-1].Seq() {
			t.Fatalf("commit %d: boundary at seq %d after it", i, b.Seq)
		}
		changedRecord := !reflect.DeepEqual(b.Session, record)
		if (c.Session != nil) != changedRecord || (c.Session != nil && !reflect.DeepEqual(*c.Session, b.Session)) {
			t.Fatalf("commit %d: record %+v, before %+v, after %+v", i, c.Session, record, b.Session)
		}
		record = b.Session
	}
	if _, err := st.Commit(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: in.ID}); messages.TypeOf(err) != messages.ErrInputPromoted {
		t.Fatalf("second promotion: %v", err)
	}
}
