package actors_test

import (
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

func TestSelectionAppliesAtNextStep(t *testing.T) {
	h := actortest.New(t)
	started, release := make(chan string, 1), make(chan struct{})
	h.Tools.Add("slow", actortest.Blocking(started, release))
	h.Model.Reply(script.Reasoning("pondering").WithMetadata(`{"signature":"r"}`), script.Text("calling").WithMetadata(`{"id":"t"}`),
		script.ToolCall("c1", "slow", `{}`).WithMetadata(`{"id":"c"}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	<-started
	if err := h.Runtime.SelectModel(h.Ctx(), sid, messages.ModelRef{ProviderID: "script", ID: "other"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.SelectModel(h.Ctx(), sid, messages.ModelRef{ProviderID: "script", ID: "nope"}); messages.TypeOf(err) != messages.ErrModelNotFound {
		t.Fatalf("unknown model accepted: %v", err)
	}
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "plan"); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.WaitIdle(sid)
	first, second := h.Request(1), h.Request(2)
	if first.Model.ID != "demo" || second.Model.ID != "other" || second.System[0] != "You plan." {
		t.Fatalf("models %s -> %s, system %q", first.Model.ID, second.Model.ID, second.System[0])
	}
	// The model switch suppresses provider-native replay of the first step:
	// no metadata on its reasoning, text or call, and its reasoning is
	// ordinary text.
	var texts []string
	for _, m := range second.Messages {
		for _, p := range m.Parts {
			if p.ProviderMetadata != nil || p.Kind == llm.PartReasoning {
				t.Fatalf("provider-native state replayed across a model switch: %+v", p)
			}
			if m.Role == llm.RoleAssistant && p.Kind == llm.PartText {
				texts = append(texts, p.Text)
			}
		}
	}
	if !slices.Equal(texts, []string{"pondering", "calling"}) {
		t.Fatalf("assistant text after the switch %q", texts)
	}
	h.CheckReplay()
}

// opensWithSummary reports whether req's first message is a compaction
// checkpoint whose summary contains text.
func opensWithSummary(req llm.Request, text string) bool {
	if len(req.Messages) == 0 || len(req.Messages[0].Parts) == 0 {
		return false
	}
	first := req.Messages[0].Parts[0].Text
	return strings.HasPrefix(first, "<summary>") && strings.Contains(first, text)
}

// compactNow asks for a manual compaction of sid and waits until the
// Session is idle again.
func compactNow(t *testing.T, h *actortest.Harness, sid messages.SessionID) {
	t.Helper()
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
}

func TestManualCompactionBarrier(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\nKeep going\n## Next Move\nAnswer the next prompt"))
	h.Model.Reply(script.Text("after compaction"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	summary := h.Request(2)
	if len(summary.Tools) != 0 || !strings.Contains(summary.System[0], "## Important Details") {
		t.Fatalf("compaction request %+v", summary.System)
	}
	next := h.Request(3)
	first := next.Messages[0].Parts[0].Text
	if !strings.HasPrefix(first, "<summary>") || !strings.Contains(first, "## Work State") || !strings.Contains(first, "(none)") {
		t.Fatalf("request after compaction starts with %q", first)
	}
	if got := userTexts(next); got[len(got)-1] != "two" || slices.Contains(got, "one") {
		t.Fatalf("history not replaced by the checkpoint: %v", got)
	}
	types := h.Types(sid)
	if !slices.Contains(types, "session.compaction.admitted") || !slices.Contains(types, "session.compaction.ended") {
		t.Fatalf("%v", types)
	}
	rows, err := h.Store.Pending(h.Ctx(), sid)
	if err != nil || len(rows) != 0 {
		t.Fatalf("barrier not settled: %+v", rows)
	}
	h.CheckReplay()
}

// overflow is a model reply that fails the step: the request is larger
// than the model's context window.
var overflow = script.Fail(&llm.Error{Type: messages.ErrProviderContextOverflow, Message: "too long"})

// twoTurns starts a Session and runs two prompts in it, "one" and then
// "two", each to idle.
func twoTurns(h *actortest.Harness) messages.SessionID {
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	return sid
}

func TestOverflowCompactsOnceThenRetries(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(overflow)
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.Text("fits now"))
	sid := twoTurns(h)
	types := h.Types(sid)
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 || types[len(types)-1] != "session.execution.succeeded" || h.Model.Count() != 4 {
		t.Fatalf("%d requests: %v", h.Model.Count(), types)
	}
	h.CheckReplay()
}

// answeredWithAgentsMD runs one prompt of a Session whose directory has an
// AGENTS.md saying text, on a harness that observes instructions, and
// returns the file's path.
func answeredWithAgentsMD(t *testing.T, text string, opts ...actortest.Options) (*actortest.Harness, messages.SessionID, string) {
	t.Helper()
	dir := t.TempDir()
	agents := filepath.Join(dir, "AGENTS.md")
	if err := os.WriteFile(agents, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := actortest.Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	o.Instructions = &locations.InstructionsConfig{Getenv: func(string) string { return "" }}
	h := actortest.New(t, o)
	h.Dir = dir
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	return h, sid, agents
}

func TestInstructionsBaselineAndUpdate(t *testing.T) {
	h, sid, agents := answeredWithAgentsMD(t, "Use tabs.")
	types := h.Types(sid)
	if b, p := slices.Index(types, "session.instructions.baselined"), slices.Index(types, "session.prompt.promoted"); b < 0 || b > p {
		t.Fatalf("baseline must precede promotion: %v", types)
	}
	if !slices.ContainsFunc(h.Request(1).System, func(s string) bool { return strings.Contains(s, "Use tabs.") }) {
		t.Fatalf("baseline not in the request: %q", h.Request(1).System)
	}
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.Store.PutEntry(h.Ctx(), sid, "style", "Be brief."); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeInstructionsUpdated); n != 1 {
		t.Fatalf("%d updates, want one for both changes: %v", n, h.Types(sid))
	}
	var sys []string
	for _, m := range h.Request(2).Messages {
		if m.Role == llm.RoleSystem {
			sys = append(sys, m.Parts[0].Text)
		}
	}
	if len(sys) != 1 || !strings.Contains(sys[0], "Use spaces.") || !strings.Contains(sys[0], "Be brief.") {
		t.Fatalf("chronological update %q", sys)
	}
	cp, ok, err := h.Store.Checkpoint(h.Ctx(), sid)
	if err != nil || !ok || !strings.Contains(cp.Applied["agents"], "Use spaces.") {
		t.Fatalf("applied not advanced: %+v %v", cp, err)
	}
	h.CheckReplay()
}

// TestRetryObservesInstructionsAtTheNextBoundary: instructions are
// observed at step boundaries, before promotion. A retried attempt is the
// same logical step, reusing its assistant message (whose row keeps its
// place), so a change during its backoff is observed at the boundary after
// it, and history stays chronological: the update follows the answer.
func TestRetryObservesInstructionsAtTheNextBoundary(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "AGENTS.md")
	if err := os.WriteFile(agents, []byte("Use tabs."), 0o644); err != nil {
		t.Fatal(err)
	}
	h := actortest.New(t, actortest.Options{Instructions: &locations.InstructionsConfig{Dir: dir, Getenv: func(string) string { return "" }}})
	h.Dir = dir
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "echoed", nil })
	h.Model.Reply(script.Fail(rateLimit(0)))
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(2 * time.Second)
	h.WaitIdle(sid)
	roles := func(r llm.Request) (out []llm.Role) {
		for _, m := range r.Messages {
			out = append(out, m.Role)
		}
		return out
	}
	retry, next := h.Request(2), h.Request(3)
	if !slices.Equal(roles(retry), []llm.Role{llm.RoleUser}) {
		t.Fatalf("the retry saw %v", roles(retry))
	}
	if got := roles(next); !slices.Equal(got, []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleSystem}) ||
		!strings.Contains(next.Messages[3].Parts[0].Text, "Use spaces.") {
		t.Fatalf("the step after the retry got %v: %+v", got, next.Messages)
	}
	h.CheckReplay()
}

// TestRetryRunsOnTheModelSelectedSince: a retry attempt is a step, and
// selection is step-scoped: a model selected during the backoff serves
// the retry (and the assistant message it answers in), so a user leaving a
// rate-limited provider does not wait out its retries.
func TestRetryRunsOnTheModelSelectedSince(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Fail(rateLimit(0)))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil {
		t.Fatal(err)
	}
	other := messages.ModelRef{ProviderID: "script", ID: "other"}
	if err := h.Runtime.SelectModel(h.Ctx(), sid, other); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(2 * time.Second)
	h.WaitIdle(sid)
	if got := h.Request(2).Model; got != other {
		t.Fatalf("the retry went to %v, want %v", got, other)
	}
	var models []messages.ModelRef
	for _, ev := range h.Events(sid) {
		if p, ok := ev.Data.(*messages.StepStarted); ok {
			models = append(models, p.Model)
		}
	}
	if len(models) != 2 || models[1] != other || models[0] == other {
		t.Fatalf("step.started models %v", models)
	}
	h.CheckReplay()
}

// selectOnPromotion commits a model selection, as another writer would,
// right after the first commit that promotes a prompt: after the step
// boundary that read the Session, before the step it starts.
type selectOnPromotion struct {
	persistence.Store
	once sync.Once
}

func (s *selectOnPromotion) Commit(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	c, err := s.Store.Commit(ctx, sid, ps...)
	if _, ok := ps[len(ps)-1].(*messages.PromptPromoted); ok && err == nil {
		s.once.Do(func() {
			_, err = s.Store.Append(ctx, sid, &messages.ModelSelected{SessionID: sid, Model: messages.ModelRef{ProviderID: "script", ID: "other"}})
		})
	}
	return c, err
}

// TestModelSelectedAfterTheBoundaryServesTheNextStep checks that selection
// is step-scoped in the other direction too: a model selected after a
// step's boundary read does not take over that step's first attempt (its
// request and its step.started record the model the boundary read); it
// serves the next step.
func TestModelSelectedAfterTheBoundaryServesTheNextStep(t *testing.T) {
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Store = &selectOnPromotion{Store: c.Store} }})
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	demo, other := messages.ModelRef{ProviderID: "script", ID: "demo"}, messages.ModelRef{ProviderID: "script", ID: "other"}
	if a, b := h.Request(1).Model, h.Request(2).Model; a != demo || b != other {
		t.Fatalf("requests went to %v then %v, want %v then %v", a, b, demo, other)
	}
}

// switchSource is an instruction source that can be made unavailable.
type switchSource struct {
	key  string
	down atomic.Bool
}

func (s *switchSource) Key() string { return s.key }

func (s *switchSource) Observe(context.Context) (locations.Observation, error) {
	if s.down.Load() {
		return locations.Unavailable(errors.New("skills directory unreadable")), nil
	}
	return locations.Available("Skill: deploy."), nil
}

// TestUnavailableSourceAtFirstObservation: with a source unavailable, no
// baseline exists and none can be made complete, so the model is not
// called and the prompt stays pending; the busy period fails with the
// instructions error, so a client sees why. Once the source is back, the
// next wake baselines and answers the same prompt.
func TestUnavailableSourceAtFirstObservation(t *testing.T) {
	skills := &switchSource{key: locations.SourceSkills}
	skills.down.Store(true)
	dir := t.TempDir()
	h := actortest.New(t, actortest.Options{Instructions: &locations.InstructionsConfig{Dir: dir, Skills: skills}})
	h.Dir = dir
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	admitted := h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if h.Model.Count() != 0 || count(h, sid, messages.TypeInstructionsBaselined) != 0 {
		t.Fatalf("ran without a complete baseline: %v", h.Types(sid))
	}
	f := lastOf[*messages.ExecutionFailed](h, sid)
	if f == nil || f.Error.Type != messages.ErrInstructions || !strings.Contains(f.Error.Message, locations.SourceSkills) {
		t.Fatalf("busy period %+v: %v", f, h.Types(sid))
	}
	if pend, err := h.Store.Pending(h.Ctx(), sid); err != nil || len(pend) != 1 || pend[0].ID != admitted.ID {
		t.Fatalf("pending %+v %v", pend, err)
	}
	skills.down.Store(false)
	if err := h.Runtime.Wake(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if h.Model.Count() != 1 || !slices.ContainsFunc(h.Request(1).System, func(s string) bool { return strings.Contains(s, "Skill: deploy.") }) {
		t.Fatalf("after the source came back: %d requests, %v", h.Model.Count(), h.Types(sid))
	}
	h.CheckReplay()
}

// TestIneligibleWakeLeavesNoTrace checks that a wake with nothing to
// promote writes nothing, even when the instructions changed since the
// last step: they are observed at the next step boundary that has work.
func TestIneligibleWakeLeavesNoTrace(t *testing.T) {
	h := actortest.New(t, actortest.Options{Instructions: &locations.InstructionsConfig{Dir: t.TempDir(), Getenv: func(string) string { return "" }}})
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	before := h.Types(sid)
	if err := h.Store.PutEntry(h.Ctx(), sid, "style", "Be brief."); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Wake(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	if types := h.Types(sid); len(types) != len(before) || h.Model.Count() != 1 {
		t.Fatalf("a wake with nothing eligible wrote %v (%d requests)", types[len(before):], h.Model.Count())
	}
	// The change reaches the log with the next prompt.
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeInstructionsUpdated); n != 1 {
		t.Fatalf("%d updates: %v", n, h.Types(sid))
	}
	h.CheckReplay()
}

// TestOverflowRetryAnswersAfterTheBoundary checks that the attempt retried
// after an overflow-triggered compaction stays visible to later requests:
// it writes a new assistant message, after the compaction boundary, since
// the failed attempt's message sits before it.
func TestOverflowRetryAnswersAfterTheBoundary(t *testing.T) {
	h := actortest.New(t)
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ECHO-RESULT", nil })
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(overflow)
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.ToolCall("c1", "echo", `{}`))
	h.Model.Reply(script.Text("done"))
	twoTurns(h)
	var call, result bool
	for _, m := range h.Request(5).Messages {
		for _, p := range m.Parts {
			call = call || (p.Kind == llm.PartToolCall && p.CallID == "c1")
			result = result || (p.Kind == llm.PartToolResult && strings.Contains(p.Output, "ECHO-RESULT"))
		}
	}
	if !call || !result {
		t.Fatalf("the retried attempt's tool call (%v) or result (%v) is missing from the next request: %+v", call, result, h.Request(5).Messages)
	}
	// The rebuilt step carries its prompt after the checkpoint, verbatim,
	// and the checkpoint its recent context; the failed attempt is gone.
	got := userTexts(h.Request(4))
	if len(got) != 2 || !strings.HasPrefix(got[0], "<summary>") || got[1] != "two" {
		t.Fatalf("the rebuilt step's user messages: %q", got)
	}
	if !strings.Contains(got[0], "Recent context before the summary point:\nuser: one\nassistant: earlier") {
		t.Fatalf("the checkpoint lacks its recent context: %q", got[0])
	}
	h.CheckReplay()
}

// crashedInManualCompaction returns a harness over the store a process
// killed while a manual compaction ran would have left (one prompt
// answered, then the compaction started), its Session, and how many events
// that store holds.
func crashedInManualCompaction(t *testing.T) (*actortest.Harness, messages.SessionID, int) {
	t.Helper()
	h := actortest.New(t)
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("## Objective\nx"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	h2, kept := crashedAt(t, h, sid, messages.TypeCompactionStarted)
	return h2, sid, kept
}

// TestManualCompactionInterruptedByACrash checks that a manual compaction
// whose process died while it ran is settled as interrupted by the next
// drain, releasing the prompts its barrier held, instead of holding them
// forever.
func TestManualCompactionInterruptedByACrash(t *testing.T) {
	h2, sid, kept := crashedInManualCompaction(t)
	h2.Model.Default(script.Text("answer"))
	h2.Prompt(sid, "two")
	h2.WaitIdle(sid)
	if pend, err := h2.Store.Pending(h2.Ctx(), sid); err != nil || len(pend) != 0 || h2.Model.Count() != 1 {
		t.Fatalf("after the crash: %d requests, pending %+v (%v): %v", h2.Model.Count(), pend, err, h2.Types(sid)[kept:])
	}
	failed := lastOf[*messages.CompactionFailed](h2, sid)
	if failed == nil || failed.Error.Type != messages.ErrAborted {
		t.Fatalf("the interrupted compaction was not settled as aborted: %+v", failed)
	}
	h2.CheckReplay()
}

// TestCompactRequestAfterACrash: a manual compaction requested after a
// crash cut one off runs. Coalesced into the orphaned barrier, the request
// was settled with it as interrupted and never ran. The drain settles the
// orphaned barrier before it starts the new one: barriers run in admission
// order, and the stale row never shows a compaction running while another
// one runs and ends.
func TestCompactRequestAfterACrash(t *testing.T) {
	h2, sid, kept := crashedInManualCompaction(t)
	orphan := lastOf[*messages.CompactionStarted](h2, sid)
	h2.Model.Reply(script.Text("## Objective\ny"))
	in, err := h2.Runtime.Compact(h2.Ctx(), sid)
	if err != nil {
		t.Fatal(err)
	}
	h2.WaitIdle(sid)
	if in.ID == orphan.InputID {
		t.Fatalf("the request joined the orphaned barrier %s", in.ID)
	}
	failed := lastOf[*messages.CompactionFailed](h2, sid)
	ended := lastOf[*messages.CompactionEnded](h2, sid)
	if failed == nil || failed.InputID != orphan.InputID || failed.Error.Type != messages.ErrAborted ||
		ended == nil || ended.InputID != in.ID || !strings.HasPrefix(ended.Text, "## Objective\ny") || h2.Model.Count() != 1 {
		t.Fatalf("after the request: %d requests, %v; failed %+v, ended %+v", h2.Model.Count(), h2.Types(sid)[kept:], failed, ended)
	}
	var order []string
	for _, ev := range h2.Events(sid)[kept:] {
		switch p := ev.Data.(type) {
		case *messages.CompactionStarted:
			order = append(order, "started "+string(p.InputID))
		case *messages.CompactionFailed:
			order = append(order, "failed "+string(p.InputID))
		case *messages.CompactionEnded:
			order = append(order, "ended "+string(p.InputID))
		}
	}
	want := []string{"failed " + string(orphan.InputID), "started " + string(in.ID), "ended " + string(in.ID)}
	if !slices.Equal(order, want) {
		t.Fatalf("compactions after the crash: %q, want %q", order, want)
	}
	if pend, err := h2.Store.Pending(h2.Ctx(), sid); err != nil || len(pend) != 0 {
		t.Fatalf("pending %+v (%v)", pend, err)
	}
	h2.CheckReplay()
}

// autoCompacting returns a harness whose runner compacts automatically
// once a request leaves less than buffer tokens of the script model's
// 200,000-token window: 199990 compacts before every step with history to
// fold.
func autoCompacting(t *testing.T, buffer int) *actortest.Harness {
	return actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.AutoCompact, c.CompactionBuffer = true, buffer }})
}

// crashedAt returns a harness over the store a process killed right after
// committing the Session's first event of type typ would have left, and
// how many events that store holds.
func crashedAt(t *testing.T, h *actortest.Harness, sid messages.SessionID, typ string) (*actortest.Harness, int) {
	t.Helper()
	var kept []messages.Event
	for _, ev := range h.Events(sid) {
		kept = append(kept, ev)
		if ev.Type == typ {
			break
		}
	}
	path := filepath.Join(t.TempDir(), "crashed.db")
	st, err := persistence.Open(path, persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Restore(h.Ctx(), kept); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return actortest.New(t, actortest.Options{StorePath: path}), len(kept)
}

// TestAutomaticCompactionInterruptedByACrash: an automatic compaction a
// dead process left running is settled as aborted by the next drain, not
// shown running forever.
func TestAutomaticCompactionInterruptedByACrash(t *testing.T) {
	h := autoCompacting(t, 199990)
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("## Objective\nx"))
	h.Model.Reply(script.Text("a2"))
	sid := twoTurns(h)
	row := lastOf[*messages.CompactionStarted](h, sid)
	if row == nil || row.Reason != messages.CompactionAuto {
		t.Fatalf("no automatic compaction: %v", h.Types(sid))
	}
	h2, kept := crashedAt(t, h, sid, messages.TypeCompactionStarted)
	h2.Model.Default(script.Text("answer"))
	h2.Prompt(sid, "three")
	h2.WaitIdle(sid)
	m, err := h2.Store.Message(h2.Ctx(), sid, row.InputID)
	if err != nil {
		t.Fatal(err)
	}
	if m.Compaction.State != persistence.CompactionFailed || m.Compaction.Error.Type != messages.ErrAborted {
		t.Fatalf("the dead process's compaction after a later drain: %+v; events %v", *m.Compaction, h2.Types(sid)[kept:])
	}
	h2.CheckReplay()
}

// TestManualCompactionAfterAnAutomaticOne: a manual compaction requested
// during a continuation in which an automatic one then ran finishes last,
// though its row sits earlier: later requests use its checkpoint, and the
// steps between the two do not survive its boundary.
func TestManualCompactionAfterAnAutomaticOne(t *testing.T) {
	h := autoCompacting(t, 195000)
	started, release := make(chan string, 1), make(chan struct{})
	h.Tools.Add("slow", func(ctx context.Context, call locations.ToolCall) (string, error) {
		out, err := actortest.Blocking(started, release)(ctx, call)
		return out + strings.Repeat("x", 40000), err
	})
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Text("## Objective\nAUTO-SUMMARY"))
	h.Model.Reply(script.Text("finished"))
	h.Model.Reply(script.Text("## Objective\nMANUAL-SUMMARY"))
	h.Model.Reply(script.Text("answer two"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.WaitIdle(sid)
	var reasons []string
	for _, ev := range h.Events(sid) {
		if e, ok := ev.Data.(*messages.CompactionEnded); ok {
			reasons = append(reasons, e.Reason)
		}
	}
	if !slices.Equal(reasons, []string{messages.CompactionAuto, messages.CompactionManual}) {
		t.Fatalf("compactions %v: %v", reasons, h.Types(sid))
	}
	if sys := h.Request(4).System[0]; !strings.Contains(sys, "AUTO-SUMMARY") {
		t.Fatalf("the manual compaction did not update the automatic summary: %q", sys)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	msgs := h.Request(5).Messages
	if len(msgs) != 2 || !strings.Contains(msgs[0].Parts[0].Text, "MANUAL-SUMMARY") || userTexts(h.Request(5))[1] != "two" {
		t.Fatalf("the request after the manual compaction: %+v", msgs)
	}
	h.CheckReplay()
}

// TestManualCompactionAdmittedDuringAnOverflowOne: the overflow
// compaction's own outcome decides the retry, not the newest compaction
// row, which a manual request admitted meanwhile adds.
func TestManualCompactionAdmittedDuringAnOverflowOne(t *testing.T) {
	h := actortest.New(t)
	g := script.NewGate()
	h.Model.Reply(script.Text("earlier"))
	h.Model.Reply(overflow)
	h.Model.Reply(script.Text("## Objective\n"), script.Hold(g), script.Text("summary"))
	h.Model.Default(script.Text("fits now"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	h.Prompt(sid, "two")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	g.Release()
	h.WaitIdle(sid)
	if f := lastOf[*messages.ExecutionFailed](h, sid); f != nil {
		t.Fatalf("the step failed after its overflow compaction completed: %+v\n%v", f, h.Types(sid))
	}
	// The retried attempt answered, and the manual barrier ran after it.
	if m := lastOf[*messages.CompactionEnded](h, sid); m == nil || m.Reason != messages.CompactionManual || count(h, sid, messages.TypeStepEnded) != 2 {
		t.Fatalf("events %v", h.Types(sid))
	}
	if pend, err := h.Store.Pending(h.Ctx(), sid); err != nil || len(pend) != 0 {
		t.Fatalf("pending after idle: %+v %v", pend, err)
	}
	h.CheckReplay()
}

// TestNoAutomaticCompactionWithoutNewSteps: right after a compaction no
// complete step is left to fold, so an over-budget request does not
// compact again.
func TestNoAutomaticCompactionWithoutNewSteps(t *testing.T) {
	h := autoCompacting(t, 199990)
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("## Objective\nmanual"))
	h.Model.Default(script.Text("## Objective\nagain"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 {
		t.Fatalf("%d compactions: %v", n, h.Types(sid))
	}
	// The next turn has a complete step after the boundary, and compacts.
	h.Prompt(sid, "three")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeCompactionEnded); n != 2 {
		t.Fatalf("%d compactions: %v", n, h.Types(sid))
	}
	h.CheckReplay()
}

// TestManualCompactionCarriesNoEarlierPrompt: a turn that failed before a
// manual compaction is the summary's; its prompt does not reappear after
// the checkpoint as if unanswered.
func TestManualCompactionCarriesNoEarlierPrompt(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("partial"), script.Fail(&llm.Error{Type: messages.ErrProviderUnknown, Message: "boom"}))
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.Text("answer two"))
	sid := h.Session()
	h.Prompt(sid, "delete the old branch")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	got := userTexts(h.Request(3))
	if len(got) != 2 || !strings.HasPrefix(got[0], "<summary>") || got[1] != "two" {
		t.Fatalf("user messages after the manual compaction: %q", got)
	}
	h.CheckReplay()
}

// commitRecorder records the payload types of each commit.
type commitRecorder struct {
	persistence.Store
	mu      sync.Mutex
	commits [][]string
}

func (s *commitRecorder) Commit(ctx context.Context, sid messages.SessionID, ps ...messages.Payload) (persistence.Committed, error) {
	var types []string
	for _, p := range ps {
		types = append(types, p.Type())
	}
	s.mu.Lock()
	s.commits = append(s.commits, types)
	s.mu.Unlock()
	return s.Store.Commit(ctx, sid, ps...)
}

// TestCompactionRebaselinesInTheSameCommit checks that a completed
// compaction commits the fresh instruction baseline with its end: apart, a
// crash between the two would leave the next attempt on the old baseline.
func TestCompactionRebaselinesInTheSameCommit(t *testing.T) {
	rec := &commitRecorder{}
	h := actortest.New(t, actortest.Options{
		Instructions: &locations.InstructionsConfig{Dir: t.TempDir(), Getenv: func(string) string { return "" }},
		Config:       func(c *actors.Config) { rec.Store = c.Store; c.Store = rec },
	})
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("## Objective\nx"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, c := range rec.commits {
		if slices.Contains(c, messages.TypeCompactionEnded) {
			if !slices.Contains(c, messages.TypeInstructionsBaselined) {
				t.Fatalf("compaction ended without its rebaseline: %v", c)
			}
			return
		}
	}
	t.Fatalf("no compaction ended: %v", rec.commits)
}

// TestRebaselineRestatesWhatWasApplied: the baseline a compaction writes
// renders the current sources, and one unavailable at that moment is
// restated from the value last applied instead of dropped.
func TestRebaselineRestatesWhatWasApplied(t *testing.T) {
	dir := t.TempDir()
	agents := filepath.Join(dir, "AGENTS.md")
	if err := os.WriteFile(agents, []byte("Use tabs."), 0o644); err != nil {
		t.Fatal(err)
	}
	skills := &switchSource{key: locations.SourceSkills}
	h := actortest.New(t, actortest.Options{Instructions: &locations.InstructionsConfig{Dir: dir, Skills: skills,
		Getenv: func(string) string { return "" }}})
	h.Dir = dir
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("## Objective\nx"))
	h.Model.Reply(script.Text("a2"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	skills.down.Store(true)
	compactNow(t, h, sid)
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	req := h.Request(3)
	sys := strings.Join(req.System, "\n")
	if !strings.Contains(sys, "Use spaces.") || strings.Contains(sys, "Use tabs.") || !strings.Contains(sys, "Skill: deploy.") {
		t.Fatalf("the baseline after the compaction: %q", req.System)
	}
	for _, m := range req.Messages {
		if m.Role == llm.RoleSystem {
			t.Fatalf("a chronological update survived the rebaseline: %+v", req.Messages)
		}
	}
	h.CheckReplay()
}

// TestManualCompactionDuringContinuation checks that the steps run between
// a manual compaction's admission (where its row sits) and its start, which
// its summary covers, do not survive the boundary as provider-native
// assistant, reasoning or tool messages.
func TestManualCompactionDuringContinuation(t *testing.T) {
	h := actortest.New(t)
	started, release := make(chan string, 1), make(chan struct{})
	h.Tools.Add("slow", actortest.Blocking(started, release))
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "ECHO", nil })
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`))
	h.Model.Reply(script.Reasoning("thinking").WithMetadata(`{"sig":"abc"}`), script.ToolCall("c2", "echo", `{}`))
	h.Model.Reply(script.Text("finished"))
	h.Model.Reply(script.Text("## Objective\nsummary"))
	h.Model.Reply(script.Text("answer two"))
	sid := h.Session()
	h.Prompt(sid, "one")
	<-started
	if _, err := h.Runtime.Compact(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	close(release)
	h.WaitIdle(sid)
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	if !strings.Contains(h.Request(4).System[0], "## Objective") {
		t.Fatalf("request 4 is not the compaction's: %q", h.Request(4).System)
	}
	req := h.Request(5)
	if !opensWithSummary(req, "") {
		t.Fatalf("request 5 does not start with the checkpoint: %+v", req.Messages)
	}
	for _, m := range req.Messages[1:] {
		if m.Role == llm.RoleAssistant || m.Role == llm.RoleTool {
			t.Fatalf("a %s message survived the compaction boundary: %+v", m.Role, m.Parts)
		}
	}
	if got := userTexts(req); len(got) != 2 || got[1] != "two" {
		t.Fatalf("user messages after the checkpoint: %q", got)
	}
	h.CheckReplay()
}

// TestAutomaticCompactionKeepsThePromptItAnswers checks that the prompt an
// automatic compaction folds behind its boundary (it runs after its step
// promoted the prompt) still reaches the step that answers it, with its
// attachments: the summary holds only its text.
func TestAutomaticCompactionKeepsThePromptItAnswers(t *testing.T) {
	h := autoCompacting(t, 199990)
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("## Objective\nx"))
	h.Model.Reply(script.Text("a2"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "describe this image",
		Files: []messages.File{{Mime: "image/png", URL: "data:image/png;base64,AAAA"}}}})
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 {
		t.Fatalf("want one automatic compaction, got %d: %v", n, h.Types(sid))
	}
	msgs := h.Request(3).Messages
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0].Parts[0].Text, "<summary>") || msgs[1].Role != llm.RoleUser ||
		!slices.ContainsFunc(msgs[1].Parts, func(p llm.Part) bool { return p.Kind == llm.PartFile }) {
		t.Fatalf("the step after the compaction got %+v", msgs)
	}
	// The prompt goes after the checkpoint, not also in its recent context.
	if ended := lastOf[*messages.CompactionEnded](h, sid); strings.Contains(ended.Recent, "describe this image") || !strings.Contains(ended.Recent, "one") {
		t.Fatalf("recent context %q", ended.Recent)
	}
	h.CheckReplay()
}

