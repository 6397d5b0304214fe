package script_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// Tests in this file pin behaviour that mutation testing found unchecked.

// TestParseBounds: limits are inclusive, and values just outside them or
// of the wrong type are rejected at their path.
func TestParseBounds(t *testing.T) {
	accepted := []string{
		`{"loop": false, "default": {"steps": [{"error": {"type": "provider.rate-limit", "retryAfterMs": 86400000, "statusCode": 599}}]}}`,
		`{"default": {"steps": [{"error": {"type": "provider.internal", "statusCode": 100}}]}}`,
	}
	for _, doc := range accepted {
		if _, err := script.Parse([]byte(doc)); err != nil {
			t.Errorf("Parse(%s): %v", doc, err)
		}
	}
	rejected := []struct{ doc, path string }{
		{`{"description": 5, "default": {"steps": []}}`, "/description"},
		{`{"responses": [{"match": {"round": -1}, "steps": []}]}`, "/responses/0/match/round"},
		{`{"default": {"steps": [{"error": {"type": "provider.rate-limit", "retryAfterMs": 86400001}}]}}`, "/default/steps/0/error/retryAfterMs"},
		{`{"default": {"steps": [{"error": {"type": "provider.internal", "statusCode": 600}}]}}`, "/default/steps/0/error/statusCode"},
		{`{"loop": true}`, ""},
		{`{"default": {"steps": [{"toolCall": {"name": "read"}}]}}`, "/default/steps/0/toolCall"},
		{`{"default": {"steps": [{"toolResult": {"id": "c1"}}]}}`, "/default/steps/0/toolResult"},
	}
	for _, tt := range rejected {
		_, err := script.Parse([]byte(tt.doc))
		var pe *script.ParseError
		if !errors.As(err, &pe) || pe.Path != tt.path {
			t.Errorf("Parse(%s) = %v, want a parse error at %q", tt.doc, err, tt.path)
		}
	}
}

