package actors_test

import (
	"context"
	"os"
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
)

// TestNextAttemptAfterCompactionRebaselines: a completed compaction
// causes the next physical attempt to rebaseline from current
// instructions (SEED.md). Instructions that change between a manual
// compaction and the next prompt reach that attempt as a fresh baseline,
// not as the baseline of the compaction's moment followed by a
// chronological update.
func TestNextAttemptAfterCompactionRebaselines(t *testing.T) {
	h, sid, agents := answeredWithAgentsMD(t, "Use tabs.")
	compactNow(t, h, sid)
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	req := h.Request(3) // 1: "one", 2: the summary, 3: "two"
	if !opensWithSummary(req, "") {
		t.Fatalf("request 3 is not the first after the compaction: %+v", req.Messages)
	}
	sys := strings.Join(req.System, "\n")
	if !strings.Contains(sys, "Use spaces.") || strings.Contains(sys, "Use tabs.") {
		t.Fatalf("the first attempt after the compaction has the baseline %q", req.System)
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem {
			t.Fatalf("a chronological update follows the compaction instead of a fresh baseline: %q", m.Parts[0].Text)
		}
	}
	if n := count(h, sid, messages.TypeInstructionsUpdated); n != 0 {
		t.Fatalf("%d instruction updates: %v", n, h.Types(sid))
	}
	// Once an attempt has seen that baseline, changes are updates again.
	if err := os.WriteFile(agents, []byte("Use both."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "three")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeInstructionsUpdated); n != 1 {
		t.Fatalf("%d instruction updates after an attempt saw the baseline: %v", n, h.Types(sid))
	}
	h.CheckReplay()
}

// TestRebaselineWaitsForAnAttempt: a busy period after a compaction whose
// input was promoted but whose step failed before any request (its agent
// was gone) showed the new baseline to no model. Instructions that change
// after it still replace that baseline at the next attempt, rather than
// follow it as an update.
func TestRebaselineWaitsForAnAttempt(t *testing.T) {
	h, sid, agents := answeredWithAgentsMD(t, "Use tabs.")
	compactNow(t, h, sid)
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "plan"); err != nil {
		t.Fatal(err)
	}
	plan := h.Agents["plan"]
	delete(h.Agents, "plan") // the Session is idle: nothing reads the map now
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || !strings.Contains(f.Error.Message, `"plan"`) {
		t.Fatalf("the busy period without its agent: %+v: %v", f, h.Types(sid))
	}
	requests := h.Model.Count()
	h.Agents["plan"] = plan
	if err := os.WriteFile(agents, []byte("Use both."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "three")
	h.WaitIdle(sid)
	if h.Model.Count() != requests+1 {
		t.Fatalf("%d requests after %d: %v", h.Model.Count(), requests, h.Types(sid))
	}
	req := h.Request(h.Model.Count())
	if sys := strings.Join(req.System, "\n"); !strings.Contains(sys, "Use both.") {
		t.Fatalf("the first attempt after the compaction has the baseline %q", req.System)
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem {
			t.Fatalf("an update follows a baseline no attempt showed: %q", m.Parts[0].Text)
		}
	}
	h.CheckReplay()
}

// TestOverflowOnTheLastStepStillCompacts: a context overflow before
// any output triggers one compaction even on the last step of the agent's
// allowance, where no attempt is left to rebuild: without the checkpoint,
// an agent of one step failed every later turn on the same overflow.
func TestOverflowOnTheLastStepStillCompacts(t *testing.T) {
	h := actortest.New(t, actortest.Options{Steps: 1})
	overflow := &llm.Error{Type: messages.ErrProviderContextOverflow, Message: "prompt is too long"}
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(script.Fail(overflow))
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.Text("answer three"))
	sid := twoTurns(h)
	ended := lastOf[*messages.CompactionEnded](h, sid)
	if ended == nil || ended.Reason != messages.CompactionOverflow {
		t.Fatalf("no overflow compaction on the last step: %v", h.Types(sid))
	}
	// No attempt was left: the step fails as it would have, after the
	// compaction, and nothing else is sent.
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || f.Error.Type != messages.ErrProviderContextOverflow || h.Model.Count() != 3 {
		t.Fatalf("busy period %+v after %d requests: %v", f, h.Model.Count(), h.Types(sid))
	}
	h.Prompt(sid, "three")
	h.WaitIdle(sid)
	got := userTexts(h.Request(4))
	if len(got) != 3 || !strings.HasPrefix(got[0], "<summary>") || got[1] != "two" || got[2] != "three" {
		t.Fatalf("the next turn's user messages: %q", got)
	}
	if types := h.Types(sid); types[len(types)-1] != "session.execution.succeeded" {
		t.Fatalf("the next turn: %v", types)
	}
	h.CheckReplay()
}

