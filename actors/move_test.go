package actors_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// moveAsync starts a Move of sid to loc and returns where its error comes.
func moveAsync(h *actortest.Harness, sid messages.SessionID, loc messages.Location) <-chan error {
	moved := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Move(h.Ctx(), sid, loc)
		moved <- err
	}()
	return moved
}

// moveSeen starts a Move of sid to loc and returns, with where its error
// comes, once the Session actor has received it.
func moveSeen(t *testing.T, h *actortest.Harness, sid messages.SessionID, loc messages.Location) <-chan error {
	t.Helper()
	arrived := make(chan struct{})
	var once sync.Once
	actors.SetSessionFault(func(msg any) {
		if m, ok := msg.(*messages.Move); ok && m.SessionID == sid {
			once.Do(func() { close(arrived) })
		}
	})
	t.Cleanup(func() { actors.SetSessionFault(nil) })
	moved := moveAsync(h, sid, loc)
	<-arrived
	return moved
}

// settleHeld sends cmd while a move of sid waits at release, checks that
// the router holds it, lets the move go on, and requires both to succeed.
func settleHeld(t *testing.T, h *actortest.Harness, sid messages.SessionID, release chan struct{}, moved <-chan error, cmd func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd() }()
	eventually(t, "the router to hold the command", func() bool { return h.Runtime.Held(sid) == 1 })
	close(release)
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

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
	moved := moveAsync(h, sid, dest)
	<-cancelled
	// The Session actor has the move and waits for its drain: a wake and a
	// wait sent now are held by the router until the move settles.
	woke, waited := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := h.Runtime.Prompt(h.Ctx(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "two"}})
		woke <- err
	}()
	go func() { waited <- h.Runtime.Wait(h.Ctx(), sid) }()
	eventually(t, "the router to hold the wake and the wait", func() bool { return h.Runtime.Held(sid) == 2 })
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

// TestMoveRespectsAUsersInterrupt: a move that arrives while a user's
// interrupt is settling carries no work to the new Location: a steer
// admitted before stays pending, as after any interrupt.
func TestMoveRespectsAUsersInterrupt(t *testing.T) {
	h := actortest.New(t)
	entered, cancelled, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h.Tools.Add("slow", func(ctx context.Context, _ locations.ToolCall) (string, error) {
		close(entered)
		<-ctx.Done()
		close(cancelled)
		<-release // the interrupt cannot settle before the test lets it
		return "", ctx.Err()
	})
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-entered
	h.Prompt(sid, "early steer")
	interrupted := make(chan error, 1)
	go func() { interrupted <- h.Runtime.Interrupt(h.Ctx(), sid) }()
	<-cancelled
	moved := moveSeen(t, h, sid, messages.Location{Directory: t.TempDir()}) // while the interrupt is settling
	close(release)
	if err := <-interrupted; err != nil {
		t.Fatal(err)
	}
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if got := typesAfter(h, sid, "session.moved"); len(got) != 0 || len(h.Model.Requests()) != 1 {
		t.Fatalf("work ran after the move: %v", got)
	}
	if p, err := h.Store.Pending(h.Ctx(), sid); err != nil || len(p) != 1 {
		t.Fatalf("pending %+v, %v; want the steer", p, err)
	}
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
	// Not WaitIdle: the router routes a wait by the Session's Location,
	// which this move, made beside the actors, changed under a running drain.
	h.WaitEvent(sid, actortest.OfType(messages.TypeExecutionInterrupted))
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
	bare := t.TempDir() // configures only the build agent and the demo model
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "script", Type: llm.ProviderScript,
		Models: map[string]llm.ModelSpec{"demo": {Context: 200000, Output: 8000}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		built := c.Locations
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			if loc.Directory == gone || loc.Directory == refused {
				return nil, messages.Errorf(messages.ErrInvalid, "location.directory: lstat %s: no such file or directory", loc.Directory)
			}
			svc, err := built.Get(loc)
			if err != nil || loc.Directory != bare {
				return svc, err
			}
			b := *svc
			b.Agents = map[string]locations.Agent{"build": svc.Agents["build"]}
			b.Catalog = catalog
			return &b, nil
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
	// The destination must run the Session as it is configured: its agent
	// and its model.
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: bare}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Errorf("a destination without the Session's agent: %v", err)
	}
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "build"); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.SelectModel(h.Ctx(), sid, messages.ModelRef{ProviderID: "script", ID: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: bare}); messages.TypeOf(err) != messages.ErrModelNotFound {
		t.Errorf("a destination without the Session's model: %v", err)
	}
	if s, _ := h.Store.Get(h.Ctx(), sid); s.Location.Directory != h.Dir {
		t.Fatalf("a refused move moved the Session to %q", s.Location.Directory)
	}
	// Created through the store: Runtime.Create refuses such a Location,
	// so this is a Session whose directory went after it was created.
	s, _, err := h.Store.CreateSession(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: gone}})
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
	entered, release := stubborn(h)
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-entered
	moved := moveSeen(t, h, sid, messages.Location{Directory: t.TempDir()})
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

// heldStore holds the first write (Append or Commit) whose last payload
// match accepts until release is closed, after closing held.
type heldStore struct {
	persistence.Store
	match         func(messages.Payload) bool
	held, release chan struct{}
	once          atomic.Bool
}

func newHeldStore(match func(messages.Payload) bool) *heldStore {
	return &heldStore{match: match, held: make(chan struct{}), release: make(chan struct{})}
}

