package actors_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// realTools gives the harness the real registry with the built-ins, behind
// a permission gate whose asks go to the returned broker and whose
// "always" replies are saved in the harness store.
func realTools(t *testing.T, h *actortest.Harness, rules tools.Ruleset) *tools.Pending {
	t.Helper()
	return realAgentTools(t, h, map[string]tools.Ruleset{"build": rules})
}

// realAgentTools is realTools with the rules of each agent.
func realAgentTools(t *testing.T, h *actortest.Harness, rules map[string]tools.Ruleset) *tools.Pending {
	t.Helper()
	asked := make(chan *messages.PermissionAsked, 16)
	pending := tools.NewPending(tools.PendingConfig{OnAsked: func(a *messages.PermissionAsked) { asked <- a }})
	build := locations.NewBuilder(locations.BuildConfig{Catalog: h.Services.Catalog, DefaultModel: h.Services.DefaultModel,
		Providers: map[string]llm.Provider{"script": h.Model}, Agents: h.Agents,
		Rules: rules, Approvals: locations.NewApprovals(h.Store), Asker: pending,
		Builtins: tools.BuiltinConfig{Read: tools.DefaultReadConfig(), Bash: tools.DefaultBashConfig(), ApplyPatch: tools.DefaultApplyPatchConfig()}})
	svc, err := build(messages.Location{Directory: h.Dir})
	if err != nil {
		t.Fatal(err)
	}
	h.Services.Tools = svc.Tools
	return pending
}

// answer waits for the next ask and replies to it.
func answer(t *testing.T, p *tools.Pending, reply tools.Reply, msg string) tools.Request {
	t.Helper()
	eventually(t, "a permission ask", func() bool { return len(p.List()) > 0 })
	req := p.List()[0]
	if err := p.Reply(req.ID, reply, msg); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestRejectedPermissionEndsStepWithoutContinuation(t *testing.T) {
	h := actortest.New(t)
	pending := realTools(t, h, nil)
	h.Model.Reply(script.ToolCall("c1", "bash", `{"command":"touch made-it"}`))
	h.Model.Default(script.Text("must not be asked"))
	sid := h.Session()
	h.Prompt(sid, "run it")
	req := answer(t, pending, tools.Reject, "not today")
	h.WaitIdle(sid)
	if req.Permission != tools.PermissionBash || req.SessionID != sid {
		t.Fatalf("ask %+v", req)
	}
	failed := lastOf[*messages.ToolFailed](h, sid)
	if failed == nil || failed.Error.Type != messages.ErrPermissionRejected {
		t.Fatalf("tool failure %+v", failed)
	}
	if h.Model.Count() != 1 {
		t.Fatalf("%d requests: a rejection must end the step without continuation", h.Model.Count())
	}
	if _, err := os.Stat(filepath.Join(h.Dir, "made-it")); !os.IsNotExist(err) {
		t.Fatal("the rejected command ran")
	}
	h.CheckReplay()
}

// TestDeniedByRuleLetsTheModelGoOn: a call the agent's rules deny fails,
// and the model gets the failure in its next step (it is told not to
// retry); only a user's rejection ends the busy period.
func TestDeniedByRuleLetsTheModelGoOn(t *testing.T) {
	h := actortest.New(t)
	realTools(t, h, tools.Ruleset{{Permission: "*", Pattern: "*", Action: tools.Allow},
		{Permission: tools.PermissionBash, Pattern: "rm *", Action: tools.Deny}})
	h.Model.Reply(script.ToolCall("c1", "bash", `{"command":"rm -f x"}`))
	h.Model.Reply(script.Text("I will leave x alone."))
	sid := h.Session()
	h.Prompt(sid, "remove x")
	h.WaitIdle(sid)
	failed := lastOf[*messages.ToolFailed](h, sid)
	if failed == nil || failed.Error.Type != messages.ErrPermissionRejected || !strings.Contains(failed.Error.Message, "denied by the rules") {
		t.Fatalf("tool failure %+v", failed)
	}
	if h.Model.Count() != 2 {
		t.Fatalf("%d requests: the model must see a rule's denial", h.Model.Count())
	}
	h.CheckReplay()
}

func TestAlwaysApprovalIsSavedDurably(t *testing.T) {
	h := actortest.New(t)
	pending := realTools(t, h, nil)
	h.Model.Reply(script.ToolCall("c1", "bash", `{"command":"echo one > a.txt"}`))
	h.Model.Reply(script.ToolCall("c2", "bash", `{"command":"echo one > a.txt"}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "write")
	answer(t, pending, tools.Always, "")
	h.WaitIdle(sid)
	if n := count(h, sid, messages.TypeToolSucceeded); n != 2 {
		t.Fatalf("%d successes; the second call must not ask again: %v", n, h.Types(sid))
	}
	saved, err := h.Store.Approvals(h.Ctx(), mustCanon(t, h.Dir))
	if err != nil || len(saved[tools.PermissionBash]) == 0 {
		t.Fatalf("approval not saved: %v %v", saved, err)
	}
}

func mustCanon(t *testing.T, dir string) string {
	t.Helper()
	c, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestToolsFollowTheSelectedAgent: a Session's tools are listed and run
// under its selected agent's rules, not the default agent's: a "plan"
// Session does not see bash, and a bash call it makes anyway is refused
// although "build" allows bash.
func TestToolsFollowTheSelectedAgent(t *testing.T) {
	h := actortest.New(t)
	realAgentTools(t, h, map[string]tools.Ruleset{
		"build": {{Permission: "*", Pattern: "*", Action: tools.Allow}},
		"plan":  {{Permission: "*", Pattern: "*", Action: tools.Allow}, {Permission: tools.PermissionBash, Pattern: "*", Action: tools.Deny}},
	})
	h.Model.Reply(script.ToolCall("c1", "bash", `{"command":"touch made-it"}`))
	h.Model.Default(script.Text("done"))
	sid := h.Session()
	if err := h.Runtime.SelectAgent(h.Ctx(), sid, "plan"); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "run it")
	h.WaitIdle(sid)
	for _, d := range h.Request(1).Tools {
		if d.Name == "bash" {
			t.Fatalf("the plan agent was offered bash: %+v", h.Request(1).Tools)
		}
	}
	if len(h.Request(1).Tools) == 0 {
		t.Fatal("the plan agent was offered no tools")
	}
	failed := lastOf[*messages.ToolFailed](h, sid)
	if failed == nil || !strings.Contains(failed.Error.Message, "not available to agent plan") {
		t.Fatalf("bash under plan settled as %+v", failed)
	}
	if _, err := os.Stat(filepath.Join(h.Dir, "made-it")); !os.IsNotExist(err) {
		t.Fatal("bash ran under the build agent's rules")
	}
}