// TestCompactionKeepsRecentToolOutputWhole: a compaction in the middle of
// a tool loop keeps the result the next step asked for, whole, in its
// recent context (it was cut to 400 characters).
func TestCompactionKeepsRecentToolOutputWhole(t *testing.T) {
	h := autoCompacting(t, 199990) // every step after a complete one compacts
	big := strings.Repeat("0123456789", 300) + "THE-END"
	h.Tools.Add("big", func(ctx context.Context, c locations.ToolCall) (string, error) { return big, nil })
	h.Model.Reply(script.ToolCall("c1", "big", `{}`))
	h.Model.Reply(script.Text("## Objective\nread the big file"))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "read it")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 {
		t.Fatalf("want one compaction, got %d: %v", n, h.Types(sid))
	}
	if summary := h.Request(3).Messages[0].Parts[0].Text; !strings.Contains(summary, big) {
		t.Fatalf("the step after the compaction got %q", summary)
	}
	h.CheckReplay()
}

// TestTruncatedSummaryFailsTheCompaction: a summary the output limit cut
// off (finish length) has lost its last sections, Next Move among them;
// it fails the compaction rather than replace history.
func TestTruncatedSummaryFailsTheCompaction(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\nPort the parser.\n## Important Details\nThe lexer is in"), script.Finish("length", messages.Tokens{}))
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	failed := lastOf[*messages.CompactionFailed](h, sid)
	if count(h, sid, messages.TypeCompactionEnded) != 0 || failed == nil || failed.Error.Type != messages.ErrCompactionFailed ||
		!strings.Contains(failed.Error.Message, "cut off") {
		t.Fatalf("compaction of a cut-off summary: %+v, %v", failed, h.Types(sid))
	}
	h.CheckReplay()
}

