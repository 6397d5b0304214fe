package storetest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// Scenario creates a Session and commits a valid history that uses every
// durable event type of the catalog, returning the Session ID. It is the
// fixture of replay-equivalence tests.
func Scenario(t testing.TB, st persistence.Store) messages.SessionID {
	t.Helper()
	ctx := context.Background()
	s, _, err := st.CreateSession(ctx, persistence.CreateSession{
		Location: messages.Location{Directory: "/tmp/project"}, Title: "scenario", Agent: "build",
		Model: messages.ModelRef{ProviderID: "script", ID: "demo"},
	})
	must(t, err)
	sid := s.ID
	id := func(suffix string) messages.MessageID { return messages.MessageID("msg_" + string(sid[4:]) + suffix) }
	app := func(ps ...messages.Payload) {
		t.Helper()
		_, err := st.Append(ctx, sid, ps...)
		must(t, err)
	}
	a1, _, err := st.Admit(ctx, persistence.Admission{ID: id("1"), SessionID: sid, Prompt: messages.Prompt{Text: "read a.txt",
		Files: []messages.File{{Mime: "text/plain", Filename: "a.txt", URL: "file:///tmp/project/a.txt"}}}})
	must(t, err)
	a2, _, err := st.Admit(ctx, persistence.Admission{ID: id("2"), SessionID: sid, Prompt: messages.Prompt{Text: "then summarize"}, Delivery: messages.Queue})
	must(t, err)
	comp, _, err := st.AdmitCompaction(ctx, sid)
	must(t, err)

	asst := id("A1")
	asst2 := id("A2")
	meta := json.RawMessage(`{"signature":"sig"}`)
	app(&messages.InstructionsBaselined{SessionID: sid, Text: "base", Applied: map[string]string{"builtin": "v1", "agents": "x"}})
	app(&messages.ExecutionStarted{SessionID: sid})
	app(&messages.PromptPromoted{SessionID: sid, InputID: a1.ID})
	// Attempt 1 fails before output and is retried.
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: asst, Agent: "build", Model: s.Model, Attempt: 1})
	app(&messages.StepFailed{SessionID: sid, AssistantMessageID: asst, Error: messages.Error{Type: messages.ErrProviderRateLimit, Message: "slow down"}})
	app(&messages.RetryScheduled{SessionID: sid, AssistantMessageID: asst, Attempt: 2, At: 1_700_000_002_000, Error: messages.Error{Type: messages.ErrProviderRateLimit, Message: "slow down"}})
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: asst, Agent: "build", Model: s.Model, Attempt: 2})
	app(&messages.ReasoningStarted{SessionID: sid, AssistantMessageID: asst, Ordinal: 0})
	app(&messages.ReasoningEnded{SessionID: sid, AssistantMessageID: asst, Ordinal: 0, Text: "thinking", ProviderMetadata: meta})
	app(&messages.TextStarted{SessionID: sid, AssistantMessageID: asst, Ordinal: 0})
	app(&messages.TextEnded{SessionID: sid, AssistantMessageID: asst, Ordinal: 0, Text: "Reading."})
	app(&messages.ToolInputStarted{SessionID: sid, AssistantMessageID: asst, CallID: "call_1", Name: "read"})
	app(&messages.ToolInputEnded{SessionID: sid, AssistantMessageID: asst, CallID: "call_1", Name: "read", Text: `{"path":"a.txt"}`})
	app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: asst, CallID: "call_1", Name: "read", Input: json.RawMessage(`{"path":"a.txt"}`)})
	app(&messages.ToolCalled{SessionID: sid, AssistantMessageID: asst, CallID: "call_2", Name: "web", Input: json.RawMessage(`{}`), Executed: true, ProviderMetadata: meta})
	app(&messages.ToolSucceeded{SessionID: sid, AssistantMessageID: asst, CallID: "call_1", Output: "hello", Metadata: json.RawMessage(`{"lines":1}`)},
		&messages.ToolFailed{SessionID: sid, AssistantMessageID: asst, CallID: "call_2", Error: messages.Error{Type: messages.ErrToolExecution, Message: "boom"}, ProviderMetadata: json.RawMessage(`{"r":1}`)})
	app(&messages.StepEnded{SessionID: sid, AssistantMessageID: asst, Finish: "tool-calls", Tokens: messages.Tokens{Input: 10, Output: 5, Reasoning: 2, Cache: messages.CacheUsage{Read: 3, Write: 1}}, Cost: 0.25})
	app(&messages.AgentSelected{SessionID: sid, Agent: "plan"})
	app(&messages.ModelSelected{SessionID: sid, Model: messages.ModelRef{ProviderID: "script", ID: "other"}})
	app(&messages.InstructionsUpdated{SessionID: sid, Text: "AGENTS.md changed", Kind: messages.InstructionsUpdate, Applied: map[string]string{"builtin": "v1", "agents": "y"}})
	app(&messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionManual, InputID: comp.ID})
	app(&messages.CompactionEnded{SessionID: sid, Reason: messages.CompactionManual, InputID: comp.ID, Text: "## Objective\n(none)", Recent: "recent"})
	app(&messages.CompactionStarted{SessionID: sid, Reason: messages.CompactionAuto, InputID: id("C2")})
	app(&messages.CompactionFailed{SessionID: sid, Reason: messages.CompactionAuto, InputID: id("C2"), Error: messages.Error{Type: messages.ErrCompactionFailed, Message: "no"}})
	app(&messages.PromptPromoted{SessionID: sid, InputID: a2.ID})
	app(&messages.StepStarted{SessionID: sid, AssistantMessageID: asst2, Agent: "plan", Model: messages.ModelRef{ProviderID: "script", ID: "other"}, Attempt: 1})
	app(&messages.TextStarted{SessionID: sid, AssistantMessageID: asst2, Ordinal: 0})
	app(&messages.TextEnded{SessionID: sid, AssistantMessageID: asst2, Ordinal: 0, Text: "Done."})
	app(&messages.StepEnded{SessionID: sid, AssistantMessageID: asst2, Finish: "stop", Tokens: messages.Tokens{Input: 1, Output: 1}})
	app(&messages.ExecutionSucceeded{SessionID: sid})
	app(&messages.ExecutionStarted{SessionID: sid})
	app(&messages.ExecutionFailed{SessionID: sid, Error: messages.Error{Type: messages.ErrInstructions, Message: "agents unavailable"}})
	app(&messages.ExecutionStarted{SessionID: sid})
	app(&messages.ExecutionInterrupted{SessionID: sid, Reason: messages.ReasonUser})
	app(&messages.SessionMoved{SessionID: sid, Location: messages.Location{Directory: "/tmp/elsewhere"}})
	return sid
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
