package actors_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// typesAfter returns the (unversioned) types of the Session's events after
// the first one of type first, or nil when there is none.
func typesAfter(h *actortest.Harness, sid messages.SessionID, first string) []string {
	types := h.Types(sid)
	if i := slices.Index(types, first); i >= 0 {
		return types[i+1:]
	}
	return nil
}

// TestMoveResetsTheInstructionBaseline: a move commits session.moved.1, the
// next run executes at the new Location (a run left at the old one would
// stop at the step fence) and starts from a complete instruction baseline
// again, as SEED.md asks of a move.
func TestMoveResetsTheInstructionBaseline(t *testing.T) {
	h := actortest.New(t, actortest.Options{Instructions: &locations.InstructionsConfig{Dir: t.TempDir(), Getenv: func(string) string { return "" }}})
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("a2"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	dest := messages.Location{Directory: t.TempDir()}
	s, err := h.Runtime.Move(h.Ctx(), sid, dest)
	if err != nil {
		t.Fatal(err)
	}
	if s.Location != dest {
		t.Fatalf("moved Session at %+v, want %+v", s.Location, dest)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	got := typesAfter(h, sid, "session.moved")
	want := []string{"session.prompt.admitted", "session.execution.started", "session.instructions.baselined", "session.prompt.promoted"}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) || got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("after the move: %v", got)
	}
	if n := len(h.Model.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
	// A move to where the Session is changes nothing.
	before := len(h.Events(sid))
	if _, err := h.Runtime.Move(h.Ctx(), sid, dest); err != nil {
		t.Fatal(err)
	}
	if after := len(h.Events(sid)); after != before {
		t.Fatalf("a move to the same Location wrote %d events", after-before)
	}
	h.CheckReplay()
}

// TestMoveSupersedesTheRunningExecution: a move while a tool runs
// interrupts the busy period with reason superseded (settlement first) and
// commits after its terminal event; a wake and a wait that arrive meanwhile
// are held and then routed to the new Location, where the prompt runs.
func TestMoveSupersedesTheRunningExecution(t *testing.T) {
	h := actortest.New(t)
	entered, cancelled, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h.Tools.Add("slow", func(ctx context.Context, _ locations.ToolCall) (string, error) {
		close(entered)
		<-ctx.Done()
		close(cancelled)
		<-release // the busy period cannot end before the test lets it
		return "", ctx.Err()
	})
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("answered at the new place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-entered
	dest := messages.Location{Directory: t.TempDir()}
	moved := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Move(h.Ctx(), sid, dest)
		moved <- err
	}()
	<-cancelled
	// The Session actor has the move and waits for its drain: a wake and a
	// wait that reach it now wait with it.
	arrived := make(chan any, 4)
	actors.SetSessionFault(func(msg any) {
		switch m := msg.(type) {
		case *messages.Wake:
			if m.SessionID == sid {
				arrived <- m
			}
		case *messages.Wait:
			if m.SessionID == sid {
				arrived <- m
			}
		}
	})
	defer actors.SetSessionFault(nil)
	woke, waited := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := h.Runtime.Prompt(h.Ctx(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "two"}})
		woke <- err
	}()
	go func() { waited <- h.Runtime.Wait(h.Ctx(), sid) }()
	<-arrived
	<-arrived
	actors.SetSessionFault(nil)
	select {
	case err := <-moved:
		t.Fatalf("the move answered before its superseded busy period ended: %v", err)
	case err := <-waited:
		t.Fatalf("a wait answered while the move waited: %v", err)
	default:
	}
	close(release)
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	types := h.Types(sid)
	i := slices.Index(types, "session.execution.interrupted")
	if i < 0 || !slices.Contains(types[i+1:], "session.moved") {
		t.Fatalf("no interruption before the move: %v", types)
	}
	before := types[:i]
	if !slices.Contains(before, "session.tool.failed") || before[len(before)-1] != "session.step.failed" {
		t.Fatalf("not settled before the terminal: %v", types)
	}
	for _, ev := range h.Events(sid) {
		if p, ok := ev.Data.(*messages.ExecutionInterrupted); ok && p.Reason != messages.ReasonSuperseded {
			t.Fatalf("interrupted with reason %q, want superseded", p.Reason)
		}
	}
	if got := typesAfter(h, sid, "session.moved"); len(got) == 0 || got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("the second prompt did not run at the new Location: %v", types)
	}
	if req := h.Request(2); userTexts(req)[len(userTexts(req))-1] != "two" {
		t.Fatalf("request 2 answers %q", userTexts(req))
	}
	h.CheckReplay()
}

// TestMoveKeepsTheWakeItSuperseded: a steer admitted while the superseded
// busy period ran had its wake coalesced into it; the move hands that wake
// to the new Location, so the steer runs there without another command.
func TestMoveKeepsTheWakeItSuperseded(t *testing.T) {
	h := actortest.New(t)
	started := make(chan string, 1)
	h.Tools.Add("slow", blocking(started, make(chan struct{})))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("answered the steer"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	h.Prompt(sid, "early steer")
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	got := typesAfter(h, sid, "session.moved")
	if len(got) < 2 || got[0] != "session.execution.started" || got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("after the move: %v", got)
	}
	if texts := userTexts(h.Request(2)); texts[len(texts)-1] != "early steer" {
		t.Fatalf("request 2 answers %q", texts)
	}
	h.CheckReplay()
}

