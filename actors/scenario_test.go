package actors_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

func no() *bool { f := false; return &f }

// count returns how many events of typ the Session has.
func count(h *actortest.Harness, sid messages.SessionID, typ string) int {
	n := 0
	for _, ev := range h.Events(sid) {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// lastOf returns the payload of the Session's last event of type P, or
// nil when it has none.
func lastOf[P messages.Payload](h *actortest.Harness, sid messages.SessionID) P {
	var last P
	for _, ev := range h.Events(sid) {
		if p, ok := ev.Data.(P); ok {
			last = p
		}
	}
	return last
}

// userTexts returns the texts of the user messages of a request.
func userTexts(req llm.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			out = append(out, m.Parts[0].Text)
		}
	}
	return out
}

func withMetrics(m *actors.Metrics) actortest.Options {
	return actortest.Options{Config: func(c *actors.Config) { c.Metrics = m }}
}

func TestWakesCoalesceIntoOneFollowUp(t *testing.T) {
	m := actors.NewMetrics(prometheus.NewRegistry())
	h := actortest.New(t, withMetrics(m))
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("one"))
	h.Model.Reply(script.Text("two"))
	sid := h.Session()
	h.Prompt(sid, "a")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"b", "c", "d"} {
		h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: text}, Resume: no()})
	}
	for range 3 {
		if err := h.Runtime.Wake(h.Ctx(), sid); err != nil {
			t.Fatal(err)
		}
	}
	joined, err := h.Runtime.Resume(h.Ctx(), sid)
	if err != nil || !joined {
		t.Fatalf("resume during a drain: joined=%v err=%v", joined, err)
	}
	if a := h.Runtime.Active(); a[sid].Type != "running" {
		t.Fatalf("active %v", a)
	}
	g.Release()
	h.WaitIdle(sid)
	if n := testutil.ToFloat64(m.Drains); n != 2 {
		t.Fatalf("%v drains, want the first plus exactly one follow-up", n)
	}
	if got := userTexts(h.Request(2)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("follow-up request users %v", got)
	}
	if h.Model.Count() != 2 || count(h, sid, messages.TypeExecutionStarted) != 1 || count(h, sid, messages.TypeExecutionSucceeded) != 1 {
		t.Fatalf("requests %d; one busy period expected: %v", h.Model.Count(), h.Types(sid))
	}
	if len(h.Runtime.Active()) != 0 {
		t.Fatal("active after idle")
	}
	h.CheckReplay()
}

func TestInterruptClearsCoalescedWake(t *testing.T) {
	h := actortest.New(t)
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("never"))
	h.Model.Default(script.Text("unexpected"))
	sid := h.Session()
	h.Prompt(sid, "a")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	pending := h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "later"}}) // wake coalesces
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	types := h.Types(sid)
	if types[len(types)-1] != "session.execution.interrupted" || h.Model.Count() != 1 {
		t.Fatalf("after interrupt: %d requests, %v", h.Model.Count(), types)
	}
	rows, err := h.Store.Pending(h.Ctx(), sid)
	if err != nil || len(rows) != 1 || rows[0].ID != pending.ID {
		t.Fatalf("inbox row not preserved: %+v %v", rows, err)
	}
	// Interrupting an idle or missing Session is a no-op.
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Interrupt(h.Ctx(), "ses_missing"); err != nil {
		t.Fatal(err)
	}
	h.CheckReplay()
}

func TestWakeDuringInterruptCleanupStartsFreshBusyPeriod(t *testing.T) {
	h := actortest.New(t)
	started := make(chan struct{})
	cancelled := make(chan struct{})
	cleanup := make(chan struct{})
	h.Tools.Add("stubborn", func(ctx context.Context, _ locations.ToolCall) (string, error) {
		close(started)
		<-ctx.Done()
		close(cancelled)
		<-cleanup
		return "", ctx.Err()
	})
	h.Model.Reply(script.ToolCall("c1", "stubborn", `{}`))
	h.Model.Reply(script.Text("fresh"))
	sid := h.Session()
	h.Prompt(sid, "go")
	// tool.called commits before the tool actor starts; an interrupt in
	// between settles the call without running it, so wait for the tool.
	<-started
	done := make(chan error, 1)
	go func() { done <- h.Runtime.Interrupt(context.Background(), sid) }()
	<-cancelled
	h.Prompt(sid, "again") // a wake while the interrupted drain cleans up
	close(cleanup)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	types := h.Types(sid)
	i := slices.Index(types, "session.execution.interrupted")
	if i < 0 || !slices.Contains(types[i:], "session.execution.started") || types[len(types)-1] != "session.execution.succeeded" {
		t.Fatalf("no fresh busy period after cleanup: %v", types)
	}
	if got := userTexts(h.Request(2)); got[len(got)-1] != "again" {
		t.Fatalf("fresh busy period did not run the new prompt: %v", got)
	}
	h.CheckReplay()
}

// blocking returns a tool that signals started and waits for release.
// stubborn adds a tool "stubborn" that ignores its context: it reports
// that it started by closing entered, and returns only once release is
// closed.
func stubborn(h *actortest.Harness) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	h.Tools.Add("stubborn", func(context.Context, locations.ToolCall) (string, error) {
		close(entered)
		<-release
		return "late", nil
	})
	return entered, release
}

// callsBlockingTool has the model's next reply call a tool named name (call
// c1) that blocks until release is closed or its context ends; started
// receives the call's ID as it starts.
func callsBlockingTool(h *actortest.Harness, name string) (started chan string, release chan struct{}) {
	started, release = make(chan string, 1), make(chan struct{})
	h.Tools.Add(name, actortest.Blocking(started, release))
	h.Model.Reply(script.ToolCall("c1", name, `{}`))
	return started, release
}

