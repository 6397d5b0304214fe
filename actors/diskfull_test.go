package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// fullDisk is a store that refuses every write while full is set, as a
// store whose disk has no room does (persistence's TestDiskFull: the
// writes that do not fit fail, and writing resumes once there is room).
type fullDisk struct {
	persistence.Store
	full *atomic.Bool
}

// errNoRoom is what persistence.Bolt refuses a write with then.
var errNoRoom = fmt.Errorf("%w: %w", messages.Errorf(messages.ErrStorageFull, "the disk has no room for sessiond's store"),
	fmt.Errorf("injected: %w", syscall.ENOSPC))

func (s fullDisk) Commit(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	if s.full.Load() {
		return persistence.Committed{}, errNoRoom
	}
	return s.Store.Commit(ctx, sid, ps...)
}

func (s fullDisk) Append(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) ([]messages.Event, error) {
	if s.full.Load() {
		return nil, errNoRoom
	}
	return s.Store.Append(ctx, sid, ps...)
}

func (s fullDisk) Admit(ctx context.Context, req persistence.Admission) (persistence.Admitted, bool, error) {
	if s.full.Load() {
		return persistence.Admitted{}, false, errNoRoom
	}
	return s.Store.Admit(ctx, req)
}

// fullDiskHarness returns a harness whose store refuses every write while
// the flag is set.
func fullDiskHarness(t *testing.T) (*actortest.Harness, *atomic.Bool) {
	full := new(atomic.Bool)
	return actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Store = fullDisk{c.Store, full} }}), full
}

// fillDiskAt prompts a new Session and fills the disk once its model's
// stream reaches g.
func fillDiskAt(t *testing.T, h *actortest.Harness, full *atomic.Bool, g *script.Gate) messages.SessionID {
	t.Helper()
	sid := h.Session()
	h.Prompt(sid, "first")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	return sid
}

// countingEcho adds an echo tool and returns how many times it ran.
func countingEcho(h *actortest.Harness) *atomic.Int32 {
	runs := new(atomic.Int32)
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { runs.Add(1); return "ok", nil })
	return runs
}

// roomAgain checks that nothing runs in sid while the disk is full, gives
// the disk room, runs a second prompt to its end, and returns the two busy
// periods' terminals: each busy period has exactly one, the one the full
// disk refused written before the next busy period starts.
func roomAgain(t *testing.T, h *actortest.Harness, full *atomic.Bool, sid messages.SessionID) []messages.Event {
	t.Helper()
	if got := h.Runtime.Active(); len(got) != 0 {
		t.Fatalf("active with the disk full: %v", got)
	}
	full.Store(false)
	h.Prompt(sid, "second")
	h.WaitIdle(sid)
	terminals := checkBusyPeriods(t, h, sid)
	if len(terminals) != 2 {
		t.Fatalf("busy periods: %v", h.Types(sid))
	}
	return terminals
}

// checkStepsClosed checks that every step the log started it also closed.
func checkStepsClosed(t *testing.T, h *actortest.Harness, sid messages.SessionID) {
	t.Helper()
	started, closed := count(h, sid, messages.TypeStepStarted), count(h, sid, messages.TypeStepEnded)+count(h, sid, messages.TypeStepFailed)
	if started != closed {
		t.Fatalf("%d steps started, %d closed: %v", started, closed, h.Types(sid))
	}
}