// TestBaseInstructionsFollowTheProviderFamily: without an agent prompt, a
// request starts from its model's provider-family baseline, chosen at each
// step from the selected model.
func TestBaseInstructionsFollowTheProviderFamily(t *testing.T) {
	h := actortest.New(t)
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{
		{ID: "anthropic", Type: llm.ProviderAnthropic, HasCredentials: true, Models: map[string]llm.ModelSpec{"claude": {}}},
		{ID: "openai", Type: llm.ProviderOpenAI, HasCredentials: true, Models: map[string]llm.ModelSpec{"gpt": {}}},
		{ID: "script", Type: llm.ProviderScript},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.Services.Catalog = catalog
	h.Services.DefaultModel = messages.ModelRef{ProviderID: "anthropic", ID: "claude"}
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	var systems []string
	for _, ref := range []messages.ModelRef{{ProviderID: "anthropic", ID: "claude"}, {ProviderID: "openai", ID: "gpt"}, {ProviderID: "script", ID: "demo"}} {
		if err := h.Runtime.SelectModel(h.Ctx(), sid, ref); err != nil {
			t.Fatal(err)
		}
		h.Prompt(sid, "hi")
		h.WaitIdle(sid)
		req := h.Request(h.Model.Count())
		if req.Model != ref {
			t.Fatalf("request for %v", req.Model)
		}
		systems = append(systems, req.System[0])
	}
	if systems[0] == systems[1] || systems[1] == systems[2] || systems[0] == systems[2] {
		t.Fatalf("one baseline for different families: %q", systems)
	}
	if !strings.Contains(systems[1], "JSON object matching its schema") {
		t.Fatalf("the OpenAI-family baseline: %q", systems[1])
	}
}

// sizeLimited is a provider whose context holds limit characters: a longer
// request fails as a context overflow before reaching the script.
type sizeLimited struct {
	next  llm.Provider
	limit int
	sizes *[]int
}

func (p sizeLimited) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	n := 0
	for _, s := range req.System {
		n += len(s)
	}
	for _, m := range req.Messages {
		for _, part := range m.Parts {
			n += len(part.Text) + len(part.Output) + len(part.Input)
		}
	}
	*p.sizes = append(*p.sizes, n)
	if n > p.limit {
		return func(yield func(llm.Event, error) bool) {
			yield(llm.Event{}, &llm.Error{Type: messages.ErrProviderContextOverflow, Message: "prompt is too long"})
		}
	}
	return p.next.Stream(ctx, req)
}

