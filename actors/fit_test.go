package actors

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/persistence"
)

// TestFitHistory: a compaction request over its budget loses its oldest
// messages, whole turns at a time (it never starts at a tool result or an
// assistant message), and says how many it left out; one within it, or
// with no budget, is sent whole.
func TestFitHistory(t *testing.T) {
	text := func(role llm.Role, n int) llm.Message {
		return llm.Message{Role: role, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Repeat("x", n)}}}
	}
	history := []llm.Message{
		text(llm.RoleUser, 4000), text(llm.RoleAssistant, 400), text(llm.RoleTool, 4000), text(llm.RoleAssistant, 400),
		text(llm.RoleUser, 400), text(llm.RoleAssistant, 400),
	}
	req := llm.Request{System: []string{"summarize"}}
	got, _ := fitHistory(req, history, 600, true, nil) // about 2,400 characters
	if len(got) != 3 || got[0].Role != llm.RoleUser || len(got[0].Parts[0].Text) != 400 {
		t.Fatalf("kept %d messages starting with %s", len(got), got[0].Role)
	}
	if last := got[len(got)-1].Parts[0].Text; !strings.Contains(last, "The 4 oldest messages") || !strings.HasSuffix(last, "Write the checkpoint summary now.") {
		t.Fatalf("instruction %q", last)
	}
	for _, budget := range []int{0, 1 << 20} {
		if got, _ := fitHistory(req, history, budget, true, nil); len(got) != len(history)+1 || got[len(got)-1].Parts[0].Text != "Write the checkpoint summary now." {
			t.Fatalf("budget %d: %d messages", budget, len(got))
		}
	}
	if got, some := fitHistory(req, history, 1, true, nil); len(got) != 1 || some {
		t.Fatalf("nothing fits: %d messages kept (some %v)", len(got), some)
	}
	// No turn fits whole: the instruction carries what render makes of
	// the history within the room left.
	var room int
	got, some := fitHistory(req, []llm.Message{text(llm.RoleUser, 40000)}, 600, false, func(keep int) string { room = keep; return "user: the newest part" })
	if len(got) != 1 || !some || room <= 0 || room >= 600 || !strings.Contains(got[0].Parts[0].Text, "\n\nuser: the newest part\n\nWrite the checkpoint summary now.") ||
		!strings.HasPrefix(got[0].Parts[0].Text, "The conversation is too long to send whole") {
		t.Fatalf("rendered fallback: %d messages, some %v, room %d: %q", len(got), some, room, got[0].Parts[0].Text)
	}
	if _, some := fitHistory(req, []llm.Message{text(llm.RoleUser, 40000)}, 600, false, func(int) string { return "" }); some {
		t.Fatal("an empty rendering counts as conversation")
	}
}

// TestCompactionBudget: a known window, however small, cuts; an unknown
// one does not.
func TestCompactionBudget(t *testing.T) {
	for _, tc := range []struct {
		context, output, want int
	}{
		{200000, 8000, 200000 - 8000 - compactionMargin},
		{2048, 1024, 1},
		{4096, 4096, 1},
		{0, 1024, 0},
	} {
		if got := compactionBudget(llm.Model{Context: tc.context, Output: tc.output}); got != tc.want {
			t.Errorf("context %d, output %d: budget %d, want %d", tc.context, tc.output, got, tc.want)
		}
	}
}

// TestDefaultBufferFitsSmallWindows: the default buffer (20,000 tokens) is
// at most a quarter of the window, so a 16k model compacts only when its
// history fills it (it compacted before every step); a configured buffer
// is taken as SEED's formula has it.
func TestDefaultBufferFitsSmallWindows(t *testing.T) {
	model := llm.Model{Context: 16384, Output: 1000}
	msgs := []persistence.Message{{Role: persistence.RoleUser}, {Role: persistence.RoleAssistant}}
	small := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Repeat("x", 4000)}}}}}
	large := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Repeat("x", 4*13000)}}}}}
	for _, tc := range []struct {
		name   string
		req    llm.Request
		buffer int
		want   bool
	}{
		{"default buffer, little history", small, 0, false},
		{"default buffer, a window's worth", large, 0, true},
		{"configured buffer larger than the window", small, 20000, true},
		{"default buffer of a large window", large, 0, false},
	} {
		m := model
		if tc.name == "default buffer of a large window" {
			m.Context = 200000
		}
		if got := needsCompaction(tc.req, m, tc.buffer, msgs); got != tc.want {
			t.Errorf("%s: needsCompaction = %v, want %v", tc.name, got, tc.want)
		}
	}
}
