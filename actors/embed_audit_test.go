package actors_test

import (
	"context"
	"encoding/json"
	"iter"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestPromptAfterShutdownWaitsForAWake pins what Runtime.Prompt and New
// document: a prompt admitted by a runtime that has shut down returns its
// receipt (the input is durable), a new runtime on the store does not run
// it by itself, and a Wake does.
func TestPromptAfterShutdownWaitsForAWake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessiond.db")
	h := actortest.New(t, actortest.Options{StorePath: path})
	sid := h.Session()
	if err := h.Runtime.Shutdown(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	a, err := h.Runtime.Prompt(h.Ctx(), persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "hi"}})
	if err != nil || a.AdmittedSeq != 1 {
		t.Fatalf("prompt after shutdown: %+v, %v; want the receipt of seq 1", a, err)
	}
	h.Close()

	h2 := actortest.New(t, actortest.Options{StorePath: path})
	h2.Model.Reply(script.Text("hello"))
	h2.WaitIdle(sid)
	if got, want := h2.Types(sid), []string{"session.created", "session.prompt.admitted"}; !slices.Equal(got, want) {
		t.Fatalf("after a restart without a wake: %v, want %v", got, want)
	}
	if err := h2.Runtime.Wake(h2.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h2.WaitIdle(sid)
	if got := h2.Types(sid); got[len(got)-1] != "session.execution.succeeded" {
		t.Fatalf("after a wake: %v, want the prompt run", got)
	}
}

// streamFunc is an llm.Provider made of one stream function, as a user's
// own adapter is.
type streamFunc func(yield func(llm.Event, error) bool)

func (f streamFunc) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return iter.Seq2[llm.Event, error](f)
}

// TestToolCallWithoutIDFailsTheStep: a provider's tool call (or tool input)
// without a call ID is the provider's error, refused before it is stored,
// as a reused ID is. It was committed: results pair with calls by ID, and
// an adapter would send the empty ID back in every later request of the
// Session.
func TestToolCallWithoutIDFailsTheStep(t *testing.T) {
	for name, first := range map[string]llm.Event{
		"tool call":  {Kind: llm.ToolCall, Name: "echo", Input: json.RawMessage(`{}`)},
		"tool input": {Kind: llm.ToolInputStart, Name: "echo"},
	} {
		t.Run(name, func(t *testing.T) {
			h := actortest.New(t)
			h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ok", nil })
			h.Services.Provider = func(string) (llm.Provider, error) {
				return streamFunc(func(yield func(llm.Event, error) bool) {
					_ = yield(first, nil) && yield(llm.Event{Kind: llm.StepFinish, Finish: llm.FinishToolCalls}, nil)
				}), nil
			}
			sid := h.Session()
			h.Prompt(sid, "hi")
			h.WaitIdle(sid)
			var failed *messages.Error
			for _, ev := range h.Events(sid) {
				switch d := ev.Data.(type) {
				case *messages.ToolCalled, *messages.ToolInputStarted:
					t.Fatalf("stored %s without a call ID", ev.Type)
				case *messages.StepFailed:
					failed = &d.Error
				}
			}
			if failed == nil || failed.Type != messages.ErrProviderUnknown {
				t.Fatalf("step failure %+v, want provider.unknown; events %v", failed, h.Types(sid))
			}
		})
	}
}
