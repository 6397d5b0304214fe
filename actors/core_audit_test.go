package actors_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
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

// promotedInputs returns the input IDs the Session's log promoted.
func promotedInputs(h *actortest.Harness, sid messages.SessionID) []messages.MessageID {
	var out []messages.MessageID
	for _, ev := range h.Events(sid) {
		if p, ok := ev.Data.(*messages.PromptPromoted); ok {
			out = append(out, p.InputID)
		}
	}
	return out
}

// checkBusyPeriods fails the test unless every execution.started of the
// Session's log is followed by exactly one terminal before the next one,
// and returns the terminals.
func checkBusyPeriods(t *testing.T, h *actortest.Harness, sid messages.SessionID) (terminals []messages.Event) {
	t.Helper()
	open := false
	for _, ev := range h.Events(sid) {
		switch ev.Type {
		case messages.TypeExecutionStarted:
			if open {
				t.Fatalf("a busy period started inside another: %v", h.Types(sid))
			}
			open = true
		case messages.TypeExecutionSucceeded, messages.TypeExecutionFailed, messages.TypeExecutionInterrupted:
			if !open {
				t.Fatalf("a busy-period terminal without its start: %v", h.Types(sid))
			}
			open = false
			terminals = append(terminals, ev)
		}
	}
	if open {
		t.Fatalf("a busy period without its terminal: %v", h.Types(sid))
	}
	return terminals
}

// TestInterruptWhilePreparingInstructionsKeepsThePromptPending: an
// interrupt that arrives while the runner observes the instructions of a
// step boundary (before it promotes) stops the drain there. The prompt the
// wake was for stays in the inbox for a later wake, and no step is
// started. The runner went on with the cancelled context instead: it
// promoted the prompt into history (so a later wake, which answers only
// promotable input, never answered it) and opened a step that failed as
// interrupted at once.
func TestInterruptWhilePreparingInstructionsKeepsThePromptPending(t *testing.T) {
	src := &heldSource{reached: make(chan struct{})}
	h := actortest.New(t, actortest.Options{Instructions: &locations.InstructionsConfig{Getenv: func(string) string { return "" }, Skills: src}})
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("second answer"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)

	src.armed.Store(true) // the next boundary's observation blocks
	two := h.Prompt(sid, "two")
	select {
	case <-src.reached:
	case <-h.Ctx().Done():
		t.Fatal("the drain never observed the instructions")
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	for _, id := range promotedInputs(h, sid) {
		if id == two.ID {
			t.Fatalf("the prompt was promoted after the interrupt: %v", h.Types(sid))
		}
	}
	if n := count(h, sid, messages.TypeStepStarted); n != 1 {
		t.Fatalf("%d steps started, want only the first prompt's: %v", n, h.Types(sid))
	}
	checkBusyPeriods(t, h, sid)
	if len(h.Runtime.Active()) != 0 {
		t.Fatalf("active after the interrupt: %v", h.Runtime.Active())
	}

	// The durable inbox row is there for the next wake.
	if err := h.Runtime.Wake(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if h.Model.Count() != 2 {
		t.Fatalf("%d model requests, want the second prompt answered: %v", h.Model.Count(), h.Types(sid))
	}
	if got := userTexts(h.Request(2)); len(got) != 2 || got[1] != "two" {
		t.Fatalf("second request users %v", got)
	}
	h.CheckReplay()
}

// messagesFailingStore fails the Session's message reads while failing is
// set, as a store that cannot read its projections does, or panics on
// them when panics is set, as a store with a bug does.
type messagesFailingStore struct {
	persistence.Store
	panics  bool
	failing atomic.Bool
	failed  atomic.Int64
}

func (s *messagesFailingStore) Messages(ctx context.Context, sid messages.SessionID, q persistence.Query) (persistence.Page[persistence.Message], error) {
	if s.failing.Load() {
		s.failed.Add(1)
		if s.panics {
			panic("store bug reading messages")
		}
		return persistence.Page[persistence.Message]{}, errors.New("audit: messages unreadable")
	}
	return s.Store.Messages(ctx, sid, q)
}

// promptWhileFailing prompts sid with text while the store fails its
// message reads, waits until the Session is idle, and checks that a read
// was refused.
func (s *messagesFailingStore) promptWhileFailing(t *testing.T, h *actortest.Harness, sid messages.SessionID, text string) {
	t.Helper()
	s.failing.Store(true)
	h.Prompt(sid, text)
	h.WaitIdle(sid)
	s.failing.Store(false)
	if s.failed.Load() == 0 {
		t.Fatalf("the request never read the messages: %v", h.Types(sid))
	}
}

// withStore returns a harness whose runtime uses the store wrap makes of
// the harness's own, and that store.
func withStore[S persistence.Store](t *testing.T, wrap func(persistence.Store) S) (*actortest.Harness, S) {
	var st S
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		st = wrap(c.Store)
		c.Store = st
	}})
	return h, st
}

