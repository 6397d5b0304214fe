package actors_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// The tests of this file pin SEED.md sentences that no other test would
// fail on; each names the sentence it pins.

// TestCallIDIsUniqueOnlyWithinItsStep: "callID is unique only within its
// owning step, not across the Session": two steps whose calls share an ID
// both run, each settlement names its own assistant message, and the
// request after them sends back both calls with their own results.
func TestCallIDIsUniqueOnlyWithinItsStep(t *testing.T) {
	h := actortest.New(t)
	var runs []string
	h.Tools.Add("echo", func(_ context.Context, c locations.ToolCall) (string, error) {
		runs = append(runs, string(c.Input)) // the two calls run one after the other
		return "echoed " + string(c.Input), nil
	})
	h.Model.Reply(script.ToolCall("c1", "echo", `{"n":1}`))
	h.Model.Reply(script.ToolCall("c1", "echo", `{"n":2}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)

	if last := h.Types(sid); last[len(last)-1] != "session.execution.succeeded" || count(h, sid, messages.TypeStepFailed) != 0 {
		t.Fatalf("a callID repeated in a later step failed the run: %v", last)
	}
	if !slices.Equal(runs, []string{`{"n":1}`, `{"n":2}`}) {
		t.Fatalf("tool runs %q", runs)
	}
	owners := map[messages.MessageID]string{}
	for _, ev := range h.Events(sid) {
		if p, ok := ev.Data.(*messages.ToolSucceeded); ok {
			if p.CallID != "c1" {
				t.Fatalf("settlement of %q", p.CallID)
			}
			owners[p.AssistantMessageID] = p.Output
		}
	}
	if len(owners) != 2 {
		t.Fatalf("two calls c1 settled under %d assistant messages: %v", len(owners), owners)
	}
	var results []string
	for _, m := range h.Request(3).Messages {
		for _, p := range m.Parts {
			if p.Kind == llm.PartToolResult && p.CallID == "c1" {
				results = append(results, p.Output)
			}
		}
	}
	if !slices.Equal(results, []string{`echoed {"n":1}`, `echoed {"n":2}`}) {
		t.Fatalf("request 3 sends back results %q", results)
	}
	h.CheckReplay()
}

// TestSteersAtOneBoundaryResetTheAllowanceOnce: "multiple steers promoted
// at one boundary reset it once": two steers promoted together leave the
// agent's configured allowance, not one allowance per steer.
func TestSteersAtOneBoundaryResetTheAllowanceOnce(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 2})
	started, release := callsBlockingTool(h, "slow")
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("c2", "echo", `{}`))
	h.Model.Default(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	h.Prompt(sid, "steer a")
	h.Prompt(sid, "steer b")
	close(release)
	h.WaitIdle(sid)
	second, third := h.Request(2), h.Request(3)
	if got := userTexts(second); !slices.Equal(got, []string{"one", "steer a", "steer b"}) || len(second.Tools) == 0 {
		t.Fatalf("request 2 users %v, %d tools", got, len(second.Tools))
	}
	if len(third.Tools) != 0 || third.ToolChoice != llm.ToolChoiceNone {
		t.Fatalf("request 3 is not the final step of a reset allowance of 2: tools=%d choice=%s", len(third.Tools), third.ToolChoice)
	}
	h.CheckReplay()
}

// TestCompactionBarrierHoldsEarlierPrompts: "A pending compaction blocks
// all unpromoted prompts ... and releases the backlog only after its
// durable ended or failed event settles the barrier", and
// "session.compaction.failed.1 settles an unsuccessful manual barrier
// without changing the previous history boundary". The prompt waiting
// when the barrier is admitted is promoted only after the settlement, and
// its request sees the summary after an ended compaction, the whole
// earlier history after a failed one.
func TestCompactionBarrierHoldsEarlierPrompts(t *testing.T) {
	for name, summary := range map[string][]script.Step{
		"ended":  {script.Text("## Objective\nKeep going")},
		"failed": {script.Text("## Objective\ncut"), script.Finish("length", messages.Tokens{})},
	} {
		t.Run(name, func(t *testing.T) {
			h := actortest.New(t)
			h.Model.Reply(script.Text("first answer"))
			h.Model.Reply(summary...)
			h.Model.Reply(script.Text("second answer"))
			sid := h.Session()
			h.Prompt(sid, "one")
			h.WaitIdle(sid)
			no := false
			waiting := h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "two"}, Resume: &no})
			compactNow(t, h, sid)

			var order []string
			for _, ev := range h.Events(sid) {
				switch p := ev.Data.(type) {
				case *messages.CompactionStarted:
					order = append(order, "started")
				case *messages.CompactionEnded:
					order = append(order, "ended")
				case *messages.CompactionFailed:
					order = append(order, "failed")
				case *messages.PromptPromoted:
					if p.InputID == waiting.ID {
						order = append(order, "promoted")
					}
				}
			}
			if want := []string{"started", name, "promoted"}; !slices.Equal(order, want) {
				t.Fatalf("order %v, want %v: %v", order, want, h.Types(sid))
			}
			if h.Model.Count() != 3 {
				t.Fatalf("%d requests: %v", h.Model.Count(), h.Types(sid))
			}
			next := h.Request(3)
			users := userTexts(next)
			if users[len(users)-1] != "two" {
				t.Fatalf("request 3 users %v", users)
			}
			summarized := strings.HasPrefix(next.Messages[0].Parts[0].Text, "<summary>")
			if name == "ended" && (!summarized || slices.Contains(users, "one")) {
				t.Fatalf("after the ended compaction request 3 users %v, summary %v", users, summarized)
			}
			if name == "failed" && (summarized || !slices.Equal(users, []string{"one", "two"})) {
				t.Fatalf("the failed compaction moved the history boundary: users %v, summary %v", users, summarized)
			}
			if rows, err := h.Store.Pending(h.Ctx(), sid); err != nil || len(rows) != 0 {
				t.Fatalf("pending %+v (%v)", rows, err)
			}
			h.CheckReplay()
		})
	}
}

// TestStepFailureAwaitsItsRunningTools: "only then may the runner publish
// the single terminal session.step.ended or session.step.failed. Streamed
// provider-error evidence is retained until this closeout". A stream that
// fails (a transport error, a content-filter finish) while a local call it
// made still runs closes its step only after that call settled with its
// own result; the step fails with the provider's error, and no retry
// follows the durable call.
func TestStepFailureAwaitsItsRunningTools(t *testing.T) {
	for name, tc := range map[string]struct {
		end  func(yield func(llm.Event, error) bool)
		want messages.ErrorType
	}{
		"streamed error": {func(yield func(llm.Event, error) bool) {
			yield(llm.Event{}, &llm.Error{Type: messages.ErrProviderTransport, Message: "reset"})
		}, messages.ErrProviderTransport},
		"content filter": {func(yield func(llm.Event, error) bool) {
			yield(llm.Event{Kind: llm.StepFinish, Finish: llm.FinishContentFilter}, nil)
		}, messages.ErrProviderContentFilter},
	} {
		t.Run(name, func(t *testing.T) {
			h := actortest.New(t)
			started, ended := make(chan struct{}), make(chan struct{})
			var requests atomic.Int32
			h.Services.Provider = func(string) (llm.Provider, error) {
				return streamFunc(func(yield func(llm.Event, error) bool) {
					if requests.Add(1) > 1 {
						return
					}
					if !yield(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "work", Input: []byte(`{}`)}, nil) {
						return
					}
					<-started // the call runs while the stream fails
					tc.end(yield)
					close(ended)
				}), nil
			}
			h.Tools.Add("work", func(context.Context, locations.ToolCall) (string, error) {
				close(started)
				<-ended // still running when the stream has ended
				return "done", nil
			})
			sid := h.Session()
			h.Prompt(sid, "go")
			h.WaitIdle(sid)
			if !settledThenFailed(t, h, sid, tc.want) || requests.Load() != 1 {
				t.Fatalf("want the call's own result, then the step's failure, one request (%d): %v", requests.Load(), h.Types(sid))
			}
			if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || f.Error.Type != tc.want {
				t.Fatalf("busy period %+v: %v", f, h.Types(sid))
			}
			h.CheckReplay()
		})
	}
}

// TestOverflowRecoveryNeverLoops: "A second overflow, unavailable
// compaction, or overflow after durable output becomes the ordinary
// terminal failure; recovery never loops or replays partial side effects."
// A step that overflows again after its overflow compaction fails with the
// overflow instead of compacting again; one that overflows after streaming
// text does not compact at all.
func TestOverflowRecoveryNeverLoops(t *testing.T) {
	for name, tc := range map[string]struct {
		replies     [][]script.Step
		compactions int
	}{
		"second overflow": {[][]script.Step{{overflow}, {script.Text("## Objective\nsummary")}, {overflow}}, 1},
		"after output":    {[][]script.Step{{script.PartialText("half an"), overflow}}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			h := actortest.New(t)
			h.Model.Reply(script.Text("earlier"))
			for _, r := range tc.replies {
				h.Model.Reply(r...)
			}
			h.Model.Default(script.Text("## Objective\nnot reached"))
			sid := twoTurns(h)
			if n := count(h, sid, messages.TypeCompactionStarted); n != tc.compactions || h.Model.Count() != 1+len(tc.replies) {
				t.Fatalf("%d compactions, %d requests: %v", n, h.Model.Count(), h.Types(sid))
			}
			if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || f.Error.Type != messages.ErrProviderContextOverflow {
				t.Fatalf("busy period %+v: %v", f, h.Types(sid))
			}
			h.CheckReplay()
		})
	}
}

// TestOverflowCompactionLeavesOneAttempt: "A completed checkpoint
// rebuilds the same logical step with one remaining physical attempt"
// (SEED.md; DESIGN.md §5: one overflow-triggered compaction, then
// terminal). A rate limit on that attempt, retryable before any output on
// any other attempt, ends the busy period without a retry.
func TestOverflowCompactionLeavesOneAttempt(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(overflow)
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.Fail(rateLimit(0)))
	h.Model.Default(script.Text("not reached"))
	sid := twoTurns(h)
	if n := count(h, sid, messages.TypeRetryScheduled); n != 0 || h.Model.Count() != 4 {
		t.Fatalf("%d retries, %d requests after the overflow compaction, want none and 4: %v", n, h.Model.Count(), h.Types(sid))
	}
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 {
		t.Fatalf("%d compactions ended: %v", n, h.Types(sid))
	}
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || f.Error.Type != messages.ErrProviderRateLimit {
		t.Fatalf("busy period %+v: %v", f, h.Types(sid))
	}
	h.CheckReplay()
}

// TestOrphanSweepPrecedesAWokenRequest: "Before assembling a provider
// request, the runner's cross-drain failInterruptedTools recovery durably
// fails any tool still projected as pending or running from a previous
// process". Not only an explicit run: a drain a new prompt wakes fails the
// orphaned call under its own assistant message before its step starts,
// sends the model that failure as the call's result, and does not run the
// tool again.
func TestOrphanSweepPrecedesAWokenRequest(t *testing.T) {
	h2, sid, kept := echoCrashedAt(t, messages.TypeToolCalled)
	h2.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) {
		t.Error("the orphaned call ran again")
		return "", nil
	})
	h2.Model.Reply(script.Text("recovered"))
	h2.Prompt(sid, "next")
	h2.WaitIdle(sid)
	called := lastOf[*messages.ToolCalled](h2, sid)
	var order []string
	for _, ev := range h2.Events(sid)[kept:] {
		switch p := ev.Data.(type) {
		case *messages.ToolFailed:
			if p.CallID == called.CallID && p.AssistantMessageID == called.AssistantMessageID &&
				p.Error.Type == messages.ErrAborted && strings.HasPrefix(p.Error.Message, "Tool execution interrupted") {
				order = append(order, "swept")
			}
		case *messages.StepStarted:
			if p.AssistantMessageID != called.AssistantMessageID {
				order = append(order, "step")
			}
		}
	}
	if !slices.Equal(order, []string{"swept", "step"}) {
		t.Fatalf("after the crash %v: %v", order, h2.Types(sid)[kept:])
	}
	var result string
	for _, m := range h2.Request(1).Messages {
		for _, p := range m.Parts {
			if p.Kind == llm.PartToolResult && p.CallID == "call_1" {
				result = p.Output
			}
		}
	}
	if !strings.Contains(result, "Tool execution interrupted") {
		t.Fatalf("the woken request sends back %q for the orphaned call", result)
	}
	h2.CheckReplay()
}
