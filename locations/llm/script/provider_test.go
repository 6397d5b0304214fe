package script_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// firstText returns the concatenated text deltas of a stream, or its error
// rendered as "error: ...".
func firstText(t *testing.T, p *script.Provider, req llm.Request) string {
	t.Helper()
	evs, err := collect(p.Stream(ctxT(t), req))
	if err != nil {
		return "error: " + err.Error()
	}
	var s string
	for _, ev := range evs {
		if ev.Kind == llm.TextDelta {
			s += ev.Text
		}
	}
	return s
}

func TestEmptyScriptFails(t *testing.T) {
	p := script.New().Reply(script.Text("one"))
	if got := firstText(t, p, userRequest("a")); got != "one" {
		t.Fatalf("first = %q", got)
	}
	evs, err := collect(p.Stream(ctxT(t), userRequest("b")))
	if len(evs) != 0 {
		t.Errorf("events = %v, want none", describe(evs))
	}
	e := asLLMError(t, err)
	want := llm.Error{Type: messages.ErrProviderInvalidRequest, Message: "script: no scripted response left for request 2"}
	if *e != want {
		t.Errorf("error = %+v, want %+v", *e, want)
	}
	if e.Retryable() {
		t.Error("a script running dry must not be retried")
	}
	if p.Count() != 2 {
		t.Errorf("count = %d, want 2 (the failed request is recorded too)", p.Count())
	}
}

func TestSelection(t *testing.T) {
	type call struct {
		req  llm.Request
		want string
	}
	withKey := func(key, text string) llm.Request {
		r := userRequest(text)
		r.CacheKey = key
		return r
	}
	tests := []struct {
		name      string
		configure func(p *script.Provider)
		calls     []call
		remaining int
	}{{
		name: "replies form a FIFO",
		configure: func(p *script.Provider) {
			p.Reply(script.Text("1")).Reply(script.Text("2")).Reply(script.Text("3"))
		},
		calls: []call{{userRequest("a"), "1"}, {userRequest("a"), "2"}, {userRequest("a"), "3"},
			{userRequest("a"), "error: provider.invalid-request: script: no scripted response left for request 4"}},
	}, {
		name: "keyed replies serve their Session only",
		configure: func(p *script.Provider) {
			p.ReplyFor(script.SessionKey("ses_a"), script.Text("a1"))
			p.ReplyFor(script.SessionKey("ses_b"), script.Text("b1"))
			p.ReplyFor(script.SessionKey("ses_a"), script.Text("a2"))
		},
		calls: []call{{withKey("ses_b", "x"), "b1"}, {withKey("ses_a", "x"), "a1"}, {withKey("ses_a", "x"), "a2"},
			{withKey("ses_b", "x"), "error: provider.invalid-request: script: no scripted response left for request 4"}},
	}, {
		name: "an earlier fitting response wins",
		configure: func(p *script.Provider) {
			p.Reply(script.Text("any"))
			p.ReplyFor(script.LastUserContains("hello"), script.Text("greeting"))
		},
		calls: []call{{userRequest("hello"), "any"}, {userRequest("hello"), "greeting"}},
	}, {
		name: "unmatched replies wait for their request",
		configure: func(p *script.Provider) {
			p.ReplyFor(script.LastUserContains("second"), script.Text("for second"))
			p.Reply(script.Text("for first"))
		},
		calls:     []call{{userRequest("first"), "for first"}, {userRequest("first"), "error: provider.invalid-request: script: no scripted response left for request 2"}},
		remaining: 1,
	}, {
		name: "default answers whatever is left",
		configure: func(p *script.Provider) {
			p.Reply(script.Text("scripted")).Default(script.Text("fallback"))
		},
		calls: []call{{userRequest("a"), "scripted"}, {userRequest("a"), "fallback"}, {userRequest("a"), "fallback"}},
	}, {
		name: "times limits a response and zero never runs out",
		configure: func(p *script.Provider) {
			p.Add(script.Response{Name: "twice", Times: 2, Steps: []script.Step{script.Text("limited")}})
			p.Add(script.Response{Steps: []script.Step{script.Text("forever")}})
		},
		calls: []call{{userRequest("a"), "limited"}, {userRequest("a"), "limited"}, {userRequest("a"), "forever"}, {userRequest("a"), "forever"}},
	}, {
		name: "loop starts over",
		configure: func(p *script.Provider) {
			p.Reply(script.Text("A")).Reply(script.Text("B")).SetLoop(true)
		},
		calls:     []call{{userRequest("a"), "A"}, {userRequest("a"), "B"}, {userRequest("a"), "A"}, {userRequest("a"), "B"}},
		remaining: 0,
	}, {
		name: "loop falls back to the default when nothing fits after a rewind",
		configure: func(p *script.Provider) {
			p.ReplyFor(script.LastUserContains("x"), script.Text("X")).SetLoop(true).Default(script.Text("D"))
		},
		calls:     []call{{userRequest("x"), "X"}, {userRequest("y"), "D"}, {userRequest("x"), "X"}},
		remaining: 0,
	}, {
		name: "loop without any use fails",
		configure: func(p *script.Provider) {
			p.ReplyFor(script.LastUserContains("x"), script.Text("X")).SetLoop(true)
		},
		calls:     []call{{userRequest("y"), "error: provider.invalid-request: script: no scripted response left for request 1"}},
		remaining: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := script.New()
			tt.configure(p)
			for i, c := range tt.calls {
				if got := firstText(t, p, c.req); got != c.want {
					t.Errorf("call %d = %q, want %q", i+1, got, c.want)
				}
			}
			if got := p.Remaining(); got != tt.remaining {
				t.Errorf("remaining = %d, want %d", got, tt.remaining)
			}
		})
	}
}

