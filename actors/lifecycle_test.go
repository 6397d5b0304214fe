package actors_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// eventually polls cond until it holds or the harness timeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(actortest.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling, not synchronisation: cond is re-checked
	}
}

func TestToolPanicBecomesUnknownFailure(t *testing.T) {
	h := actortest.New(t)
	h.Tools.Add("boom", func(context.Context, locations.ToolCall) (string, error) { panic("kaboom") })
	h.Model.Reply(script.ToolCall("c1", "boom", `{}`))
	h.Model.Reply(script.Text("survived"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	failed := lastOf[*messages.ToolFailed](h, sid)
	if failed == nil || failed.Error.Type != messages.ErrUnknown || !strings.Contains(failed.Error.Message, "kaboom") {
		t.Fatalf("panic settlement %+v", failed)
	}
	if h.Model.Count() != 2 {
		t.Fatal("the model did not continue after the panic")
	}
}

// panickingProvider streams a tool call, then panics.
type panickingProvider struct{}

func (panickingProvider) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if !yield(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "echo", Input: []byte(`{}`)}, nil) {
			return
		}
		panic("provider bug")
	}
}

// TestRunnerPanicClosesTheStep checks that a panic in the runner (here in
// a provider's stream) fails the busy period without leaving its step open:
// the call it started is settled and the step failed, in this busy period
// rather than by a later drain's orphan sweep. (A provider's panic is a
// thrown provider failure: the call is awaited and settles with its own
// result, see TestProviderPanicAwaitsItsTools.)
func TestRunnerPanicClosesTheStep(t *testing.T) {
	h := actortest.New(t)
	h.Services.Provider = func(string) (llm.Provider, error) { return panickingProvider{}, nil }
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	types := h.Types(sid)
	last := types[len(types)-1]
	if count(h, sid, messages.TypeToolFailed)+count(h, sid, messages.TypeToolSucceeded) != 1 || count(h, sid, messages.TypeStepFailed) != 1 || last != "session.execution.failed" {
		t.Fatalf("events: %v", types)
	}
	open, err := h.Store.OpenSteps(h.Ctx(), sid)
	if err != nil || len(open) != 0 {
		t.Fatalf("open steps after the busy period: %v %v", open, err)
	}
	h.CheckReplay()
}

func TestIdleSessionsPassivate(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.IdleTimeout = 20 * time.Millisecond }})
	h.Model.Default(script.Text("hi"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	eventually(t, "passivation", func() bool { return h.Runtime.Live() == 0 })
	// State comes back from the store on the next message.
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if h.Model.Count() != 2 || count(h, sid, messages.TypeExecutionSucceeded) != 2 {
		t.Fatalf("after passivation: %v", h.Types(sid))
	}
}

func TestShutdownInterruptsWithReasonShutdown(t *testing.T) {
	h := actortest.New(t)
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("never"))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Shutdown(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	evs := h.Events(sid)
	last, ok := evs[len(evs)-1].Data.(*messages.ExecutionInterrupted)
	if !ok || last.Reason != messages.ReasonShutdown {
		t.Fatalf("last event %s %+v", evs[len(evs)-1].Type, evs[len(evs)-1].Data)
	}
	if _, err := h.Runtime.Resume(h.Ctx(), sid); messages.TypeOf(err) != messages.ErrShuttingDown {
		t.Fatalf("command after shutdown: %v", err)
	}
}

// TestShutdownKeepsItsDeadline checks that Shutdown returns by its
// context's deadline even while a tool ignores cancellation (the process
// must be able to exit), and that the step still closes once the tool
// returns.
func TestShutdownKeepsItsDeadline(t *testing.T) {
	h := actortest.New(t)
	started, release := stubborn(h)
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	sid := h.Session()
	h.Prompt(sid, "go")
	<-started
	ctx, cancel := context.WithTimeout(h.Ctx(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.Runtime.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("shutdown past its deadline: %v", err)
		}
	case <-time.After(actortest.Timeout):
		close(release)
		t.Fatal("Shutdown held the process past its deadline for a tool ignoring cancellation")
	}
	close(release)
	eventually(t, "the busy period's terminal", func() bool {
		return count(h, sid, messages.TypeExecutionInterrupted) == 1 && count(h, sid, messages.TypeStepFailed) == 1
	})
}

func TestBusCutsOffSlowSubscriber(t *testing.T) {
	bus := actors.NewBus()
	slow := bus.Subscribe(2, nil)
	fast := bus.Subscribe(100, nil)
	for i := range 10 {
		bus.Publish(messages.Event{ID: messages.EventID(strings.Repeat("x", i+1)), Data: &messages.TextDelta{}})
	}
	if !slow.Dropped() || fast.Dropped() || bus.Subscribers() != 1 {
		t.Fatalf("slow dropped=%v fast dropped=%v subscribers=%d", slow.Dropped(), fast.Dropped(), bus.Subscribers())
	}
	n := 0
	for range slow.C {
		n++
	}
	if n != 2 {
		t.Fatalf("slow subscriber got %d events before the cut", n)
	}
	fast.Close()
	fast.Close()
	if bus.Subscribers() != 0 {
		t.Fatal("close did not unsubscribe")
	}
}

// TestBusDefaults: a subscription asked for no particular buffer has room
// for 256 events, and a Session's filter passes over events without data.
func TestBusDefaults(t *testing.T) {
	bus := actors.NewBus()
	s := bus.Subscribe(0, nil)
	for range 256 {
		bus.Publish(messages.Event{Data: &messages.TextDelta{}})
	}
	if s.Dropped() {
		t.Fatal("cut off within 256 events")
	}
	bus.Publish(messages.Event{Data: &messages.TextDelta{}})
	if !s.Dropped() {
		t.Fatal("not cut off at the 257th event")
	}
	if actors.SessionFilter("ses_x")(messages.Event{}) {
		t.Fatal("a Session's filter passed an event without data")
	}
}

// lockedBuffer is a goroutine-safe writer.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProtoactorLogsRouteToZerolog(t *testing.T) {
	var buf lockedBuffer
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Logger = zerolog.New(&buf) }})
	_ = h
	if !strings.Contains(buf.String(), `"message":"actor system started"`) {
		t.Fatalf("protoactor log not routed to zerolog: %q", buf.String())
	}
}

