package actors

import (
	"encoding/json"
	"reflect"
	"testing"

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
		got := lowerWith(hist, model, &c)
		want := lower(hist, model)
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
	got := lowerWith(hist, a, &c)
	if got[1].Parts[0].Kind != "reasoning" || got[1].Parts[1].ProviderMetadata == nil {
		t.Fatalf("same-model replay lost native parts: %+v", got[1])
	}
	check("model switch", hist, b)
	if got := lowerWith(hist, b, &c); got[1].Parts[0].Kind != "text" || got[1].Parts[0].ProviderMetadata != nil {
		t.Fatalf("model switch replayed native parts: %+v", got[1])
	}
	check("switch back", hist, a)
	hist = append(hist, persistence.Message{Seq: 12, Role: persistence.RoleCompaction,
		Compaction: &persistence.Compaction{State: persistence.CompactionCompleted, Summary: "sum"}}, asst(14, a, "after", true))
	c.keep(len(hist) - 2)
	check("compacted", hist, a)
	// "more" was not answered when the compaction started: it stays after
	// the checkpoint as it is, attachments and all.
	if got := lowerWith(hist, a, &c); len(got) != 4 || got[0].Parts[0].Text != "<summary>\nsum\n</summary>" || got[1].Parts[0].Text != "more" {
		t.Fatalf("compaction checkpoint not first, then the unanswered prompt: %+v", got)
	}
}