func (g *heldStore) hold(data []messages.Payload) {
	if len(data) > 0 && g.match(data[len(data)-1]) && g.once.CompareAndSwap(false, true) {
		close(g.held)
		<-g.release
	}
}

func (g *heldStore) Append(ctx context.Context, id messages.SessionID, data ...messages.Payload) ([]messages.Event, error) {
	g.hold(data)
	return g.Store.Append(ctx, id, data...)
}

func (g *heldStore) Commit(ctx context.Context, id messages.SessionID, data ...messages.Payload) (persistence.Committed, error) {
	g.hold(data)
	return g.Store.Commit(ctx, id, data...)
}

// TestMoveHoldsCommandsUntilItSettles: while a move commits (here in the
// Location actor: the Session has no actor there), a wake is held by the
// router, not routed by the stale Location to an actor at the place the
// Session is leaving; once the move settles it runs the prompt at the new
// Location.
func TestMoveHoldsCommandsUntilItSettles(t *testing.T) {
	g := newHeldStore(func(p messages.Payload) bool { _, ok := p.(*messages.SessionMoved); return ok })
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { g.Store = c.Store; c.Store = g }})
	h.Model.Reply(script.Text("other"))
	h.Model.Reply(script.Text("two, at the new place"))
	other := h.Session()
	h.Prompt(other, "x") // the Location actor of h.Dir now exists
	h.WaitIdle(other)
	sid := h.Session() // at the same Location, without an actor
	no := false
	if _, err := h.Runtime.Prompt(h.Ctx(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "two"}, Resume: &no}); err != nil {
		t.Fatal(err)
	}
	moved := moveAsync(h, sid, messages.Location{Directory: t.TempDir()})
	<-g.held
	settleHeld(t, h, sid, g.release, moved, func() error { return h.Runtime.Wake(h.Ctx(), sid) })
	h.WaitIdle(sid)
	if got := typesAfter(h, sid, "session.moved"); len(got) == 0 || got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("the held wake did not run the prompt at the new Location: %v", h.Types(sid))
	}
	h.CheckReplay()
}

// TestMoveBesideAWake: a wake and a move sent together, in either order,
// lose nothing: a wake that started a busy period the move superseded is
// carried to the new Location, where the prompt runs.
func TestMoveBesideAWake(t *testing.T) {
	h := actortest.New(t, actortest.Options{Sync: true})
	h.Model.Default(script.Text("ran"))
	other := h.Session()
	h.Prompt(other, "x")
	h.WaitIdle(other)
	for i := range 20 {
		sid := h.Session()
		no := false
		if _, err := h.Runtime.Prompt(h.Ctx(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "two"}, Resume: &no}); err != nil {
			t.Fatal(err)
		}
		moved := moveAsync(h, sid, messages.Location{Directory: t.TempDir()})
		if err := h.Runtime.Wake(h.Ctx(), sid); err != nil {
			t.Fatal(err)
		}
		if err := <-moved; err != nil {
			t.Fatal(err)
		}
		h.WaitIdle(sid)
		// The prompt ran before the move, or after it at the new Location
		// (a move after its answer carries no step: none is owed).
		types := h.Types(sid)
		at := slices.Index(types, "session.moved")
		if p := slices.Index(types, "session.prompt.promoted"); p < 0 || at < 0 || !slices.Contains(types[p:], "session.step.ended") {
			t.Fatalf("round %d: the prompt did not run: %v", i, types)
		}
		if slices.Contains(types[:at], "session.step.ended") && slices.Contains(types[at:], "session.step.started") {
			t.Fatalf("round %d: a step ran again after the move, with no input: %v", i, types)
		}
	}
}

// TestMoveBackToALocationItLeft: the actor a Session leaves behind is
// forgotten by its Location at once, so after moving back the Session gets
// a fresh actor there: commands are answered, not bounced between the old
// actor and the router.
func TestMoveBackToALocationItLeft(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("back home"))
	sid := h.Session()
	home := messages.Location{Directory: h.Dir}
	h.Prompt(sid, "one")
	h.WaitIdle(sid) // its actor at home stays until the idle timeout
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	actors.SetSessionFault(func(msg any) {
		if m, ok := msg.(*messages.Move); ok && m.SessionID == sid && first.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	})
	defer actors.SetSessionFault(nil)
	moved := moveAsync(h, sid, messages.Location{Directory: t.TempDir()})
	<-entered
	settleHeld(t, h, sid, release, moved, func() error { return h.Runtime.Wake(h.Ctx(), sid) })
	h.WaitIdle(sid)
	if _, err := h.Runtime.Move(h.Ctx(), sid, home); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Runtime.Wait(ctx, sid); err != nil {
		t.Fatalf("wait after moving back: %v", err)
	}
	if got := typesAfter(h, sid, "session.prompt.admitted"); got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("after moving back: %v", h.Types(sid))
	}
}