// TestStepFenceStopsAMovedSession: a move committed beside the actors (here
// by a tool, straight into the store) while a step runs lets that step
// settle, and the next step boundary ends the busy period as superseded
// instead of taking another step at the old Location.
func TestStepFenceStopsAMovedSession(t *testing.T) {
	h := actortest.New(t)
	var sid messages.SessionID
	dest := messages.Location{Directory: t.TempDir()}
	h.Tools.Add("relocate", func(ctx context.Context, _ locations.ToolCall) (string, error) {
		_, err := h.Store.Append(ctx, sid, &messages.SessionMoved{SessionID: sid, Location: dest})
		return "moved", err
	})
	h.Model.Reply(script.ToolCall("c1", "relocate", `{}`))
	h.Model.Reply(script.Text("never asked here"))
	sid = h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	got := typesAfter(h, sid, "session.moved")
	want := []string{"session.tool.success", "session.step.ended", "session.execution.interrupted"}
	if !slices.Equal(got, want) {
		t.Fatalf("after the move: %v, want %v", got, want)
	}
	evs := h.Events(sid)
	if p, ok := evs[len(evs)-1].Data.(*messages.ExecutionInterrupted); !ok || p.Reason != messages.ReasonSuperseded {
		t.Fatalf("terminal %+v", evs[len(evs)-1].Data)
	}
	if n := len(h.Model.Requests()); n != 1 {
		t.Fatalf("%d model requests after the move, want 1", n)
	}
	// Resumed, the Session runs at its new Location.
	if _, err := h.Runtime.Resume(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if got := h.Types(sid); got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("resumed at the new Location: %v", got)
	}
	h.CheckReplay()
}

// TestMoveRefusals: bad destinations and unknown Sessions are typed errors
// that leave the log as it was; a Session whose old Location can no longer
// be built can still move away from it.
func TestMoveRefusals(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "removed")
	refused := filepath.Join(t.TempDir(), "refused")
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		built := c.Locations
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			if loc.Directory == gone || loc.Directory == refused {
				return nil, messages.Errorf(messages.ErrInvalid, "location.directory: lstat %s: no such file or directory", loc.Directory)
			}
			return built.Get(loc)
		})
	}})
	sid := h.Session()
	before := len(h.Events(sid))
	cases := []struct {
		name string
		sid  messages.SessionID
		loc  messages.Location
		want messages.ErrorType
	}{
		{"relative directory", sid, messages.Location{Directory: "rel/dir"}, messages.ErrInvalid},
		{"no directory", sid, messages.Location{}, messages.ErrInvalid},
		{"bad workspace", sid, messages.Location{Directory: "/tmp", WorkspaceID: "nope"}, messages.ErrInvalid},
		{"unbuildable destination", sid, messages.Location{Directory: refused}, messages.ErrInvalid},
		{"unknown Session", "ses_unknown", messages.Location{Directory: "/tmp"}, messages.ErrSessionNotFound},
	}
	for _, tc := range cases {
		if _, err := h.Runtime.Move(h.Ctx(), tc.sid, tc.loc); messages.TypeOf(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	if after := len(h.Events(sid)); after != before {
		t.Fatalf("refused moves wrote %d events", after-before)
	}
	s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: gone}})
	if err != nil {
		t.Fatal(err)
	}
	dest := messages.Location{Directory: t.TempDir()}
	if _, err := h.Runtime.Move(h.Ctx(), s.ID, dest); err != nil {
		t.Fatalf("moving away from an unbuildable Location: %v", err)
	}
	h.Model.Reply(script.Text("runs again"))
	h.Prompt(s.ID, "hello")
	h.WaitIdle(s.ID)
	if got := h.Types(s.ID); got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("after moving away: %v", got)
	}
}

// TestMoveDuringShutdown: a move waiting for its superseded busy period is
// answered with shutting-down when Shutdown stops the actors first, never
// left without a reply.
func TestMoveDuringShutdown(t *testing.T) {
	h := actortest.New(t)
	entered, release := make(chan struct{}), make(chan struct{})
	h.Tools.Add("stubborn", func(ctx context.Context, _ locations.ToolCall) (string, error) {
		close(entered)
		<-release
		return "late", nil
	})
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-entered
	got := make(chan struct{})
	actors.SetSessionFault(func(msg any) {
		if m, ok := msg.(*messages.Move); ok && m.SessionID == sid {
			close(got)
		}
	})
	defer actors.SetSessionFault(nil)
	moved := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()})
		moved <- err
	}()
	<-got
	stopped := make(chan error, 1)
	go func() { stopped <- h.Runtime.Shutdown(h.Ctx()) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	err := <-moved
	if err != nil && messages.TypeOf(err) != messages.ErrShuttingDown {
		t.Fatalf("move during shutdown: %v", err)
	}
	if err == nil && !slices.Contains(h.Types(sid), "session.moved") {
		t.Fatal("the move answered success without committing")
	}
}
