package actortest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// testRegistryTools is a test of your own with the daemon's tool registry
// in place of the harness's Go-function tools: the input is validated
// against the tool's schema before it runs, and the agent's permission
// rules ask a question, here answered by the test.
func testRegistryTools(t testing.TB) {
	h := actortest.New(t)

	// Questions go to a broker; the test answers each as it is asked.
	var pending *tools.Pending
	pending = tools.NewPending(tools.PendingConfig{OnAsked: func(a *messages.PermissionAsked) {
		fmt.Printf("asked: %s %v\n", a.Permission, a.Patterns)
		// Reply after Ask has started to wait, not inside its callback.
		go func() { _ = pending.Reply(a.RequestID, tools.Once, "") }()
	}})
	t.Cleanup(func() { pending.CancelAll() })
	perms, err := tools.NewPermissions(tools.PermissionsConfig{Project: h.Dir, Asker: pending,
		Agents: map[string]tools.Ruleset{"build": {{Permission: "*", Pattern: "*", Action: tools.Ask}}}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Config{Root: h.Dir, Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	scope := reg.NewScope("mine")
	t.Cleanup(scope.Close)
	type sum struct{ A, B int }
	add := tools.NewTool(tools.Definition{Name: "add", Description: "Adds two integers.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"A":{"type":"integer"},"B":{"type":"integer"}},"required":["A","B"],"additionalProperties":false}`)},
		func(_ context.Context, _ *tools.CallContext, in sum) (tools.Result, error) {
			return tools.Result{Output: fmt.Sprint(in.A + in.B)}, nil
		})
	if err := reg.Register(scope, add); err != nil {
		t.Fatal(err)
	}
	// Before the first Session: every Location copies the service set
	// when it is built.
	h.Services.Tools = locations.NewTools(reg)

	h.Model.
		Reply(script.ToolCall("c1", "add", `{"A":"two","B":2}`)).
		Reply(script.ToolCall("c2", "add", `{"A":2,"B":2}`)).
		Reply(script.Text("2 + 2 = 4"))
	sid := h.Session()
	h.Prompt(sid, "What is 2 + 2?")
	h.WaitIdle(sid)
	for _, ev := range h.Events(sid) {
		switch d := ev.Data.(type) {
		case *messages.ToolFailed:
			fmt.Printf("%s failed: %s\n", d.CallID, d.Error.Type)
		case *messages.ToolSucceeded:
			fmt.Printf("%s succeeded: %s\n", d.CallID, d.Output)
		}
	}
}

// Example_registry tests tools of the daemon's registry: a call whose
// input breaks the schema fails without running, and the model sees why;
// a valid call asks its permission question first.
func Example_registry() {
	t := &exampleT{}
	defer t.cleanup()
	testRegistryTools(t)
	// Output:
	// asked: add [*]
	// c1 failed: tool.execution
	// c2 succeeded: 4
}
