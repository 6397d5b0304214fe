package actors_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// holdForever makes every live event wait for the next durability point,
// so commit grouping does not depend on timing.
func holdForever(c *actors.Config) { c.LiveHold = time.Hour }

// TestToolStepIsTwoCommits: with a model that answers at once, a tool step
// commits twice (through tool.called, then settlement and step.ended): the
// live tool-input delta waits for the first instead of forcing its own.
func TestToolStepIsTwoCommits(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 5, Config: holdForever})
	h.Tools.Add("noop", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	h.Model.Default(script.ToolCall("call_1", "noop", `{}`))
	sid := h.Session()
	before := h.Commits()
	h.Prompt(sid, "loop")
	h.WaitIdle(sid)
	// admission, promotion, 5 steps x 2, the busy period's terminal
	if got := h.Commits() - before; got != 3+2*5 {
		t.Fatalf("%d commits for 5 tool steps, want %d", got, 3+2*5)
	}
	h.CheckReplay()
}

// collect subscribes to the bus and returns the Session's events, live and
// durable, in publication order up to the busy period's terminal.
func collect(t *testing.T, bus *actors.Bus, sid messages.SessionID, run func()) []messages.Event {
	t.Helper()
	sub := bus.Subscribe(4096, func(ev messages.Event) bool { return ev.Data.Session() == sid })
	defer sub.Close()
	run()
	var out []messages.Event
	timeout := time.After(actortest.Timeout)
	for {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatal("subscription cut off")
			}
			out = append(out, ev)
			if ev.Type == messages.TypeExecutionSucceeded || ev.Type == messages.TypeExecutionFailed {
				return out
			}
		case <-timeout:
			t.Fatalf("no terminal among %d events", len(out))
		}
	}
}

// TestHeldLiveEventsKeepLifecycleOrder: deltas held for one commit are
// published between their fragment's started and ended events, and
// durable events in seq order.
func TestHeldLiveEventsKeepLifecycleOrder(t *testing.T) {
	bus := actors.NewBus()
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { holdForever(c); c.Bus = bus }})
	h.Model.Reply(script.Reasoning("hmm"), script.TextChunks("Hel", "lo", " world"))
	sid := h.Session()
	evs := collect(t, bus, sid, func() { h.Prompt(sid, "hi") })
	var types []string
	var last int64 = -1
	for _, ev := range evs {
		types = append(types, ev.Type)
		if ev.Durable != nil {
			if ev.Durable.Seq <= last {
				t.Fatalf("seq %d after %d: %v", ev.Durable.Seq, last, types)
			}
			last = ev.Durable.Seq
		}
	}
	index := func(match func(messages.Payload) bool) int {
		return slices.IndexFunc(evs, func(ev messages.Event) bool { return match(ev.Data) })
	}
	textStart := index(func(p messages.Payload) bool { _, ok := p.(*messages.TextStarted); return ok })
	textEnd := index(func(p messages.Payload) bool { _, ok := p.(*messages.TextEnded); return ok })
	reasonStart := index(func(p messages.Payload) bool { _, ok := p.(*messages.ReasoningStarted); return ok })
	reasonEnd := index(func(p messages.Payload) bool { _, ok := p.(*messages.ReasoningEnded); return ok })
	if textStart < 0 || textEnd < 0 || reasonStart < 0 || reasonEnd < 0 {
		t.Fatalf("fragments missing: %v", types)
	}
	var deltas []string
	for i, ev := range evs {
		switch d := ev.Data.(type) {
		case *messages.TextDelta:
			if i < textStart || i > textEnd {
				t.Fatalf("text delta at %d outside started %d .. ended %d: %v", i, textStart, textEnd, types)
			}
			deltas = append(deltas, d.Delta)
		case *messages.ReasoningDelta:
			if i < reasonStart || i > reasonEnd {
				t.Fatalf("reasoning delta at %d outside started %d .. ended %d: %v", i, reasonStart, reasonEnd, types)
			}
		}
	}
	if !slices.Equal(deltas, []string{"Hel", "lo", " world"}) {
		t.Fatalf("deltas %q", deltas)
	}
}

// TestHeldDeltaFlushesWhenModelStalls: a delta is published within the
// hold even while the model stalls mid-fragment, after its fragment's
// start has committed.
func TestHeldDeltaFlushesWhenModelStalls(t *testing.T) {
	bus := actors.NewBus()
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Bus = bus; c.LiveHold = time.Millisecond }})
	g := script.NewGate()
	h.Model.Reply(script.PartialText("thinking"), script.Hold(g), script.Fail(nil))
	h.Model.Default(script.Text("unused"))
	sid := h.Session()
	sub := bus.Subscribe(4096, func(ev messages.Event) bool { return ev.Data.Session() == sid })
	defer sub.Close()
	h.Prompt(sid, "hi")
	timeout := time.After(actortest.Timeout)
	for delta := false; !delta; {
		select {
		case ev := <-sub.C:
			delta = ev.Type == messages.TypeTextDelta
		case <-timeout:
			t.Fatal("no delta while the model stalls")
		}
	}
	if !slices.Contains(h.Types(sid), "session.text.started") {
		t.Fatalf("delta published before its fragment started durably: %v", h.Types(sid))
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	g.Release()
	h.WaitIdle(sid)
	h.CheckReplay()
}