func TestSteersLandAfterToolResult(t *testing.T) {
	h := actortest.New(t)
	started, release := callsBlockingTool(h, "slow")
	h.Model.Reply(script.Text("got both"))
	sid := h.Session()
	h.Prompt(sid, "first")
	<-started
	h.Prompt(sid, "steer one")
	h.Prompt(sid, "steer two")
	close(release)
	h.WaitIdle(sid)
	req := h.Request(2)
	var roles []llm.Role
	for _, m := range req.Messages {
		roles = append(roles, m.Role)
	}
	want := []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleUser, llm.RoleUser}
	if !slices.Equal(roles, want) || !slices.Equal(userTexts(req), []string{"first", "steer one", "steer two"}) {
		t.Fatalf("request 2 roles %v users %v", roles, userTexts(req))
	}
	if h.Model.Count() != 2 {
		t.Fatalf("%d requests: two steers must land in one request", h.Model.Count())
	}
	// Both steers were promoted at one boundary, in one commit.
	evs := h.Events(sid)
	var promotedSeqs []int64
	for _, ev := range evs {
		if ev.Type == messages.TypePromptPromoted {
			promotedSeqs = append(promotedSeqs, ev.Durable.Seq)
		}
	}
	if len(promotedSeqs) != 3 || promotedSeqs[2] != promotedSeqs[1]+1 {
		t.Fatalf("promotions at seqs %v", promotedSeqs)
	}
	h.CheckReplay()
}

func TestQueuedWaitsForContinuationThenFIFO(t *testing.T) {
	h := actortest.New(t)
	started, release := callsBlockingTool(h, "slow")
	h.Model.Reply(script.Text("continued"))
	h.Model.Reply(script.Text("q1 done"))
	h.Model.Reply(script.Text("q2 done"))
	sid := h.Session()
	h.Prompt(sid, "first")
	<-started
	for _, q := range []string{"q1", "q2"} {
		h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: q}, Delivery: messages.Queue})
	}
	close(release)
	h.WaitIdle(sid)
	if got := userTexts(h.Request(2)); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("continuation request promoted queued input: %v", got)
	}
	if got := userTexts(h.Request(3)); !slices.Equal(got, []string{"first", "q1"}) {
		t.Fatalf("request 3 users %v", got)
	}
	if got := userTexts(h.Request(4)); !slices.Equal(got, []string{"first", "q1", "q2"}) {
		t.Fatalf("request 4 users %v", got)
	}
	h.CheckReplay()
}

func TestFiveToolsRunConcurrentlyAndSettleFirst(t *testing.T) {
	h := actortest.New(t)
	var running atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	h.Tools.Add("par", func(ctx context.Context, c locations.ToolCall) (string, error) {
		if running.Add(1) == 5 {
			once.Do(func() { close(all) })
		}
		select {
		case <-all: // only reachable if all five run at once
			return "ok " + c.CallID, nil
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(actortest.Timeout):
			return "", context.DeadlineExceeded
		}
	})
	var steps []script.Step
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5"} {
		steps = append(steps, script.ToolCall(id, "par", `{}`))
	}
	h.Model.Reply(steps...)
	h.Model.Reply(script.Text("all done"))
	sid := h.Session()
	h.Prompt(sid, "fan out")
	h.WaitIdle(sid)
	types := h.Types(sid)
	end := slices.Index(types, "session.step.ended")
	if n := count(h, sid, messages.TypeToolSucceeded); n != 5 {
		t.Fatalf("%d successes: %v", n, types)
	}
	for i, typ := range types {
		if typ == "session.tool.success" && i > end {
			t.Fatalf("a tool settled after step.ended: %v", types)
		}
	}
	h.CheckReplay()
}

func TestInterruptWhileToolBlocks(t *testing.T) {
	h := actortest.New(t)
	started := make(chan string, 1)
	h.Tools.Add("hang", actortest.Blocking(started, nil))
	h.Model.Reply(script.ToolCall("c1", "hang", `{}`))
	h.Model.Reply(script.Text("resumed"))
	sid := h.Session()
	h.Prompt(sid, "go")
	<-started
	later := h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "later"}, Resume: no()})
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	evs := h.Events(sid)
	tail := evs[len(evs)-3:]
	if f, ok := tail[0].Data.(*messages.ToolFailed); !ok || f.Error.Type != messages.ErrAborted {
		t.Fatalf("want tool.failed aborted, got %s %+v", tail[0].Type, tail[0].Data)
	}
	if f, ok := tail[1].Data.(*messages.StepFailed); !ok || f.Error.Type != messages.ErrAborted {
		t.Fatalf("want step.failed aborted, got %s", tail[1].Type)
	}
	if f, ok := tail[2].Data.(*messages.ExecutionInterrupted); !ok || f.Reason != messages.ReasonUser {
		t.Fatalf("want execution.interrupted user, got %s %+v", tail[2].Type, tail[2].Data)
	}
	in, err := h.Store.Input(h.Ctx(), later.ID)
	if err != nil || in.PromotedSeq != nil {
		t.Fatalf("prompt admitted during the stream must stay pending: %+v %v", in, err)
	}
	if _, err := h.Runtime.Resume(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if got := userTexts(h.Request(2)); got[len(got)-1] != "later" {
		t.Fatalf("resume did not run the pending prompt: %v", got)
	}
	h.CheckReplay()
}

func rateLimit(after time.Duration) *llm.Error {
	return &llm.Error{Type: messages.ErrProviderRateLimit, Message: "slow down", RetryAfter: after, StatusCode: 429}
}

func retryAts(h *actortest.Harness, sid messages.SessionID) []int64 {
	var out []int64
	for _, ev := range h.Events(sid) {
		if r, ok := ev.Data.(*messages.RetryScheduled); ok {
			out = append(out, r.At)
		}
	}
	return out
}

