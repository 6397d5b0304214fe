package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// fragmentKey names one text fragment of a step.
type fragmentKey struct {
	msg     messages.MessageID
	ordinal int
}

// liveLog reads a live log stream after its marker: durable events must
// come with their seq as id, in order from next; live ones as event type
// "live" without an id, and a text delta only inside its fragment (after its text.started,
// before its text.ended, wherever in the stream those came). open holds
// the fragments the replay left open or closed (true, false). It returns
// the durable events and the number of text deltas once until matches.
func liveLog(t *testing.T, s *sseStream, next int64, open map[fragmentKey]bool, until func(messages.Event) bool) ([]messages.Event, int) {
	t.Helper()
	var durable []messages.Event
	deltas := 0
	for {
		m := s.nextData()
		ev := m.event(t)
		if ev.Durable == nil {
			if m.hasID || m.name != "live" {
				t.Fatalf("live event %s sent with id %q as event type %q", ev.Type, m.id, m.name)
			}
			if d, ok := ev.Data.(*messages.TextDelta); ok {
				if !open[fragmentKey{d.AssistantMessageID, d.Ordinal}] {
					t.Fatalf("text delta %q outside its fragment (%s %d)", d.Delta, d.AssistantMessageID, d.Ordinal)
				}
				deltas++
			}
			continue
		}
		if ev.Seq() != next || !m.hasID || m.id != strconv.FormatInt(next, 10) || m.name != "" {
			t.Fatalf("durable event %s with seq %d, id %q and event type %q, want seq %d", ev.Type, ev.Seq(), m.id, m.name, next)
		}
		next++
		durable = append(durable, ev)
		trackFragment(open, ev)
		if until(ev) {
			return durable, deltas
		}
	}
}

// trackFragment records a text fragment opening or closing.
func trackFragment(open map[fragmentKey]bool, ev messages.Event) {
	switch p := ev.Data.(type) {
	case *messages.TextStarted:
		open[fragmentKey{p.AssistantMessageID, p.Ordinal}] = true
	case *messages.TextEnded:
		open[fragmentKey{p.AssistantMessageID, p.Ordinal}] = false
	}
}

func succeeded(ev messages.Event) bool { return ev.Type == messages.TypeExecutionSucceeded }

// nextSeq is the seq after a log.synced marker's.
func nextSeq(syn *messages.Synced) int64 {
	if syn.Seq == nil {
		return 0
	}
	return *syn.Seq + 1
}

// TestLogLiveInterleavesLiveEvents: with live=true the log stream goes on
// after its marker with the Session's live events between its durable
// ones, each delta inside its fragment, named "live" and without ids, and
// the durable events exactly the log's, every one once.
func TestLogLiveInterleavesLiveEvents(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Reply(script.TextChunks("hel", "lo"))
	sid := e.createSession()
	s := e.stream("/api/session/" + string(sid) + "/log?follow=true&live=1")
	replayed, syn := readLog(t, s)
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "hi"}})
	durable, deltas := liveLog(t, s, nextSeq(syn), map[fragmentKey]bool{}, succeeded)
	if deltas != 2 {
		t.Fatalf("%d text deltas, want 2", deltas)
	}
	want := e.allEvents(sid)
	got := append(replayed, durable...)
	if len(got) != len(want) {
		t.Fatalf("stream carried %d durable events, the log has %d", len(got), len(want))
	}
	for i := range want {
		a, _ := json.Marshal(got[i])
		b, _ := json.Marshal(want[i])
		if string(a) != string(b) {
			t.Fatalf("event %d differs from the log's:\n%s\n%s", i, a, b)
		}
	}
}

// TestLogLiveDropsWhatTheReplayOvertook: live events published between the
// stream's subscription and its replay's watermark came before durable
// events the replay sent; written after the marker they would land after
// them (a delta after its fragment ended), so they are not sent.
func TestLogLiveDropsWhatTheReplayOvertook(t *testing.T) {
	reached, hold := make(chan struct{}, 1), make(chan struct{})
	tailHook = func() {
		reached <- struct{}{}
		<-hold
	}
	t.Cleanup(func() { tailHook = nil }) // after the server below has stopped
	e := newHarnessEnv(t, nil)
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold) // should the test fail while the tail waits
		}
	})
	e.model.Reply(script.TextChunks("hel", "lo"))
	e.model.Reply(script.TextChunks("wor", "ld"))
	sid := e.createSession()
	s := e.stream("/api/session/" + string(sid) + "/log?follow=true&live=true")
	<-reached // subscribed to the bus; the replay's watermark not yet taken
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "first"}})
	e.waitIdle(sid)
	close(hold)
	replayed, syn := readLog(t, s)
	open := map[fragmentKey]bool{}
	for _, ev := range replayed {
		trackFragment(open, ev)
	}
	if len(open) != 1 {
		t.Fatalf("the replay holds %d text fragments, want the first exchange's one", len(open))
	}
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "second"}})
	_, deltas := liveLog(t, s, nextSeq(syn), open, succeeded)
	if deltas != 2 {
		t.Fatalf("%d text deltas, want the second exchange's 2", deltas)
	}
}