// TestMoveCleansTheDirectory: one directory is one Location however it is
// spelled, at creation and at a move, so a move to the Session's own
// directory with a trailing slash supersedes nothing and writes nothing.
func TestMoveCleansTheDirectory(t *testing.T) {
	h := actortest.New(t)
	started := make(chan string, 1)
	h.Tools.Add("slow", actortest.Blocking(started, make(chan struct{})))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Default(script.Text("done"))
	s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: h.Dir + "/./"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Location.Directory != h.Dir {
		t.Fatalf("created at %q, want %q", s.Location.Directory, h.Dir)
	}
	h.Prompt(s.ID, "one")
	<-started
	before := len(h.Events(s.ID))
	moved, err := h.Runtime.Move(h.Ctx(), s.ID, messages.Location{Directory: h.Dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if types := h.Types(s.ID); len(types) != before || moved.Location.Directory != h.Dir {
		t.Fatalf("a move to the Session's own directory wrote %v (at %q)", types[before:], moved.Location.Directory)
	}
	if err := h.Runtime.Interrupt(h.Ctx(), s.ID); err != nil {
		t.Fatal(err)
	}
}

// TestStepFenceCoversRetries: a retry attempt is a new step, fenced like
// the first: a move committed during the retry delay ends the busy period
// as superseded instead of asking the model again at the old Location.
func TestStepFenceCoversRetries(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderInternal, "overloaded")))
	h.Model.Reply(script.Text("answered at the old place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil { // the retry delay waits
		t.Fatal(err)
	}
	if _, err := h.Store.Append(h.Ctx(), sid, &messages.SessionMoved{SessionID: sid, Location: messages.Location{Directory: t.TempDir()}}); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(time.Minute)
	eventually(t, "the busy period to end", func() bool { _, busy := h.Runtime.Active()[sid]; return !busy })
	want := []string{"session.execution.interrupted"}
	if got := typesAfter(h, sid, "session.moved"); !slices.Equal(got, want) || len(h.Model.Requests()) != 1 {
		t.Fatalf("after the move: %v, want %v (%d model requests)", got, want, len(h.Model.Requests()))
	}
	h.CheckReplay()
}

// fenceHeldStore holds the first Get once hold is set (the runner fencing
// a retry) until its context is cancelled, and then calls moved (a move
// committed beside the actors) before reading.
type fenceHeldStore struct {
	persistence.Store
	hold    atomic.Bool
	reached chan struct{}
	moved   func()
}

func (s *fenceHeldStore) Get(ctx context.Context, id messages.SessionID) (persistence.Session, error) {
	if s.hold.CompareAndSwap(true, false) {
		close(s.reached)
		select {
		case <-ctx.Done():
		case <-time.After(actortest.Timeout):
		}
		s.moved()
		ctx = context.WithoutCancel(ctx)
	}
	return s.Store.Get(ctx, id)
}

// TestInterruptDuringAFenceThatFindsAMove: a user's interrupt that lands
// while the runner fences a retry, and the fence then finds the Session
// moved, ends the busy period as the user interrupted it: the reason is
// the interrupt's, not superseded (which is for a move that ends a busy
// period nothing interrupted).
func TestInterruptDuringAFenceThatFindsAMove(t *testing.T) {
	h, st := withStore(t, func(s persistence.Store) *fenceHeldStore {
		return &fenceHeldStore{Store: s, reached: make(chan struct{})}
	})
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderInternal, "overloaded")))
	h.Model.Reply(script.Text("answered at the old place"))
	sid := h.Session()
	st.moved = func() {
		if _, err := h.Store.Append(context.Background(), sid, &messages.SessionMoved{SessionID: sid, Location: messages.Location{Directory: t.TempDir()}}); err != nil {
			t.Error(err)
		}
	}
	h.Prompt(sid, "one")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil { // the retry delay waits
		t.Fatal(err)
	}
	st.hold.Store(true)
	h.Clock.Advance(time.Minute)
	<-st.reached // the retry's fence reads the Session
	// Routed by the Location the Session has until the fence's read.
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	want := []string{"session.execution.interrupted"}
	if got := typesAfter(h, sid, "session.moved"); !slices.Equal(got, want) || len(h.Model.Requests()) != 1 {
		t.Fatalf("after the move: %v, want %v (%d model requests)", got, want, len(h.Model.Requests()))
	}
	if i := lastOf[*messages.ExecutionInterrupted](h, sid); i == nil || i.Reason != messages.ReasonUser {
		t.Fatalf("busy period ended %+v, want interrupted by the user: %v", i, h.Types(sid))
	}
	h.CheckReplay()
}

// TestMoveContinuesTheSupersededWork: a busy period a move supersedes
// resumes at the new Location (a run), so a turn it had started is
// answered there without another command; a user's interrupt in progress
// is respected (no run).
func TestMoveContinuesTheSupersededWork(t *testing.T) {
	h := actortest.New(t)
	started := make(chan string, 1)
	h.Tools.Add("slow", actortest.Blocking(started, make(chan struct{})))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("continued at the new place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	got := typesAfter(h, sid, "session.moved")
	if len(got) == 0 || got[0] != "session.execution.started" || got[len(got)-1] != "session.execution.succeeded" || len(h.Model.Requests()) != 2 {
		t.Fatalf("after the move: %v (%d model requests)", got, len(h.Model.Requests()))
	}
	h.CheckReplay()
}

// failingMoves fails every commit of session.moved.1.
type failingMoves struct{ persistence.Store }

func (f failingMoves) Append(ctx context.Context, id messages.SessionID, data ...messages.Payload) ([]messages.Event, error) {
	if _, ok := data[0].(*messages.SessionMoved); ok {
		return nil, messages.Errorf(messages.ErrInternal, "injected: the disk is full")
	}
	return f.Store.Append(ctx, id, data...)
}

// TestMoveThatFailsToCommit: a move whose commit fails answers the error,
// and the Session stays where it was: the superseded work and the commands
// held meanwhile run at the old Location.
func TestMoveThatFailsToCommit(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Store = failingMoves{c.Store} }})
	started := make(chan string, 1)
	h.Tools.Add("slow", actortest.Blocking(started, make(chan struct{})))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("still at home"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("move: %v, want the commit's error", err)
	}
	h.WaitIdle(sid)
	if s, _ := h.Store.Get(h.Ctx(), sid); s.Location.Directory != h.Dir {
		t.Fatalf("the Session moved to %q", s.Location.Directory)
	}
	if got := h.Types(sid); got[len(got)-1] != "session.execution.succeeded" || slices.Contains(got, "session.moved") {
		t.Fatalf("after the failed move: %v", got)
	}
	// Its actor stayed its Location's: the work went on in it, not in a
	// second one beside it.
	if n := h.Runtime.Live(); n != 1 {
		t.Fatalf("%d Session actors live after the failed move, want 1", n)
	}
}

