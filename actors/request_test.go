package actors

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestLoweredCacheMatchesFreshLowering: a request built from the lowering
// cache equals lowering the whole history afresh, across growing history,
// a re-read suffix, a model switch and back, and a completed compaction.
func TestLoweredCacheMatchesFreshLowering(t *testing.T) {
	a := messages.ModelRef{ProviderID: "p", ID: "a"}
	b := messages.ModelRef{ProviderID: "p", ID: "b"}
	meta := json.RawMessage(`{"sig":"x"}`)
	user := func(seq int64, text string) persistence.Message {
		return persistence.Message{Seq: seq, Role: persistence.RoleUser, Prompt: &messages.Prompt{Text: text}}
	}
	asst := func(seq int64, model messages.ModelRef, text string, settled bool) persistence.Message {
		state := persistence.ToolRunning
		if settled {
			state = persistence.ToolCompleted
		}
		return persistence.Message{Seq: seq, Role: persistence.RoleAssistant, Model: model, Parts: []persistence.Part{
			{Kind: persistence.PartReasoning, Text: "think", ProviderMetadata: meta, Ended: true},
			{Kind: persistence.PartText, Text: text, ProviderMetadata: meta, Ended: true},
			{Kind: persistence.PartTool, Tool: &persistence.ToolPart{CallID: "c1", Name: "read", State: state,
				Input: json.RawMessage(`{}`), Output: "out", CallMetadata: meta}},
		}}
	}
	var c lowered
	check := func(step string, hist []persistence.Message, model messages.ModelRef) {
		t.Helper()
		got := lowerWith(hist, model, &c, 0)
		want := lower(hist, model, 0)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: cached lowering differs\n got %+v\nwant %+v", step, got, want)
		}
	}
	hist := []persistence.Message{user(1, "hi"), asst(2, a, "looking", false)}
	check("open step", hist, a)
	// The open message changes; history keeps only what cannot change.
	hist[1] = asst(2, a, "looking", true)
	c.keep(1)
	hist = append(hist, user(9, "more"))
	check("settled and grown", hist, a)
	got := lowerWith(hist, a, &c, 0)
	if got[1].Parts[0].Kind != "reasoning" || got[1].Parts[1].ProviderMetadata == nil || got[1].Parts[2].ProviderMetadata == nil {
		t.Fatalf("same-model replay lost native parts: %+v", got[1])
	}
	// A failed step of the same model replays nothing provider-native.
	failed := asst(2, a, "looking", true)
	failed.Error = &messages.Error{Type: messages.ErrProviderInternal, Message: "x"}
	for _, p := range lower([]persistence.Message{failed}, a, 0)[0].Parts {
		if p.Kind == "reasoning" || p.ProviderMetadata != nil {
			t.Fatalf("a failed step replayed native state: %+v", p)
		}
	}
	check("model switch", hist, b)
	if got := lowerWith(hist, b, &c, 0); got[1].Parts[0].Kind != "text" || got[1].Parts[0].ProviderMetadata != nil {
		t.Fatalf("model switch replayed native parts: %+v", got[1])
	}
	check("switch back", hist, a)
	hist = append(hist, persistence.Message{Seq: 12, Role: persistence.RoleCompaction,
		Compaction: &persistence.Compaction{State: persistence.CompactionCompleted, Summary: "sum"}}, asst(14, a, "after", true))
	c.keep(len(hist) - 2)
	check("compacted", hist, a)
	// "more" was not answered when the compaction started: it stays after
	// the checkpoint as it is, attachments and all.
	if got := lowerWith(hist, a, &c, 0); len(got) != 4 || got[0].Parts[0].Text != "<summary>\nsum\n</summary>" || got[1].Parts[0].Text != "more" {
		t.Fatalf("compaction checkpoint not first, then the unanswered prompt: %+v", got)
	}
}

// TestEstimateCountsAttachments: the compaction estimate counts what an
// attachment adds to the request, an image at a provider's cost, an
// inline document at its decoded size.
func TestEstimateCountsAttachments(t *testing.T) {
	text := llm.Part{Kind: llm.PartText, Text: "read this"}
	with := func(f messages.File) int {
		return estimateTokens(llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{text, {Kind: llm.PartFile, File: &f}}}}})
	}
	base := estimateTokens(llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{text}}}})
	pdf := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("%PDF page text ", 70000))) // 1,050,000 bytes
	for _, tc := range []struct {
		name string
		file messages.File
		want int
	}{
		{"inline pdf", messages.File{Mime: "application/pdf", URL: "data:application/pdf;base64," + pdf}, 1050000 / 4},
		{"inline text", messages.File{Mime: "text/plain", URL: "data:text/plain," + strings.Repeat("a", 4000)}, 1000},
		{"inline image", messages.File{Mime: "image/png", URL: "data:image/png;base64," + pdf}, 1600},
		{"remote file", messages.File{Mime: "application/pdf", URL: "https://example.com/spec.pdf"}, 1600},
	} {
		if got := with(tc.file) - base; got < tc.want-1 || got > tc.want+1 {
			t.Errorf("%s adds %d tokens, want about %d", tc.name, got, tc.want)
		}
	}
}