func TestRetryTiming(t *testing.T) {
	m := actors.NewMetrics(prometheus.NewRegistry())
	h := actortest.New(t, withMetrics(m))
	h.Model.Reply(script.Fail(rateLimit(0)))
	h.Model.Reply(script.Fail(rateLimit(5 * time.Second)))
	h.Model.Reply(script.Text("ok"))
	start := h.Clock.Now().UnixMilli()
	sid := h.Session()
	h.Prompt(sid, "go")
	ctx := h.Ctx()
	if err := h.Clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Advance fires every wait now due before it returns: a retry still
	// waiting is still a waiter of the fake clock.
	h.Clock.Advance(1999 * time.Millisecond)
	if h.Clock.Waiters() != 1 || h.Model.Count() != 1 {
		t.Fatal("retried before 2000 ms")
	}
	h.Clock.Advance(time.Millisecond)
	h.Request(2)
	if err := h.Clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(4999 * time.Millisecond)
	if h.Clock.Waiters() != 1 || h.Model.Count() != 2 {
		t.Fatal("retryAfterMs 5000 not honoured")
	}
	h.Clock.Advance(time.Millisecond)
	h.WaitIdle(sid)
	if got := retryAts(h, sid); !slices.Equal(got, []int64{start + 2000, start + 2000 + 5000}) {
		t.Fatalf("retry at %v", got)
	}
	// Every attempt reused one assistant message, and the retry state is
	// cleared by the next start.
	msgs, err := h.Store.Messages(ctx, sid, persistence.Query{After: -1})
	if err != nil {
		t.Fatal(err)
	}
	var assistants []persistence.Message
	for _, m := range msgs.Data {
		if m.Role == persistence.RoleAssistant {
			assistants = append(assistants, m)
		}
	}
	if len(assistants) != 1 || assistants[0].Attempts != 3 || assistants[0].Retry != nil || assistants[0].Finish != "stop" {
		t.Fatalf("assistants %+v", assistants)
	}
	// Attempts are one-based: each retry names the attempt it schedules,
	// and that attempt's step.started carries the same number.
	var started, scheduled []int
	for _, ev := range h.Events(sid) {
		switch p := ev.Data.(type) {
		case *messages.StepStarted:
			started = append(started, p.Attempt)
		case *messages.RetryScheduled:
			scheduled = append(scheduled, p.Attempt)
		}
	}
	if !slices.Equal(started, []int{1, 2, 3}) || !slices.Equal(scheduled, []int{2, 3}) {
		t.Fatalf("step attempts %v, retries scheduled for %v", started, scheduled)
	}
	if n := testutil.ToFloat64(m.Retries); n != 2 {
		t.Fatalf("sessiond_retries_total %v, want 2", n)
	}
	h.CheckReplay()
}

// TestRetryProjectedUntilInterrupted: a scheduled retry shows on the
// assistant message during its delay, and interruption clears it without
// running the attempt.
func TestRetryProjectedUntilInterrupted(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Fail(rateLimit(0)))
	h.Model.Default(script.Text("unexpected"))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil {
		t.Fatal(err)
	}
	if m := lastAssistant(t, h, sid); m.Retry == nil || m.Retry.Attempt != 2 || m.Retry.Error.Type != messages.ErrProviderRateLimit {
		t.Fatalf("no retry projected during the delay: %+v", m)
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(time.Minute)
	h.WaitIdle(sid)
	if r := lastOf[*messages.ExecutionInterrupted](h, sid); r == nil || r.Reason != messages.ReasonUser || h.Model.Count() != 1 {
		t.Fatalf("%d requests, %v", h.Model.Count(), h.Types(sid))
	}
	if m := lastAssistant(t, h, sid); m.Retry != nil {
		t.Fatalf("retry survived interruption: %+v", m.Retry)
	}
	h.CheckReplay()
}

// TestStaleRetryAfterACrash: a retry a dead process scheduled is history.
// It starts nothing by itself, and the next busy period's first
// step.started clears it although that step writes another message.
func TestStaleRetryAfterACrash(t *testing.T) {
	h := actortest.New(t)
	sid := h.Session()
	old := messages.MessageID("msg_00000000000000000000000001")
	rl := messages.Error{Type: messages.ErrProviderRateLimit, Message: "slow"}
	if _, err := h.Store.Append(h.Ctx(), sid,
		&messages.ExecutionStarted{SessionID: sid},
		&messages.StepStarted{SessionID: sid, AssistantMessageID: old, Attempt: 1},
		&messages.StepFailed{SessionID: sid, AssistantMessageID: old, Error: rl},
		&messages.RetryScheduled{SessionID: sid, AssistantMessageID: old, Attempt: 2, At: 1, Error: rl},
	); err != nil {
		t.Fatal(err)
	}
	before := len(h.Events(sid))
	if err := h.Runtime.Wake(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if n := len(h.Events(sid)); n != before || h.Model.Count() != 0 {
		t.Fatalf("a stale retry started work: %d requests, %v", h.Model.Count(), h.Types(sid)[before:])
	}
	started, release := make(chan struct{}), make(chan struct{})
	h.Tools.Add("block", func(ctx context.Context, _ locations.ToolCall) (string, error) {
		close(started)
		<-release
		return "ok", nil
	})
	h.Model.Reply(script.ToolCall("c1", "block", `{}`))
	h.Model.Reply(script.Text("done"))
	h.Prompt(sid, "go")
	<-started // the new step has started; its busy period has not ended
	m, err := h.Store.Message(h.Ctx(), sid, old)
	close(release)
	h.WaitIdle(sid)
	if err != nil {
		t.Fatal(err)
	}
	if m.Retry != nil {
		t.Fatalf("after the next step.started, %s still projects retry %+v", old, *m.Retry)
	}
	h.CheckReplay()
}

func TestRetryExhaustion(t *testing.T) {
	h := actortest.New(t)
	for range 6 {
		h.Model.Reply(script.Fail(&llm.Error{Type: messages.ErrProviderInternal, Message: "overloaded"}))
	}
	start := h.Clock.Now().UnixMilli()
	sid := h.Session()
	h.Prompt(sid, "go")
	ctx := h.Ctx()
	for i := range 4 {
		if err := h.Clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		h.Clock.Advance(time.Duration(2000<<i) * time.Millisecond)
	}
	h.WaitIdle(sid)
	want := []int64{start + 2000, start + 6000, start + 14000, start + 30000}
	if got := retryAts(h, sid); !slices.Equal(got, want) {
		t.Fatalf("retry at %v, want %v", got, want)
	}
	types := h.Types(sid)
	if h.Model.Count() != 5 || types[len(types)-1] != "session.execution.failed" || count(h, sid, messages.TypeStepFailed) != 5 {
		t.Fatalf("%d requests, %v", h.Model.Count(), types)
	}
	h.CheckReplay()
}

// TestRetryAfterAnEmptyBlock: a stream that opens a text or reasoning
// block and fails before any text in it (Anthropic's opens every text
// block empty, and an overload error or a cut connection comes next) has
// produced no output: the attempt is retried, and the empty block leaves
// no fragment in the log, so the retry's fragments number from 0.
func TestRetryAfterAnEmptyBlock(t *testing.T) {
	reset := script.Fail(&llm.Error{Type: messages.ErrProviderInternal, Message: "Overloaded"})
	for _, tc := range []struct {
		name  string
		steps []script.Step
	}{
		{"text start", []script.Step{script.Event(llm.Event{Kind: llm.TextStart, ID: "t1"}), reset}},
		{"reasoning start", []script.Step{script.Event(llm.Event{Kind: llm.ReasoningStart, ID: "r1"}), reset}},
		{"empty delta", []script.Step{script.Event(llm.Event{Kind: llm.TextStart, ID: "t1"}),
			script.Event(llm.Event{Kind: llm.TextDelta, ID: "t1"}), reset}},
		{"empty block ended", []script.Step{script.Event(llm.Event{Kind: llm.TextStart, ID: "t1"}),
			script.Event(llm.Event{Kind: llm.TextEnd, ID: "t1"}), reset}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := actortest.New(t)
			h.Model.Reply(tc.steps...)
			h.Model.Default(script.Text("retried"))
			sid := h.Session()
			h.Prompt(sid, "go")
			if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil {
				t.Fatal(err)
			}
			h.Clock.Advance(2 * time.Second)
			h.WaitIdle(sid)
			if h.Model.Count() != 2 || len(retryAts(h, sid)) != 1 {
				t.Fatalf("%d requests: %v", h.Model.Count(), h.Types(sid))
			}
			for _, ev := range h.Events(sid) {
				switch p := ev.Data.(type) {
				case *messages.TextStarted:
					if p.Ordinal != 0 {
						t.Fatalf("the retry's text is ordinal %d", p.Ordinal)
					}
				case *messages.ReasoningStarted:
					t.Fatalf("the empty block left %s", ev.Type)
				}
			}
			m := lastAssistant(t, h, sid)
			if len(m.Parts) != 1 || m.Parts[0].Text != "retried" || m.Error != nil {
				t.Fatalf("assistant message %+v", m)
			}
			h.CheckReplay()
		})
	}
}

