package script_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

func TestSteps(t *testing.T) {
	usage := messages.Tokens{Input: 10, Output: 4, Reasoning: 2, Cache: messages.CacheUsage{Read: 3, Write: 1}}
	tests := []struct {
		name    string
		chunk   int
		steps   []script.Step
		want    []string
		wantErr *llm.Error
	}{{
		name:  "text in chunks",
		chunk: 4,
		steps: []script.Step{script.Text("hello world")},
		want: []string{`text-start text_1`, `text-delta text_1 "hell"`, `text-delta text_1 "o wo"`,
			`text-delta text_1 "rld"`, `text-end text_1`, `step-finish stop`},
	}, {
		name:  "text chunks split by runes",
		chunk: 2,
		steps: []script.Step{script.Text("héllo✓")},
		want: []string{`text-start text_1`, `text-delta text_1 "hé"`, `text-delta text_1 "ll"`,
			`text-delta text_1 "o✓"`, `text-end text_1`, `step-finish stop`},
	}, {
		name:  "empty text",
		steps: []script.Step{script.Text("")},
		want:  []string{`text-start text_1`, `text-end text_1`, `step-finish stop`},
	}, {
		name:  "exact text chunks",
		steps: []script.Step{script.TextChunks("a", "", "bc")},
		want: []string{`text-start text_1`, `text-delta text_1 "a"`, `text-delta text_1 ""`,
			`text-delta text_1 "bc"`, `text-end text_1`, `step-finish stop`},
	}, {
		name:  "text with metadata",
		steps: []script.Step{script.Text("hi").WithMetadata(`{"id":"msg_1"}`)},
		want: []string{`text-start text_1`, `text-delta text_1 "hi"`, `text-end text_1 meta={"id":"msg_1"}`,
			`step-finish stop`},
	}, {
		name:  "reasoning with metadata then text",
		chunk: 5,
		steps: []script.Step{script.Reasoning("think hard").WithMetadata(`{"signature":"sig"}`), script.Text("ok")},
		want: []string{`reasoning-start reasoning_1`, `reasoning-delta reasoning_1 "think"`,
			`reasoning-delta reasoning_1 " hard"`, `reasoning-end reasoning_1 meta={"signature":"sig"}`,
			`text-start text_2`, `text-delta text_2 "ok"`, `text-end text_2`, `step-finish stop`},
	}, {
		name:  "tool call finishes with tool-calls",
		chunk: 8,
		steps: []script.Step{script.ToolCall("call_1", "read", `{"path":"a.txt"}`)},
		want: []string{`tool-input-start tool_1 call_1:read`, `tool-input-delta tool_1 call_1:read "{\"path\":"`,
			`tool-input-delta tool_1 call_1:read "\"a.txt\"}"`, `tool-input-end tool_1 call_1:read`,
			`tool-call call_1:read {"path":"a.txt"}`, `step-finish tool-calls`},
	}, {
		name:  "two tool calls with metadata",
		chunk: 100,
		steps: []script.Step{
			script.ToolCall("c1", "read", `{}`).WithMetadata(`{"item":"fc_1"}`),
			script.ToolCall("c2", "bash", `{"command":"ls"}`),
		},
		want: []string{`tool-input-start tool_1 c1:read`, `tool-input-delta tool_1 c1:read "{}"`,
			`tool-input-end tool_1 c1:read`, `tool-call c1:read {} meta={"item":"fc_1"}`,
			`tool-input-start tool_2 c2:bash`, `tool-input-delta tool_2 c2:bash "{\"command\":\"ls\"}"`,
			`tool-input-end tool_2 c2:bash`, `tool-call c2:bash {"command":"ls"}`, `step-finish tool-calls`},
	}, {
		name:  "provider-executed tool call finishes with stop",
		chunk: 100,
		steps: []script.Step{script.ToolCall("ws_1", "web_search", `{"q":"go"}`).ProviderExecuted()},
		want: []string{`tool-input-start tool_1 ws_1:web_search`, `tool-input-delta tool_1 ws_1:web_search "{\"q\":\"go\"}"`,
			`tool-input-end tool_1 ws_1:web_search`, `tool-call ws_1:web_search {"q":"go"} executed`, `step-finish stop`},
	}, {
		name:  "malformed tool input passes through",
		chunk: 100,
		steps: []script.Step{script.ToolCall("c1", "read", `{"path":`)},
		want: []string{`tool-input-start tool_1 c1:read`, `tool-input-delta tool_1 c1:read "{\"path\":"`,
			`tool-input-end tool_1 c1:read`, `tool-call c1:read {"path":`, `step-finish tool-calls`},
	}, {
		name:  "explicit finish and usage",
		steps: []script.Step{script.Text("cut"), script.Finish(llm.FinishLength, usage)},
		want: []string{`text-start text_1`, `text-delta text_1 "cut"`, `text-end text_1`,
			`step-finish length in=10 out=4 reasoning=2 read=3 write=1`},
	}, {
		name:  "empty finish reason after tool call",
		chunk: 100,
		steps: []script.Step{script.ToolCall("c1", "read", `{}`), script.Finish("", usage)},
		want: []string{`tool-input-start tool_1 c1:read`, `tool-input-delta tool_1 c1:read "{}"`,
			`tool-input-end tool_1 c1:read`, `tool-call c1:read {}`,
			`step-finish tool-calls in=10 out=4 reasoning=2 read=3 write=1`},
	}, {
		name:  "empty finish reason without tool call",
		steps: []script.Step{script.Finish("", messages.Tokens{})},
		want:  []string{`step-finish stop`},
	}, {
		name:  "content-filter finish",
		steps: []script.Step{script.Text("I can"), script.Finish(llm.FinishContentFilter, messages.Tokens{})},
		want:  []string{`text-start text_1`, `text-delta text_1 "I can"`, `text-end text_1`, `step-finish content-filter`},
	}, {
		name:  "steps after finish are not played",
		steps: []script.Step{script.Finish(llm.FinishStop, messages.Tokens{}), script.Text("never")},
		want:  []string{`step-finish stop`},
	}, {
		name:    "rate limit before output",
		steps:   []script.Step{script.Fail(&llm.Error{Type: messages.ErrProviderRateLimit, Message: "slow down", RetryAfter: 3 * time.Second, StatusCode: 429})},
		wantErr: &llm.Error{Type: messages.ErrProviderRateLimit, Message: "slow down", RetryAfter: 3 * time.Second, StatusCode: 429},
	}, {
		name:    "internal error",
		steps:   []script.Step{script.Fail(llm.Errorf(messages.ErrProviderInternal, "overloaded"))},
		wantErr: &llm.Error{Type: messages.ErrProviderInternal, Message: "overloaded"},
	}, {
		name:    "transport failure mid-stream after partial text",
		steps:   []script.Step{script.PartialText("half an ans"), script.Fail(llm.Errorf(messages.ErrProviderTransport, "connection reset"))},
		want:    []string{`text-start text_1`, `text-delta text_1 "half an "`, `text-delta text_1 "ans"`},
		wantErr: &llm.Error{Type: messages.ErrProviderTransport, Message: "connection reset"},
	}, {
		name:    "context overflow",
		steps:   []script.Step{script.Fail(llm.Errorf(messages.ErrProviderContextOverflow, "prompt is too long"))},
		wantErr: &llm.Error{Type: messages.ErrProviderContextOverflow, Message: "prompt is too long"},
	}, {
		name:    "content-filter error",
		steps:   []script.Step{script.Fail(llm.Errorf(messages.ErrProviderContentFilter, "blocked"))},
		wantErr: &llm.Error{Type: messages.ErrProviderContentFilter, Message: "blocked"},
	}, {
		name:    "nil error",
		steps:   []script.Step{script.Fail(nil)},
		wantErr: &llm.Error{Type: messages.ErrProviderUnknown, Message: "script: Fail(nil)"},
	}, {
		name:    "steps after fail are not played",
		steps:   []script.Step{script.Fail(llm.Errorf(messages.ErrProviderAuth, "bad key")), script.Text("never")},
		wantErr: &llm.Error{Type: messages.ErrProviderAuth, Message: "bad key"},
	}, {
		name: "raw events",
		steps: []script.Step{
			script.Event(llm.Event{Kind: llm.TextStart, ID: "a"}),
			script.Event(llm.Event{Kind: llm.TextStart, ID: "b"}),
		},
		want: []string{`text-start a`, `text-start b`, `step-finish stop`},
	}, {
		name:  "raw tool call counts for the default finish",
		steps: []script.Step{script.Event(llm.Event{Kind: llm.ToolCall, CallID: "c", Name: "read", Input: []byte(`{}`)})},
		want:  []string{`tool-call c:read {}`, `step-finish tool-calls`},
	}, {
		name:  "delay",
		steps: []script.Step{script.Delay(time.Millisecond), script.Text("late"), script.Delay(0)},
		want:  []string{`text-start text_1`, `text-delta text_1 "late"`, `text-end text_1`, `step-finish stop`},
	}, {
		name:  "empty response",
		steps: nil,
		want:  []string{`step-finish stop`},
	}, {
		name:    "zero step",
		steps:   []script.Step{{}},
		wantErr: &llm.Error{Type: messages.ErrProviderInvalidRequest, Message: "script: request 1: step 0 has no kind (build steps with the script package's functions)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := script.New().SetChunkSize(tt.chunk).Reply(tt.steps...)
			evs, err := collect(p.Stream(ctxT(t), userRequest("hi")))
			if got := describe(evs); !slices.Equal(got, tt.want) {
				t.Errorf("events:\n got %q\nwant %q", got, tt.want)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("error = %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("error = nil, want %v", tt.wantErr)
			}
			if e := asLLMError(t, err); *e != *tt.wantErr {
				t.Errorf("error = %+v, want %+v", *e, *tt.wantErr)
			}
		})
	}
}

func TestFailYieldsACopyPerStream(t *testing.T) {
	injected := llm.Errorf(messages.ErrProviderInternal, "boom")
	p := script.New().Default(script.Fail(injected))
	_, err1 := collect(p.Stream(ctxT(t), userRequest("a")))
	_, err2 := collect(p.Stream(ctxT(t), userRequest("b")))
	e1, e2 := asLLMError(t, err1), asLLMError(t, err2)
	if e1 == injected || e1 == e2 {
		t.Fatal("streams share the injected *llm.Error; each should get its own copy")
	}
	e1.Message = "changed"
	if injected.Message != "boom" || e2.Message != "boom" {
		t.Fatal("changing one stream's error changed another")
	}
}

func TestStepsDoNotAliasCallerMemory(t *testing.T) {
	ev := llm.Event{Kind: llm.ToolCall, CallID: "c", Name: "read", Input: []byte(`{"a":1}`)}
	chunks := []string{"x", "y"}
	p := script.New().Default(script.Event(ev), script.TextChunks(chunks...))
	ev.Input[2] = 'b'
	chunks[0] = "z"
	evs, err := collect(p.Stream(ctxT(t), userRequest("a")))
	if err != nil {
		t.Fatal(err)
	}
	evs[0].Input[2] = 'c' // must not change what the next stream sees
	evs, err = collect(p.Stream(ctxT(t), userRequest("b")))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(evs[0].Input); got != `{"a":1}` {
		t.Errorf("tool input = %s, want {\"a\":1}", got)
	}
	if evs[2].Text != "x" {
		t.Errorf("first chunk = %q, want x", evs[2].Text)
	}
}

func TestDelayHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	p := script.New().Reply(script.Text("before"), script.Delay(time.Hour), script.Text("after"))
	var got []llm.Event
	var err error
	for ev, e := range p.Stream(ctx, userRequest("hi")) {
		if e != nil {
			err = e
			break
		}
		got = append(got, ev)
		if ev.Kind == llm.TextEnd {
			cancel() // the stream is about to enter the hour-long delay
		}
	}
	if len(got) != 3 {
		t.Errorf("got %d events before the delay, want 3", len(got))
	}
	if e := asLLMError(t, err); e.Type != messages.ErrAborted {
		t.Errorf("error type = %s, want aborted", e.Type)
	}
}