// sizeLimitedHarness returns a harness whose provider holds 6,000
// characters (sizeLimited over its scripted model), and the sizes of the
// requests it gets.
func sizeLimitedHarness(t *testing.T, opts ...actortest.Options) (*actortest.Harness, *[]int) {
	h := actortest.New(t, opts...)
	var sizes []int
	var mu sync.Mutex
	limited := sizeLimited{next: h.Model, limit: 6000, sizes: &sizes}
	h.Services.Provider = func(string) (llm.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		return limited, nil
	}
	return h, &sizes
}

// TestOverflowCompactionFitsItsOwnRequest: when the history overflows the
// context, the compaction it triggers cannot send that history whole: its
// request is cut, oldest first, until the provider takes it, the summary
// completes, and the step it was for is answered; the Session is not left
// failing every turn.
func TestOverflowCompactionFitsItsOwnRequest(t *testing.T) {
	// Recent context kept in proportion to this small context window.
	h, sizes := sizeLimitedHarness(t, actortest.Options{Config: func(c *actors.Config) { c.KeepTokens = 200 }})
	big := strings.Repeat("lorem ipsum ", 200) // 2,400 characters a turn
	h.Model.Reply(script.Text("a1"))
	h.Model.Reply(script.Text("a2"))
	h.Model.Reply(script.Text("## Objective\nKeep answering"))
	h.Model.Reply(script.Text("a3"))
	sid := h.Session()
	for _, p := range []string{"one " + big, "two " + big, "three " + big} {
		h.Prompt(sid, p)
		h.WaitIdle(sid)
	}
	types := h.Types(sid)
	if !slices.Contains(types, "session.compaction.ended") || types[len(types)-1] != "session.execution.succeeded" {
		t.Fatalf("sizes %v\n%v", *sizes, types)
	}
	h.CheckReplay()
}

