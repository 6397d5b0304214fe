package actors_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
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

// orderProbe holds the publication of one admission (the read-back of its
// event) until released, and reports the runner's commits.
type orderProbe struct {
	persistence.Store
	armed     atomic.Bool
	entered   chan struct{}
	release   chan struct{}
	committed chan struct{}
}

func (s *orderProbe) History(ctx context.Context, id messages.SessionID, q persistence.Query) (persistence.Page[messages.Event], error) {
	page, err := s.Store.History(ctx, id, q)
	if err == nil && q.Limit == 1 && len(page.Data) == 1 {
		if p, ok := page.Data[0].Data.(*messages.PromptAdmitted); ok && p.Prompt.Text == "steer" && s.armed.CompareAndSwap(true, false) {
			close(s.entered)
			<-s.release
		}
	}
	return page, err
}

func (s *orderProbe) Commit(ctx context.Context, id messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	c, err := s.Store.Commit(ctx, id, ps...)
	select {
	case s.committed <- struct{}{}:
	default:
	}
	return c, err
}

// TestBusGetsDurableEventsInOrder: an admission committed while the runner
// runs is published before the runner's later commits, although it
// commits and publishes outside the runner.
func TestBusGetsDurableEventsInOrder(t *testing.T) {
	probe := &orderProbe{entered: make(chan struct{}), release: make(chan struct{}), committed: make(chan struct{}, 1)}
	waited := make(chan struct{}, 1)
	t.Cleanup(actors.WatchOrderWaits(waited)) // restored once the harness below has stopped
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { probe.Store = c.Store; c.Store = probe }})
	release := sync.OnceFunc(func() { close(probe.release) })
	t.Cleanup(release) // before the harness stops, should the test fail first
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("one"))
	h.Model.Reply(script.Text("two"))
	sid := h.Session()
	sub := h.Runtime.Bus().Subscribe(4096, actors.SessionFilter(sid))
	defer sub.Close()
	h.Prompt(sid, "first")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	probe.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := h.Runtime.Prompt(context.Background(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "steer"}})
		done <- err
	}()
	<-probe.entered // the steer is committed, its publication held
	for len(probe.committed) > 0 {
		<-probe.committed
	}
	g.Release()
	// The runner's next commit must wait for the order stripe, which the
	// admission holds until its publication is released: committing now
	// would let the runner publish later events before the steer's.
	select {
	case <-waited:
	case <-probe.committed:
		t.Fatal("the runner committed while the steer, committed before it, was still unpublished")
	case <-h.Ctx().Done():
		t.Fatal("the runner never tried to commit after the gate")
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	last := int64(-1)
	for {
		select {
		case ev := <-sub.C:
			if ev.Durable == nil {
				continue
			}
			if ev.Durable.Seq <= last {
				t.Fatalf("the bus published durable seq %d (%s) after seq %d", ev.Durable.Seq, ev.Type, last)
			}
			last = ev.Durable.Seq
		default:
			if last < 8 {
				t.Fatalf("only up to seq %d published", last)
			}
			return
		}
	}
}

// failFlushStore fails the first two commits holding a fragment's start,
// numbering their errors (or, with panics, panics in them): with a stalled
// model those are the commits the hold timer makes to publish held deltas.
type failFlushStore struct {
	persistence.Store
	panics bool
	failed chan struct{}
	n      atomic.Int32
}

func (s *failFlushStore) Commit(ctx context.Context, id messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	for _, p := range ps {
		switch p.(type) {
		case *messages.TextStarted, *messages.ReasoningStarted:
			if n := s.n.Add(1); n <= 2 {
				defer func() { s.failed <- struct{}{} }()
				if s.panics {
					panic(fmt.Sprintf("injected store bug %d", n))
				}
				return persistence.Committed{}, messages.Errorf(messages.ErrInternal, "injected: flush %d refused", n)
			}
		}
	}
	return s.Store.Commit(ctx, id, ps...)
}