// panickyMoves panics on every commit of session.moved.1 (a Store bug).
type panickyMoves struct{ persistence.Store }

func (p panickyMoves) Append(ctx context.Context, id messages.SessionID, data ...messages.Payload) ([]messages.Event, error) {
	if _, ok := data[0].(*messages.SessionMoved); ok {
		panic("injected store bug")
	}
	return p.Store.Append(ctx, id, data...)
}

// TestMoveWhoseCommitPanics: a move whose commit panics settles with an
// internal error, also when it commits after the busy period it superseded
// (outside the Move's own handling): the router then releases the
// Session's commands instead of holding them for good.
func TestMoveWhoseCommitPanics(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Store = panickyMoves{c.Store} }})
	started := make(chan string, 1)
	h.Tools.Add("slow", actortest.Blocking(started, make(chan struct{})))
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Default(script.Text("still at home"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid) // its actor stays: the next Move reaches it idle
	for _, busy := range []bool{false, true} {
		if busy {
			h.Prompt(sid, "two")
			<-started
		}
		ctx, cancel := context.WithTimeout(h.Ctx(), 10*time.Second)
		_, err := h.Runtime.Move(ctx, sid, messages.Location{Directory: t.TempDir()})
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut || messages.TypeOf(err) != messages.ErrInternal {
			t.Fatalf("busy=%v: move %v (timed out: %v)", busy, err, timedOut)
		}
		h.WaitIdle(sid)
	}
}

// TestWaitFollowsTheCarriedWork: a wait caller of the busy period a move
// supersedes is answered after the work the move carries to the new
// Location, not as idle in between.
func TestWaitFollowsTheCarriedWork(t *testing.T) {
	h := actortest.New(t)
	started := make(chan string, 1)
	h.Tools.Add("slow", actortest.Blocking(started, make(chan struct{})))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("continued at the new place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	gotWait, gotMove := make(chan struct{}), make(chan struct{})
	var waitSeen atomic.Bool
	actors.SetSessionFault(func(msg any) {
		switch m := msg.(type) {
		case *messages.Wait:
			if m.SessionID == sid && waitSeen.CompareAndSwap(false, true) {
				close(gotWait)
			}
		case *messages.Move:
			if m.SessionID == sid {
				close(gotMove)
			}
		}
	})
	defer actors.SetSessionFault(nil)
	waited := make(chan []string, 1)
	go func() {
		if err := h.Runtime.Wait(h.Ctx(), sid); err != nil {
			t.Error(err)
		}
		waited <- h.Types(sid)
	}()
	<-gotWait
	moved := moveAsync(h, sid, messages.Location{Directory: t.TempDir()})
	<-gotMove
	atWait := <-waited
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	if atWait[len(atWait)-1] != "session.execution.succeeded" {
		t.Fatalf("the wait answered before the carried work ended: %v", atWait)
	}
}

// TestHeldInterruptStopsTheCarriedWork: a user's interrupt sent while a move
// waits is held with the Session's other commands; the work the move would
// carry to the new Location is then not started at all (it would start
// and be cancelled at once).
func TestHeldInterruptStopsTheCarriedWork(t *testing.T) {
	h := actortest.New(t)
	sid, release := stubbornStep(h, "ran after the user's interrupt")
	got, received := afterMoveOf(t, sid)
	moved := moveAsync(h, sid, messages.Location{Directory: t.TempDir()})
	<-got
	settleHeld(t, h, sid, release, moved, func() error { return h.Runtime.Interrupt(h.Ctx(), sid) })
	h.WaitIdle(sid)
	if runs := received(); slices.Contains(runs, "run") || len(typesAfter(h, sid, "session.moved")) != 0 {
		t.Fatalf("after the user's interrupt the new Location got %v: %v", runs, typesAfter(h, sid, "session.moved"))
	}
}

// stubbornStep starts a busy period of a new Session on a tool that ignores
// cancellation, after which the model answers then, and returns the
// Session and what releases the tool.
func stubbornStep(h *actortest.Harness, then string) (messages.SessionID, chan struct{}) {
	entered, release := stubborn(h)
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	h.Model.Default(script.Text(then))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-entered
	return sid, release
}

// afterMoveOf records the runs and waits sid's actors receive once one of
// them has received a Move: moved closes at that Move, received returns
// them in order.
func afterMoveOf(t *testing.T, sid messages.SessionID) (moved <-chan struct{}, received func() []string) {
	got := make(chan struct{})
	var mu sync.Mutex
	var after bool
	var order []string
	actors.SetSessionFault(func(msg any) {
		mu.Lock()
		defer mu.Unlock()
		switch m := msg.(type) {
		case *messages.Move:
			if m.SessionID == sid && !after {
				close(got)
				after = true
			}
		case *messages.Run:
			if m.SessionID == sid && after {
				order = append(order, "run")
			}
		case *messages.Wait:
			if m.SessionID == sid && after {
				order = append(order, "wait")
			}
		}
	})
	t.Cleanup(func() { actors.SetSessionFault(nil) })
	return got, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(order)
	}
}

