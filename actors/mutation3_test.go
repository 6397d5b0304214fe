package actors_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestNewNeedsStoreAndLocations: a Config missing either its Store or its
// Locations is refused, not only one missing both.
func TestNewNeedsStoreAndLocations(t *testing.T) {
	h := actortest.New(t)
	mgr := locations.NewManager(func(messages.Location) (*locations.Services, error) { return h.Services, nil })
	for name, cfg := range map[string]actors.Config{
		"no store":     {Locations: mgr},
		"no locations": {Store: h.Store},
	} {
		rt, err := actors.New(cfg)
		if err == nil {
			_ = rt.Shutdown(context.Background())
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestManualCompactionAdmittedMidTurnReplacesHistory: a manual compaction
// admitted while a turn runs has its row before the turn's later
// assistant message; the runner, which read that row pending, sees it
// completed once the compaction ran, and the queued prompt answered after
// it gets the checkpoint, not the history it replaced.
func TestManualCompactionAdmittedMidTurnReplacesHistory(t *testing.T) {
	h := actortest.New(t)
	started, release := callsBlockingTool(h, "wait")
	h.Model.Reply(script.Text("answered one"))
	h.Model.Reply(script.Text("## Objective\nsummary of one"))
	h.Model.Reply(script.Text("answered two"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "two"}, Delivery: messages.Queue})
	close(release)
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 4 {
		t.Fatalf("%d requests: %v", n, h.Types(sid))
	}
	next := h.Request(4)
	if !opensWithSummary(next, "summary of one") {
		t.Fatalf("request after the compaction starts with %+v", next.Messages[0])
	}
	if got := userTexts(next); slices.Contains(got, "one") || got[len(got)-1] != "two" {
		t.Fatalf("history not replaced by the checkpoint: %v", got)
	}
	h.CheckReplay()
}

// TestManualCompactionOfNothingFails: a manual compaction with no
// history to summarize, in a fresh Session or right after another one,
// fails as compaction.failed without asking the model (a summary of a
// conversation that has not happened would be the model's guess), and
// releases the prompts behind it, which run on the history as it was.
func TestManualCompactionOfNothingFails(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\nsummary of one"))
	h.Model.Default(script.Text("answer"))
	sid := h.Session()
	failed := func(want int) {
		t.Helper()
		n := 0
		for _, ev := range h.Events(sid) {
			if p, ok := ev.Data.(*messages.CompactionFailed); ok {
				if p.Error.Type != messages.ErrCompactionFailed || p.Error.Message != "nothing to compact: no messages since the last compaction" {
					t.Fatalf("compaction failed with %+v", p.Error)
				}
				n++
			}
		}
		if n != want {
			t.Fatalf("%d failed compactions, want %d: %v", n, want, h.Types(sid))
		}
	}
	compactNow(t, h, sid) // a fresh Session: nothing to summarize
	failed(1)
	if n := h.Model.Count(); n != 0 {
		t.Fatalf("%d requests for a compaction of nothing", n)
	}
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if req := h.Request(1); opensWithSummary(req, "") || userTexts(req)[0] != "one" {
		t.Fatalf("first request %+v", req.Messages)
	}
	compactNow(t, h, sid) // summarizes "one"
	compactNow(t, h, sid) // nothing since
	failed(2)
	if n := h.Model.Count(); n != 2 {
		t.Fatalf("%d requests, want 2 (one answer, one summary)", n)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if req := h.Request(3); !opensWithSummary(req, "summary of one") || userTexts(req)[len(userTexts(req))-1] != "two" {
		t.Fatalf("request after the compactions %+v", req.Messages)
	}
	h.CheckReplay()
}

// TestHistoryReadsEveryPage: history longer than one page of the store's
// message listing (500) reaches the request whole.
func TestHistoryReadsEveryPage(t *testing.T) {
	h := actortest.New(t)
	h.Model.Default(script.Text("answer"))
	sid := h.Session()
	const n = 520
	for i := range n - 1 {
		h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprintf("p%d", i)}, Resume: no()})
	}
	h.Prompt(sid, "last")
	h.WaitIdle(sid)
	if got := userTexts(h.Request(1)); len(got) != n || got[0] != "p0" || got[n-1] != "last" {
		t.Fatalf("request has %d user messages, want %d", len(got), n)
	}
}

// TestCreateChecksAgentAndModelAlone: a Session is not created with an
// agent its Location does not configure, nor with a model it cannot
// resolve, whichever of the two the request names; both configured, it
// is.
func TestCreateChecksAgentAndModelAlone(t *testing.T) {
	h := actortest.New(t)
	loc := messages.Location{Directory: h.Dir}
	for name, req := range map[string]persistence.CreateSession{
		"agent alone": {Location: loc, Agent: "nope"},
		"model alone": {Location: loc, Model: messages.ModelRef{ProviderID: "script", ID: "nope"}},
		"bad agent":   {Location: loc, Agent: "nope", Model: messages.ModelRef{ProviderID: "script", ID: "other"}},
		"bad model":   {Location: loc, Agent: "plan", Model: messages.ModelRef{ProviderID: "script", ID: "nope"}},
	} {
		if s, _, err := h.Runtime.Create(h.Ctx(), req); err == nil {
			t.Errorf("%s: created %+v", name, s)
		}
	}
	s, created, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: loc, Agent: "plan", Model: messages.ModelRef{ProviderID: "script", ID: "other"}})
	if err != nil || !created || s.Agent != "plan" || s.Model.ID != "other" {
		t.Fatalf("%+v, %v, %v", s, created, err)
	}
}