// TestSummaryPromptSaysWhatEachSectionRecords: the rolling summary's
// Work State records completed, active and blocked work, and its Next Move
// the immediate and following actions (SEED.md); the summary request asks
// for that content, not only for the headings.
func TestSummaryPromptSaysWhatEachSectionRecords(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\nKeep going"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	sys := strings.Join(h.Request(2).System, "\n")
	if !strings.Contains(sys, "## Next Move") {
		t.Fatalf("request 2 is not the summary request: %q", sys)
	}
	for _, want := range []string{"completed, active and blocked work", "immediate next action", "actions that follow it"} {
		if !strings.Contains(sys, want) {
			t.Fatalf("the summary request does not ask for %q: %q", want, sys)
		}
	}
	h.CheckReplay()
}

// TestCompactionBaselineIsMeasured: the fresh baseline a completed
// compaction writes is the last rendered baseline, so
// sessiond_instruction_baseline_bytes reports its size (it kept the size
// of the Session's first baseline).
func TestCompactionBaselineIsMeasured(t *testing.T) {
	m := actors.NewMetrics(prometheus.NewRegistry())
	h, sid, agents := answeredWithAgentsMD(t, "Use tabs.", withMetrics(m))
	if err := os.WriteFile(agents, []byte("Use spaces, four of them, never tabs, in every file of this project."), 0o644); err != nil {
		t.Fatal(err)
	}
	compactNow(t, h, sid)
	ended := h.Events(sid)
	var last *messages.InstructionsBaselined
	for _, ev := range ended {
		if b, ok := ev.Data.(*messages.InstructionsBaselined); ok {
			last = b
		}
	}
	if last == nil || !strings.Contains(last.Text, "four of them") {
		t.Fatalf("the compaction wrote no fresh baseline: %v", h.Types(sid))
	}
	if got := testutil.ToFloat64(m.BaselineBytes); got != float64(len(last.Text)) {
		t.Fatalf("sessiond_instruction_baseline_bytes %v, the last baseline has %d bytes", got, len(last.Text))
	}
}

// overflowCompactionFails runs two prompts in a new Session, the second
// of which overflows the context, and checks that the compaction the
// overflow triggered failed.
func overflowCompactionFails(t *testing.T, h *actortest.Harness) messages.SessionID {
	t.Helper()
	sid := twoTurns(h)
	if c := lastOf[*messages.CompactionFailed](h, sid); c == nil || c.Reason != messages.CompactionOverflow {
		t.Fatalf("the overflow compaction did not fail: %v", h.Types(sid))
	}
	return sid
}

// TestOverflowWithAFailedCompactionFailsTheStep checks that when the
// compaction a context overflow triggers fails (here its summary request
// is refused), the step is not retried on the history that just
// overflowed: the busy period fails with the overflow, after the one
// summary request.
func TestOverflowWithAFailedCompactionFailsTheStep(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(script.Fail(&llm.Error{Type: messages.ErrProviderContextOverflow, Message: "prompt is too long"}))
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderInvalidRequest, "summary refused")))
	h.Model.Default(script.Text("retried on the overflowing history"))
	sid := overflowCompactionFails(t, h)
	if f := lastOf[*messages.ExecutionFailed](h, sid); f == nil || f.Error.Type != messages.ErrProviderContextOverflow || h.Model.Count() != 3 {
		t.Fatalf("busy period %+v after %d requests: %v", f, h.Model.Count(), h.Types(sid))
	}
}