// TestHeldWaitFollowsTheCarriedWork: a wait sent while a move waits for the
// busy period it supersedes is held with the Session's other commands and
// routed after the work the move carries, so it is answered once that work
// ends, not by the new Location's idle actor before the work starts.
func TestHeldWaitFollowsTheCarriedWork(t *testing.T) {
	h := actortest.New(t)
	sid, release := stubbornStep(h, "continued at the new place")
	got, received := afterMoveOf(t, sid)
	moved := moveAsync(h, sid, messages.Location{Directory: t.TempDir()})
	<-got
	var atWait []string
	settleHeld(t, h, sid, release, moved, func() error {
		err := h.Runtime.Wait(h.Ctx(), sid)
		atWait = h.Types(sid)
		return err
	})
	if order := received(); !slices.Equal(order, []string{"run", "wait"}) {
		t.Fatalf("after the move the Session received %v, want the carried run first", order)
	}
	if got := atWait[len(atWait)-1]; got != "session.execution.succeeded" {
		t.Fatalf("the held wait was answered at %s: %v", got, atWait)
	}
}

// TestHeldMoveToWhereTheSessionWentIsANoOp: a second move to the same
// place, sent while the first waits, is held; once the first has moved
// the Session there it commits nothing and reaches no actor. Sent to the
// actor just started for the work the first move carried, it would
// supersede that work before its first commit, and leave the actor behind.
func TestHeldMoveToWhereTheSessionWentIsANoOp(t *testing.T) {
	h := actortest.New(t)
	entered, release := stubborn(h)
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	started, carried := make(chan string, 1), make(chan struct{})
	h.Tools.Add("carried", actortest.Blocking(started, carried))
	h.Model.Reply(script.ToolCall("c2", "carried", `{}`))
	h.Model.Default(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-entered
	to := messages.Location{Directory: t.TempDir()}
	moved := moveSeen(t, h, sid, to)
	settleHeld(t, h, sid, release, moved, func() error {
		_, err := h.Runtime.Move(h.Ctx(), sid, to)
		return err
	})
	<-started // the carried work runs at the new Location
	close(carried)
	h.WaitIdle(sid)
	after := typesAfter(h, sid, "session.moved")
	if slices.Contains(after, "session.moved") || slices.Contains(after, "session.execution.interrupted") ||
		after[len(after)-1] != "session.execution.succeeded" {
		t.Fatalf("after the first move: %v", after)
	}
	// Only the actor serving the Session now: the one the first move left
	// behind stops with its Location, which has no other Session.
	eventually(t, "one Session actor", func() bool { return h.Runtime.Live() == 1 })
}

// TestMoveWithoutAnActorSpawnsNone: a move of a Session with no actor at
// its Location (whose actor serves another Session) commits at once; it
// does not start an actor there only to leave it behind.
func TestMoveWithoutAnActorSpawnsNone(t *testing.T) {
	h := actortest.New(t)
	a, b := h.Session(), h.Session() // one Location
	if err := h.Runtime.Wake(h.Ctx(), a); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(a)
	to := messages.Location{Directory: t.TempDir()}
	if _, err := h.Runtime.Move(h.Ctx(), b, to); err != nil {
		t.Fatal(err)
	}
	if s, _ := h.Store.Get(h.Ctx(), b); s.Location.Directory != to.Directory {
		t.Fatalf("the Session is at %q, want %q", s.Location.Directory, to.Directory)
	}
	if n := h.Runtime.Live(); n != 1 {
		t.Fatalf("%d Session actors live after moving one without an actor, want 1", n)
	}
}

// TestMoveRechecksTheAgentAtCommit: an agent selected while a move waits
// for the busy period it supersedes was checked against the old Location;
// the move checks the Session again when it commits, and a destination
// that does not configure the agent refuses it there.
func TestMoveRechecksTheAgentAtCommit(t *testing.T) {
	bare := t.TempDir() // configures only the build agent
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		built := c.Locations
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			svc, err := built.Get(loc)
			if err != nil || loc.Directory != bare {
				return svc, err
			}
			b := *svc
			b.Agents = map[string]locations.Agent{"build": svc.Agents["build"]}
			return &b, nil
		})
	}})
	entered, release := stubborn(h)
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-entered
	moved := moveSeen(t, h, sid, messages.Location{Directory: bare})
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "plan"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-moved; messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("move: %v, want invalid (the destination lacks the agent)", err)
	}
	h.WaitIdle(sid)
	if s, _ := h.Store.Get(h.Ctx(), sid); s.Location.Directory != h.Dir || s.Agent != "plan" {
		t.Fatalf("Session at %q with agent %q", s.Location.Directory, s.Agent)
	}
}

// TestMoveCarriesAWakeOfAClosingBusyPeriod: a wake that arrives while a
// busy period writes its terminal event waits to start a fresh one; a move
// that supersedes the closing busy period carries that wake to the new
// Location, where the prompt it was for runs.
func TestMoveCarriesAWakeOfAClosingBusyPeriod(t *testing.T) {
	// The first commit of a busy period's success: the drain is closing.
	g := newHeldStore(func(p messages.Payload) bool { _, ok := p.(*messages.ExecutionSucceeded); return ok })
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { g.Store = c.Store; c.Store = g }})
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("two, at the new place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-g.held // the drain is writing session.execution.succeeded.1, under the Session's order lock
	if _, _, err := h.Store.Admit(h.Ctx(), persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "two"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Wake(h.Ctx(), sid); err != nil { // waits for the closing busy period
		t.Fatal(err)
	}
	moved := moveSeen(t, h, sid, messages.Location{Directory: t.TempDir()})
	close(g.release)
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if got := typesAfter(h, sid, "session.moved"); len(got) == 0 || got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("the wake was not carried: %v", h.Types(sid))
	}
	if texts := userTexts(h.Request(2)); texts[len(texts)-1] != "two" {
		t.Fatalf("request 2 answers %q", texts)
	}
}