// TestLogLiveEndsAtACommitTheBusMissed: a commit made outside the runtime
// never reaches the bus, so the live stream cannot place it; it ends
// there, and resuming from Last-Event-ID reads it from the log.
func TestLogLiveEndsAtACommitTheBusMissed(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	path := "/api/session/" + string(sid) + "/log?follow=true&live=true"
	s := e.stream(path)
	_, syn := readLog(t, s)
	if _, err := e.store.Append(e.h.Ctx(), sid, &messages.AgentSelected{SessionID: sid, Agent: "build"}); err != nil {
		t.Fatal(err)
	}
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "hi"}, "resume": false})
	for {
		m, err := s.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.comment == "" {
			t.Fatalf("stream went on past the missed commit: %+v", m)
		}
	}
	r := e.stream(path, "Last-Event-ID", strconv.FormatInt(*syn.Seq, 10))
	evs, _ := readLog(t, r)
	if len(evs) != 2 || evs[0].Type != messages.TypeAgentSelected || evs[1].Type != messages.TypePromptAdmitted {
		t.Fatalf("resumed replay: %v", evs)
	}
}

// TestLogLiveNeedsFollow: live events exist only while a stream follows.
func TestLogLiveNeedsFollow(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	for _, q := range []string{"live=true", "live=1&follow=false", "live=yes&follow=true", "live=true&live=true&follow=true"} {
		e.do("GET", "/api/session/"+string(sid)+"/log?"+q, nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	}
}

// TestLogLiveStreamsOpenedMidRun: streams opened at every pause of a run
// (mid-fragment, while a tool runs, between steps) each carry the durable
// log once and in order, and every text delta inside its fragment,
// whichever side of their replay the fragment opened on.
func TestLogLiveStreamsOpenedMidRun(t *testing.T) {
	e := newHarnessEnv(t, nil)
	entered, release := make(chan string, 1), make(chan struct{})
	e.h.Tools.Add("wait", actortest.Blocking(entered, release))
	mid, between := script.NewGate(), script.NewGate()
	e.model.Reply(script.Event(llm.Event{Kind: llm.TextStart}), script.Event(llm.Event{Kind: llm.TextDelta, Text: "a"}),
		script.Hold(mid), script.Event(llm.Event{Kind: llm.TextDelta, Text: "b"}), script.Event(llm.Event{Kind: llm.TextEnd}),
		script.ToolCall("c1", "wait", `{}`))
	e.model.Reply(script.Reasoning("think"), script.Hold(between), script.TextChunks("do", "ne"))
	sid := e.createSession()
	// Each stream reads its replay at once, so that its watermark is
	// taken at the pause it opened in.
	type opened struct {
		s        *sseStream
		replayed []messages.Event
		syn      *messages.Synced
	}
	var streams []opened
	open := func() {
		s := e.stream("/api/session/" + string(sid) + "/log?follow=true&live=true")
		replayed, syn := readLog(t, s)
		streams = append(streams, opened{s, replayed, syn})
	}
	open()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "go"}})
	if err := mid.Reached(e.h.Ctx()); err != nil {
		t.Fatal(err)
	}
	open() // mid-fragment
	mid.Release()
	<-entered
	open() // while the tool runs
	close(release)
	if err := between.Reached(e.h.Ctx()); err != nil {
		t.Fatal(err)
	}
	open() // between the steps' fragments
	between.Release()
	e.waitIdle(sid)
	want := e.allEvents(sid)
	for i, o := range streams {
		frags := map[fragmentKey]bool{}
		for _, ev := range o.replayed {
			trackFragment(frags, ev)
		}
		durable, deltas := liveLog(t, o.s, nextSeq(o.syn), frags, succeeded)
		got := append(o.replayed, durable...)
		if len(got) != len(want) {
			t.Fatalf("stream %d carried %d durable events, the log has %d", i, len(got), len(want))
		}
		for j := range want {
			if got[j].ID != want[j].ID {
				t.Fatalf("stream %d: event %d is %s, the log's %s", i, j, got[j].Type, want[j].Type)
			}
		}
		// Mid-fragment, "a" was published before the stream subscribed,
		// or after the replay if its fragment's start was not yet
		// committed.
		if lo, hi := []int{4, 3, 2, 2}[i], []int{4, 4, 2, 2}[i]; deltas < lo || deltas > hi {
			t.Fatalf("stream %d carried %d text deltas, want %d to %d", i, deltas, lo, hi)
		}
	}
}
