package actors_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
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
