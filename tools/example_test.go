package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

type greetInput struct {
	Name string `json:"name"`
}

// ExampleNewTool registers a tool of one's own in a Registry and calls it
// three times: once asking the user, once denied by a rule, once with
// input its schema refuses.
func ExampleNewTool() {
	dir, err := os.MkdirTemp("", "tools-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	// The user is asked through a Pending broker; here a goroutine stands
	// in for them and answers every question "once". Hooks must not block
	// or reply, so OnAsked only hands the question on.
	asked := make(chan *messages.PermissionAsked, 1)
	pending := tools.NewPending(tools.PendingConfig{OnAsked: func(a *messages.PermissionAsked) { asked <- a }})
	go func() {
		for a := range asked {
			fmt.Println("asked:", a.Permission, a.Patterns)
			_ = pending.Reply(a.RequestID, tools.Once, "")
		}
	}()
	defer close(asked)

	// Rules are per agent, wildcard-matched, and the last match wins;
	// what no rule decides is asked.
	perms, err := tools.NewPermissions(tools.PermissionsConfig{Project: dir, Asker: pending,
		Agents: map[string]tools.Ruleset{tools.DefaultAgent: {{Permission: "greet", Pattern: "mallory", Action: tools.Deny}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, err := tools.NewRegistry(tools.Config{Root: dir, Permissions: perms})
	if err != nil {
		fmt.Println(err)
		return
	}
	greet := tools.NewTool(tools.Definition{
		Name:        "greet",
		Description: "Greets someone by name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"]}`),
		// Without AsksItself the registry would ask before every call, for
		// greet and pattern "*", showing the input.
		AsksItself: true,
	}, func(ctx context.Context, call *tools.CallContext, in greetInput) (tools.Result, error) {
		// The tool asks for what it is about to do, naming it in its
		// patterns, so a rule or an "always" can be about one name.
		if err := call.Ask(ctx, tools.Request{Permission: "greet", Patterns: []string{in.Name}}); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Output: "hello " + in.Name}, nil
	})
	scope := reg.NewScope("example")
	defer scope.Close() // removes the scope's tools again
	if err := reg.Register(scope, greet); err != nil {
		fmt.Println(err)
		return
	}

	sid := messages.NewIDs(nil, nil).Session()
	for i, input := range []string{`{"name":"alice"}`, `{"name":"mallory"}`, `{}`} {
		res, err := reg.Execute(context.Background(), tools.Call{SessionID: sid, CallID: fmt.Sprint("call_", i), Name: "greet", Input: json.RawMessage(input)})
		if err != nil {
			// Every failure is a *messages.Error the model is shown.
			fmt.Println("failed:", messages.TypeOf(err))
			continue
		}
		fmt.Println("output:", res.Output)
	}
	// Output:
	// asked: greet [alice]
	// output: hello alice
	// failed: permission.rejected
	// failed: tool.execution
}