// TestBusyPeriodsEndWithoutDeadLetters: a Session's busy period ends only
// once its drain actor, and every tool actor under it, has terminated.
// protoactor stops the children an actor still lists, and a child whose
// termination is on its way gets a second Stop, logged as a dead letter:
// before, a runtime shut down just after a busy period with a tool call
// logged one about one time in eight.
func TestBusyPeriodsEndWithoutDeadLetters(t *testing.T) {
	for range 100 {
		h, logs := loggedHarness(t)
		h.Model.Reply(script.ToolCall("call_1", "echo", `{"x":1}`))
		h.Model.Reply(script.Text("done"))
		sid := h.Session()
		h.Prompt(sid, "go")
		h.WaitIdle(sid)
		noDeadLetters(t, h, logs)
	}
}

// loggedHarness is a harness whose runtime logs to the returned buffer.
func loggedHarness(t *testing.T) (*actortest.Harness, *lockedBuffer) {
	var buf lockedBuffer
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Logger = zerolog.New(&buf) }})
	return h, &buf
}

// noDeadLetters fails t when the runtime of h, now closed, logged a dead
// letter.
func noDeadLetters(t *testing.T, h *actortest.Harness, logs *lockedBuffer) {
	t.Helper()
	h.Close()
	if strings.Contains(logs.String(), "DeadLetter") {
		t.Fatalf("dead letters logged:\n%s", logs.String())
	}
}

// TestWorkCarriedByAMoveIsNotAnswered: the wake and run a move carries to
// the new Location are sent with no one to answer; the Session actor's
// answers there reach no one, which is not logged as a dead letter.
func TestWorkCarriedByAMoveIsNotAnswered(t *testing.T) {
	h, logs := loggedHarness(t)
	g := script.NewGate()
	h.Model.Reply(script.Hold(g))
	h.Model.Default(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "one")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Wake(h.Ctx(), sid); err != nil { // coalesced: the move carries it
		t.Fatal(err)
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if after := typesAfter(h, sid, "session.moved"); !slices.Contains(after, "session.step.ended") {
		t.Fatalf("the carried run did not run: %v", after)
	}
	noDeadLetters(t, h, logs)
}

// TestShutdownStopsEachActorOnce: Shutdown stops the actors from the
// bottom up, each once its children have terminated. It stopped the
// router, and protoactor stopped every child each actor still listed: a
// Session actor passivated just before, stopping but not yet reported to
// its Location, was stopped a second time, a dead letter in the log of a
// clean stop.
func TestShutdownStopsEachActorOnce(t *testing.T) {
	fire, restore := actors.HoldIdleTimers()
	t.Cleanup(restore)
	h, logs := loggedHarness(t)
	h.Model.Default(script.Text("ok"))
	p, a := h.Session(), h.Session() // one Location
	if err := h.Runtime.Wake(h.Ctx(), a); err != nil {
		t.Fatal(err)
	}
	waitIdleArmed(h, a)
	h.Prompt(p, "one")
	waitIdleArmed(h, p) // fire passivates p
	passivated, stopping, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var held, seen sync.Once
	actors.SetSessionFault(func(msg any) {
		switch msg.(type) {
		case *actor.Stopped: // p's, held between its stop and its report
			held.Do(func() { close(passivated); <-release })
		case *actor.Stopping:
			select {
			case <-passivated: // a's, stopped by Shutdown
				seen.Do(func() { close(stopping) })
			default:
			}
		}
	})
	defer actors.SetSessionFault(nil)
	fire()
	<-passivated
	done := make(chan error, 1)
	go func() { done <- h.Runtime.Shutdown(h.Ctx()) }()
	<-stopping
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	noDeadLetters(t, h, logs)
}

// TestFailedBusyPeriodIsLogged: a busy period that fails (a wrong API key,
// a provider down) is logged for the operator, not only recorded in the
// Session's log.
func TestFailedBusyPeriodIsLogged(t *testing.T) {
	var buf lockedBuffer
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Logger = zerolog.New(&buf) }})
	h.Model.Reply(script.Fail(&llm.Error{Type: messages.ErrProviderAuth, Message: "invalid x-api-key"}))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if line := buf.String(); !strings.Contains(line, `"level":"warn","session":"`+string(sid)+`","type":"provider.auth","error":"invalid x-api-key","message":"busy period failed"`) {
		t.Fatalf("log:\n%s", line)
	}
}

// TestAbandonedWaitReleasesItsGoroutine: a caller that gives up on Wait
// (an HTTP client that disconnects) leaves nothing behind while the Session
// keeps running, and its answer, when the busy period ends, reaches no one
// without a dead letter in the log.
func TestAbandonedWaitReleasesItsGoroutine(t *testing.T) {
	h, logs := loggedHarness(t)
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "long")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(h.Ctx())
	errc := make(chan error, 1)
	go func() { errc <- h.Runtime.Wait(ctx, sid) }()
	eventually(t, "the wait to be listed", func() bool {
		_, n, _ := h.Runtime.SessionWaiters(sid)
		return n == 1
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned wait returned %v", err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("abandoned wait left goroutines: %v", err)
	}
	g.Release()
	h.WaitIdle(sid)
	noDeadLetters(t, h, logs)
}

// TestRouterPanicLeavesOtherSessionsRunning checks that a panic while the
// router handles one Session's command (here in a Locations factory) fails
// that command and nothing else: restarted, the router would stop every
// Session actor beneath it, interrupting their busy periods while their
// drains ran on.
func TestRouterPanicLeavesOtherSessionsRunning(t *testing.T) {
	bad := t.TempDir()
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		orig := c.Locations
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			if loc.Directory == bad {
				panic("location factory bug")
			}
			return orig.Get(loc)
		})
	}})
	started, release := make(chan struct{}), make(chan struct{})
	h.Tools.Add("slow", func(context.Context, locations.ToolCall) (string, error) {
		close(started)
		<-release
		return "done", nil
	})
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Default(script.Text("ok"))
	a := h.Session()
	h.Prompt(a, "go")
	<-started
	b, _, err := h.Store.CreateSession(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: bad}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Wake(h.Ctx(), b.ID); messages.TypeOf(err) != messages.ErrInternal || !strings.Contains(err.Error(), "location factory bug") {
		t.Fatalf("wake of the Session whose Location panics: %v", err)
	}
	close(release)
	h.WaitIdle(a)
	if count(h, a, messages.TypeExecutionStarted) != 1 || count(h, a, messages.TypeExecutionSucceeded) != 1 ||
		count(h, a, messages.TypeExecutionInterrupted) != 0 {
		t.Fatalf("the other Session's busy period: %v", h.Types(a))
	}
	if active := h.Runtime.Active(); len(active) != 0 {
		t.Fatalf("active after idle: %v", active)
	}
}