// failedFlushes runs a step whose two held deltas each wait for the hold
// timer's flush, which st fails, and checks the busy period failed with
// the first failure's message, want.
func failedFlushes(t *testing.T, st *failFlushStore, want string) {
	t.Helper()
	st.failed = make(chan struct{}, 2)
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		c.LiveHold = time.Millisecond
		st.Store = c.Store
		c.Store = st
	}})
	g1, g2 := script.NewGate(), script.NewGate()
	h.Model.Reply(script.PartialText("thinking"), script.Hold(g1), script.Reasoning("hmm"), script.Hold(g2))
	sid := h.Session()
	h.Prompt(sid, "hi")
	for _, g := range []*script.Gate{g1, g2} {
		select {
		case <-st.failed:
		case <-h.Ctx().Done():
			t.Fatal("a held delta never flushed")
		}
		g.Release()
	}
	h.WaitIdle(sid)
	f := lastOf[*messages.ExecutionFailed](h, sid)
	if f == nil || !strings.Contains(f.Error.Message, want) {
		t.Fatalf("busy period ended %+v, want it failed with the first flush's error; events %v", f, h.Types(sid))
	}
}

// TestFailedFlushFailsTheStep checks that a commit failing while the hold
// timer flushes the buffer for a held delta is not forgotten: the events
// it held are lost, so the step cannot end as if they were durable, and
// the busy period fails with the first such commit's error rather than a
// later one's, or whatever a later commit, missing its fragment's start,
// runs into.
func TestFailedFlushFailsTheStep(t *testing.T) {
	failedFlushes(t, &failFlushStore{}, "flush 1 refused")
}

// TestPanickingFlushFailsTheStep: a Store that panics in the commit the
// hold timer makes for held deltas fails the busy period, as a refused
// commit does, instead of ending the process from the timer's goroutine.
func TestPanickingFlushFailsTheStep(t *testing.T) {
	failedFlushes(t, &failFlushStore{panics: true}, "store panicked publishing held events: injected store bug 1")
}

// TestLiveEventWithNothingQueuedIsPublishedAtOnce checks that a live event
// with no durable event queued before it is published when it happens, not
// held for the next durability point: a compaction's summary delta, which
// follows the committed compaction start, reaches a subscriber while the
// model is still writing the summary, even with a hold that never runs
// out.
func TestLiveEventWithNothingQueuedIsPublishedAtOnce(t *testing.T) {
	bus := actors.NewBus()
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { holdForever(c); c.Bus = bus }})
	g := script.NewGate()
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.TextChunks("## Objective\nKeep going"), script.Hold(g))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	sub := bus.Subscribe(4096, func(ev messages.Event) bool { return ev.Type == messages.TypeCompactionDelta })
	defer sub.Close()
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	// The delta was handled before the stream reached the gate, and the
	// bus publishes synchronously: it is in the subscription now or held.
	select {
	case <-sub.C:
	default:
		t.Fatal("the compaction delta was held while nothing durable was queued before it")
	}
	g.Release()
	h.WaitIdle(sid)
}

// TestPublishedWaitsForCommitsStillPublishing: Published takes the
// Session's order stripe, which a commit holds until its events are on
// the bus, so it returns only once they are (the live log stream counts on
// it to tell a live event that came before a replayed one).
func TestPublishedWaitsForCommitsStillPublishing(t *testing.T) {
	waited := make(chan struct{}, 1)
	t.Cleanup(actors.WatchOrderWaits(waited)) // restored once the harness below has stopped
	h := actortest.New(t)
	sid := h.Session()
	stripe := actors.OrderStripe(h.Runtime, sid)
	stripe.Lock() // as a commit does until it has published
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Runtime.Published(sid)
	}()
	select {
	case <-waited:
	case <-done:
		stripe.Unlock()
		t.Fatal("Published returned while a commit held the Session's order stripe")
	case <-h.Ctx().Done():
		stripe.Unlock()
		t.Fatal("Published never waited for the stripe")
	}
	select {
	case <-done:
		t.Fatal("Published returned while a commit held the Session's order stripe")
	default:
	}
	stripe.Unlock()
	select {
	case <-done:
	case <-h.Ctx().Done():
		t.Fatal("Published did not return once the stripe was free")
	}
}