func TestNoRetryAfterDurableOutput(t *testing.T) {
	reset := script.Fail(&llm.Error{Type: messages.ErrProviderTransport, Message: "reset"})
	for _, tc := range []struct {
		name   string
		output script.Step
	}{
		{"text", script.PartialText("partial")},
		{"reasoning", script.Reasoning("thinking")},
		{"tool input and call", script.ToolCall("c1", "nope", `{}`)},
		{"tool call alone", script.Event(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "nope", Input: []byte(`{}`)})},
		{"hosted call", script.Event(llm.Event{Kind: llm.ToolCall, CallID: "h1", Name: "web_search", Input: []byte(`{}`), Executed: true})},
		// A block with no text but provider state (Anthropic's redacted
		// thinking) is output the provider needs back.
		{"empty reasoning with metadata", script.Event(llm.Event{Kind: llm.ReasoningStart, ID: "r1", ProviderMetadata: []byte(`{"redacted":"x"}`)})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := actortest.New(t)
			h.Model.Reply(tc.output, reset)
			h.Model.Default(script.Text("retried"))
			sid := h.Session()
			h.Prompt(sid, "go")
			h.WaitIdle(sid)
			if h.Model.Count() != 1 || len(retryAts(h, sid)) != 0 {
				t.Fatalf("retried after durable output: %v", h.Types(sid))
			}
			m := lastAssistant(t, h, sid)
			if len(m.Parts) == 0 || m.Error.Type != messages.ErrProviderTransport {
				t.Fatalf("the output must stay visible: %+v", m)
			}
			h.CheckReplay()
		})
	}
}

func TestRetriesConsumeAllowance(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 3})
	for range 5 {
		h.Model.Reply(script.Fail(rateLimit(0)))
	}
	sid := h.Session()
	h.Prompt(sid, "go")
	ctx := h.Ctx()
	for i := range 2 {
		if err := h.Clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		h.Clock.Advance(time.Duration(2000<<i) * time.Millisecond)
	}
	h.WaitIdle(sid)
	if h.Model.Count() != 3 {
		t.Fatalf("%d requests with an allowance of 3", h.Model.Count())
	}
}

func lastAssistant(t *testing.T, h *actortest.Harness, sid messages.SessionID) persistence.Message {
	t.Helper()
	p, err := h.Store.Messages(h.Ctx(), sid, persistence.Query{After: -1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := len(p.Data) - 1; i >= 0; i-- {
		if p.Data[i].Role == persistence.RoleAssistant {
			return p.Data[i]
		}
	}
	t.Fatal("no assistant message")
	return persistence.Message{}
}

func TestContentFilter(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("half an ans"), script.Finish(llm.FinishContentFilter, messages.Tokens{}))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	types := h.Types(sid)
	if slices.Contains(types, "session.step.ended") {
		t.Fatalf("content filter ended the step: %v", types)
	}
	m := lastAssistant(t, h, sid)
	if m.Error == nil || m.Error.Type != messages.ErrProviderContentFilter || m.Parts[0].Text != "half an ans" {
		t.Fatalf("assistant %+v", m)
	}
	// A response filtered before any content still has its failed message.
	h.Model.Reply(script.Finish(llm.FinishContentFilter, messages.Tokens{}))
	h.Prompt(sid, "again")
	h.WaitIdle(sid)
	m = lastAssistant(t, h, sid)
	if m.Error == nil || m.Error.Type != messages.ErrProviderContentFilter || len(m.Parts) != 0 || m.Open || m.Completed == 0 {
		t.Fatalf("contentless filtered assistant %+v", m)
	}
	h.CheckReplay()
}

// TestContentFilterFailsTheBusyPeriod checks that a filtered response
// ends the run as any failed step does: the busy period fails with
// provider.content-filter, and a queued prompt waiting behind it is not
// promoted and sent as if the step had ended.
func TestContentFilterFailsTheBusyPeriod(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("half an ans"), script.Finish(llm.FinishContentFilter, messages.Tokens{}))
	h.Model.Default(script.Text("answered the queued prompt"))
	sid := h.Session()
	no := false
	queued := h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "next"}, Delivery: messages.Queue, Resume: &no})
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || f.Error.Type != messages.ErrProviderContentFilter {
		t.Fatalf("busy period ended %+v: %v", f, h.Types(sid))
	}
	if in, err := h.Store.Input(h.Ctx(), queued.ID); err != nil || in.PromotedSeq != nil || h.Model.Count() != 1 {
		t.Fatalf("the queued prompt ran after the filtered step (%d requests): %+v %v", h.Model.Count(), in, err)
	}
}