// TestCompactionTriesThreeSizesThenFails: a summary request the provider
// keeps refusing as too long is cut and sent again at most three times in
// all; then the compaction fails, and so does the overflowing step.
func TestCompactionTriesThreeSizesThenFails(t *testing.T) {
	h := actortest.New(t)
	overflow := &llm.Error{Type: messages.ErrProviderContextOverflow, Message: "prompt is too long"}
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(script.Text("and more"))
	h.Model.Reply(script.Text("and more again"))
	h.Model.Reply(script.Fail(overflow)) // the step
	for range 3 {
		h.Model.Reply(script.Fail(overflow)) // the summary, at three sizes
	}
	h.Model.Default(script.Text("## Objective\nA fourth try was sent"))
	sid := h.Session()
	// Turns long beside the summary's instructions, so that each halving
	// of the budget cuts some of them and not all.
	for _, text := range []string{"one", "two", "three", "four"} {
		h.Prompt(sid, text+strings.Repeat(" and so on", 400))
		h.WaitIdle(sid)
	}
	if c := lastOf[*messages.CompactionFailed](h, sid); c == nil || c.Reason != messages.CompactionOverflow {
		t.Fatalf("the overflow compaction did not fail: %v", h.Types(sid))
	}
	if n := h.Model.Count(); n != 7 {
		t.Fatalf("%d provider requests, want the steps' four and three summary tries: %v", n, h.Types(sid))
	}
	// Each try sent less than the one before, and the cut is named
	// without a previous summary to point to (there is none): whole turns
	// left out, or, once no turn fits whole, the newest part as text.
	size := func(req llm.Request) (n int) {
		for _, m := range req.Messages {
			for _, p := range m.Parts {
				n += len(p.Text)
			}
		}
		return n
	}
	for i := 6; i <= 7; i++ {
		prev, req := h.Request(i-1), h.Request(i)
		if size(req) >= size(prev) {
			t.Fatalf("summary try %d sent %d characters after %d", i-4, size(req), size(prev))
		}
		last := req.Messages[len(req.Messages)-1].Parts[0].Text
		if !strings.Contains(last, "oldest messages of the conversation") && !strings.HasPrefix(last, "The conversation is too long to send whole") {
			t.Fatalf("summary try %d asks %q", i-4, last)
		}
	}
}

// TestCompactionStopsWhenNothingMoreCanBeCut: a summary request refused as
// too long when nothing smaller that still holds some of the conversation
// can be made is not sent again, nor sent empty (it was: the instruction
// alone, whose invented summary replaced the history); the compaction
// fails after the tries that sent something new.
func TestCompactionStopsWhenNothingMoreCanBeCut(t *testing.T) {
	h := actortest.New(t)
	overflow := &llm.Error{Type: messages.ErrProviderContextOverflow, Message: "prompt is too long"}
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(script.Fail(overflow)) // the step
	h.Model.Default(script.Fail(overflow))
	sid := overflowCompactionFails(t, h)
	if n := h.Model.Count(); n != 3 {
		t.Fatalf("%d provider requests, want the step's two and one summary try (the whole history; half of it leaves no room beside the instructions): %v", n, h.Types(sid))
	}
	for i := 1; i <= h.Model.Count(); i++ {
		if req := h.Request(i); len(req.Messages) == 1 && strings.HasPrefix(req.Messages[0].Parts[0].Text, "Write the checkpoint summary") {
			t.Fatalf("request %d holds no conversation", i)
		}
	}
}

// TestCompactionOfATurnTooLargeToSendWhole: when not even the newest turn
// fits the summary request (one huge tool output), the summarizer gets
// that turn as text, long outputs cut, and the summary completes. It got
// the instruction alone, and its invented summary replaced the history.
func TestCompactionOfATurnTooLargeToSendWhole(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.AutoCompact = true }})
	h.Tools.Add("big", func(context.Context, locations.ToolCall) (string, error) {
		return "BEGIN" + strings.Repeat(" lorem", 150000) + " END", nil
	})
	h.Model.Reply(script.ToolCall("c1", "big", `{}`), script.Finish("tool-calls", messages.Tokens{}))
	h.Model.Reply(script.Text("## Objective\nRead the big file."))
	h.Model.Default(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "read the big file, FACT-1")
	h.WaitIdle(sid)
	if c := lastOf[*messages.CompactionEnded](h, sid); c == nil || c.Reason != messages.CompactionAuto {
		t.Fatalf("no automatic compaction completed: %v", h.Types(sid))
	}
	summary := h.Request(2)
	if len(summary.Messages) != 1 {
		t.Fatalf("summary request of %d messages", len(summary.Messages))
	}
	text := summary.Messages[0].Parts[0].Text
	if !strings.HasPrefix(text, "The conversation is too long to send whole") || !strings.Contains(text, "user: read the big file, FACT-1") ||
		!strings.Contains(text, "tool big {} -> BEGIN lorem") || strings.Contains(text, " END") || !strings.HasSuffix(text, "Write the checkpoint summary now.") {
		t.Fatalf("summary request holds %d characters: %.300q … %.200q", len(text), text, text[max(len(text)-200, 0):])
	}
	h.CheckReplay()
}