// TestOverflowRecoveryWithDefaultKeep is TestOverflowCompactionFitsItsOwnRequest
// with the default keep (8,000 tokens, far more than this provider holds)
// and a catalog that does not know the window: the recent context an
// overflow compaction keeps is bounded by the request the provider
// refused, so the Session goes on answering (it failed every turn after).
func TestOverflowRecoveryWithDefaultKeep(t *testing.T) {
	h, sizes := sizeLimitedHarness(t)
	big := strings.Repeat("lorem ipsum ", 200) // 2,400 characters a turn
	h.Model.ReplyFor(script.SystemContains("Summarize the conversation"), script.Text("## Objective\nKeep answering"))
	h.Model.Default(script.Text("answer"))
	sid := h.Session()
	for _, p := range []string{"one " + big, "two " + big, "three " + big, "four"} {
		h.Prompt(sid, p)
		h.WaitIdle(sid)
	}
	for _, ev := range h.Events(sid) {
		if f, ok := ev.Data.(*messages.ExecutionFailed); ok {
			t.Fatalf("a busy period failed: %s; request sizes %v", f.Error.Message, *sizes)
		}
	}
	if count(h, sid, messages.TypeCompactionEnded) == 0 {
		t.Fatalf("no compaction: %v", h.Types(sid))
	}
	h.CheckReplay()
}