// TestRequestAssemblyFailureFailsTheBusyPeriod: a step whose request
// cannot be assembled (history cannot be read) fails, and so does its busy
// period: it stops there, as one whose model cannot be resolved does. The
// runner failed the step and then carried on as if it had ended: the busy
// period went on to promote the queued prompt behind it, and ended as
// succeeded, so a client saw a successful execution that answered
// nothing.
func TestRequestAssemblyFailureFailsTheBusyPeriod(t *testing.T) {
	h, st := withStore(t, func(s persistence.Store) *messagesFailingStore { return &messagesFailingStore{Store: s} })
	h.Model.Default(script.Text("answered"))
	sid := h.Session()
	queued := h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "queued"},
		Delivery: messages.Queue, Resume: no()})
	st.promptWhileFailing(t, h, sid, "steer")
	checkBusyPeriods(t, h, sid)
	f := lastOf[*messages.ExecutionFailed](h, sid)
	if f == nil || count(h, sid, messages.TypeExecutionSucceeded) != 0 {
		t.Fatalf("the busy period did not fail: %v", h.Types(sid))
	}
	if n := count(h, sid, messages.TypeStepFailed); n != 1 || count(h, sid, messages.TypeStepStarted) != 1 {
		t.Fatalf("want the one step, failed: %v", h.Types(sid))
	}
	if h.Model.Count() != 0 {
		t.Fatalf("%d model requests after the failure", h.Model.Count())
	}
	in, err := h.Store.Input(h.Ctx(), queued.ID)
	if err != nil || in.PromotedSeq != nil {
		t.Fatalf("the queued prompt was promoted after the failure: %+v %v: %v", in, err, h.Types(sid))
	}
	h.CheckReplay()
}

// toolThenPanicProvider streams a call of the tool "work", then closes
// panicking and panics, as a provider adapter with a bug does.
type toolThenPanicProvider struct{ panicking chan struct{} }

func (p toolThenPanicProvider) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if !yield(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "work", Input: []byte(`{}`)}, nil) {
			return
		}
		close(p.panicking)
		panic("provider adapter bug")
	}
}

// TestProviderPanicAwaitsItsTools: a provider stream that panics
// after a local tool call is a thrown provider failure, which keeps
// settlement-first ordering (SEED.md): the runner awaits the call it
// started and records its real outcome before the step fails. It failed
// the step from the recovered panic instead, recording the call as failed
// ("The runner failed") while the tool was still running, never awaited:
// its side effects went on after its step and busy period had closed, and
// its result was thrown away.
func TestProviderPanicAwaitsItsTools(t *testing.T) {
	h := actortest.New(t)
	panicking := make(chan struct{})
	h.Services.Provider = func(string) (llm.Provider, error) { return toolThenPanicProvider{panicking: panicking}, nil }
	var finished atomic.Bool
	h.Tools.Add("work", func(ctx context.Context, _ locations.ToolCall) (string, error) {
		<-panicking // still running when the stream panics
		finished.Store(true)
		return "done", nil
	})
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if !finished.Load() {
		t.Fatal("the tool never finished")
	}
	checkBusyPeriods(t, h, sid)
	evs := h.Events(sid)
	if !settledThenFailed(t, h, sid, messages.ErrProviderUnknown) {
		t.Fatalf("want the call's own result, then the step's failure: %v", h.Types(sid))
	}
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || h.Types(sid)[len(evs)-1] != "session.execution.failed" {
		t.Fatalf("the busy period did not fail: %v", h.Types(sid))
	}
	open, err := h.Store.OpenSteps(h.Ctx(), sid)
	if err != nil || len(open) != 0 {
		t.Fatalf("open steps after the busy period: %v %v", open, err)
	}
	h.CheckReplay()
}

// TestStuckToolsShareOneGrace: an interrupted step waits for the
// tools that ignore cancellation at most toolGrace in all, then settles
// them as interrupted. It waited toolGrace for each of them in turn, so an
// interrupt (and a shutdown) of a step with several stuck tools took that
// many times as long: with the default ten seconds, five stuck tools held
// the interrupt for fifty. The graces are counted rather than timed: each
// runs out at once, and the step must start one for all its stuck tools.
// It runs with the default grace and with a configured one (ToolGrace).
func TestStuckToolsShareOneGrace(t *testing.T) {
	for _, grace := range []struct{ config, want time.Duration }{{0, 10 * time.Second}, {42 * time.Second, 42 * time.Second}} {
		t.Run(grace.want.String(), func(t *testing.T) { stuckToolsShareOneGrace(t, grace.config, grace.want) })
	}
}