// TestDiskFullMidBusyPeriod: the store refuses every write from the
// middle of a step on, the busy period's terminal included, and then has
// room again. The Session must not be left busy or wedged: it goes idle,
// a prompt refused meanwhile is not in the log, the next prompt runs, and
// the log keeps its invariants: every step that started is closed, the
// tool ran once, and every busy period has exactly one terminal (SEED.md),
// the refused one written once the store takes writes again.
func TestDiskFullMidBusyPeriod(t *testing.T) {
	h, full := fullDiskHarness(t)
	runs := countingEcho(h)
	g := script.NewGate()
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`))
	h.Model.Reply(script.Hold(g), script.Text("lost to the full disk"))
	h.Model.Default(script.Text("done"))
	sid := fillDiskAt(t, h, full, g)
	g.Release()
	h.WaitIdle(sid)
	if _, err := h.Runtime.Prompt(h.Ctx(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "refused"}}); !errors.Is(err, syscall.ENOSPC) || messages.TypeOf(err) != messages.ErrStorageFull {
		t.Fatalf("prompt while the disk is full: %v", err)
	}
	terminals := roomAgain(t, h, full, sid)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	checkStepsClosed(t, h, sid)
	for _, ev := range h.Events(sid) {
		if p, ok := ev.Data.(*messages.PromptAdmitted); ok && p.Prompt.Text == "refused" {
			t.Fatalf("a refused prompt is in the log: %v", h.Types(sid))
		}
	}
	pending, err := h.Store.Pending(h.Ctx(), sid)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending after the last busy period: %v, %v", pending, err)
	}
	// The first busy period's terminal, which the full disk refused,
	// says why it failed.
	f, ok := terminals[0].Data.(*messages.ExecutionFailed)
	if !ok || f.Error.Type != messages.ErrStorageFull || terminals[1].Type != messages.TypeExecutionSucceeded {
		t.Fatalf("terminals %+v, %s", terminals[0].Data, terminals[1].Type)
	}
	h.CheckReplay()
}

// TestInterruptOnAFullDisk: an interrupt while the disk is full, in a step
// whose tool call is in the log, returns once the busy period has ended in
// this process, though nothing it settles can be written; the Session is
// idle. Once there is room the interrupted terminal is written before the
// next busy period starts, and that one closes the step and its call
// (settled once, never re-run), as after a crash.
func TestInterruptOnAFullDisk(t *testing.T) {
	h, full := fullDiskHarness(t)
	runs := countingEcho(h)
	g := script.NewGate()
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`), script.Hold(g), script.Text("after"))
	h.Model.Default(script.Text("done"))
	// The step and its call are in the log; its settlement and end are not.
	sid := fillDiskAt(t, h, full, g)
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatalf("interrupt on a full disk: %v", err)
	}
	terminals := roomAgain(t, h, full, sid)
	if p, ok := terminals[0].Data.(*messages.ExecutionInterrupted); !ok || p.Reason != messages.ReasonUser {
		t.Fatalf("first terminal %s %+v: %v", terminals[0].Type, terminals[0].Data, h.Types(sid))
	}
	checkStepsClosed(t, h, sid)
	if n := runs.Load(); n > 1 || count(h, sid, messages.TypeToolCalled) != 1 || count(h, sid, messages.TypeToolSucceeded)+count(h, sid, messages.TypeToolFailed) != 1 {
		t.Fatalf("the tool ran %d times (at most once: the interrupt may come first): %v", n, h.Types(sid))
	}
	h.CheckReplay()
}

// TestShutdownWritesTheUnendedTerminal: a busy period whose terminal the
// full disk refused, with no later one in this process to write it, gets
// it written at shutdown once there is room.
func TestShutdownWritesTheUnendedTerminal(t *testing.T) {
	h, full := fullDiskHarness(t)
	g := script.NewGate()
	h.Model.Reply(script.Text("before"), script.Hold(g), script.Text("after"))
	sid := fillDiskAt(t, h, full, g)
	g.Release()
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeExecutionFailed); n != 0 {
		t.Fatalf("a terminal written on a full disk: %v", h.Types(sid))
	}
	full.Store(false)
	if err := h.Runtime.Shutdown(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	terminals := checkBusyPeriods(t, h, sid)
	if len(terminals) != 1 {
		t.Fatalf("busy periods after shutdown: %v", h.Types(sid))
	}
	if f, ok := terminals[0].Data.(*messages.ExecutionFailed); !ok || f.Error.Type != messages.ErrStorageFull {
		t.Fatalf("terminal %s %+v", terminals[0].Type, terminals[0].Data)
	}
	h.CheckReplay()
}

// terminalsPanic is a Store that panics committing any busy period's
// successful terminal.
type terminalsPanic struct{ persistence.Store }

func (s terminalsPanic) Commit(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	for _, p := range ps {
		if _, ok := p.(*messages.ExecutionSucceeded); ok {
			panic("store bug committing a terminal")
		}
	}
	return s.Store.Commit(ctx, sid, ps...)
}

// TestShutdownSurvivesAStorePanicOnTheUnendedTerminal: the owed terminal
// Shutdown commits goes to a Store that panics again; Shutdown still
// returns, and the busy period stays unmatched, as after a crash.
func TestShutdownSurvivesAStorePanicOnTheUnendedTerminal(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Store = terminalsPanic{c.Store} }})
	h.Model.Default(script.Text("answered"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if err := h.Runtime.Shutdown(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	if n := count(h, sid, messages.TypeExecutionStarted); n != 1 || count(h, sid, messages.TypeExecutionSucceeded) != 0 {
		t.Fatalf("after shutdown: %v", h.Types(sid))
	}
}