// TestModelSelectionKeepsTheBaseline: model selection changes Model
// Context assembly but is not an instruction source; the next step uses
// the new model with the same baseline, and no instruction event is
// written for it.
func TestModelSelectionKeepsTheBaseline(t *testing.T) {
	h, sid, _ := answeredWithAgentsMD(t, "Use tabs.")
	before, ok, err := h.Store.Checkpoint(h.Ctx(), sid)
	if err != nil || !ok {
		t.Fatalf("no checkpoint after the first run: %v", err)
	}
	if err := h.Runtime.SelectModel(h.Ctx(), sid, messages.ModelRef{ProviderID: "script", ID: "other"}); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	after, _, err := h.Store.Checkpoint(h.Ctx(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if after.BaselineSeq != before.BaselineSeq || after.Baseline != before.Baseline {
		t.Fatalf("a model switch replaced the baseline: seq %d -> %d", before.BaselineSeq, after.BaselineSeq)
	}
	if n, m := count(h, sid, messages.TypeInstructionsBaselined), count(h, sid, messages.TypeInstructionsUpdated); n != 1 || m != 0 {
		t.Fatalf("%d baselines and %d updates, want 1 and 0: %v", n, m, h.Types(sid))
	}
	second := h.Request(2)
	if second.Model.ID != "other" || !slices.ContainsFunc(second.System, func(s string) bool { return strings.Contains(s, "Use tabs.") }) {
		t.Fatalf("second request: model %s, system %q", second.Model.ID, second.System)
	}
	h.CheckReplay()
}

// TestCompactionRecentLeavesInstructionsToTheBaseline: the baseline a
// compaction writes supersedes every instruction update before it, so its
// recent context holds none; after a move, the old Location's AGENTS.md
// reached the model there, in the checkpoint's user message.
func TestCompactionRecentLeavesInstructionsToTheBaseline(t *testing.T) {
	h, sid, agents := answeredWithAgentsMD(t, "Use tabs.")
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	if ended := lastOf[*messages.CompactionEnded](h, sid); strings.Contains(ended.Recent, "Use spaces.") || !strings.Contains(ended.Recent, "user: two") {
		t.Fatalf("recent context %q", ended.Recent)
	}
	if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "three")
	h.WaitIdle(sid)
	req := h.Request(h.Model.Count())
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			if strings.Contains(p.Text, "Use spaces.") || strings.Contains(p.Text, "Use tabs.") {
				t.Fatalf("the old Location's instructions reach the model after the move (%s message):\n%s", m.Role, p.Text)
			}
		}
	}
	h.CheckReplay()
}