func stuckToolsShareOneGrace(t *testing.T, config, want time.Duration) {
	const tools = 6
	// Restored after the harness's own cleanup, which registers later.
	graces, restore := actors.CountToolGraces()
	t.Cleanup(restore)
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.ToolGrace = config }})
	started := make(chan string, tools)
	release := make(chan struct{})
	defer close(release) // before the harness shuts down (a cleanup)
	h.Tools.Add("stuck", func(_ context.Context, call locations.ToolCall) (string, error) {
		started <- call.CallID
		<-release // ignores its cancelled context
		return "late", nil
	})
	var steps []script.Step
	for i := range tools {
		steps = append(steps, script.ToolCall(fmt.Sprintf("c%d", i), "stuck", `{}`))
	}
	h.Model.Reply(steps...)
	sid := h.Session()
	h.Prompt(sid, "go")
	for range tools {
		select {
		case <-started:
		case <-h.Ctx().Done():
			t.Fatal("the tools never started")
		}
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	// One grace per stuck tool, one after another, was the bug.
	if g := graces(); len(g) != 1 || g[0] != want {
		t.Fatalf("the interrupted step started graces %v for its %d stuck tools, want one of %v for all of them", g, tools, want)
	}
	checkBusyPeriods(t, h, sid)
	aborted := 0
	for _, ev := range h.Events(sid) {
		if f, ok := ev.Data.(*messages.ToolFailed); ok && f.Error.Type == messages.ErrAborted {
			aborted++
		}
	}
	if aborted != tools || lastOf[*messages.ExecutionInterrupted](h, sid) == nil {
		t.Fatalf("want %d calls settled as interrupted, then the busy period: %v", tools, h.Types(sid))
	}
}

// panicOnRequest passes requests to a scripted model, but panics on the
// n-th (one-based), as a provider adapter with a bug does.
type panicOnRequest struct {
	llm.Provider
	n     int32
	count atomic.Int32
}

func (p *panicOnRequest) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	if p.count.Add(1) == p.n {
		return func(func(llm.Event, error) bool) { panic("provider adapter bug") }
	}
	return p.Provider.Stream(ctx, req)
}

// TestPanicDuringACompactionSettlesIt: a busy period that a panic
// ends in the middle of a manual compaction settles that compaction (and
// with it the barrier) as failed, as it closes a step the panic left open.
// It left the compaction running: the busy period ended with its row
// shown in progress and the barrier holding back every prompt until a
// later drain found it and failed it as if the process had died.
func TestPanicDuringACompactionSettlesIt(t *testing.T) {
	h := actortest.New(t)
	p := &panicOnRequest{Provider: h.Model, n: 2}
	h.Services.Provider = func(string) (llm.Provider, error) { return p, nil }
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("after the failed compaction"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	in, err := h.Runtime.Compact(h.Ctx(), sid)
	if err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	checkBusyPeriods(t, h, sid)
	if f := lastOf[*messages.CompactionFailed](h, sid); f == nil || f.InputID != in.ID {
		t.Fatalf("the compaction was not settled: %v", h.Types(sid))
	}
	if types := h.Types(sid); types[len(types)-1] != "session.execution.failed" {
		t.Fatalf("the busy period did not fail: %v", types)
	}
	rows, err := h.Store.Pending(h.Ctx(), sid)
	if err != nil || len(rows) != 0 {
		t.Fatalf("the barrier is still pending: %+v %v", rows, err)
	}
	// The next prompt is answered at once: nothing holds it back.
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeCompactionFailed); n != 1 {
		t.Fatalf("%d compaction failures, want the one: %v", n, h.Types(sid))
	}
	if got := userTexts(h.Request(2)); got[len(got)-1] != "two" {
		t.Fatalf("request after the compaction users %v", got)
	}
	h.CheckReplay()
}

// settledThenFailed reports whether call c1's own result ("done") was
// recorded before its step failed, and fails t if the step failed with
// another type than want or ended instead.
func settledThenFailed(t *testing.T, h *actortest.Harness, sid messages.SessionID, want messages.ErrorType) bool {
	t.Helper()
	settled, failed := -1, -1
	for i, ev := range h.Events(sid) {
		switch p := ev.Data.(type) {
		case *messages.ToolSucceeded:
			if p.CallID == "c1" && p.Output == "done" {
				settled = i
			}
		case *messages.StepFailed:
			failed = i
			if p.Error.Type != want {
				t.Errorf("step failed with %+v, want %s", p.Error, want)
			}
		case *messages.StepEnded:
			t.Errorf("the failed stream ended its step: %+v", p)
		}
	}
	return settled >= 0 && failed >= 0 && settled < failed
}