// slowGet holds the store's next Get until released.
type slowGet struct {
	persistence.Store
	block            atomic.Bool
	entered, release chan struct{}
}

func (s *slowGet) Get(ctx context.Context, id messages.SessionID) (persistence.Session, error) {
	if s.block.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
	return s.Store.Get(ctx, id)
}

// TestShutdownAnswersCommandsInFlight checks that a command the router was
// still routing when Shutdown stopped it is answered shutting-down, not
// left waiting for a reply that protoactor dropped with the stopped actor.
func TestShutdownAnswersCommandsInFlight(t *testing.T) {
	sg := &slowGet{entered: make(chan struct{}), release: make(chan struct{})}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { sg.Store = c.Store; c.Store = sg }})
	sid := h.Session()
	sg.block.Store(true)
	waited := make(chan error, 1)
	go func() { waited <- h.Runtime.Wait(h.Ctx(), sid) }()
	<-sg.entered // the router is in the store's Get for this Wait
	stopped := make(chan error, 1)
	go func() { stopped <- h.Runtime.Shutdown(h.Ctx()) }()
	eventually(t, "shutdown to begin", h.Runtime.Closing)
	close(sg.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil && messages.TypeOf(err) != messages.ErrShuttingDown {
		t.Fatalf("the Wait in flight: %v", err)
	}
}

// TestUnbuildableLocationIsIdle: a Session whose Location cannot be built
// (its directory was removed) has no actor, so interrupt and wait are the
// no-ops they are for any idle Session; a wake fails with the build's own
// error type rather than internal.
func TestUnbuildableLocationIsIdle(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "removed")
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		built := c.Locations
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			if loc.Directory == gone {
				return nil, messages.Errorf(messages.ErrInvalid, "location.directory: lstat %s: no such file or directory", gone)
			}
			return built.Get(loc)
		})
	}})
	// Created through the store: Runtime.Create refuses such a Location,
	// so this is a Session whose directory went after it was created.
	s, _, err := h.Store.CreateSession(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: gone}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Interrupt(h.Ctx(), s.ID); err != nil {
		t.Errorf("interrupt: %v", err)
	}
	if err := h.Runtime.Wait(h.Ctx(), s.ID); err != nil {
		t.Errorf("wait: %v", err)
	}
	if err := h.Runtime.Wake(h.Ctx(), s.ID); messages.TypeOf(err) != messages.ErrInvalid {
		t.Errorf("wake: %v, want invalid", err)
	}
}

// TestSessionActorPanicKeepsItsDrain: a command that panics in a Session
// actor fails alone. Restarted, the actor would lose its running drain: an
// interrupt would answer at once while the drain ran on, and its end would
// leave the Session unable to run again.
func TestSessionActorPanicKeepsItsDrain(t *testing.T) {
	h := actortest.New(t)
	started, release := make(chan string, 1), make(chan struct{})
	h.Tools.Add("slow", actortest.Blocking(started, release))
	defer close(release)
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "go")
	<-started
	actors.SetSessionFault(func(msg any) {
		if _, ok := msg.(*messages.Wait); ok {
			panic("session bug")
		}
	})
	err := h.Runtime.Wait(h.Ctx(), sid)
	actors.SetSessionFault(nil)
	if messages.TypeOf(err) != messages.ErrInternal || !strings.Contains(err.Error(), "session bug") {
		t.Fatalf("wait on the panicking actor: %v", err)
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	if r := lastOf[*messages.ExecutionInterrupted](h, sid); r == nil || r.Reason != messages.ReasonUser {
		t.Fatalf("interrupt answered before the drain ended: %v", h.Types(sid))
	}
	h.Prompt(sid, "again")
	h.WaitIdle(sid)
	if h.Model.Count() != 2 || len(h.Runtime.Active()) != 0 {
		t.Fatalf("after the panic: %d requests, active %v: %v", h.Model.Count(), h.Runtime.Active(), h.Types(sid))
	}
	h.CheckReplay()
}

// failingGet fails the store's Get while fail is set.
type failingGet struct {
	persistence.Store
	fail *atomic.Bool
}

func (f failingGet) Get(ctx context.Context, id messages.SessionID) (persistence.Session, error) {
	if f.fail.Load() {
		return persistence.Session{}, errors.New("transient read error")
	}
	return f.Store.Get(ctx, id)
}

// TestStoreErrorIsNotIdle: when the store cannot read a Session, interrupt
// and wait fail instead of answering as for an idle Session, which it may
// not be.
func TestStoreErrorIsNotIdle(t *testing.T) {
	fail := new(atomic.Bool)
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Store = failingGet{c.Store, fail} }})
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	ierr := h.Runtime.Interrupt(h.Ctx(), sid)
	werr := h.Runtime.Wait(h.Ctx(), sid)
	fail.Store(false)
	g.Release()
	h.WaitIdle(sid)
	if messages.TypeOf(ierr) != messages.ErrInternal || messages.TypeOf(werr) != messages.ErrInternal {
		t.Fatalf("with the store failing, interrupt: %v; wait: %v", ierr, werr)
	}
}

// TestPassivationUnderLoad: Sessions that go idle and passivate every
// millisecond between prompts answer every prompt. Under -race it also
// checks the idle timer: protoactor's receive timeout, used before, wrote
// the actor context from its timer goroutine.
func TestPassivationUnderLoad(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.IdleTimeout = time.Millisecond }})
	h.Model.Default(script.Text("ok"))
	var wg sync.WaitGroup
	for range 4 {
		sid := h.Session()
		wg.Go(func() {
			for range 30 {
				h.Prompt(sid, "p")
				h.WaitIdle(sid)
			}
		})
	}
	wg.Wait()
	if h.Model.Count() != 120 {
		t.Fatalf("%d of 120 prompts answered", h.Model.Count())
	}
}