// TestSpawnRefusedOnceShutdownBegan: an adapter actor spawns beside the
// router while the runtime runs, its name is free again once StopActor
// returns, and none spawns once Shutdown has begun.
func TestSpawnRefusedOnceShutdownBegan(t *testing.T) {
	h := actortest.New(t)
	props := actor.PropsFromFunc(func(actor.Context) {})
	for range 2 {
		pid, err := h.Runtime.Spawn("adapter", props)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Runtime.StopActor(h.Ctx(), pid); err != nil {
			t.Fatal(err)
		}
	}
	h.Close()
	if pid, err := h.Runtime.Spawn("late", props); messages.TypeOf(err) != messages.ErrShuttingDown {
		t.Fatalf("spawned %v after shutdown: %v", pid, err)
	}
}

// missingOnce is a store whose Get of one Session finds nothing once, as
// when another creation of the same ID commits between Create's check and
// its own.
type missingOnce struct {
	persistence.Store
	sid  messages.SessionID
	miss atomic.Bool
}

func (s *missingOnce) Get(ctx context.Context, id messages.SessionID) (persistence.Session, error) {
	if id == s.sid && s.miss.CompareAndSwap(true, false) {
		return persistence.Session{}, messages.Errorf(messages.ErrSessionNotFound, "session %s not found", id)
	}
	return s.Store.Get(ctx, id)
}

// TestCreateRacedByAnotherPublishesNothing: a Create that finds its ID
// taken only when it commits returns the existing Session, not created,
// and publishes no second session.created.1 on the bus.
func TestCreateRacedByAnotherPublishesNothing(t *testing.T) {
	st := &missingOnce{sid: "ses_raced_create"}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { st.Store = c.Store; c.Store = st }})
	sub := h.Runtime.Bus().Subscribe(16, func(ev messages.Event) bool { return ev.Data.Session() == st.sid })
	defer sub.Close()
	req := persistence.CreateSession{ID: st.sid, Location: messages.Location{Directory: h.Dir}}
	if _, created, err := h.Runtime.Create(h.Ctx(), req); err != nil || !created {
		t.Fatalf("first create: %v, %v", created, err)
	}
	st.miss.Store(true)
	if s, created, err := h.Runtime.Create(h.Ctx(), req); err != nil || created || s.ID != st.sid {
		t.Fatalf("second create: %+v, %v, %v", s, created, err)
	}
	h.PromptWith(persistence.PromptRequest{SessionID: st.sid, Prompt: messages.Prompt{Text: "hi"}, Resume: no()})
	for _, want := range []string{messages.TypeSessionCreated, messages.TypePromptAdmitted} {
		if ev := <-sub.C; ev.Type != want {
			t.Fatalf("bus got %s, want %s", ev.Type, want)
		}
	}
}

// TestOverflowOfTheFirstPromptCarriesIt: when the very first prompt of a
// Session overflows the context, there is nothing to summarize but the
// prompt a checkpoint would carry as it is: the compaction fails without
// a summary request (it spent one on summarizing the prompt, then sent the
// prompt again whole), and so does the step, with the overflow.
func TestOverflowOfTheFirstPromptCarriesIt(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(overflow)
	h.Model.Default(script.Text("## Objective\nsummary"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 1 {
		t.Fatalf("%d requests: %v", n, h.Types(sid))
	}
	c := lastOf[*messages.CompactionFailed](h, sid)
	if c == nil || c.Error.Message != "nothing to compact: since the last compaction there are only the prompts not yet answered, which go to the model as they are" {
		t.Fatalf("compaction %+v", c)
	}
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || f.Error.Type != messages.ErrProviderContextOverflow {
		t.Fatalf("busy period %+v", f)
	}
}

// TestAutomaticCompactionCarriesNoPromptOfAFailedTurn: an automatic
// compaction carries the prompts right before it, and stops at the failed
// step before them: the prompt of that failed turn is the summary's, not
// carried again.
func TestAutomaticCompactionCarriesNoPromptOfAFailedTurn(t *testing.T) {
	h := autoCompacting(t, 198000) // a budget of 2,000 tokens
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text(strings.Repeat("long answer ", 1000)), script.Fail(&llm.Error{Type: messages.ErrProviderAuth, Message: "denied"}))
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.Text("a3"))
	sid := h.Session()
	for _, p := range []string{"one", "two", "three"} {
		h.Prompt(sid, p)
		h.WaitIdle(sid)
	}
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 || h.Model.Count() != 4 {
		t.Fatalf("%d requests: %v", h.Model.Count(), h.Types(sid))
	}
	if got := userTexts(h.Request(4)); !slices.Equal(got[1:], []string{"three"}) {
		t.Fatalf("the step after the compaction got the prompts %q", got)
	}
}