func TestRecordsDeepCopies(t *testing.T) {
	p := script.New().Default(script.Text("ok"))
	req := llm.Request{
		Model:  messages.ModelRef{ProviderID: "script", ID: "m"},
		System: []string{"be brief"},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hi"},
				{Kind: llm.PartFile, File: &messages.File{Mime: "text/plain", URL: "file:///a"}}}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: "c", Name: "read",
				Input: json.RawMessage(`{"path":"a"}`), ProviderMetadata: json.RawMessage(`{"sig":"s"}`)}}},
		},
		Tools:      []llm.ToolDefinition{{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice: llm.ToolChoiceAuto,
		CacheKey:   "ses_1",
	}
	want := llm.Request{
		Model:  req.Model,
		System: []string{"be brief"},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hi"},
				{Kind: llm.PartFile, File: &messages.File{Mime: "text/plain", URL: "file:///a"}}}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: "c", Name: "read",
				Input: json.RawMessage(`{"path":"a"}`), ProviderMetadata: json.RawMessage(`{"sig":"s"}`)}}},
		},
		Tools:      []llm.ToolDefinition{{Name: "read", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice: llm.ToolChoiceAuto,
		CacheKey:   "ses_1",
	}
	if _, err := collect(p.Stream(ctxT(t), req)); err != nil {
		t.Fatal(err)
	}
	// The sender reuses its buffers.
	req.System[0] = "changed"
	req.Messages[0].Parts[0].Text = "changed"
	req.Messages[0].Parts[1].File.URL = "changed"
	req.Messages[1].Parts[0].Input[2] = 'X'
	req.Messages[1].Parts[0].ProviderMetadata[2] = 'X'
	req.Tools[0].InputSchema[2] = 'X'

	got := p.Requests()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("recorded %+v\nwant %+v", got, want)
	}
	// Changing what Requests returned does not change the record either.
	got[0].Messages[1].Parts[0].Input[2] = 'Y'
	got[0].System[0] = "Y"
	again, err := p.WaitRequest(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Fatalf("record changed through a returned copy: %+v", again)
	}
}