// TestStepCostIsTheProvidersOrPriced checks what a step records as its
// cost: the cost the provider reported with its step-finish when it did,
// and otherwise the usage priced at the model's catalog prices.
func TestStepCostIsTheProvidersOrPriced(t *testing.T) {
	h := actortest.New(t)
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "script", Type: llm.ProviderScript,
		Models: map[string]llm.ModelSpec{"demo": {Context: 200000, Output: 8000, Prices: llm.Prices{Input: 3, Output: 15}}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.Services.Catalog = catalog // before the Session's Location is first used
	usage := messages.Tokens{Input: 1_000_000, Output: 100_000}
	h.Model.Reply(script.Text("priced"), script.Finish(llm.FinishStop, usage))
	h.Model.Reply(script.Text("reported"), script.Event(llm.Event{Kind: llm.StepFinish, Finish: llm.FinishStop, Usage: usage, Cost: 0.25}))
	sub := h.Runtime.Bus().Subscribe(16, func(ev messages.Event) bool { return ev.Type == messages.TypeUsageUpdated })
	defer sub.Close()
	sid := twoTurns(h)
	var costs []float64
	for _, ev := range h.Events(sid) {
		if p, ok := ev.Data.(*messages.StepEnded); ok {
			costs = append(costs, p.Cost)
		}
	}
	if !slices.Equal(costs, []float64{4.5, 0.25}) {
		t.Fatalf("step costs %v, want [4.5 0.25]", costs)
	}
	// The live usage of each step says the same (it said 0 for a priced one).
	var live []float64
	for len(live) < 2 {
		live = append(live, (<-sub.C).Data.(*messages.UsageUpdated).Cost)
	}
	if !slices.Equal(live, costs) {
		t.Fatalf("live usage costs %v, want %v", live, costs)
	}
}

// TestFragmentMetadataFromStartOrEnd checks which provider metadata a
// fragment's ended event keeps: the end event's when the provider sent
// some there, else what came with the fragment's start, so continuation
// state a provider sends on either side of a block is not lost.
func TestFragmentMetadataFromStartOrEnd(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Reasoning("pondering").WithMetadata(`{"sig":"end"}`),
		script.Event(llm.Event{Kind: llm.TextStart, ID: "t1", ProviderMetadata: []byte(`{"id":"start"}`)}),
		script.Event(llm.Event{Kind: llm.TextDelta, ID: "t1", Text: "answer"}),
		script.Event(llm.Event{Kind: llm.TextEnd, ID: "t1"}))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	r, x := lastOf[*messages.ReasoningEnded](h, sid), lastOf[*messages.TextEnded](h, sid)
	if r == nil || x == nil || string(r.ProviderMetadata) != `{"sig":"end"}` || string(x.ProviderMetadata) != `{"id":"start"}` {
		t.Fatalf("ended fragments: reasoning %+v, text %+v", r, x)
	}
}