// TestSelectionsAreChecked: selecting no agent, or a model reference
// missing its provider or its id, is invalid; an agent the Location does
// not configure is refused naming the configured ones, the default agent
// first and once; the default agent is always selectable, configured or
// not.
func TestSelectionsAreChecked(t *testing.T) {
	h := actortest.New(t)
	sid := h.Session()
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, ""); messages.TypeOf(err) != messages.ErrInvalid {
		t.Errorf("no agent: %v", err)
	}
	for _, ref := range []messages.ModelRef{{ProviderID: "script"}, {ID: "demo"}} {
		if err := h.Runtime.SelectModel(h.Ctx(), sid, ref); messages.TypeOf(err) != messages.ErrInvalid {
			t.Errorf("model %+v: %v", ref, err)
		}
	}
	err := h.Runtime.SelectAgent(h.Ctx(), sid, "nope")
	if messages.TypeOf(err) != messages.ErrInvalid || !strings.HasSuffix(err.Error(), "(configured: build, plan)") {
		t.Errorf("unknown agent: %v", err)
	}
	delete(h.Agents, locations.DefaultAgent) // before the Session's first run: nothing reads the map now
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, locations.DefaultAgent); err != nil {
		t.Errorf("default agent, not configured: %v", err)
	}
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "nope"); err == nil || !strings.HasSuffix(err.Error(), "(configured: build, plan)") {
		t.Errorf("unknown agent, the default not configured: %v", err)
	}
	if s, created, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: h.Dir},
		Model: messages.ModelRef{ProviderID: "script", ID: "other"}}); err != nil || !created || s.Agent != "" {
		t.Fatalf("a model alone: %+v, %v, %v", s, created, err)
	}
}

// TestCoalescedCompactionPublishesNothing: a manual compaction asked for
// while one is pending is coalesced into it and publishes no admission of
// its own on the bus.
func TestCoalescedCompactionPublishesNothing(t *testing.T) {
	h := actortest.New(t)
	started, release := callsBlockingTool(h, "wait")
	h.Model.Reply(script.Text("answered"))
	h.Model.Reply(script.Text("## Objective\nsummary"))
	sid := h.Session()
	sub := h.Runtime.Bus().Subscribe(64, func(ev messages.Event) bool {
		return ev.Data.Session() == sid && ev.Type == messages.TypeCompactionAdmitted
	})
	defer sub.Close()
	h.Prompt(sid, "one")
	<-started
	first, err := h.Runtime.Compact(h.Ctx(), sid)
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.Runtime.Compact(h.Ctx(), sid)
	if err != nil || again.ID != first.ID {
		t.Fatalf("second compaction %+v, %v; first %+v", again, err, first)
	}
	close(release)
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 {
		t.Fatalf("%d compactions: %v", n, h.Types(sid))
	}
	if n := len(sub.C); n != 1 {
		t.Fatalf("%d compaction admissions published", n)
	}
}

// TestResumeOfAnIdleSessionStartsADrain: resuming an idle Session starts a
// busy period, which it reports as not joined, and the busy period takes
// its forced step from the Session's history (a Session without any has
// nothing to continue: TestRunOfASessionWithoutMessages).
func TestResumeOfAnIdleSessionStartsADrain(t *testing.T) {
	h := actortest.New(t)
	h.Model.Default(script.Text("resumed"))
	sid := h.Session()
	h.Prompt(sid, "hello")
	h.WaitIdle(sid)
	joined, err := h.Runtime.Resume(h.Ctx(), sid)
	if err != nil || joined {
		t.Fatalf("resume of an idle Session: joined=%v err=%v", joined, err)
	}
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 2 {
		t.Fatalf("%d requests: %v", n, h.Types(sid))
	}
}

// TestWaitHeldByAMoveWaitsForTheCarriedWork: a Wait the router holds while
// a move of a busy Session commits is routed after the work the move
// carries to the new Location, so it returns once that work is done, not
// at once as for an idle Session.
func TestWaitHeldByAMoveWaitsForTheCarriedWork(t *testing.T) {
	g := newHeldStore(func(p messages.Payload) bool { _, ok := p.(*messages.SessionMoved); return ok })
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { g.Store = c.Store; c.Store = g }})
	started := make(chan string, 1)
	h.Tools.Add("slow", actortest.Blocking(started, make(chan struct{})))
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("continued at the new place"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	moved := moveAsync(h, sid, messages.Location{Directory: t.TempDir()})
	<-g.held
	settleHeld(t, h, sid, g.release, moved, func() error { return h.Runtime.Wait(h.Ctx(), sid) })
	if got := typesAfter(h, sid, "session.moved"); len(got) == 0 || got[len(got)-1] != "session.execution.succeeded" || h.Model.Count() != 2 {
		t.Fatalf("the held wait returned before the carried work ran: %v (%d requests)", got, h.Model.Count())
	}
}
