package actors_test

import (
	"context"
	"slices"
	"strings"
	"testing"

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

// hostedHarness is a harness whose "demo" model enables the hosted tool
// web_search ("other" enables none).
func hostedHarness(t *testing.T, opts ...actortest.Options) *actortest.Harness {
	h := actortest.New(t, opts...)
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "script", Type: llm.ProviderScript, Models: map[string]llm.ModelSpec{
		"demo":  {Context: 200000, Output: 8000, HostedTools: []string{"web_search"}},
		"other": {Context: 200000, Output: 8000}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.Services.Catalog = catalog
	return h
}

// searchedGo is a hosted search srv_1 for "go" and its result, as a
// provider streams them.
func searchedGo() []script.Step {
	return []script.Step{script.ToolCall("srv_1", "web_search", `{"query":"go"}`).ProviderExecuted(),
		script.HostedResult("srv_1", "web_search", "Go — https://go.dev").WithMetadata(`{"r":1}`)}
}

// toolPart returns the tool part with callID of the Session's assistant
// messages.
func toolPart(t *testing.T, h *actortest.Harness, sid messages.SessionID, callID string) *persistence.ToolPart {
	t.Helper()
	page, err := h.Store.Messages(h.Ctx(), sid, persistence.Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Data {
		for _, p := range m.Parts {
			if p.Tool != nil && p.Tool.CallID == callID {
				return p.Tool
			}
		}
	}
	t.Fatalf("no tool part %s", callID)
	return nil
}

// TestHostedToolSettlesWithItsResult: a hosted call the provider answers
// in its stream settles as session.tool.success.1 with the result's
// provider metadata, kept apart from the call's; the same model gets both
// back inside the assistant message, another model a text account; the
// requests enable the model's hosted tools except on the final step.
func TestHostedToolSettlesWithItsResult(t *testing.T) {
	h := hostedHarness(t)
	h.Model.Reply(script.Text("Searching."),
		script.ToolCall("srv_1", "web_search", `{"query":"go"}`).ProviderExecuted().WithMetadata(`{"call":1}`),
		script.HostedResult("srv_1", "web_search", "Go — https://go.dev").WithMetadata(`{"result":1}`),
		script.Text("Found it."))
	h.Model.Reply(script.Text("again"))
	h.Model.Reply(script.Text("elsewhere"))
	sid := h.Session()
	h.Prompt(sid, "search")
	h.WaitIdle(sid)
	want := []string{"session.step.started", "session.text.started", "session.text.ended",
		"session.tool.input.started", "session.tool.input.ended", "session.tool.called",
		"session.tool.success", "session.text.started", "session.text.ended", "session.step.ended", "session.execution.succeeded"}
	if got := typesAfter(h, sid, "session.prompt.promoted"); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if h.Model.Count() != 1 {
		t.Fatalf("%d requests: a hosted call needs no continuation", h.Model.Count())
	}
	if r := h.Request(1); !slices.Equal(r.HostedTools, []string{"web_search"}) {
		t.Fatalf("hosted tools %q", r.HostedTools)
	}
	part := toolPart(t, h, sid, "srv_1")
	if part.State != persistence.ToolCompleted || !part.Executed || part.Output != "Go — https://go.dev" ||
		string(part.CallMetadata) != `{"call":1}` || string(part.ResultMetadata) != `{"result":1}` {
		t.Fatalf("hosted part %+v", part)
	}

	h.Prompt(sid, "more")
	h.WaitIdle(sid)
	asst := h.Request(2).Messages[1]
	if asst.Role != llm.RoleAssistant || len(asst.Parts) != 4 {
		t.Fatalf("assistant message %+v", asst)
	}
	call, res := asst.Parts[1], asst.Parts[2]
	if call.Kind != llm.PartToolCall || !call.Executed || call.CallID != "srv_1" || string(call.Input) != `{"query":"go"}` || string(call.ProviderMetadata) != `{"call":1}` {
		t.Fatalf("hosted call lowered as %+v", call)
	}
	if res.Kind != llm.PartToolResult || !res.Executed || res.IsError || res.Output != "Go — https://go.dev" || string(res.ProviderMetadata) != `{"result":1}` {
		t.Fatalf("hosted result lowered as %+v", res)
	}
	for _, m := range h.Request(2).Messages {
		if m.Role == llm.RoleTool {
			t.Fatalf("a hosted result went into a tool message: %+v", m)
		}
	}

	if err := h.Runtime.SelectModel(h.Ctx(), sid, messages.ModelRef{ProviderID: "script", ID: "other"}); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "elsewhere")
	h.WaitIdle(sid)
	third := h.Request(3)
	if len(third.HostedTools) != 0 {
		t.Fatalf("a model without hosted tools was sent %q", third.HostedTools)
	}
	asst = third.Messages[1]
	if len(asst.Parts) != 3 || asst.Parts[1].Kind != llm.PartText || asst.Parts[1].Executed ||
		!strings.Contains(asst.Parts[1].Text, "web_search") || !strings.Contains(asst.Parts[1].Text, "https://go.dev") {
		t.Fatalf("after a model switch the hosted call lowered as %+v", asst.Parts)
	}
	h.CheckReplay()
}

// TestHostedToolFailure: a hosted result the provider marks as an error
// settles as session.tool.failed.1 (tool.execution) with its metadata; a
// result for a call the step does not have fails the step; a hosted call
// never answered settles as tool.result-missing and is sent back as text.
func TestHostedToolFailure(t *testing.T) {
	m := actors.NewMetrics(prometheus.NewRegistry())
	h := hostedHarness(t, withMetrics(m))
	h.Model.Reply(script.ToolCall("srv_1", "web_search", `{}`).ProviderExecuted(),
		script.HostedError("srv_1", "web_search", "max_uses_exceeded").WithMetadata(`{"e":1}`),
		script.ToolCall("srv_2", "web_search", `{}`).ProviderExecuted(),
		script.Text("partly"))
	h.Model.Reply(script.HostedResult("nope", "web_search", "x"))
	h.Model.Reply(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "search")
	h.WaitIdle(sid)
	failed := toolPart(t, h, sid, "srv_1")
	if failed.State != persistence.ToolError || failed.Error == nil || failed.Error.Type != messages.ErrToolExecution ||
		failed.Error.Message != "max_uses_exceeded" || string(failed.ResultMetadata) != `{"e":1}` {
		t.Fatalf("hosted failure %+v", failed)
	}
	missing := toolPart(t, h, sid, "srv_2")
	if missing.State != persistence.ToolError || missing.Error.Type != messages.ErrToolResultMissing || missing.ResultMetadata != nil {
		t.Fatalf("unanswered hosted call %+v", missing)
	}
	if n := testutil.ToFloat64(m.Tools.WithLabelValues("web_search", "failed")); n != 2 {
		t.Fatalf("%v failed web_search calls counted, want 2 (one reported, one unanswered)", n)
	}

	h.Prompt(sid, "again")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeStepFailed); n != 1 {
		t.Fatalf("%d failed steps, want 1 (the result for an unknown call): %v", n, h.Types(sid))
	}
	parts := h.Request(2).Messages[1].Parts
	if len(parts) != 4 || !parts[0].Executed || parts[1].Kind != llm.PartToolResult || !parts[1].IsError ||
		parts[1].Output != "max_uses_exceeded" || parts[2].Kind != llm.PartText || !strings.Contains(parts[2].Text, string(messages.ErrToolResultMissing)) {
		t.Fatalf("request 2 assistant parts %+v", parts)
	}
	h.CheckReplay()
}

// TestHostedToolsOnTheFinalStep: the final step, which offers no local
// tools and forbids tool use, still declares the model's hosted tools,
// since its history may hold their earlier calls.
func TestHostedToolsOnTheFinalStep(t *testing.T) {
	h := hostedHarness(t, actortest.Options{Steps: 1})
	h.Model.Reply(script.Text("only step"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if r := h.Request(1); r.ToolChoice != llm.ToolChoiceNone || len(r.Tools) != 0 || !slices.Equal(r.HostedTools, []string{"web_search"}) {
		t.Fatalf("final request: choice %s, %d tools, hosted %q", r.ToolChoice, len(r.Tools), r.HostedTools)
	}
}

// TestPausedTurnContinues: a step the provider paused (a long turn of
// hosted tool use) ends and is sent back in a further step, which
// consumes the allowance like any other.
func TestPausedTurnContinues(t *testing.T) {
	h := hostedHarness(t)
	h.Model.Reply(append(searchedGo(), script.Finish(llm.FinishPause, messages.Tokens{}))...)
	h.Model.Reply(script.Text("Here is what I found."))
	sid := h.Session()
	h.Prompt(sid, "search")
	h.WaitIdle(sid)
	if h.Model.Count() != 2 || count(h, sid, messages.TypeStepEnded) != 2 {
		t.Fatalf("%d requests: %v", h.Model.Count(), h.Types(sid))
	}
	second := h.Request(2)
	last := second.Messages[len(second.Messages)-1]
	if last.Role != llm.RoleAssistant || len(last.Parts) != 2 || !last.Parts[0].Executed {
		t.Fatalf("the paused response was not sent back as the last message: %+v", second.Messages)
	}
	h.CheckReplay()
}

// TestCompactionDeclaresHostedTools: a compaction request sends the same
// history, hosted calls included, so it declares the model's hosted tools
// too (its tool choice forbids using them).
func TestCompactionDeclaresHostedTools(t *testing.T) {
	h := hostedHarness(t)
	h.Model.Reply(append(searchedGo(), script.Text("Found."))...)
	h.Model.Default(script.Text("summary"))
	sid := h.Session()
	h.Prompt(sid, "search")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	req := h.Request(2)
	if req.ToolChoice != llm.ToolChoiceNone || !slices.Equal(req.HostedTools, []string{"web_search"}) {
		t.Fatalf("compaction request: choice %s, hosted %q", req.ToolChoice, req.HostedTools)
	}
}

// failedCall returns the last tool.failed of the Session's call id, or nil.
func failedCall(h *actortest.Harness, sid messages.SessionID, id string) *messages.ToolFailed {
	var failed *messages.ToolFailed
	for _, ev := range h.Events(sid) {
		if f, ok := ev.Data.(*messages.ToolFailed); ok && f.CallID == id {
			failed = f
		}
	}
	return failed
}

// searchDeferred runs a turn whose first response calls a local echo and a
// hosted web search it leaves unanswered, with the responses then after
// it, and checks that the search settled as a call the provider runs in
// its next turn.
func searchDeferred(t *testing.T, h *actortest.Harness, then ...[]script.Step) messages.SessionID {
	t.Helper()
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("srv_1", "web_search", `{"query":"go"}`).ProviderExecuted(), script.ToolCall("c1", "echo", `{}`))
	for _, steps := range then {
		h.Model.Reply(steps...)
	}
	sid := h.Session()
	h.Prompt(sid, "search and echo")
	h.WaitIdle(sid)
	deferred := failedCall(h, sid, "srv_1")
	if deferred == nil || deferred.Error.Type != messages.ErrToolResultMissing || !strings.Contains(deferred.Error.Message, "next turn") {
		t.Fatalf("the deferred call settled as %+v", deferred)
	}
	return sid
}

// TestDeferredHostedCallGoesBack: a turn that calls a local tool and a
// hosted one the provider leaves unanswered settles the hosted call as
// result-missing, saying the provider runs it next; the continuing request
// sends it back bare to the same model, and the result that arrives in the
// next step settles the call there. Later requests tell it as text.
func TestDeferredHostedCallGoesBack(t *testing.T) {
	h := hostedHarness(t)
	sid := searchDeferred(t, h, append(searchedGo(), script.Text("Found.")), []script.Step{script.Text("again")})
	asst := h.Request(2).Messages[1]
	if asst.Role != llm.RoleAssistant || len(asst.Parts) != 2 || !asst.Parts[0].Executed || asst.Parts[0].Kind != llm.PartToolCall || asst.Parts[0].CallID != "srv_1" {
		t.Fatalf("continuing request's assistant message %+v", asst)
	}
	if n := count(h, sid, messages.TypeToolSucceeded); n != 2 { // echo, then the search in step 2
		t.Fatalf("%d successes: %v", n, h.Types(sid))
	}
	h.Prompt(sid, "more")
	h.WaitIdle(sid)
	first := h.Request(3).Messages[1]
	if first.Parts[0].Kind != llm.PartText || !strings.Contains(first.Parts[0].Text, "next turn") {
		t.Fatalf("an older deferred call lowered as %+v", first.Parts[0])
	}
	h.CheckReplay()
}

// TestDeferredHostedCallOnTheFinalStep is TestDeferredHostedCallGoesBack
// on the last step of the allowance, where the local call is not run: it
// still counts as a local call of the turn, so the unanswered hosted call
// is settled as one the provider runs in its next turn, when the user's
// next prompt sends this response back.
func TestDeferredHostedCallOnTheFinalStep(t *testing.T) {
	searchDeferred(t, hostedHarness(t, actortest.Options{Steps: 1}))
}

// TestUnansweredHostedCallOfAFinishedTurn checks the other side of
// TestDeferredHostedCallGoesBack: a turn that ends (finish stop) with a
// hosted call the provider never answered, and no local call or pause that
// would send the response back, settles the call as result-missing saying
// the provider returned no result, not that it runs it next.
func TestUnansweredHostedCallOfAFinishedTurn(t *testing.T) {
	h := hostedHarness(t)
	h.Model.Reply(script.ToolCall("srv_1", "web_search", `{"query":"go"}`).ProviderExecuted(), script.Text("Gave up."))
	sid := h.Session()
	h.Prompt(sid, "search")
	h.WaitIdle(sid)
	f := lastOf[*messages.ToolFailed](h, sid)
	if f == nil || f.CallID != "srv_1" || f.Error.Type != messages.ErrToolResultMissing || !strings.Contains(f.Error.Message, "did not return a result") {
		t.Fatalf("the unanswered call settled as %+v", f)
	}
	if types := h.Types(sid); types[len(types)-1] != "session.execution.succeeded" {
		t.Fatalf("%v", types)
	}
}
