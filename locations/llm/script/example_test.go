package script_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// Example_demo plays the offline demo script the way the runner does: each
// step's tool calls are answered with tool results and the conversation is
// sent again, until the model stops.
func Example_demo() {
	p, err := script.Load(filepath.Join("testdata", "demo.json"))
	if err != nil {
		fmt.Println(err)
		return
	}
	history := []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "Show me around."}}}}
	for step := 0; ; step++ {
		req := llm.Request{Model: messages.ModelRef{ProviderID: "demo", ID: "scripted"}, Messages: history, CacheKey: "ses_demo"}
		var text strings.Builder
		assistant := llm.Message{Role: llm.RoleAssistant}
		results := llm.Message{Role: llm.RoleTool}
		var finish string
		for ev, err := range p.Stream(context.Background(), req) {
			if err != nil {
				fmt.Println("error:", err)
				return
			}
			switch ev.Kind {
			case llm.TextDelta:
				text.WriteString(ev.Text)
			case llm.ToolCall:
				assistant.Parts = append(assistant.Parts, llm.Part{Kind: llm.PartToolCall, CallID: ev.CallID, Name: ev.Name, Input: ev.Input})
				results.Parts = append(results.Parts, llm.Part{Kind: llm.PartToolResult, CallID: ev.CallID, Name: ev.Name, Output: "ok"})
				fmt.Printf("step %d: call %s %s\n", step, ev.Name, ev.Input)
			case llm.StepFinish:
				finish = ev.Finish
			}
		}
		fmt.Printf("step %d: say %q, finish %s\n", step, text.String(), finish)
		if finish != llm.FinishToolCalls {
			return
		}
		assistant.Parts = append([]llm.Part{{Kind: llm.PartText, Text: text.String()}}, assistant.Parts...)
		history = append(history, assistant, results)
	}
	// Output:
	// step 0: call read {"path":"notes.txt"}
	// step 0: say "Let me start by reading notes.txt.", finish tool-calls
	// step 1: call bash {"command":"ls -la"}
	// step 1: say "Now let me see what else is in the directory.", finish tool-calls
	// step 2: call apply_patch {"patchText":"*** Begin Patch\n*** Add File: hello.txt\n+Hello from sessiond!\n*** End Patch"}
	// step 2: say "I'll add a small hello.txt file.", finish tool-calls
	// step 3: say "Done. I read notes.txt, listed the directory with `ls -la`, and added hello.txt containing \"Hello from sessiond!\".", finish stop
}

// ExampleProvider scripts a two-step exchange from Go and inspects the
// requests the model received.
func ExampleProvider() {
	p := script.New().
		Reply(script.ToolCall("call_1", "read", `{"path":"a.txt"}`)).
		Reply(script.Text("a.txt says hi"), script.Finish(llm.FinishStop, messages.Tokens{Input: 30, Output: 4}))

	ctx := context.Background()
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "What is in a.txt?"}}}}}
	for ev := range p.Stream(ctx, req) {
		switch ev.Kind {
		case llm.ToolCall:
			fmt.Println("call", ev.Name, string(ev.Input))
		case llm.StepFinish:
			fmt.Println("finish", ev.Finish)
		}
	}
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: "call_1", Name: "read", Input: []byte(`{"path":"a.txt"}`)}}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "call_1", Name: "read", Output: "hi"}}})
	for ev := range p.Stream(ctx, req) {
		if ev.Kind == llm.TextDelta {
			fmt.Println("delta", ev.Text)
		}
	}
	second, _ := p.WaitRequest(ctx, 2)
	fmt.Println("requests:", p.Count(), "round of the second:", script.Round(second), "left:", p.Remaining())
	// Output:
	// call read {"path":"a.txt"}
	// finish tool-calls
	// delta a.txt sa
	// delta ys hi
	// requests: 2 round of the second: 1 left: 0
}

// ExampleGate holds a stream open until the test has looked at the state it
// wanted to observe mid-stream.
func ExampleGate() {
	g := script.NewGate()
	p := script.New().Reply(script.Text("working"), script.Hold(g), script.Text("done"))
	ctx := context.Background()

	done := make(chan int)
	go func() {
		n := 0
		for range p.Stream(ctx, llm.Request{}) {
			n++
		}
		done <- n
	}()
	if err := g.Reached(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stream is held; releasing")
	g.Release()
	fmt.Println("events:", <-done)
	// Output:
	// stream is held; releasing
	// events: 7
}
