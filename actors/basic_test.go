package actors_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

func wantTypes(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

func TestTextReply(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("hello there"))
	sid := h.Session()
	h.Prompt(sid, "hi")
	h.WaitIdle(sid)
	wantTypes(t, h.Types(sid),
		"session.created", "session.prompt.admitted",
		"session.execution.started", "session.prompt.promoted",
		"session.step.started", "session.text.started", "session.text.ended", "session.step.ended",
		"session.execution.succeeded")
	req := h.Request(1)
	if len(req.Messages) != 1 || req.Messages[0].Parts[0].Text != "hi" || len(req.System) == 0 {
		t.Fatalf("request %+v", req)
	}
}

func TestToolRound(t *testing.T) {
	h := actortest.New(t)
	h.Tools.Add("echo", func(ctx context.Context, c locations.ToolCall) (string, error) {
		return "echoed " + string(c.Input), nil
	})
	h.Model.Reply(script.ToolCall("call_1", "echo", `{"x":1}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "use echo")
	h.WaitIdle(sid)
	wantTypes(t, h.Types(sid),
		"session.created", "session.prompt.admitted",
		"session.execution.started", "session.prompt.promoted",
		"session.step.started", "session.tool.input.started", "session.tool.input.ended", "session.tool.called",
		"session.tool.success", "session.step.ended",
		"session.step.started", "session.text.started", "session.text.ended", "session.step.ended",
		"session.execution.succeeded")
	req := h.Request(2)
	last := req.Messages[len(req.Messages)-1]
	if last.Role != llm.RoleTool || last.Parts[0].Output != `echoed {"x":1}` {
		t.Fatalf("tool result not replayed: %+v", last)
	}
}

// TestStepBoundariesComeFromTheMirror: in a tool loop with nothing else
// committed to its Session, every step boundary after the first is served
// from the runner's mirror of its own commits (and, in these tests,
// checked against a read: see main_test.go); an admission between steps
// sends the next boundary back to the store, and its steer still lands in
// the next request.
func TestStepBoundariesComeFromTheMirror(t *testing.T) {
	h := actortest.New(t)
	gate := make(chan struct{})
	h.Tools.Add("noop", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
	h.Tools.Add("wait", func(context.Context, locations.ToolCall) (string, error) { <-gate; return "ok", nil })
	for range 5 {
		h.Model.Reply(script.ToolCall("call_n", "noop", `{}`))
	}
	h.Model.Reply(script.ToolCall("call_w", "wait", `{}`))
	h.Model.Reply(script.ToolCall("call_n", "noop", `{}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	before, _ := actors.MirrorChecks()
	h.Prompt(sid, "loop")
	h.WaitEvent(sid, func(ev messages.Event) bool {
		c, ok := ev.Data.(*messages.ToolCalled)
		return ok && c.CallID == "call_w"
	})
	h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "steer"}, Delivery: messages.Steer})
	close(gate)
	h.WaitIdle(sid)
	after, diff := actors.MirrorChecks()
	if diff != "" {
		t.Fatal(diff)
	}
	// Nine boundaries in the first drain: its first reads the store, and
	// so does the one after the steer's admission; the seven others follow
	// the runner's own commits. (The steer's wake adds a follow-up drain,
	// whose boundary is one more.)
	if got := after - before; got < 7 {
		t.Fatalf("%d step boundaries served from the mirror, want at least 7", got)
	}
	req := h.Request(7)
	last := req.Messages[len(req.Messages)-1]
	if last.Role != llm.RoleUser || last.Parts[0].Text != "steer" {
		t.Fatalf("the steer is not the last message of request 7: %+v", last)
	}
}