// TestToolInputEndedCarriesTheStreamedInput checks that a call's
// tool.input.ended records the input its deltas streamed, which is live
// only: the durable event is the one place a replay finds it.
func TestToolInputEndedCarriesTheStreamedInput(t *testing.T) {
	h := actortest.New(t)
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("c1", "echo", `{"path":"a/b.go","line":12}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if e := lastOf[*messages.ToolInputEnded](h, sid); e == nil || e.Text != `{"path":"a/b.go","line":12}` || e.Name != "echo" {
		t.Fatalf("tool.input.ended %+v", e)
	}
}

// TestProviderProtocolErrorEndsTheStream checks that the runner stops
// reading a stream at the first event it refuses (here a second text
// block opened before the first ended): what the provider streams after
// it is not recorded, and a tool call in it is not run.
func TestProviderProtocolErrorEndsTheStream(t *testing.T) {
	h := actortest.New(t)
	var runs atomic.Int32
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { runs.Add(1); return "e", nil })
	h.Model.Reply(script.Event(llm.Event{Kind: llm.TextStart, ID: "t1"}), script.Event(llm.Event{Kind: llm.TextStart, ID: "t2"}),
		script.Event(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "echo", Input: []byte(`{}`)}))
	h.Model.Default(script.Text("unused"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	f := lastOf[*messages.StepFailed](h, sid)
	if f == nil || f.Error.Type != messages.ErrProviderUnknown || count(h, sid, messages.TypeToolCalled) != 0 || runs.Load() != 0 {
		t.Fatalf("step failed %+v, %d runs: %v", f, runs.Load(), h.Types(sid))
	}
}

// unfinishedProvider streams a complete text block and ends its stream
// without a step-finish event, as a connection cut at the wrong moment
// does.
type unfinishedProvider struct{}

func (unfinishedProvider) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		for _, ev := range []llm.Event{{Kind: llm.TextStart, ID: "t"}, {Kind: llm.TextDelta, ID: "t", Text: "half"}, {Kind: llm.TextEnd, ID: "t"}} {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// TestStreamWithoutAFinishFailsTheStep checks that a stream ending without
// a step-finish event is a transport failure, not a finished step: the
// step fails (its text kept), and no step.ended claims a finish the
// provider never sent.
func TestStreamWithoutAFinishFailsTheStep(t *testing.T) {
	h := actortest.New(t)
	h.Services.Provider = func(string) (llm.Provider, error) { return unfinishedProvider{}, nil }
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	f := lastOf[*messages.StepFailed](h, sid)
	if f == nil || f.Error.Type != messages.ErrProviderTransport || !strings.Contains(f.Error.Message, "without a finish") || count(h, sid, messages.TypeStepEnded) != 0 {
		t.Fatalf("step failed %+v: %v", f, h.Types(sid))
	}
}

// TestHostedCallsAreNotRunHere: a call the provider executed is recorded,
// never run locally even when a local tool has its name, and settled
// without a result; a local call's provider metadata is recorded with it.
func TestHostedCallsAreNotRunHere(t *testing.T) {
	h := actortest.New(t)
	var runs atomic.Int32
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { runs.Add(1); return "echoed", nil })
	h.Model.Reply(script.Event(llm.Event{Kind: llm.ToolCall, CallID: "h1", Name: "echo", Input: []byte(`{}`), Executed: true,
		ProviderMetadata: []byte(`{"hosted":1}`)}), script.ToolCall("c1", "echo", `{}`).WithMetadata(`{"local":1}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the local tool ran %d times, want once (for the local call only)", n)
	}
	calls := map[string]*messages.ToolCalled{}
	settled := map[string]messages.Payload{}
	for _, ev := range h.Events(sid) {
		switch p := ev.Data.(type) {
		case *messages.ToolCalled:
			calls[p.CallID] = p
		case *messages.ToolSucceeded:
			settled[p.CallID] = p
		case *messages.ToolFailed:
			settled[p.CallID] = p
		}
	}
	if c := calls["h1"]; c == nil || !c.Executed || string(c.ProviderMetadata) != `{"hosted":1}` {
		t.Fatalf("hosted call recorded as %+v", c)
	}
	if c := calls["c1"]; c == nil || c.Executed || string(c.ProviderMetadata) != `{"local":1}` {
		t.Fatalf("local call recorded as %+v", c)
	}
	if f, ok := settled["h1"].(*messages.ToolFailed); !ok || f.Error.Type != messages.ErrToolResultMissing {
		t.Fatalf("hosted call settled as %+v", settled["h1"])
	}
	if _, ok := settled["c1"].(*messages.ToolSucceeded); !ok {
		t.Fatalf("local call settled as %+v", settled["c1"])
	}
	h.CheckReplay()
}

func TestUnknownToolLetsTheModelContinue(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.ToolCall("c1", "nope", `{}`))
	h.Model.Reply(script.Text("sorry"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if count(h, sid, messages.TypeToolFailed) != 1 || h.Model.Count() != 2 {
		t.Fatalf("%v", h.Types(sid))
	}
	last := h.Request(2).Messages
	if res := last[len(last)-1]; res.Role != llm.RoleTool || !res.Parts[0].IsError {
		t.Fatalf("tool error not replayed: %+v", res)
	}
	h.CheckReplay()
}

// TestReusedCallIDFailsTheStep checks that a provider repeating a tool
// call ID within one step fails the step as a provider error, the call
// settled once and the busy period closed: committed, the repeat would be
// refused by the store, and the commit with it.
func TestReusedCallIDFailsTheStep(t *testing.T) {
	call := llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "echo", Input: []byte(`{}`)}
	for name, steps := range map[string][]script.Step{
		"call":            {script.Event(call), script.Event(call)},
		"streamed inputs": {script.ToolCall("c1", "echo", `{}`), script.ToolCall("c1", "echo", `{}`)},
	} {
		t.Run(name, func(t *testing.T) {
			h := actortest.New(t)
			h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
			h.Model.Reply(append(steps, script.Finish("tool-calls", messages.Tokens{}))...)
			sid := h.Session()
			h.Prompt(sid, "go")
			h.WaitIdle(sid)
			types := h.Types(sid)
			if count(h, sid, messages.TypeStepStarted) != 1 || count(h, sid, messages.TypeStepFailed) != 1 ||
				count(h, sid, messages.TypeToolSucceeded) != 1 || count(h, sid, messages.TypeExecutionFailed) != 1 {
				t.Fatalf("events: %v", types)
			}
			if m := lastAssistant(t, h, sid); m.Error == nil || m.Error.Type != messages.ErrProviderUnknown {
				t.Fatalf("assistant %+v", m)
			}
			h.CheckReplay()
		})
	}
}

// callFaultStore fails the first commit holding call callID with fault's
// error, or its panic: a store refusing a write it cannot take, or one with
// a bug.
type callFaultStore struct {
	persistence.Store
	callID string
	fault  func() error
	hit    atomic.Bool
}

// refusingStore refuses the first commit holding the call "refused".
func refusingStore(s persistence.Store) *callFaultStore {
	return &callFaultStore{Store: s, callID: "refused", fault: func() error {
		return messages.Errorf(messages.ErrInvalid, "refused by the test")
	}}
}

func (s *callFaultStore) Commit(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	for _, p := range ps {
		if c, ok := p.(*messages.ToolCalled); ok && c.CallID == s.callID && s.hit.CompareAndSwap(false, true) {
			return persistence.Committed{}, s.fault()
		}
	}
	return s.Store.Commit(ctx, sid, ps...)
}