// panickyGets panics on every Get of one Session once armed (a Store bug).
type panickyGets struct {
	persistence.Store
	sid   atomic.Value // messages.SessionID
	armed atomic.Bool
}

func (p *panickyGets) Get(ctx context.Context, id messages.SessionID) (persistence.Session, error) {
	if p.armed.Load() && p.sid.Load() == id {
		panic("injected store bug")
	}
	return p.Store.Get(ctx, id)
}

// TestHeldCommandsSurviveAPanickingRoute: when routing the commands a move
// held panics (a Store bug), each such command fails alone, with an
// internal error; none is left without an answer.
func TestHeldCommandsSurviveAPanickingRoute(t *testing.T) {
	p := &panickyGets{}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { p.Store = c.Store; c.Store = p }})
	entered, release := stubborn(h)
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	sid := h.Session()
	p.sid.Store(sid)
	h.Prompt(sid, "one")
	<-entered
	moved := moveSeen(t, h, sid, messages.Location{Directory: t.TempDir()})
	waited := make(chan error, 2)
	for range 2 {
		go func() { waited <- h.Runtime.Wait(h.Ctx(), sid) }()
	}
	eventually(t, "the waits to be held", func() bool { return h.Runtime.Held(sid) == 2 })
	p.armed.Store(true)
	close(release)
	ctx, cancel := context.WithTimeout(h.Ctx(), 10*time.Second)
	defer cancel()
	for range 2 {
		select {
		case err := <-waited:
			if messages.TypeOf(err) != messages.ErrInternal {
				t.Fatalf("held wait: %v, want internal", err)
			}
		case <-ctx.Done():
			t.Fatal("a held wait was never answered")
		}
	}
	if err := <-moved; err == nil {
		t.Fatal("the move succeeded although its commit could not read the Session")
	}
	p.armed.Store(false)
}

// movedAfterAnUpdate runs a Session whose AGENTS.md changed between its
// two prompts (one instruction update), moves it to an empty directory and
// prompts it once more there.
func movedAfterAnUpdate(t *testing.T) (*actortest.Harness, messages.SessionID) {
	t.Helper()
	h, sid, agents := answeredWithAgentsMD(t, "Use tabs.")
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeInstructionsUpdated); n != 1 {
		t.Fatalf("%d updates before the move, want 1: %v", n, h.Types(sid))
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "three")
	h.WaitIdle(sid)
	return h, sid
}

// TestMoveDropsInstructionUpdatesOfTheOldPlace: after a move the
// destination's complete baseline is the model's instructions; the
// chronological updates published at the old Location before it are
// superseded by it and are not sent again (the old AGENTS.md text would
// otherwise follow the new baseline as the latest instruction).
func TestMoveDropsInstructionUpdatesOfTheOldPlace(t *testing.T) {
	h, _ := movedAfterAnUpdate(t)
	req := h.Request(3)
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			if strings.Contains(p.Text, "Use spaces.") || strings.Contains(p.Text, "Use tabs.") {
				t.Fatalf("the old Location's instructions reached the request after the move: %s %q", m.Role, p.Text)
			}
		}
	}
	for _, s := range req.System {
		if strings.Contains(s, "Use spaces.") || strings.Contains(s, "Use tabs.") {
			t.Fatalf("the old Location's AGENTS.md is in the new baseline: %q", s)
		}
	}
	if got := []string{req.Messages[0].Parts[0].Text, req.Messages[2].Parts[0].Text, req.Messages[4].Parts[0].Text}; !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("prompts after the move: %q", got)
	}
	h.CheckReplay()
}

// TestCompactionAfterAMoveLeavesTheOldInstructionsOut: the recent context a
// compaction keeps beside its summary leaves out the instruction updates
// the destination's baseline superseded, as requests do.
func TestCompactionAfterAMoveLeavesTheOldInstructionsOut(t *testing.T) {
	h, sid := movedAfterAnUpdate(t)
	compactNow(t, h, sid)
	h.Prompt(sid, "four")
	h.WaitIdle(sid)
	if count(h, sid, messages.TypeCompactionEnded) != 1 {
		t.Fatalf("no compaction: %v", h.Types(sid))
	}
	for _, m := range h.Request(h.Model.Count()).Messages {
		for _, p := range m.Parts {
			if strings.Contains(p.Text, "Use spaces.") {
				t.Fatalf("the old Location's instructions came back after the compaction: %s %q", m.Role, p.Text)
			}
		}
	}
	h.CheckReplay()
}

