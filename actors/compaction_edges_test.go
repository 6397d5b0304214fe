package actors

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestTruncateKeepsAnOutputOfExactlyTheLimit: a tool output as long as the
// limit is kept whole; one byte more is cut and marked.
func TestTruncateKeepsAnOutputOfExactlyTheLimit(t *testing.T) {
	if got := truncate("abcd", 4); got != "abcd" {
		t.Fatalf("truncate at its own length = %q", got)
	}
	if got := truncate("abcde", 4); got != "abcd…" {
		t.Fatalf("truncate one byte over = %q", got)
	}
}

// TestFitHistorySendsARequestOfExactlyTheBudget: a compaction request
// whose estimate equals its budget fits, and nothing is cut.
func TestFitHistorySendsARequestOfExactlyTheBudget(t *testing.T) {
	req := llm.Request{System: []string{"summarize"}} // 9 characters
	history := []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Repeat("x", 38)}}}}
	// 9 + 38 + 33 (the instruction) = 80 characters: 21 estimated tokens.
	if got, _ := fitHistory(req, history, 21, true, nil); len(got) != 2 {
		t.Fatalf("kept %d messages, want the whole history and the instruction", len(got))
	}
}

// TestNeedsCompactionOnlyAboveTheBudget: a request exactly at the window
// less its reserve does not compact, one token more does, and a model
// whose window is unknown never does.
func TestNeedsCompactionOnlyAboveTheBudget(t *testing.T) {
	model := llm.Model{Context: 16384, Output: 1000} // reserve: a quarter of the window, 4096
	msgs := []persistence.Message{{Role: persistence.RoleUser}, {Role: persistence.RoleAssistant}}
	req := func(chars int) llm.Request {
		return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Repeat("x", chars)}}}}}
	}
	at := req(4 * (16384 - 4096 - 1)) // estimate: 12288 tokens
	if needsCompaction(at, model, 0, msgs) {
		t.Fatal("a request exactly at the budget compacts")
	}
	if !needsCompaction(req(4*(16384-4096)), model, 0, msgs) {
		t.Fatal("a request one token over the budget does not compact")
	}
	if needsCompaction(req(1<<20), llm.Model{Output: 1000}, 0, msgs) {
		t.Fatal("a model with an unknown window compacts")
	}
}

// TestCompactionReserveIsTheLargerOfOutputAndBuffer: "The reserve is the
// greater of the requested/model output allowance and configured
// compaction.buffer" (SEED.md): each of the two, when the larger, decides
// where a request starts to compact.
func TestCompactionReserveIsTheLargerOfOutputAndBuffer(t *testing.T) {
	msgs := []persistence.Message{{Role: persistence.RoleUser}, {Role: persistence.RoleAssistant}}
	req := func(tokens int) llm.Request { // estimateTokens: chars/4, plus one
		return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Repeat("x", 4*(tokens-1))}}}}}
	}
	for _, tc := range []struct {
		name           string
		output, buffer int
	}{
		{"output larger", 8000, 2000},
		{"buffer larger", 2000, 8000},
	} {
		model := llm.Model{Context: 16384, Output: tc.output}
		budget := model.Context - max(tc.output, tc.buffer)
		if needsCompaction(req(budget), model, tc.buffer, msgs) {
			t.Errorf("%s: a request of exactly the budget (%d) compacts", tc.name, budget)
		}
		if !needsCompaction(req(budget+1), model, tc.buffer, msgs) {
			t.Errorf("%s: a request one token over the budget (%d) does not compact", tc.name, budget)
		}
	}
}