// promptPastTheRouter admits a prompt to sid in the background and returns,
// with where its error comes, once the router has forwarded its wake to a
// Location actor.
func promptPastTheRouter(t *testing.T, h *actortest.Harness, sid messages.SessionID, text string) <-chan error {
	t.Helper()
	_, before := h.Runtime.LocationActors()
	prompted := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Prompt(h.Ctx(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: text}})
		prompted <- err
	}()
	eventually(t, "the wake to reach a Location actor", func() bool {
		_, n := h.Runtime.LocationActors()
		return n > before
	})
	return prompted
}

// waitIdleArmed waits until sid is idle and its actor has armed its idle
// timer: a Wait is answered as the busy period ends, before the timer is
// armed in the same message, so a second one is handled after it.
func waitIdleArmed(h *actortest.Harness, sid messages.SessionID) {
	h.T.Helper()
	h.WaitIdle(sid)
	if err := h.Runtime.Wait(h.Ctx(), sid); err != nil {
		h.T.Fatal(err)
	}
}

// TestIdleActorAsksItsLocationFirst: a Session actor whose idle timer
// fires does not stop itself; it asks its Location, which refuses while a
// command to the actor is in flight. Stopping itself would drop the wake
// behind the tick in its mailbox, and the prompt it was for would wait for
// the next wake.
func TestIdleActorAsksItsLocationFirst(t *testing.T) {
	h, fire := idleHeldHarness(t)
	a, b := h.Session(), h.Session() // one Location
	h.Prompt(a, "one")
	waitIdleArmed(h, a)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	actors.SetSessionFault(func(msg any) {
		if actors.IsIdleTick(msg) {
			once.Do(func() { close(reached); <-release })
		}
	})
	defer actors.SetSessionFault(nil)
	fire()
	<-reached
	prompted := promptPastTheRouter(t, h, a, "two")
	// b's wake follows a's through their Location actor: once b's is
	// answered, a's waits in a's mailbox behind the tick.
	if err := h.Runtime.Wake(h.Ctx(), b); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-prompted; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(a)
	if n := h.Model.Count(); n != 2 {
		t.Fatalf("%d of 2 prompts answered: %v", n, h.Types(a))
	}
}

// TestMovedActorStopsAtTheMove: the actor a moved Session leaves behind
// stops when the move commits, though its old Location stays (it serves
// another Session). Its Location forgot it at the move, and its idle ticks
// (held here) passivate only actors their Location lists.
func TestMovedActorStopsAtTheMove(t *testing.T) {
	h, _ := idleHeldHarness(t)
	sid, other := h.Session(), h.Session()
	if err := h.Runtime.Wake(h.Ctx(), other); err != nil {
		t.Fatal(err)
	}
	waitIdleArmed(h, other)
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the actor left behind to stop", func() bool { return h.Runtime.Live() == 1 })
	if n, _ := h.Runtime.LocationActors(); n != 1 {
		t.Fatalf("%d Location actors, want the old one, serving the other Session", n)
	}
}

// TestCommandsWhileActorsStop: a command that reaches the actors while
// Shutdown stops them spawns nothing (a Session or Location actor spawned
// then would never be stopped, and Shutdown would wait for it to its
// deadline): an interrupt of a Session without an actor is the no-op it is
// when idle, in a Location with an actor (b) or without one (c).
func TestCommandsWhileActorsStop(t *testing.T) {
	h := actortest.New(t)
	h.Model.Default(script.Text("hi"))
	a, b := h.Session(), h.Session() // one Location; b has no actor yet
	c, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	h.Prompt(a, "go")
	h.WaitIdle(a)
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	actors.SetSessionFault(func(msg any) {
		if _, ok := msg.(*actor.Stopping); ok {
			once.Do(func() { close(reached); <-release })
		}
	})
	defer actors.SetSessionFault(nil)
	done := make(chan error, 1)
	go func() { done <- h.Runtime.Shutdown(h.Ctx()) }()
	<-reached // a's actor is stopping, so its Location and the router are too
	for _, sid := range []messages.SessionID{b, c.ID} {
		if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v (live Session actors: %d)", err, h.Runtime.Live())
	}
	if n := h.Runtime.Live(); n != 0 {
		t.Fatalf("%d Session actors live after shutdown", n)
	}
}