// TestCompactionUsageCounts: what a summary request used is recorded on
// the compaction's settlement and its row, and counts toward the
// Session's totals; it was reported nowhere, so a Session's usage left
// out its largest requests.
func TestCompactionUsageCounts(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("earlier"), script.Finish("stop", messages.Tokens{Input: 100, Output: 10}))
	h.Model.Reply(script.Text("## Objective\nearlier"), script.Finish("stop", messages.Tokens{Input: 50, Output: 7}))
	sid := h.Session()
	h.Prompt(sid, "hello")
	h.WaitIdle(sid)
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	ended := lastOf[*messages.CompactionEnded](h, sid)
	if ended == nil || ended.Usage == nil || ended.Usage.Tokens.Input != 50 || ended.Usage.Tokens.Output != 7 {
		t.Fatalf("compaction.ended %+v: %v", ended, h.Types(sid))
	}
	s, err := h.Store.Get(h.Ctx(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tokens.Input != 150 || s.Tokens.Output != 17 {
		t.Fatalf("Session tokens %+v, want the step's and the summary's", s.Tokens)
	}
	var row *messages.Usage
	for _, m := range h.Messages(sid) {
		if m.Compaction != nil {
			row = m.Compaction.Usage
		}
	}
	if row == nil || row.Tokens.Input != 50 {
		t.Fatalf("compaction row usage %+v", row)
	}
	h.CheckReplay()
}

// TestSummaryLeavesOutTheCarriedPrompts: the prompts an automatic
// compaction carries after its checkpoint are not in the summary request
// too: they go to the model as they are, and summarized as well they took
// the room of older history, which only the summary keeps.
func TestSummaryLeavesOutTheCarriedPrompts(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.AutoCompact, c.CompactionBuffer = true, 198000 }})
	h.Model.Reply(script.Text("noted"))
	h.Model.Reply(script.Text("## Objective\nremember FACT-1"))
	h.Model.Default(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "FACT-1 is blue")
	h.WaitIdle(sid)
	big := "BIG " + strings.Repeat("detail ", 1500) // past the 2,000-token budget
	h.Prompt(sid, big)
	h.WaitIdle(sid)
	if c := lastOf[*messages.CompactionEnded](h, sid); c == nil {
		t.Fatalf("no compaction: %v", h.Types(sid))
	}
	has := func(req llm.Request, s string) bool {
		for _, m := range req.Messages {
			for _, p := range m.Parts {
				if strings.Contains(p.Text, s) {
					return true
				}
			}
		}
		return false
	}
	summary, next := h.Request(2), h.Request(3)
	if !has(summary, "FACT-1 is blue") || has(summary, "BIG detail") {
		t.Fatalf("summary request: FACT-1 %v, the carried prompt %v", has(summary, "FACT-1 is blue"), has(summary, "BIG detail"))
	}
	if !has(next, big) {
		t.Fatal("the step after the checkpoint lacks the carried prompt")
	}
	h.CheckReplay()
}

// TestRollingSummarySendsThePreviousOnce: a compaction after another gets
// the previous summary once, in its system text, and the previous
// checkpoint's recent context; the summary went in the first message too.
func TestRollingSummarySendsThePreviousOnce(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\nPREVIOUS-SUMMARY"))
	h.Model.Reply(script.Text("second answer"))
	h.Model.Reply(script.Text("## Objective\nnewer"))
	sid := h.Session()
	for _, p := range []string{"one", "two"} {
		h.Prompt(sid, p)
		h.WaitIdle(sid)
		if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
			t.Fatal(err)
		}
		h.WaitIdle(sid)
	}
	req := h.Request(4)
	n := strings.Count(strings.Join(req.System, "\n"), "PREVIOUS-SUMMARY")
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			n += strings.Count(p.Text, "PREVIOUS-SUMMARY")
		}
	}
	if n != 1 || !strings.Contains(req.Messages[0].Parts[0].Text, "Recent context before the summary point:\nuser: one") {
		t.Fatalf("the previous summary is sent %d times; first message %q", n, req.Messages[0].Parts[0].Text)
	}
	h.CheckReplay()
}