// TestNeedsCompactionFoldsOnlyCompleteSteps: a step still running, or one
// that failed, is nothing to fold away, however long the request.
func TestNeedsCompactionFoldsOnlyCompleteSteps(t *testing.T) {
	model := llm.Model{Context: 1000, Output: 100}
	big := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Repeat("x", 8000)}}}}}
	user := persistence.Message{Role: persistence.RoleUser}
	for _, tc := range []struct {
		name string
		step persistence.Message
		want bool
	}{
		{"complete", persistence.Message{Role: persistence.RoleAssistant}, true},
		{"open", persistence.Message{Role: persistence.RoleAssistant, Open: true}, false},
		{"failed", persistence.Message{Role: persistence.RoleAssistant, Error: &messages.Error{Type: messages.ErrAborted}}, false},
		{"a prompt", persistence.Message{Role: persistence.RoleUser}, false},
	} {
		if got := needsCompaction(big, model, 0, []persistence.Message{user, tc.step}); got != tc.want {
			t.Errorf("%s step: needsCompaction = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestKeepTokensIsAtMostAQuarterOfTheWindow: the recent context defaults
// to 8,000 tokens, is capped at a quarter of a known window (at least one
// token), and is not capped when the window is unknown.
func TestKeepTokensIsAtMostAQuarterOfTheWindow(t *testing.T) {
	for _, tc := range []struct {
		keep, context, want int
	}{
		{0, 0, defaultKeepTokens},
		{50000, 0, 50000},
		{0, 16000, 4000},
		{100, 16000, 100},
		{0, 200000, defaultKeepTokens},
		{5, 3, 1},
	} {
		if got := keepTokens(tc.keep, llm.Model{Context: tc.context}); got != tc.want {
			t.Errorf("keep %d, context %d: %d, want %d", tc.keep, tc.context, got, tc.want)
		}
	}
}

// TestRecentContextStopsWhenItsBudgetIsSpent: the newest messages come
// oldest first; once they fill the budget exactly, nothing older is added
// (not even an empty line).
func TestRecentContextStopsWhenItsBudgetIsSpent(t *testing.T) {
	prompt := func(text string) persistence.Message {
		return persistence.Message{Role: persistence.RoleUser, Prompt: &messages.Prompt{Text: text}}
	}
	msgs := []persistence.Message{prompt("old"), prompt("abcdef")}
	if got := recentContext(msgs, 3, 0); got != "user: abcdef" { // 12 characters: the whole budget
		t.Fatalf("recent context %q", got)
	}
	if got := recentContext(msgs, 100, 0); got != "user: old\nuser: abcdef" {
		t.Fatalf("recent context %q", got)
	}
	if got := recentContext(msgs, 0, 0); got != "user: old\nuser: abcdef" { // 0: the default keep
		t.Fatalf("recent context with the default keep %q", got)
	}
}

// TestRecentContextKeepsTheLabelOfACutLine: a line cut to the budget keeps
// who wrote it ("user: …"); it began mid-sentence, and the model could not
// tell a prompt from a tool's output.
func TestRecentContextKeepsTheLabelOfACutLine(t *testing.T) {
	msgs := []persistence.Message{{Role: persistence.RoleUser, Prompt: &messages.Prompt{Text: "first " + strings.Repeat("word ", 40) + "last"}}}
	got := recentContext(msgs, 10, 0) // 40 characters
	if !strings.HasPrefix(got, "user: …") || !strings.HasSuffix(got, "word last") || len(got) > 40 {
		t.Fatalf("recent context %q (%d bytes)", got, len(got))
	}
	tool := []persistence.Message{{Role: persistence.RoleAssistant, Parts: []persistence.Part{{Kind: persistence.PartTool,
		Tool: &persistence.ToolPart{Name: "read", Input: json.RawMessage(`{"path": "a"}`), Output: strings.Repeat("x", 100) + " tail"}}}}}
	// keep 10: 40 characters, the output cut to 20 first (and marked).
	if got := recentContext(tool, 10, 0); !strings.HasPrefix(got, `tool read {"path": "a"} -> …`) || !strings.HasSuffix(got, "xx…") || len(got) > 40 {
		t.Fatalf("recent context of a tool %q", got)
	}
	if lineLabel("no label here") != "" {
		t.Fatal("a label where there is none")
	}
}