// TestCommandReachingAStoppedActor: a command that Shutdown's stopping
// actors forward to one that has just stopped (out of the process
// registry, its parent not yet told) comes back as protoactor's dead
// letter; that is the shutdown the caller raced, not an error of its own:
// an interrupt is answered as done (every Session is interrupted), as when
// the stopping actors drop a command. TestSoak (seed 80502, a Wait racing
// a restart) met it as "actors: *messages.Wait: future: dead letter".
func TestCommandReachingAStoppedActor(t *testing.T) {
	h := actortest.New(t)
	h.Model.Default(script.Text("hi"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid) // its actor is live, and idle
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	actors.SetSessionFault(func(msg any) {
		if _, ok := msg.(*actor.Stopped); ok {
			// Stopped comes after the actor left the registry and before
			// its Location is told it terminated.
			once.Do(func() { close(reached); <-release })
		}
	})
	defer actors.SetSessionFault(nil)
	done := make(chan error, 1)
	go func() { done <- h.Runtime.Shutdown(h.Ctx()) }()
	<-reached
	// The router and the Location still have the actor: the interrupt is
	// forwarded to it.
	err := h.Runtime.Interrupt(h.Ctx(), sid)
	close(release)
	if err != nil {
		t.Fatalf("an interrupt during shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// TestAdmissionOutlivesAFailedWake: a Location that cannot be built is
// refused when the Session is created, and stores nothing; a prompt to a
// Session whose directory went after it was created is admitted and
// answered with its receipt, not with the wake's error (a client would
// take an error for "not admitted" and admit it again), and it waits,
// pending, until the Location can be built and a run starts it.
func TestAdmissionOutlivesAFailedWake(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "removed")
	var broken atomic.Bool
	broken.Store(true)
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		built := c.Locations
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			if loc.Directory == gone && broken.Load() {
				return nil, messages.Errorf(messages.ErrInvalid, "location.directory: lstat %s: no such file or directory", gone)
			}
			return built.Get(loc)
		})
	}})
	if _, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{ID: "ses_refused", Location: messages.Location{Directory: gone}}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("create at an unbuildable Location: %v", err)
	}
	if _, err := h.Store.Get(h.Ctx(), "ses_refused"); messages.TypeOf(err) != messages.ErrSessionNotFound {
		t.Fatalf("a refused create stored a Session: %v", err)
	}
	s, _, err := h.Store.CreateSession(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: gone}})
	if err != nil {
		t.Fatal(err)
	}
	// An existing Session is returned as it is, whatever its Location.
	if again, created, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{ID: s.ID, Location: messages.Location{Directory: gone}}); err != nil || created || again.ID != s.ID {
		t.Fatalf("create reusing the ID: %+v %v %v", again, created, err)
	}
	req := persistence.PromptRequest{SessionID: s.ID, ID: "msg_kept", Prompt: messages.Prompt{Text: "hello"}}
	first, err := h.Runtime.Prompt(h.Ctx(), req)
	if err != nil {
		t.Fatalf("prompt whose wake fails: %v", err)
	}
	if _, err := h.Runtime.Compact(h.Ctx(), s.ID); err != nil {
		t.Fatalf("compact whose wake fails: %v", err)
	}
	if _, err := h.Runtime.Resume(h.Ctx(), s.ID); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("run reports why the Session cannot start: %v", err)
	}
	if again, err := h.Runtime.Prompt(h.Ctx(), req); err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("exact retry: %+v %v, want %+v", again, err, first)
	}
	broken.Store(false)
	h.Model.Default(script.Text("ok"))
	if _, err := h.Runtime.Resume(h.Ctx(), s.ID); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(s.ID)
	if n := count(h, s.ID, messages.TypePromptPromoted); n != 1 {
		t.Fatalf("%d promotions once the Location builds: %v", n, h.Types(s.ID))
	}
}

// TestCreateChecksTheDirectoryEachTime: a Location's services are kept
// once built, but a Session is not created in, nor moved to, a directory
// removed since.
func TestCreateChecksTheDirectoryEachTime(t *testing.T) {
	h := actortest.New(t)
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: dir}}); err != nil {
		t.Fatal(err)
	}
	other := h.Session()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: dir}}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("create in a removed directory: %+v, %v", s, err)
	}
	if s, err := h.Runtime.Move(h.Ctx(), other, messages.Location{Directory: dir}); messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("move to a removed directory: %+v, %v", s, err)
	}
}

// TestRemovedAgentFailsTheRun: a Session whose agent the configuration no
// longer has does not run as an agent without rules; its busy period fails
// with invalid, as one whose model went does.
func TestRemovedAgentFailsTheRun(t *testing.T) {
	h := actortest.New(t)
	var runs atomic.Int32
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { runs.Add(1); return "e", nil })
	h.Model.Default(script.ToolCall("c1", "echo", `{}`))
	s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: h.Dir}, Agent: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	delete(h.Agents, "plan") // the Session is idle: nothing reads the map now
	h.Prompt(s.ID, "go")
	h.WaitIdle(s.ID)
	var failed *messages.ExecutionFailed
	for _, ev := range h.Events(s.ID) {
		if f, ok := ev.Data.(*messages.ExecutionFailed); ok {
			failed = f
		}
	}
	if failed == nil || failed.Error.Type != messages.ErrInvalid || !strings.Contains(failed.Error.Message, `"plan"`) || runs.Load() != 0 || h.Model.Count() != 0 {
		t.Fatalf("failure %+v, %d tool runs, %d requests: %v", failed, runs.Load(), h.Model.Count(), h.Types(s.ID))
	}
	h.CheckReplay()
}

// badMetadataProvider starts a text fragment whose provider metadata is not
// JSON.
type badMetadataProvider struct{}

func (badMetadataProvider) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		_ = yield(llm.Event{Kind: llm.TextStart, ProviderMetadata: []byte(`{"sig":`)}, nil)
	}
}

// TestProviderMetadataThatIsNotJSONIsRefused: a provider event whose
// metadata is not JSON fails the step instead of being stored, where it
// would have made every later history page and log replay unservable.
func TestProviderMetadataThatIsNotJSONIsRefused(t *testing.T) {
	h := actortest.New(t)
	h.Services.Provider = func(string) (llm.Provider, error) { return badMetadataProvider{}, nil }
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if f := lastOf[*messages.StepFailed](h, sid); f == nil || f.Error.Type != messages.ErrProviderUnknown {
		t.Fatalf("step: %+v: %v", f, h.Types(sid))
	}
	if _, err := json.Marshal(h.Events(sid)); err != nil {
		t.Fatalf("the Session's events cannot be served: %v", err)
	}
	h.CheckReplay()
}

// TestIdleLocationsStop: once every Session actor of a Location has
// passivated, its Location actor stops and its service set is dropped, so
// neither lives on for each directory a long-running daemon has seen, and
// the next command builds the set from the directory as it is then. Under
// load (passivation every millisecond, Sessions of several Locations) no
// command is lost to a Location actor stopping.
func TestIdleLocationsStop(t *testing.T) {
	var h *actortest.Harness
	var builds atomic.Int32
	h = actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		c.IdleTimeout = time.Millisecond
		c.Locations = locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
			builds.Add(1)
			svc := *h.Services
			svc.Location = loc
			return &svc, nil
		})
	}})
	h.Model.Default(script.Text("ok"))
	const dirs, prompts = 3, 20
	var wg sync.WaitGroup
	var sid messages.SessionID
	for range dirs {
		s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		sid = s.ID
		wg.Go(func() {
			for range prompts {
				h.Prompt(s.ID, "p")
				h.WaitIdle(s.ID)
			}
		})
	}
	wg.Wait()
	if n := h.Model.Count(); n != dirs*prompts {
		t.Fatalf("%d of %d prompts answered", n, dirs*prompts)
	}
	eventually(t, "every Location actor to stop", func() bool {
		n, _ := h.Runtime.LocationActors()
		return h.Runtime.Live() == 0 && n == 0
	})
	// A Session of a Location used before (a new Session would build its
	// Location's set at creation, whatever the router kept).
	before := builds.Load()
	h.Prompt(sid, "after")
	h.WaitIdle(sid)
	if builds.Load() == before {
		t.Fatalf("a Location used again after its actor stopped kept its old service set (%d builds)", before)
	}
}