// moveDuringAManualCompaction answers a first prompt, lets start begin a
// manual compaction, moves the Session while the compaction's request is
// held, and returns once the Session is idle again. The model summarizes
// at the new Location, then answers "resumed" to a step after it.
func moveDuringAManualCompaction(t *testing.T, start func(*actortest.Harness, messages.SessionID) error) (*actortest.Harness, messages.SessionID) {
	t.Helper()
	h := actortest.New(t)
	g := script.NewGate()
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\n"), script.Hold(g), script.Text("never"))
	h.Model.Reply(script.Text("## Objective\nsummarized at the new place"))
	h.Model.Reply(script.Text("resumed"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if err := start(h, sid); err != nil {
		t.Fatal(err)
	}
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	return h, sid
}

// TestMoveContinuesAManualCompaction: a manual compaction a move
// interrupts goes on at the new Location, as the move's other work does,
// under a new barrier; no step runs without input there (it ran one, and
// the compaction was lost).
func TestMoveContinuesAManualCompaction(t *testing.T) {
	h, sid := moveDuringAManualCompaction(t, func(h *actortest.Harness, sid messages.SessionID) error {
		_, err := h.Runtime.Compact(h.Ctx(), sid)
		return err
	})
	got := typesAfter(h, sid, "session.moved")
	want := []string{"session.execution.started", "session.compaction.started", "session.compaction.ended", "session.execution.succeeded"}
	if !slices.Equal(got, want) || h.Model.Count() != 3 {
		t.Fatalf("after the move: %v (%d model requests)", got, h.Model.Count())
	}
	if f := lastOf[*messages.CompactionFailed](h, sid); f == nil || f.Error.Type != messages.ErrAborted || !strings.Contains(f.Error.Message, "moved") {
		t.Fatalf("the interrupted compaction: %+v", f)
	}
	if pend, err := h.Store.Pending(h.Ctx(), sid); err != nil || len(pend) != 0 {
		t.Fatalf("pending %+v, %v", pend, err)
	}
	h.CheckReplay()
}

// TestMoveContinuesAToolLoopAfterAWaitingCompaction: a move that supersedes
// a tool loop while a manual compaction waits for it carries the run: at
// the new Location the compaction runs, then the loop goes on (a version
// that ended the run after the compaction dropped it).
func TestMoveContinuesAToolLoopAfterAWaitingCompaction(t *testing.T) {
	h := actortest.New(t)
	started := make(chan string, 1)
	h.Tools.Add("slow", actortest.Blocking(started, make(chan struct{})))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.Text("continued at the new place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	got := typesAfter(h, sid, "session.moved")
	if h.Model.Count() != 3 || !slices.Contains(got, "session.compaction.ended") || got[len(got)-2] != "session.step.ended" {
		t.Fatalf("after the move: %v (%d model requests)", got, h.Model.Count())
	}
	h.CheckReplay()
}

// heldSource is an instruction source whose next Observe, once armed,
// signals reached and then blocks until its context ends.
type heldSource struct {
	armed   atomic.Bool
	reached chan struct{}
}

func (s *heldSource) Key() string { return locations.SourceSkills }

func (s *heldSource) Observe(ctx context.Context) (locations.Observation, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.reached)
		<-ctx.Done()
		return locations.Unavailable(ctx.Err()), nil
	}
	return locations.Available("Skill: deploy."), nil
}

// TestMoveDuringACompactionsRebaseline: a move that arrives while a manual
// compaction observes the instructions for its new baseline (after the
// summary) lets the compaction complete (the source the cancellation cut
// off is restated from the last applied belief, and the move resets the
// baseline anyway) and carries no step to the new Location: there was none
// owed. A forced run took one there with no input, answering again.
func TestMoveDuringACompactionsRebaseline(t *testing.T) {
	src := &heldSource{reached: make(chan struct{})}
	h := actortest.New(t, actortest.Options{Instructions: &locations.InstructionsConfig{Getenv: func(string) string { return "" }, Skills: src}})
	g := script.NewGate()
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\n"), script.Hold(g), script.Text("summarized here"))
	h.Model.Reply(script.Text("## Objective\nsummarized at the new place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	src.armed.Store(true) // the next observation is the rebaseline's
	g.Release()
	select {
	case <-src.reached:
	case <-h.Ctx().Done():
		t.Fatal("the compaction never observed the instructions")
	}
	if n := h.Model.Count(); n != 2 {
		t.Fatalf("%d model requests before the rebaseline, want 2 (the summary came first)", n)
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if got := typesAfter(h, sid, "session.moved"); len(got) != 0 || h.Model.Count() != 2 {
		t.Fatalf("after the move: %v (%d model requests, want 2)", got, h.Model.Count())
	}
	if types := h.Types(sid); !slices.Contains(types, "session.compaction.ended") || slices.Contains(types, "session.compaction.failed") {
		t.Fatalf("the compaction did not complete: %v", types)
	}
	h.CheckReplay()
}

// boundaryAfterStep holds the first boundary read after a step.ended
// commit until its context ends: the runner is then past its last step,
// with nothing owed, and only an interruption lets it go on.
type boundaryAfterStep struct {
	persistence.Store
	armed, held atomic.Bool
	reached     chan struct{}
}

func (g *boundaryAfterStep) Commit(ctx context.Context, id messages.SessionID, data ...messages.Payload) (persistence.Committed, error) {
	c, err := g.Store.Commit(ctx, id, data...)
	if _, ok := data[len(data)-1].(*messages.StepEnded); ok && err == nil && !g.held.Load() {
		g.armed.Store(true)
	}
	return c, err
}

func (g *boundaryAfterStep) hold(ctx context.Context) error {
	if !g.armed.CompareAndSwap(true, false) {
		return nil
	}
	g.held.Store(true)
	close(g.reached)
	<-ctx.Done()
	return ctx.Err()
}

func (g *boundaryAfterStep) Watermark(ctx context.Context, id messages.SessionID) (int64, error) {
	if err := g.hold(ctx); err != nil {
		return 0, err
	}
	return g.Store.Watermark(ctx, id)
}

func (g *boundaryAfterStep) Boundary(ctx context.Context, id messages.SessionID, after int64) (persistence.Boundary, error) {
	if err := g.hold(ctx); err != nil {
		return persistence.Boundary{}, err
	}
	return g.Store.Boundary(ctx, id, after)
}

// TestMoveAfterTheLastStepCarriesNoStep: a move that supersedes a busy
// period after its last step (the answer given, its terminal not yet
// written) carries a wake, not a run: at the new Location nothing is
// eligible and no step runs. A forced run asked the model again with no
// new input.
func TestMoveAfterTheLastStepCarriesNoStep(t *testing.T) {
	gate := &boundaryAfterStep{reached: make(chan struct{})}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { gate.Store = c.Store; c.Store = gate }})
	h.Model.Reply(script.Text("the answer"))
	sid := h.Session()
	h.Prompt(sid, "one")
	select {
	case <-gate.reached:
	case <-h.Ctx().Done():
		t.Fatal("the step never ended")
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if got := typesAfter(h, sid, "session.moved"); len(got) != 0 || h.Model.Count() != 1 {
		t.Fatalf("after the move: %v (%d model requests, want 1)", got, h.Model.Count())
	}
	h.CheckReplay()
}

// heldTerminal holds the commit of a session.execution.failed.1 until
// released, once.
type heldTerminal struct {
	persistence.Store
	reached, release chan struct{}
	once             atomic.Bool
}

func (g *heldTerminal) Commit(ctx context.Context, id messages.SessionID, data ...messages.Payload) (persistence.Committed, error) {
	if _, ok := data[len(data)-1].(*messages.ExecutionFailed); ok && g.once.CompareAndSwap(false, true) {
		close(g.reached)
		<-g.release
	}
	return g.Store.Commit(ctx, id, data...)
}

// TestMoveAfterAFailedStepCarriesNoStep: a move that arrives while a busy
// period whose step failed for good (a refused request) writes its
// terminal carries nothing owed: the new Location does not ask the model
// again with no new input.
func TestMoveAfterAFailedStepCarriesNoStep(t *testing.T) {
	gate := &heldTerminal{reached: make(chan struct{}), release: make(chan struct{})}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { gate.Store = c.Store; c.Store = gate }})
	h.Model.Reply(script.Fail(&llm.Error{Type: messages.ErrProviderInvalidRequest, Message: "refused"}))
	h.Model.Default(script.Text("asked again"))
	sid := h.Session()
	h.Prompt(sid, "one")
	select {
	case <-gate.reached:
	case <-h.Ctx().Done():
		t.Fatal("the busy period never failed")
	}
	// The Session actor handles the move before the drain can report its
	// end, which waits for the terminal's commit.
	moved := moveSeen(t, h, sid, messages.Location{Directory: t.TempDir()})
	close(gate.release)
	if err := <-moved; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if got := typesAfter(h, sid, "session.moved"); len(got) != 0 || h.Model.Count() != 1 {
		t.Fatalf("after the move: %v (%d model requests, want 1)", got, h.Model.Count())
	}
	h.CheckReplay()
}

// TestMoveCarriesAnUnservedForcedRun: a resume (a forced run) that finds
// a manual compaction pending runs the compaction first; a move during it
// carries the run, not a wake, since the forced step is still owed: at the
// new Location the compaction runs again and then the step the resume
// asked for. A wake there would stop after the compaction, nothing being
// eligible, and the resume would go unanswered.
func TestMoveCarriesAnUnservedForcedRun(t *testing.T) {
	h, sid := moveDuringAManualCompaction(t, func(h *actortest.Harness, sid messages.SessionID) error {
		if _, _, err := h.Store.AdmitCompaction(h.Ctx(), sid); err != nil {
			return err
		}
		_, err := h.Runtime.Resume(h.Ctx(), sid)
		return err
	})
	got := typesAfter(h, sid, "session.moved")
	want := []string{"session.execution.started", "session.compaction.started", "session.compaction.ended",
		"session.step.started", "session.text.started", "session.text.ended", "session.step.ended", "session.execution.succeeded"}
	if !slices.Equal(got, want) || h.Model.Count() != 4 {
		t.Fatalf("after the move: %v (%d model requests, want 4)", got, h.Model.Count())
	}
	h.CheckReplay()
}

// TestPlaceableChecksTheDirectoryFirst: a Builder of an embedder's own may
// use the directory before checking it and fail with an untyped error
// (here, a stat's); creating or moving a Session to a directory that does
// not exist is still the invalid error every other path gives, not an
// internal one, because the directory is checked before the build.
func TestPlaceableChecksTheDirectoryFirst(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			if _, err := os.Stat(filepath.Join(loc.Directory, ".")); err != nil {
				return nil, err // untyped
			}
			return &locations.Services{Location: loc}, nil
		})
	}})
	missing := filepath.Join(t.TempDir(), "missing")
	want := fmt.Sprintf("location.directory: %q does not exist", missing)
	_, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: missing}})
	if e := messages.AsError(err, messages.ErrUnknown); err == nil || e.Type != messages.ErrInvalid || e.Message != want {
		t.Fatalf("create in a missing directory: %v, want invalid %q", err, want)
	}
	s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Runtime.Move(h.Ctx(), s.ID, messages.Location{Directory: missing}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("move to a missing directory: %v, want invalid", err)
	}
}
