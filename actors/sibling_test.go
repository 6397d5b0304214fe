package actors_test

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// siblingTools is realTools that also records the permission.replied
// events, and hands out the asked ones as they come.
type siblingTools struct {
	pending *tools.Pending
	asked   chan *messages.PermissionAsked

	mu      sync.Mutex
	replied []string
}

func newSiblingTools(t *testing.T, h *actortest.Harness) *siblingTools {
	t.Helper()
	st := &siblingTools{asked: make(chan *messages.PermissionAsked, 16)}
	st.pending = tools.NewPending(tools.PendingConfig{
		OnAsked: func(a *messages.PermissionAsked) { st.asked <- a },
		OnReplied: func(r *messages.PermissionReplied) {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.replied = append(st.replied, r.RequestID+" "+r.Reply)
		},
	})
	build := locations.NewBuilder(locations.BuildConfig{Catalog: h.Services.Catalog, DefaultModel: h.Services.DefaultModel,
		Providers: map[string]llm.Provider{"script": h.Model}, Agents: h.Agents,
		Approvals: locations.NewApprovals(h.Store), Asker: st.pending,
		Builtins: tools.BuiltinConfig{Read: tools.DefaultReadConfig(), Bash: tools.DefaultBashConfig(), ApplyPatch: tools.DefaultApplyPatchConfig()}})
	svc, err := build(messages.Location{Directory: h.Dir})
	if err != nil {
		t.Fatal(err)
	}
	h.Services.Tools = svc.Tools
	return st
}

// waitAsked waits for n questions and returns their request IDs in the
// order they were asked.
func (st *siblingTools) waitAsked(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for range n {
		ids = append(ids, (<-st.asked).RequestID)
	}
	return ids
}

func (st *siblingTools) repliedEvents() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.replied)
}

// replyToOneOfTwo runs a step of the two bash calls c1 and c2, waits for
// both questions, answers question i (0 or 1) with reply, checks that no
// question is left waiting, waits for the busy period to end and returns
// the Session and the questions' IDs in the order they were asked.
func (st *siblingTools) replyToOneOfTwo(t *testing.T, h *actortest.Harness, c1, c2 string, i int, reply tools.Reply) (messages.SessionID, []string) {
	t.Helper()
	h.Model.Reply(script.ToolCall("c1", "bash", c1), script.ToolCall("c2", "bash", c2))
	sid := h.Session()
	h.Prompt(sid, "go")
	ids := st.waitAsked(t, 2)
	if err := st.pending.Reply(ids[i], reply, ""); err != nil {
		t.Fatal(err)
	}
	if left := st.pending.List(); len(left) != 0 {
		t.Fatalf("still waiting after %s: %+v", reply, left)
	}
	h.WaitIdle(sid)
	return sid, ids
}

// TestRejectOneOfTwoQuestionsEndsTheStep: a step that asked twice (two
// bash calls) ends its busy period when the user rejects one question: the
// other is rejected with it, neither command runs, and the model is not
// asked again.
func TestRejectOneOfTwoQuestionsEndsTheStep(t *testing.T) {
	h := actortest.New(t)
	st := newSiblingTools(t, h)
	h.Model.Default(script.Text("must not be asked"))
	sid, ids := st.replyToOneOfTwo(t, h, `{"command":"touch a-made"}`, `{"command":"touch b-made"}`, 0, tools.Reject)
	if n := count(h, sid, messages.TypeToolFailed); n != 2 {
		t.Fatalf("%d tool failures, want 2: %v", n, h.Types(sid))
	}
	if h.Model.Count() != 1 {
		t.Fatalf("%d requests: the rejection must end the step without continuation", h.Model.Count())
	}
	for _, f := range []string{"a-made", "b-made"} {
		if _, err := os.Stat(filepath.Join(h.Dir, f)); !os.IsNotExist(err) {
			t.Fatalf("%s: a rejected command ran", f)
		}
	}
	if got, want := st.repliedEvents(), []string{ids[0] + " reject", ids[1] + " reject"}; !slices.Equal(got, want) {
		t.Fatalf("replied events %q, want %q", got, want)
	}
	h.CheckReplay()
}

// TestAlwaysOnOneOfTwoQuestionsApprovesTheCoveredOther: two calls of one
// step ask for the same command; "always" on one approves both, and the
// busy period goes on to the next step.
func TestAlwaysOnOneOfTwoQuestionsApprovesTheCoveredOther(t *testing.T) {
	h := actortest.New(t)
	st := newSiblingTools(t, h)
	h.Model.Default(script.Text("done"))
	sid, ids := st.replyToOneOfTwo(t, h, `{"command":"echo one >> log.txt"}`, `{"command":"echo one >> log.txt"}`, 1, tools.Always)
	if n := count(h, sid, messages.TypeToolSucceeded); n != 2 {
		t.Fatalf("%d successes, want 2: %v", n, h.Types(sid))
	}
	if h.Model.Count() != 2 {
		t.Fatalf("%d requests, want 2", h.Model.Count())
	}
	if got, want := st.repliedEvents(), []string{ids[1] + " always", ids[0] + " always"}; !slices.Equal(got, want) {
		t.Fatalf("replied events %q, want %q", got, want)
	}
	saved, err := h.Store.Approvals(h.Ctx(), mustCanon(t, h.Dir))
	if err != nil || !slices.Equal(saved[tools.PermissionBash], []string{"echo one >> log.txt"}) {
		t.Fatalf("saved %v (%v), want the one command", saved, err)
	}
	h.CheckReplay()
}