// TestCommandPastAnIdleReport: a command the router forwards to a
// Location actor after that actor reported itself idle, and before the
// router read the report, keeps the actor: stopping it would drop the
// command in its mailbox (a wake lost: the prompt it was for waits for
// the next one).
func TestCommandPastAnIdleReport(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.IdleTimeout = time.Millisecond }})
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	reached, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(actors.HoldIdleReports(func() {
		close(reached)
		<-release
	}))
	select { // the Session actor passivates; its Location reports idle
	case <-reached:
	case <-time.After(actortest.Timeout):
		t.Fatal("the Location never reported itself idle")
	}
	prompted := promptPastTheRouter(t, h, sid, "two") // to the held Location actor's mailbox
	close(release)
	if err := <-prompted; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 2 {
		t.Fatalf("%d of 2 prompts answered: %v", n, h.Types(sid))
	}
}

// watermarkUntilCancelled, once armed, holds the runner's next Watermark
// read until its context is cancelled and fails it with the context's
// error, as a store read an interrupt cuts short does.
type watermarkUntilCancelled struct {
	persistence.Store
	armed   atomic.Bool
	entered chan struct{}
}

func (s *watermarkUntilCancelled) Watermark(ctx context.Context, sid messages.SessionID) (int64, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return s.Store.Watermark(ctx, sid)
}