// TestRefusedCommitStillClosesTheStep checks that when the store refuses
// a commit in the middle of a step, every step that started still gets its
// terminal and the busy period its one terminal event.
func TestRefusedCommitStillClosesTheStep(t *testing.T) {
	for name, steps := range map[string][]script.Step{
		"the step's first commit": {script.Text("looking"), script.ToolCall("refused", "echo", `{}`)},
		"after a call":            {script.ToolCall("c1", "echo", `{}`), script.ToolCall("refused", "echo", `{}`)},
		"after a call, no inputs": {script.ToolCall("c1", "echo", `{}`), script.Event(llm.Event{Kind: llm.ToolCall, CallID: "refused", Name: "echo", Input: []byte(`{}`)})},
		"after text and a call":   {script.Text("a"), script.ToolCall("c1", "echo", `{}`), script.Text("b"), script.ToolCall("refused", "echo", `{}`)},
	} {
		t.Run(name, func(t *testing.T) {
			m := actors.NewMetrics(prometheus.NewRegistry())
			h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Store, c.Metrics = refusingStore(c.Store), m }})
			h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
			h.Model.Reply(steps...)
			sid := h.Session()
			h.Prompt(sid, "go")
			h.WaitIdle(sid)
			types := h.Types(sid)
			closed := count(h, sid, messages.TypeStepEnded) + count(h, sid, messages.TypeStepFailed)
			terminals := count(h, sid, messages.TypeExecutionSucceeded) + count(h, sid, messages.TypeExecutionFailed) +
				count(h, sid, messages.TypeExecutionInterrupted)
			if closed != count(h, sid, messages.TypeStepStarted) || terminals != 1 || count(h, sid, messages.TypeExecutionStarted) != 1 {
				t.Fatalf("events: %v", types)
			}
			// sessiond_steps_total counts the step the refused commit
			// failed, as every other closed step.
			if n := testutil.ToFloat64(m.Steps.WithLabelValues("ended")) + testutil.ToFloat64(m.Steps.WithLabelValues("failed")); n != float64(closed) {
				t.Fatalf("sessiond_steps_total %v, %d steps closed", n, closed)
			}
			h.CheckReplay()
		})
	}
}

func TestFinalStepSendsNoTools(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 2})
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`))
	h.Model.Reply(script.Text("summary"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	first, final := h.Request(1), h.Request(2)
	if len(first.Tools) == 0 || first.ToolChoice != llm.ToolChoiceAuto {
		t.Fatalf("first request %+v", first.Tools)
	}
	if len(final.Tools) != 0 || final.ToolChoice != llm.ToolChoiceNone || !slices.ContainsFunc(final.System, func(s string) bool {
		return strings.Contains(s, "Maximum steps")
	}) {
		t.Fatalf("final request tools=%d choice=%s system=%q", len(final.Tools), final.ToolChoice, final.System)
	}
	h.CheckReplay()
}

// TestFinalStepRunsNoTool: a model that calls a tool on the final step,
// which offered none, does not get it run; the call fails and the busy
// period ends with the allowance.
func TestFinalStepRunsNoTool(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 2})
	var runs atomic.Int32
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { runs.Add(1); return "e", nil })
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`))
	h.Model.Reply(script.ToolCall("c2", "echo", `{}`))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once (not on the final step)", n)
	}
	failed := failedCall(h, sid, "c2")
	if failed == nil || failed.Error.Type != messages.ErrToolExecution || !strings.Contains(failed.Error.Message, "No tools are available") {
		t.Fatalf("the final step's call settled as %+v", failed)
	}
	if types := h.Types(sid); h.Model.Count() != 2 || types[len(types)-1] != "session.execution.succeeded" {
		t.Fatalf("%d requests: %v", h.Model.Count(), types)
	}
	h.CheckReplay()
}

// TestQueuedPromptRunsAfterTheAllowanceRunsOut checks that a queued
// prompt waiting behind a run is promoted when the run ends on its step
// allowance, even though the last step asked to continue (its model
// called a tool the final step does not run): continuation that the
// allowance cuts off is no continuation, and the queued prompt, which
// resets the allowance, runs in the same busy period.
func TestQueuedPromptRunsAfterTheAllowanceRunsOut(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 1})
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`))
	h.Model.Reply(script.Text("answered two"))
	sid := h.Session()
	no := false
	two := h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "two"}, Delivery: messages.Queue, Resume: &no})
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if in, err := h.Store.Input(h.Ctx(), two.ID); err != nil || in.PromotedSeq == nil {
		t.Fatalf("the queued prompt was not promoted: %+v %v: %v", in, err, h.Types(sid))
	}
	if got := userTexts(h.Request(2)); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("second request's user messages %q", got)
	}
	if n := count(h, sid, messages.TypeExecutionStarted); n != 1 {
		t.Fatalf("%d busy periods, want the queued prompt run in the first: %v", n, h.Types(sid))
	}
}

func TestSteerBatchCap(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.SteerBatch = 2 }})
	started, release := callsBlockingTool(h, "slow")
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "first")
	<-started
	for _, s := range []string{"s1", "s2", "s3"} {
		h.Prompt(sid, s)
	}
	close(release)
	h.WaitIdle(sid)
	if got := userTexts(h.Request(2)); !slices.Equal(got, []string{"first", "s1", "s2"}) {
		t.Fatalf("first batch %v", got)
	}
	if got := userTexts(h.Request(3)); !slices.Equal(got, []string{"first", "s1", "s2", "s3"}) {
		t.Fatalf("the rest must wait for the next boundary, in order: %v", got)
	}
	h.CheckReplay()
}

// TestWakeDuringAFailingDrain: a prompt admitted while the drain is
// failing is answered by a fresh busy period, not left pending.
func TestWakeDuringAFailingDrain(t *testing.T) {
	h := actortest.New(t)
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Fail(llm.Errorf(messages.ErrProviderInvalidRequest, "bad request")))
	h.Model.Reply(script.Text("second answer"))
	sid := h.Session()
	h.Prompt(sid, "first")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "second")
	g.Release()
	h.WaitIdle(sid)
	if h.Model.Count() != 2 || count(h, sid, messages.TypeExecutionFailed) != 1 || count(h, sid, messages.TypeExecutionSucceeded) != 1 {
		t.Fatalf("the prompt admitted during the failing drain: %d requests, %v", h.Model.Count(), h.Types(sid))
	}
	h.CheckReplay()
}

// TestNewInputResetsTheAllowance: promoting new user input resets the
// agent's step allowance (SEED.md), so a steer promoted after step 1 of 2
// leaves two more steps with tools instead of making step 2 the final one.
func TestNewInputResetsTheAllowance(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 2})
	started, release := make(chan string, 1), make(chan struct{})
	h.Tools.Add("slow", actortest.Blocking(started, release))
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.ToolCall("c2", "echo", `{}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	h.Prompt(sid, "steer")
	close(release)
	h.WaitIdle(sid)
	second, third := h.Request(2), h.Request(3)
	if userTexts(second)[len(userTexts(second))-1] != "steer" || len(second.Tools) == 0 || second.ToolChoice == llm.ToolChoiceNone {
		t.Fatalf("request 2 (after the steer) is the final step: tools=%d choice=%s", len(second.Tools), second.ToolChoice)
	}
	if len(third.Tools) != 0 || third.ToolChoice != llm.ToolChoiceNone {
		t.Fatalf("request 3 is not the final step: tools=%d choice=%s", len(third.Tools), third.ToolChoice)
	}
	h.CheckReplay()
}

