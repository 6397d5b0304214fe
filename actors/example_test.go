package actors_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// shout is a model of its own: an llm.Provider is one method, Stream.
// It asks for the tool "upper" with the user's text, then repeats what the
// tool returned. Providers must be safe for concurrent use; this one has
// no state.
type shout struct{}

func (shout) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		var p llm.Part
		if len(last.Parts) > 0 {
			p = last.Parts[0]
		}
		if p.Kind == llm.PartToolResult {
			// Every stream ends with exactly one StepFinish (or an error).
			_ = yield(llm.Event{Kind: llm.TextDelta, Text: p.Output}, nil) &&
				yield(llm.Event{Kind: llm.TextEnd}, nil) &&
				yield(llm.Event{Kind: llm.StepFinish, Finish: llm.FinishStop}, nil)
			return
		}
		input, _ := json.Marshal(map[string]string{"text": p.Text})
		_ = yield(llm.Event{Kind: llm.ToolCall, CallID: "call_1", Name: "upper", Input: input}, nil) &&
			yield(llm.Event{Kind: llm.StepFinish, Finish: llm.FinishToolCalls}, nil)
	}
}

// upperInput is the tool's input, decoded from JSON its schema validated.
type upperInput struct {
	Text string `json:"text"`
}

// Example runs a Session on a model and a tool of its own: a custom
// llm.Provider, and a custom tool in a tools.Registry with permission rules.
func Example() {
	dir, err := os.MkdirTemp("", "sessiond-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	st, err := persistence.Open(filepath.Join(dir, "sessiond.db"), persistence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	// The catalog knows the model's limits. A provider of one's own is of
	// type custom: the catalog asks it for no credentials.
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "mine", Type: llm.ProviderCustom,
		Models: map[string]llm.ModelSpec{"shout": {Context: 8000, Output: 1000}}}})
	if err != nil {
		fmt.Println(err)
		return
	}

	upper := tools.NewTool(tools.Definition{
		Name:        "upper",
		Description: "Returns the text in upper case.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		// The tool asks for what it is about to do itself (without
		// AsksItself the registry would ask before every call, for the
		// pattern "*"); the agent's rules, saved approvals or the user
		// (through an Asker) answer.
		AsksItself: true,
	}, func(ctx context.Context, call *tools.CallContext, in upperInput) (tools.Result, error) {
		if err := call.Ask(ctx, tools.Request{Permission: "upper", Patterns: []string{in.Text}}); err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Output: strings.ToUpper(in.Text)}, nil
	})

	build := func(loc messages.Location) (*locations.Services, error) {
		// The default agent, build, may call upper on any text; without
		// the rule it would ask, and with no Asker to put the question to
		// the call would be rejected.
		perms, err := tools.NewPermissions(tools.PermissionsConfig{Project: loc.Directory,
			Agents: map[string]tools.Ruleset{"build": {{Permission: "upper", Pattern: "*", Action: tools.Allow}}}})
		if err != nil {
			return nil, err
		}
		reg, err := tools.NewRegistry(tools.Config{Root: loc.Directory, Permissions: perms})
		if err != nil {
			return nil, err
		}
		if err := reg.Register(reg.NewScope("example"), upper); err != nil {
			return nil, err
		}
		return &locations.Services{
			Location:     loc,
			Catalog:      catalog,
			Provider:     func(string) (llm.Provider, error) { return shout{}, nil },
			DefaultModel: messages.ModelRef{ProviderID: "mine", ID: "shout"},
			Tools:        locations.NewTools(reg),
		}, nil
	}

	rt, err := actors.New(actors.Config{Store: st, Locations: locations.NewManager(build)})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Shut the runtime down before the store closes.
	defer rt.Shutdown(ctx)

	s, _, err := rt.Create(ctx, persistence.CreateSession{Location: messages.Location{Directory: dir}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := rt.Prompt(ctx, persistence.PromptRequest{SessionID: s.ID, Prompt: messages.Prompt{Text: "hello"}}); err != nil {
		fmt.Println(err)
		return
	}
	if err := rt.Wait(ctx, s.ID); err != nil {
		fmt.Println(err)
		return
	}

	page, err := st.History(ctx, s.ID, persistence.Query{After: -1, Limit: 100})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ev := range page.Data {
		switch d := ev.Data.(type) {
		case *messages.ToolCalled:
			fmt.Println(ev.Type, d.Name, string(d.Input))
		case *messages.ToolSucceeded:
			fmt.Println(ev.Type, d.Output)
		case *messages.TextEnded:
			fmt.Println(ev.Type, d.Text)
		default:
			fmt.Println(ev.Type)
		}
	}
	// Output:
	// session.created.1
	// session.prompt.admitted.1
	// session.execution.started.1
	// session.prompt.promoted.1
	// session.step.started.1
	// session.tool.called.1 upper {"text":"hello"}
	// session.tool.success.1 HELLO
	// session.step.ended.1
	// session.step.started.1
	// session.text.started.1
	// session.text.ended.1 HELLO
	// session.step.ended.1
	// session.execution.succeeded.1
}