// TestSelectingTheCurrentAgentOrModelWritesNothing: selecting the agent or
// model a Session already has is a no-op, as a move to its own Location
// is: the log gets no second selection event. A different one, or one
// the Session names only by default (no agent recorded yet), is written.
func TestSelectingTheCurrentAgentOrModelWritesNothing(t *testing.T) {
	h := actortest.New(t)
	sid := h.Session()
	count := func(typ string) (n int) {
		for _, ev := range h.Events(sid) {
			if ev.Type == typ {
				n++
			}
		}
		return n
	}
	other := messages.ModelRef{ProviderID: "script", ID: "other"}
	for range 3 {
		if err := h.Runtime.SelectAgent(h.Ctx(), sid, "plan"); err != nil {
			t.Fatal(err)
		}
		if err := h.Runtime.SelectModel(h.Ctx(), sid, other); err != nil {
			t.Fatal(err)
		}
	}
	if a, m := count(messages.TypeAgentSelected), count(messages.TypeModelSelected); a != 1 || m != 1 {
		t.Fatalf("%d agent and %d model selections in the log after selecting each three times, want 1 and 1", a, m)
	}
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "build"); err != nil {
		t.Fatal(err)
	}
	if a := count(messages.TypeAgentSelected); a != 2 {
		t.Fatalf("%d agent selections after selecting another agent, want 2", a)
	}
	s, err := h.Store.Get(h.Ctx(), sid)
	if err != nil || s.Agent != "build" || s.Model != other {
		t.Fatalf("session %+v, %v", s, err)
	}
}

// TestRemovedDirectoryFailsASessionThatRanBefore: a Session whose
// directory was removed after it ran fails its next busy period, naming
// the directory, as one that never ran does. It went on with the
// instructions the model last saw, every tool failed, and the busy period
// ended as succeeded.
func TestRemovedDirectoryFailsASessionThatRanBefore(t *testing.T) {
	h, sid, _ := answeredWithAgentsMD(t, "Use tabs.")
	if err := os.RemoveAll(h.Dir); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	f := lastOf[*messages.ExecutionFailed](h, sid)
	if f == nil || f.Error.Type != messages.ErrInstructions || !strings.Contains(f.Error.Message, strconv.Quote(h.Dir)+" does not exist") {
		t.Fatalf("busy period in a removed directory: %+v; %v", f, h.Types(sid))
	}
	if n := h.Model.Count(); n != 1 {
		t.Fatalf("%d model requests, want the first prompt's only", n)
	}
}