// TestSecondFragmentStartFailsTheStep: a provider that opens a text block
// before ending the one it has open breaks the stream contract: the step
// fails as provider.unknown with the text streamed so far kept, and the busy
// period fails.
func TestSecondFragmentStartFailsTheStep(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Event(llm.Event{Kind: llm.TextStart}), script.Event(llm.Event{Kind: llm.TextDelta, Text: "partial"}),
		script.Event(llm.Event{Kind: llm.TextStart}))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	evs := h.Events(sid)
	var stepErr *messages.Error
	for _, ev := range evs {
		if p, ok := ev.Data.(*messages.StepFailed); ok {
			stepErr = &p.Error
		}
	}
	if stepErr == nil || stepErr.Type != messages.ErrProviderUnknown || !strings.Contains(stepErr.Message, "second text fragment") {
		t.Fatalf("step error %+v", stepErr)
	}
	if last := evs[len(evs)-1].Type; last != messages.TypeExecutionFailed {
		t.Fatalf("busy period ended with %s", last)
	}
	msgs, err := h.Store.Messages(h.Ctx(), sid, persistence.Query{After: -1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kept := false
	for _, m := range msgs.Data {
		for _, p := range m.Parts {
			kept = kept || p.Text == "partial"
		}
	}
	if !kept {
		t.Fatalf("the partial text was not kept: %+v", msgs.Data)
	}
	h.CheckReplay()
}

// TestAgentSelectedMidRunBoundsTheSteps: an agent selected while a run goes
// on takes over at the next step boundary with no more steps than it
// allows (it ran on the previous agent's allowance, 24 steps where it
// allows 2), the last of them without tools.
func TestAgentSelectedMidRunBoundsTheSteps(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 25})
	h.Agents["plan"] = locations.Agent{Name: "plan", Steps: 2, Prompt: "You plan."}
	started, release := make(chan string, 1), make(chan struct{})
	h.Tools.Add("slow", actortest.Blocking(started, release))
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Default(script.ToolCall("c2", "echo", `{}`))
	sid := h.Session()
	h.Prompt(sid, "go")
	<-started
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "plan"); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.WaitIdle(sid)
	if n := h.Model.Count(); n != 3 {
		t.Fatalf("%d requests, want the first agent's step and the plan agent's 2", n)
	}
	if last := h.Request(3); len(last.Tools) != 0 || last.System[0] != "You plan." {
		t.Fatalf("the plan agent's last step: %d tools, system %q", len(last.Tools), last.System[0])
	}
	h.CheckReplay()
}

// TestToolMetricLabelsAreBounded: the tool label of sessiond_tool_calls_total
// is a tool the request offered, or "unknown": the model chooses the names
// it calls, and every name made a series of its own.
func TestToolMetricLabelsAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := actors.NewMetrics(reg)
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Metrics = m }})
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	steps := []script.Step{script.ToolCall("known", "echo", `{}`)}
	for i := range 20 {
		steps = append(steps, script.ToolCall(fmt.Sprintf("call_%d", i), fmt.Sprintf("Invented tool %d\n", i), `{}`))
	}
	h.Model.Reply(steps...)
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if n := testutil.CollectAndCount(m.Tools); n != 2 ||
		testutil.ToFloat64(m.Tools.WithLabelValues("unknown", "failed")) != 20 || testutil.ToFloat64(m.Tools.WithLabelValues("echo", "success")) != 1 {
		t.Fatalf("%d series of sessiond_tool_calls_total", n)
	}
}

// TestMalformedToolInputIsStoredAsRun: arguments a provider sent that are
// not JSON are stored, run and sent back to the model as one value, a JSON
// string of their text (blank ones as {}): before, the tool got the raw
// text while the log, and so every later request, showed {}.
func TestMalformedToolInputIsStoredAsRun(t *testing.T) {
	for raw, want := range map[string]string{`{not json`: `"{not json"`, ``: `{}`, ` {"a": 1} `: ` {"a": 1} `} {
		t.Run(raw, func(t *testing.T) {
			h := actortest.New(t)
			got := make(chan string, 1)
			h.Tools.Add("echo", func(_ context.Context, c locations.ToolCall) (string, error) {
				got <- string(c.Input)
				return "ok", nil
			})
			h.Model.Reply(script.Event(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "echo", Input: []byte(raw)}),
				script.Finish("tool-calls", messages.Tokens{}))
			h.Model.Reply(script.Text("done"))
			sid := h.Session()
			h.Prompt(sid, "go")
			h.WaitIdle(sid)
			if in := <-got; in != want {
				t.Fatalf("tool got %q, want %q", in, want)
			}
			called := h.WaitEvent(sid, actortest.OfType(messages.TypeToolCalled)).Data.(*messages.ToolCalled)
			if string(called.Input) != want {
				t.Fatalf("tool.called input %q, want %q", called.Input, want)
			}
			var sent []byte
			for _, m := range h.Request(2).Messages {
				for _, p := range m.Parts {
					if p.Kind == llm.PartToolCall && p.CallID == "c1" {
						sent = p.Input
					}
				}
			}
			if string(sent) != want {
				t.Fatalf("request 2 sent the call's input as %q, want %q", sent, want)
			}
			h.CheckReplay()
		})
	}
}