func TestRequestsInOrder(t *testing.T) {
	p := script.New().Default(script.Text("ok"))
	for i := range 5 {
		if _, err := collect(p.Stream(ctxT(t), userRequest(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range p.Requests() {
		got = append(got, script.LastUserText(r))
	}
	if want := []string{"0", "1", "2", "3", "4"}; !slices.Equal(got, want) {
		t.Errorf("requests = %v, want %v", got, want)
	}
}

func TestWaitRequest(t *testing.T) {
	ctx := ctxT(t)
	g := script.NewGate()
	p := script.New().Default(script.Hold(g))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer g.Release()

	// Waiting starts before any request exists.
	type waited struct {
		req llm.Request
		err error
	}
	second := make(chan waited, 1)
	wg.Go(func() {
		r, err := p.WaitRequest(ctx, 2)
		second <- waited{r, err}
	})
	streamAsync(ctx, &wg, p, userRequest("first"))
	if r, err := p.WaitRequest(ctx, 1); err != nil || script.LastUserText(r) != "first" {
		t.Fatalf("WaitRequest(1) = %q, %v", script.LastUserText(r), err)
	}
	streamAsync(ctx, &wg, p, userRequest("second"))
	w := <-second
	if w.err != nil || script.LastUserText(w.req) != "second" {
		t.Fatalf("WaitRequest(2) = %q, %v", script.LastUserText(w.req), w.err)
	}

	short, cancel := context.WithCancel(ctx)
	cancel()
	_, err := p.WaitRequest(short, 3)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("WaitRequest(3) with a cancelled context = %v, want context.Canceled", err)
	}
	if err.Error() != "script: wait for request 3 (have 2): context canceled" {
		t.Errorf("message = %q", err)
	}
	if _, err := p.WaitRequest(ctx, 0); err == nil {
		t.Error("WaitRequest(0) succeeded; requests are numbered from 1")
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	p := script.New().Reply(script.Text("kept"))
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	_, err := collect(p.Stream(ctx, userRequest("a")))
	if e := asLLMError(t, err); e.Type != messages.ErrAborted {
		t.Errorf("error = %+v, want aborted", *e)
	}
	if p.Count() != 0 || p.Remaining() != 1 {
		t.Errorf("count = %d, remaining = %d: a request that was never sent must not be recorded or answered", p.Count(), p.Remaining())
	}
	if got := firstText(t, p, userRequest("a")); got != "kept" {
		t.Errorf("next stream = %q, want the unused reply", got)
	}
}

func TestCancelledMidStream(t *testing.T) {
	p := script.New().SetChunkSize(1).Reply(script.Text("abcdef"))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var deltas int
	var err error
	for ev, e := range p.Stream(ctx, userRequest("a")) {
		if e != nil {
			err = e
			break
		}
		if ev.Kind == llm.TextDelta {
			deltas++
			if deltas == 2 {
				cancel()
			}
		}
	}
	if deltas != 2 {
		t.Errorf("deltas = %d, want 2", deltas)
	}
	if e := asLLMError(t, err); e.Type != messages.ErrAborted {
		t.Errorf("error = %+v, want aborted", *e)
	}
}

func TestConsumerStopsEarly(t *testing.T) {
	g := script.NewGate()
	p := script.New().Reply(script.Text("one"), script.Hold(g)).Reply(script.Text("two"))
	for range p.Stream(ctxT(t), userRequest("a")) {
		break // must not reach the gate, which is never released
	}
	if g.Arrivals() != 0 {
		t.Error("the stream went on after the consumer stopped")
	}
	if got := firstText(t, p, userRequest("b")); got != "two" {
		t.Errorf("next = %q, want two", got)
	}
}

func TestDeterministic(t *testing.T) {
	build := func() *script.Provider {
		return script.New().SetChunkSize(3).
			Reply(script.Reasoning("plan the work").WithMetadata(`{"signature":"abc"}`),
				script.Text("Reading."), script.ToolCall("call_1", "read", `{"path":"notes.txt"}`),
				script.Finish("", messages.Tokens{Input: 100, Output: 20})).
			Reply(script.PartialText("oops"), script.Fail(&llm.Error{Type: messages.ErrProviderTransport, Message: "reset"})).
			Default(script.Text("The end."), script.Finish(llm.FinishStop, messages.Tokens{Input: 1}))
	}
	run := func() []any {
		p := build()
		var out []any
		for i := range 4 {
			evs, err := collect(p.Stream(ctxT(t), userRequest(fmt.Sprint(i))))
			out = append(out, evs, err)
		}
		return out
	}
	first := run()
	for range 5 {
		if again := run(); !reflect.DeepEqual(first, again) {
			t.Fatalf("runs differ:\n%v\n%v", first, again)
		}
	}
}

func TestConcurrentSessions(t *testing.T) {
	const sessions, rounds = 32, 4
	ctx := ctxT(t)
	p := script.New().SetChunkSize(2)
	for s := range sessions {
		key := fmt.Sprintf("ses_%02d", s)
		for r := range rounds {
			p.ReplyFor(script.SessionKey(key), script.Text(fmt.Sprintf("%s round %d", key, r)),
				script.ToolCall(fmt.Sprintf("call_%d", r), "read", `{}`))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		key := fmt.Sprintf("ses_%02d", s)
		wg.Go(func() {
			for r := range rounds {
				req := userRequest("go")
				req.CacheKey = key
				evs, err := collect(p.Stream(ctx, req))
				if err != nil {
					errs <- err
					return
				}
				var text string
				for _, ev := range evs {
					if ev.Kind == llm.TextDelta {
						text += ev.Text
					}
				}
				if want := fmt.Sprintf("%s round %d", key, r); text != want || evs[len(evs)-1].Finish != llm.FinishToolCalls {
					errs <- fmt.Errorf("%s: got %q finishing %q, want %q", key, text, evs[len(evs)-1].Finish, want)
					return
				}
			}
		})
		// Readers race with the writers.
		wg.Go(func() {
			_ = p.Requests()
			_ = p.Count()
			_ = p.Remaining()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := p.Count(); got != sessions*rounds {
		t.Errorf("count = %d, want %d", got, sessions*rounds)
	}
	if got := p.Remaining(); got != 0 {
		t.Errorf("remaining = %d, want 0", got)
	}
}

// TestRecordingOff: with recording off (as the daemon runs the demo) no
// request is kept, the count still grows, and waiting for a request that
// arrived unrecorded says so instead of blocking.
func TestRecordingOff(t *testing.T) {
	p := script.New().Default(script.Text("ok")).SetRecord(false)
	for range 3 {
		if _, err := collect(p.Stream(ctxT(t), llm.Request{Model: messages.ModelRef{ProviderID: "script", ID: "m"}})); err != nil {
			t.Fatal(err)
		}
	}
	if p.Count() != 3 || len(p.Requests()) != 0 {
		t.Fatalf("count %d, %d recorded", p.Count(), len(p.Requests()))
	}
	if _, err := p.WaitRequest(ctxT(t), 2); err == nil || !strings.Contains(err.Error(), "not recorded") {
		t.Fatalf("WaitRequest of an unrecorded request = %v", err)
	}
	p.SetRecord(true)
	if _, err := collect(p.Stream(ctxT(t), llm.Request{Model: messages.ModelRef{ProviderID: "script", ID: "m"}})); err != nil {
		t.Fatal(err)
	}
	// Numbering counts unrecorded requests: the one recorded is number 4.
	if _, err := p.WaitRequest(ctxT(t), 4); err != nil || len(p.Requests()) != 1 {
		t.Fatalf("request 4: %v; %d recorded", err, len(p.Requests()))
	}
}
