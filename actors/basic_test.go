package actors_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
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