// TestRecentContextIsText: the recent context of a checkpoint cuts text at
// character boundaries, so the stored event is UTF-8 and JSON serves it
// as stored.
func TestRecentContextIsText(t *testing.T) {
	msgs := []persistence.Message{
		{Role: persistence.RoleUser, Prompt: &messages.Prompt{Text: strings.Repeat("€", 10)}},
		{Role: persistence.RoleAssistant, Parts: []persistence.Part{{Kind: persistence.PartText, Text: "ok"},
			{Kind: persistence.PartTool, Tool: &persistence.ToolPart{Name: "read", Input: json.RawMessage(`{}`), Output: strings.Repeat("€", 200)}}}},
	}
	for keep := 1; keep <= 200; keep++ {
		if recent := recentContext(msgs, keep, 0); !utf8.ValidString(recent) {
			t.Fatalf("keep %d: not UTF-8: %q", keep, recent)
		}
	}
}

// TestEstimateCountsHostedBlocks: a hosted result goes back to its model as
// the block the provider sent (its metadata), so the estimate counts that,
// not just the short rendered output.
func TestEstimateCountsHostedBlocks(t *testing.T) {
	block := `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"encrypted_content":"` + strings.Repeat("A", 40_000) + `"}]}`
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{
		{Kind: llm.PartToolCall, CallID: "srvtoolu_1", Name: "web_search", Input: []byte(`{"query":"go"}`), Executed: true},
		{Kind: llm.PartToolResult, CallID: "srvtoolu_1", Name: "web_search", Output: "Go — https://go.dev", Executed: true, ProviderMetadata: []byte(block)}}}}}
	if got := estimateTokens(req); got < len(block)/4 {
		t.Fatalf("estimate %d tokens for a request carrying a %d-byte block", got, len(block))
	}
}

// TestLowerContinuesOnlyTheLastAssistantMessage: of the assistant messages
// with a hosted call their provider left unanswered, only the last one,
// followed by nothing but instruction updates, goes back as continuing
// (the bare call, for its provider to run); an earlier one gets a text
// account. The last one continues when it is the first message lowered.
func TestLowerContinuesOnlyTheLastAssistantMessage(t *testing.T) {
	m := messages.ModelRef{ProviderID: "p", ID: "a"}
	asst := func(seq int64, callID string) persistence.Message {
		return persistence.Message{Seq: seq, Role: persistence.RoleAssistant, Model: m, Parts: []persistence.Part{
			{Kind: persistence.PartTool, Tool: &persistence.ToolPart{CallID: callID, Name: "web_search", State: persistence.ToolError, Executed: true,
				Input: json.RawMessage(`{}`), Error: &messages.Error{Type: messages.ErrToolResultMissing, Message: "next turn"}}},
		}}
	}
	continued := func(out []llm.Message) map[string]bool {
		got := map[string]bool{}
		for _, msg := range out {
			for _, p := range msg.Parts {
				if p.Kind == llm.PartToolCall {
					got[p.CallID] = true
				}
			}
		}
		return got
	}
	user := persistence.Message{Seq: 1, Role: persistence.RoleUser, Prompt: &messages.Prompt{Text: "go"}}
	update := persistence.Message{Seq: 9, Role: persistence.RoleSystem, Text: "new rules"}
	for name, tc := range map[string]struct {
		msgs []persistence.Message
		want map[string]bool
	}{
		"last of two":      {[]persistence.Message{user, asst(2, "s1"), asst(5, "s2")}, map[string]bool{"s2": true}},
		"before an update": {[]persistence.Message{user, asst(2, "s1"), asst(5, "s2"), update}, map[string]bool{"s2": true}},
		"first message":    {[]persistence.Message{asst(2, "s1")}, map[string]bool{"s1": true}},
		"answered since":   {[]persistence.Message{asst(2, "s1"), user}, map[string]bool{}},
	} {
		if got := continued(lower(tc.msgs, m, 0)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: continued %v, want %v", name, got, tc.want)
		}
	}
}

// TestActiveCheckpointOfALegacyRowAtSeqOne: a completed compaction row
// stored before rows had a start seq counts from its own seq, the first
// one a message can have.
func TestActiveCheckpointOfALegacyRowAtSeqOne(t *testing.T) {
	msgs := []persistence.Message{
		{Seq: 1, Role: persistence.RoleCompaction, Compaction: &persistence.Compaction{State: persistence.CompactionCompleted, Summary: "sum"}},
		{Seq: 2, Role: persistence.RoleUser, Prompt: &messages.Prompt{Text: "after"}},
	}
	if ck, start := activeCheckpoint(msgs); ck == nil || ck.Summary != "sum" || start != 1 {
		t.Fatalf("checkpoint %+v from %d", ck, start)
	}
}

// TestEstimateCountsToolInputsAndSchemas: the estimate counts the input of
// each tool call in history and the schema of each tool offered.
func TestEstimateCountsToolInputsAndSchemas(t *testing.T) {
	big := `{"text":"` + strings.Repeat("x", 40_000) + `"}`
	call := llm.Request{Messages: []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{
		{Kind: llm.PartToolCall, CallID: "c1", Name: "write", Output: "ok", Input: []byte(big)}}}}}
	if got := estimateTokens(call); got < len(big)/4 {
		t.Errorf("estimate %d tokens for a request carrying a %d-byte tool input", got, len(big))
	}
	tools := llm.Request{Tools: []llm.ToolDefinition{{Name: "write", Description: "writes", InputSchema: []byte(big)}}}
	if got := estimateTokens(tools); got < len(big)/4 {
		t.Errorf("estimate %d tokens for a request offering a %d-byte schema", got, len(big))
	}
}