// TestLoopedScriptStartsOverBeforeTheDefault: with loop on, the default
// answers only what no response fits even after the script started over.
func TestLoopedScriptStartsOverBeforeTheDefault(t *testing.T) {
	p, err := script.Parse([]byte(`{"loop": true,
	  "responses": [{"match": {"lastUserContains": "hi"}, "times": 1, "steps": [{"text": "a"}]}],
	  "default": {"steps": [{"text": "d"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, prompt := range []string{"hi", "hi", "bye"} {
		evs, err := collect(p.Stream(ctxT(t), userRequest(prompt)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, evs[1].Text)
	}
	if want := []string{"a", "a", "d"}; !slices.Equal(got, want) {
		t.Fatalf("answers %q, want %q", got, want)
	}
}

func TestAbortedMessages(t *testing.T) {
	p := script.New().Default(script.Text("x"))
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	_, err := collect(p.Stream(ctx, userRequest("hi")))
	if e := asLLMError(t, err); e.Type != messages.ErrAborted || !strings.Contains(e.Message, "request not sent") {
		t.Fatalf("cancelled before start: %v", e)
	}
}

// TestToolCallEventOwnsItsInput: a consumer that changes a streamed tool
// call's input changes neither the script nor the next stream.
func TestToolCallEventOwnsItsInput(t *testing.T) {
	p := script.New().Default(script.ToolCall("c1", "read", `{"path":"a"}`))
	for range 2 {
		evs, err := collect(p.Stream(ctxT(t), userRequest("hi")))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(evs, func(ev llm.Event) bool { return ev.Kind == llm.ToolCall })
		if string(evs[i].Input) != `{"path":"a"}` {
			t.Fatalf("tool call input %s", evs[i].Input)
		}
		evs[i].Input[0] = 'X'
	}
}

// TestHostedCallEventDoesNotFinishWithToolCalls: a raw hosted tool call
// event is not a call the consumer must run.
func TestHostedCallEventDoesNotFinishWithToolCalls(t *testing.T) {
	for _, tt := range []struct {
		executed bool
		want     string
	}{{true, llm.FinishStop}, {false, llm.FinishToolCalls}} {
		p := script.New().Default(script.Event(llm.Event{Kind: llm.ToolCall, CallID: "c1", Name: "web_search", Input: []byte(`{}`), Executed: tt.executed}))
		evs, err := collect(p.Stream(ctxT(t), userRequest("hi")))
		if err != nil {
			t.Fatal(err)
		}
		if got := evs[len(evs)-1]; got.Kind != llm.StepFinish || got.Finish != tt.want {
			t.Fatalf("executed=%v: last event %v %q, want finish %q", tt.executed, got.Kind, got.Finish, tt.want)
		}
	}
}

// TestFailKeepsACopy: changing the error after Fail does not change the
// scripted one.
func TestFailKeepsACopy(t *testing.T) {
	e := &llm.Error{Type: messages.ErrProviderInternal, Message: "boom"}
	p := script.New().Default(script.Fail(e))
	e.Message = "changed"
	_, err := collect(p.Stream(ctxT(t), userRequest("hi")))
	if got := asLLMError(t, err); got.Message != "boom" {
		t.Fatalf("error %v, want the scripted message", got)
	}
}

func TestHostedErrorIsAnError(t *testing.T) {
	p := script.New().Default(script.HostedError("c1", "web_search", "denied"))
	evs, err := collect(p.Stream(ctxT(t), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if ev := evs[0]; ev.Kind != llm.ToolResult || !ev.IsError || ev.Output != "denied" {
		t.Fatalf("event %+v, want an error result", ev)
	}
}

// TestGateReachedWithADoneContext: once a stream reached the gate, Reached
// reports it even when its context has ended too.
func TestGateReachedWithADoneContext(t *testing.T) {
	g := script.NewGate()
	p := script.New().Default(script.Hold(g), script.Text("x"))
	done := make(chan error, 1)
	go func() { _, err := collect(p.Stream(ctxT(t), userRequest("hi"))); done <- err }()
	if err := g.Reached(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	for range 64 {
		if err := g.Reached(ctx); err != nil {
			t.Fatalf("Reached after the gate was reached: %v", err)
		}
	}
	g.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAddAndDefaultKeepACopyOfTheSteps: changing the caller's step slice
// after Add or Default does not change the script.
func TestAddAndDefaultKeepACopyOfTheSteps(t *testing.T) {
	for name, set := range map[string]func(*script.Provider, []script.Step) *script.Provider{
		"Add": func(p *script.Provider, steps []script.Step) *script.Provider {
			return p.Add(script.Response{Steps: steps})
		},
		"Default": func(p *script.Provider, steps []script.Step) *script.Provider { return p.Default(steps...) },
	} {
		t.Run(name, func(t *testing.T) {
			steps := []script.Step{script.Text("a")}
			p := set(script.New(), steps)
			steps[0] = script.Text("changed")
			evs, err := collect(p.Stream(ctxT(t), userRequest("hi")))
			if err != nil {
				t.Fatal(err)
			}
			if evs[1].Text != "a" {
				t.Fatalf("answer %q, want the steps as %s gave them", evs[1].Text, name)
			}
		})
	}
}

func TestWaitRequestZero(t *testing.T) {
	p := script.New().Default(script.Text("a"))
	if _, err := collect(p.Stream(ctxT(t), userRequest("hi"))); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitRequest(ctxT(t), 0); err == nil || !strings.Contains(err.Error(), "numbered from 1") {
		t.Fatalf("WaitRequest(0) = %v, want a numbering error", err)
	}
}

// TestWaitRequestReturnsACopy: changing a request WaitRequest returned
// does not change the record.
func TestWaitRequestReturnsACopy(t *testing.T) {
	p := script.New().Default(script.Text("a"))
	req := userRequest("hi")
	req.System = []string{"system"}
	if _, err := collect(p.Stream(ctxT(t), req)); err != nil {
		t.Fatal(err)
	}
	got, err := p.WaitRequest(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	got.System[0] = "changed"
	got.Messages[0].Parts[0].Text = "changed"
	again, err := p.WaitRequest(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if again.System[0] != "system" || again.Messages[0].Parts[0].Text != "hi" {
		t.Fatalf("record changed through a returned request: %q %q", again.System, again.Messages[0].Parts[0].Text)
	}
}