// TestInterruptCuttingAReadShortIsAnInterruption checks that a busy period
// an interrupt ends while the runner is reading the store (between steps)
// is recorded as interrupted with the interrupt's reason, not as failed
// with the read's context error: the error is the interrupt's doing.
func TestInterruptCuttingAReadShortIsAnInterruption(t *testing.T) {
	h, st := withStore(t, func(s persistence.Store) *watermarkUntilCancelled {
		return &watermarkUntilCancelled{Store: s, entered: make(chan struct{})}
	})
	h.Tools.Add("arm", func(context.Context, locations.ToolCall) (string, error) {
		st.armed.Store(true) // the boundary after this step reads the watermark
		return "armed", nil
	})
	h.Model.Reply(script.ToolCall("c1", "arm", `{}`))
	h.Model.Default(script.Text("unused"))
	sid := h.Session()
	h.Prompt(sid, "go")
	select {
	case <-st.entered:
	case <-h.Ctx().Done():
		t.Fatal("the runner never read the watermark after the step")
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	types := h.Types(sid)
	i := lastOf[*messages.ExecutionInterrupted](h, sid)
	if i == nil || i.Reason != messages.ReasonUser || types[len(types)-1] != "session.execution.interrupted" {
		t.Fatalf("busy period ended %+v: %v", i, types)
	}
}

// TestRunnerPanicDropsWhatItHadNotCommitted: a panic while the runner
// holds events it has not committed yet (here the step.started of a step
// whose request it was assembling) fails the busy period without them: a
// step the store never held is not opened by the terminal's commit. The
// terminal's commit carried the held step.started with it, so the log
// showed a step that started and never ended inside a busy period that had
// (a later drain's orphan sweep closed it, as if the process had died).
func TestRunnerPanicDropsWhatItHadNotCommitted(t *testing.T) {
	h, st := withStore(t, func(s persistence.Store) *messagesFailingStore { return &messagesFailingStore{Store: s, panics: true} })
	h.Model.Default(script.Text("answered"))
	sid := h.Session()
	st.promptWhileFailing(t, h, sid, "go")
	checkBusyPeriods(t, h, sid)
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || !strings.Contains(f.Error.Message, "store bug reading messages") {
		t.Fatalf("the busy period did not fail with the panic: %v", h.Types(sid))
	}
	if n := count(h, sid, messages.TypeStepStarted); n != count(h, sid, messages.TypeStepFailed) {
		t.Fatalf("a step left open: %v", h.Types(sid))
	}
	open, err := h.Store.OpenSteps(h.Ctx(), sid)
	if err != nil || len(open) != 0 {
		t.Fatalf("open steps after the busy period: %v %v: %v", open, err, h.Types(sid))
	}
	h.CheckReplay()
}

// terminalPanickingStore panics on the first commit of a busy period's
// success, as a store with a bug does.
type terminalPanickingStore struct {
	persistence.Store
	panicked atomic.Bool
}

func (s *terminalPanickingStore) Commit(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	for _, p := range ps {
		if _, ok := p.(*messages.ExecutionSucceeded); ok && s.panicked.CompareAndSwap(false, true) {
			panic("store bug committing a terminal")
		}
	}
	return s.Store.Commit(ctx, sid, ps...)
}

// TestStorePanicOnTheTerminalKeepsTheProcess: a Store that panics
// committing a busy period's terminal (outside the runner's recover)
// does not end the process: the Session goes idle, its next prompt runs,
// and the refused terminal is written first, so each busy period has its
// one terminal.
func TestStorePanicOnTheTerminalKeepsTheProcess(t *testing.T) {
	h, st := withStore(t, func(s persistence.Store) *terminalPanickingStore { return &terminalPanickingStore{Store: s} })
	h.Model.Default(script.Text("answered"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if !st.panicked.Load() {
		t.Fatalf("the terminal never reached the store: %v", h.Types(sid))
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if h.Model.Count() != 2 || len(checkBusyPeriods(t, h, sid)) != 2 {
		t.Fatalf("after the panic: %v", h.Types(sid))
	}
	h.CheckReplay()
}

// movedStore holds the commit of each session.moved.1 while hold is set:
// a Location actor committing the move of a Session it has no actor for
// reads nothing else meanwhile.
type movedStore struct {
	persistence.Store
	hold             atomic.Bool
	reached, release chan struct{}
}

func (s *movedStore) Append(ctx context.Context, id messages.SessionID, data ...messages.Payload) ([]messages.Event, error) {
	if len(data) == 1 && s.hold.Load() {
		if _, ok := data[0].(*messages.SessionMoved); ok {
			close(s.reached)
			<-s.release
		}
	}
	return s.Store.Append(ctx, id, data...)
}

// TestStaleIdleReportKeepsTheNextActor: a Session actor whose timer fires
// twice before its Location reads the first report sends two reports with
// the same count. The first stops it (nothing is in flight to it) and
// removes it from the Location at once, so the wake queued behind the
// report gets a fresh actor instead of the stopped one (losing the prompt
// it was for). The second report is stale: its count may match what the
// fresh actor has been sent, and stopping that one would lose the wake (or
// cancel its drain) as well.
func TestStaleIdleReportKeepsTheNextActor(t *testing.T) {
	fire, restore := actors.HoldIdleTimers()
	t.Cleanup(restore)
	h, st := withStore(t, func(s persistence.Store) *movedStore {
		return &movedStore{Store: s, reached: make(chan struct{}), release: make(chan struct{})}
	})
	h.Model.Default(script.Text("ok"))
	var started atomic.Int32
	actors.SetSessionFault(func(msg any) {
		if _, ok := msg.(*actor.Started); ok {
			started.Add(1)
		}
	})
	defer actors.SetSessionFault(nil)
	sid, other := h.Session(), h.Session() // one Location; other has no actor
	armed := func(n int64) {
		t.Helper()
		eventually(t, "an idle timer to be armed", func() bool { return actors.IdleTimersArmed() == n })
	}
	h.Prompt(sid, "one") // its actor has handled one command
	armed(2)             // as it started, and as the busy period ended
	st.hold.Store(true)
	moved := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Move(h.Ctx(), other, messages.Location{Directory: t.TempDir()})
		moved <- err
	}()
	<-st.reached // the Location actor is committing other's move
	fire()       // the first report: sid's actor handled one command
	armed(3)
	prompted := promptPastTheRouter(t, h, sid, "two") // queued behind the first report
	fire()                                            // the second, stale report
	armed(4)
	waited := make(chan error, 1)
	go func() { waited <- h.Runtime.Wait(h.Ctx(), sid) }() // behind the second report
	close(st.release)
	for _, ch := range []<-chan error{moved, prompted, waited} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	// The wait is answered by an actor that has started (and handled
	// everything before it): a third one means the stale report stopped the
	// one the wake started.
	if n := started.Load(); n != 2 {
		t.Fatalf("%d Session actors started, want 2: the stale report stopped the one the wake started", n)
	}
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 2 {
		t.Fatalf("%d of 2 prompts answered: %v", n, h.Types(sid))
	}
	for _, typ := range h.Types(sid) {
		if typ == "session.execution.interrupted" {
			t.Fatalf("a busy period was interrupted: %v", h.Types(sid))
		}
	}
}

// TestPassivatedActorStops: the actor a Location passivates stops, though
// another Session's actor keeps the Location (which would stop it with
// itself).
func TestPassivatedActorStops(t *testing.T) {
	h, fire := idleHeldHarness(t)
	sid, other := h.Session(), h.Session()
	h.Prompt(other, "one")
	waitIdleArmed(h, other)
	h.Prompt(sid, "two")
	waitIdleArmed(h, sid) // fire sends its tick
	if n := h.Runtime.Live(); n != 2 {
		t.Fatalf("%d Session actors live, want 2", n)
	}
	fire()
	eventually(t, "the passivated actor to stop", func() bool { return h.Runtime.Live() == 1 })
}

// TestRunnerPanicInAnOpenStepClosesIt: a panic in the runner while a step
// it committed is open (its first call durable, the second panicking)
// fails the busy period with the step closed, settlement first: the
// durable call fails with the panic and the step fails, in this busy
// period rather than by a later drain's orphan sweep.
func TestRunnerPanicInAnOpenStepClosesIt(t *testing.T) {
	// A store with a bug panics committing the call c2: the runner's
	// handling of it panics while the step (durable with c1's call) is open.
	h, st := withStore(t, func(s persistence.Store) *callFaultStore {
		return &callFaultStore{Store: s, callID: "c2", fault: func() error { panic("store bug committing a call") }}
	})
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`), script.ToolCall("c2", "echo", `{}`))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if !st.hit.Load() {
		t.Fatalf("the second call never reached the store: %v", h.Types(sid))
	}
	checkBusyPeriods(t, h, sid)
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || !strings.Contains(f.Error.Message, "store bug committing a call") {
		t.Fatalf("the busy period did not fail with the panic: %v", h.Types(sid))
	}
	open, err := h.Store.OpenSteps(h.Ctx(), sid)
	if err != nil || len(open) != 0 {
		t.Fatalf("open steps after the busy period: %v %v: %v", open, err, h.Types(sid))
	}
	if n := count(h, sid, messages.TypeToolCalled); n != 1 || count(h, sid, messages.TypeToolFailed) != 1 || count(h, sid, messages.TypeStepFailed) != 1 {
		t.Fatalf("the durable call and its step were not failed: %v", h.Types(sid))
	}
	h.CheckReplay()
}

// deafProvider streams a call of "first", then, once told, waits for its
// context to be cancelled and streams a call of "late" anyway, as a
// provider that ignores cancellation does.
type deafProvider struct{ called chan struct{} }

func (p deafProvider) Stream(ctx context.Context, _ llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if !yield(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "first", Input: []byte(`{}`)}, nil) {
			return
		}
		close(p.called)
		<-ctx.Done()
		yield(llm.Event{Kind: llm.ToolCall, CallID: "c2", Name: "late", Input: []byte(`{}`)}, nil)
	}
}

// TestToolOfAnInterruptedStepDoesNotRun: a call that reaches its tool actor
// after the step was interrupted (here streamed late by a provider that
// ignores cancellation) is not run: it fails as interrupted. A tool that
// does not watch its context would otherwise run a side effect the user
// had already stopped.
func TestToolOfAnInterruptedStepDoesNotRun(t *testing.T) {
	h := actortest.New(t)
	called := make(chan struct{})
	h.Services.Provider = func(string) (llm.Provider, error) { return deafProvider{called: called}, nil }
	var ran atomic.Bool
	h.Tools.Add("first", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	h.Tools.Add("late", func(context.Context, locations.ToolCall) (string, error) { ran.Store(true); return "ran", nil })
	sid := h.Session()
	h.Prompt(sid, "go")
	<-called
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Fatalf("the late call ran after the interrupt: %v", h.Types(sid))
	}
	var late *messages.ToolFailed
	for _, ev := range h.Events(sid) {
		if f, ok := ev.Data.(*messages.ToolFailed); ok && f.CallID == "c2" {
			late = f
		}
	}
	if late == nil || late.Error.Type != messages.ErrAborted || late.Error.Message != "Tool execution interrupted: late" {
		t.Fatalf("the late call settled %+v: %v", late, h.Types(sid))
	}
	if i := lastOf[*messages.ExecutionInterrupted](h, sid); i == nil || i.Reason != messages.ReasonUser {
		t.Fatalf("busy period ended %+v: %v", i, h.Types(sid))
	}
}

// idleHeldHarness returns a harness whose model answers "ok", with the
// idle timers held until fire sends their ticks.
func idleHeldHarness(t *testing.T) (h *actortest.Harness, fire func()) {
	fire, restore := actors.HoldIdleTimers()
	t.Cleanup(restore)
	h = actortest.New(t)
	h.Model.Default(script.Text("ok"))
	return h, fire
}

// TestRunOfASessionWithoutMessages: an explicit run of an idle Session is
// a forced drain, which continues from the projected history; a Session
// without a single message sent the model a request with no messages,
// which real providers refuse, and the step failed. Such a run has nothing
// to do: it asks the model nothing and leaves no trace in the log, as a
// wake with nothing eligible does. A Session with history still runs its
// forced step.
func TestRunOfASessionWithoutMessages(t *testing.T) {
	h := actortest.New(t)
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	before := h.Types(sid)
	if _, err := h.Runtime.Resume(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 0 {
		t.Fatalf("%d model requests, want none: %v", n, h.Model.Requests())
	}
	if got := h.Types(sid); !reflect.DeepEqual(got, before) {
		t.Fatalf("events %v, want %v", got, before)
	}
	if active := h.Runtime.Active(); len(active) != 0 {
		t.Fatalf("active %v", active)
	}
	h.Prompt(sid, "hello")
	h.WaitIdle(sid)
	if _, err := h.Runtime.Resume(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 2 {
		t.Fatalf("%d model requests, want the prompt's and the forced run's", n)
	}
	h.CheckReplay()
}

// TestShutdownMidBusyPeriodStopsEachToolOnce: a Session actor that
// Shutdown stops in the middle of a busy period (one that began after
// Shutdown's interrupts, or whose interrupts did not finish in time: here
// the deadline has passed, so they and stopAll go at once) lets the busy
// period end before it stops. Stopped at once, it had protoactor stop its
// drain actor and every tool actor that still listed, while each tool's
// goroutine, cancelled, reported toolFinished and had the drain actor stop
// it too: most runs logged a dead letter of Stop.
func TestShutdownMidBusyPeriodStopsEachToolOnce(t *testing.T) {
	const calls = 4
	for range 40 {
		h, logs := loggedHarness(t)
		var started, returned sync.WaitGroup
		started.Add(calls)
		returned.Add(calls)
		h.Tools.Add("block", func(ctx context.Context, _ locations.ToolCall) (string, error) {
			defer returned.Done()
			started.Done()
			<-ctx.Done()
			return "", ctx.Err()
		})
		var steps []script.Step
		for c := range calls {
			steps = append(steps, script.ToolCall("call_"+strconv.Itoa(c), "block", `{}`))
		}
		h.Model.Reply(steps...)
		sid := h.Session()
		h.Prompt(sid, "go")
		started.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := h.Runtime.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("shutdown past its deadline: %v", err)
		}
		returned.Wait()
		h.WaitEvent(sid, actortest.OfType(messages.TypeExecutionInterrupted))
		eventually(t, "the Session actor to stop", func() bool { return h.Runtime.Live() == 0 })
		noDeadLetters(t, h, logs)
	}
}

// heldFailureStore holds the commit of the first busy period's failure
// until release is closed, closing reached first.
type heldFailureStore struct {
	persistence.Store
	reached, release chan struct{}
	held             atomic.Bool
}

func (s *heldFailureStore) Commit(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	for _, p := range ps {
		if _, ok := p.(*messages.ExecutionFailed); ok && s.held.CompareAndSwap(false, true) {
			close(s.reached)
			<-s.release
		}
	}
	return s.Store.Commit(ctx, sid, ps...)
}

// TestRunAfterADrainFailedStartsTheNextBusyPeriod: a run arriving once a
// drain has failed, while its busy period's failure is being committed,
// starts the next busy period, forced, as it does once a busy period that
// succeeded has no follow-up left. It used to join the busy period that
// was ending: answered joined, and nothing ran after it.
func TestRunAfterADrainFailedStartsTheNextBusyPeriod(t *testing.T) {
	h, st := withStore(t, func(s persistence.Store) *heldFailureStore {
		return &heldFailureStore{Store: s, reached: make(chan struct{}), release: make(chan struct{})}
	})
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderInvalidRequest, "refused")))
	h.Model.Reply(script.Text("answered"))
	sid := h.Session()
	h.Prompt(sid, "go")
	select {
	case <-st.reached:
	case <-h.Ctx().Done():
		t.Fatalf("the busy period did not fail: %v", h.Types(sid))
	}
	joined, err := h.Runtime.Resume(h.Ctx(), sid)
	close(st.release)
	if err != nil || joined {
		t.Fatalf("a run after the drain failed: joined=%v err=%v", joined, err)
	}
	h.WaitIdle(sid)
	if h.Model.Count() != 2 || count(h, sid, messages.TypeExecutionStarted) != 2 ||
		count(h, sid, messages.TypeExecutionFailed) != 1 || count(h, sid, messages.TypeExecutionSucceeded) != 1 {
		t.Fatalf("%d requests; want a failed busy period and a forced one after it: %v", h.Model.Count(), h.Types(sid))
	}
	h.CheckReplay()
}
