package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

func TestText(t *testing.T) {
	body := sse(
		chunk(`{"role":"assistant","content":"","refusal":null}`, ""),
		chunk(`{"content":"Hel"}`, ""),
		chunk(`{"content":"lo, \"wor\u006cd\"\n"}`, ""),
		chunk(`{}`, "stop"),
		usageChunk(`{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,`+
			`"prompt_tokens_details":{"cached_tokens":600,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`),
		done,
	)
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "\n\n")})
	if err != nil {
		t.Fatal(err)
	}
	// Input 400 at $2, output 50 at $8, cache read 600 at $0.5 per million.
	wantLines(t, events,
		"text-start text-0",
		`text-delta text-0 "Hel"`,
		`text-delta text-0 "lo, \"world\"\n"`,
		"text-end text-0",
		"step-finish stop in=400 out=50 reasoning=0 cache.read=600 cache.write=0 cost=0.001500",
	)
}

func TestReasoning(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			body := sse(
				chunk(`{"role":"assistant","content":null,"`+field+`":""}`, ""),
				chunk(`{"content":null,"`+field+`":"Let me "}`, ""),
				chunk(`{"content":null,"`+field+`":"think."}`, ""),
				chunk(`{"content":"Answer","`+field+`":null}`, ""),
				chunk(`{"content":"."}`, "stop"),
				usageChunk(`{"prompt_tokens":10,"completion_tokens":30,"total_tokens":40,"completion_tokens_details":{"reasoning_tokens":20}}`),
				done,
			)
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "\n")})
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, events,
				"reasoning-start reasoning-0",
				`reasoning-delta reasoning-0 "Let me "`,
				`reasoning-delta reasoning-0 "think."`,
				`reasoning-end reasoning-0 {"native":true,"field":"`+field+`"}`,
				"text-start text-1",
				`text-delta text-1 "Answer"`,
				`text-delta text-1 "."`,
				"text-end text-1",
				"step-finish stop in=10 out=10 reasoning=20 cache.read=0 cache.write=0 cost=0.000260",
			)
		})
	}
}

func TestToolCall(t *testing.T) {
	body := sse(
		chunk(`{"role":"assistant","content":"Checking."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Par"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"is\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk(`{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}`),
		done,
	)
	// Cut inside the JSON arguments: between the bytes of an escaped quote,
	// inside a string, and right before the closing brace.
	i := strings.Index(body, `{\"ci`) + 2
	j := strings.Index(body, `\"Par`) + 4
	k := strings.Index(body, `is\"}`) + 4
	if i < 2 || j < 4 || k < 4 {
		t.Fatal("split points not found")
	}
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.Split(body, i, i+1, j, k)})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, events,
		"text-start text-0",
		`text-delta text-0 "Checking."`,
		"text-end text-0",
		"tool-input-start call_abc call_abc get_weather",
		`tool-input-delta call_abc "{\"ci"`,
		`tool-input-delta call_abc "ty\": \"Par"`,
		`tool-input-delta call_abc "is\"}"`,
		"tool-input-end call_abc call_abc get_weather",
		`tool-call call_abc get_weather {"city": "Paris"}`,
		"step-finish tool-calls in=100 out=20 reasoning=0 cache.read=0 cache.write=0 cost=0.000360",
	)
}

func TestParallelToolCalls(t *testing.T) {
	body := sse(
		chunk(`{"role":"assistant","content":null}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"bash","arguments":"{\"command\""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":":\"ls\"}"}},{"index":0,"function":{"arguments":"\"a.go\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":2,"id":"call_3","type":"function","function":{"name":"noargs","arguments":""}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk(`{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}`),
		done,
	)
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "arguments")})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, events,
		"tool-input-start call_1 call_1 read",
		"tool-input-start call_2 call_2 bash",
		`tool-input-delta call_2 "{\"command\""`,
		`tool-input-delta call_1 "{\"path\":"`,
		`tool-input-delta call_2 ":\"ls\"}"`,
		`tool-input-delta call_1 "\"a.go\"}"`,
		"tool-input-start call_3 call_3 noargs",
		"tool-input-end call_1 call_1 read",
		`tool-call call_1 read {"path":"a.go"}`,
		"tool-input-end call_2 call_2 bash",
		`tool-call call_2 bash {"command":"ls"}`,
		"tool-input-end call_3 call_3 noargs",
		`tool-call call_3 noargs {}`,
		"step-finish tool-calls in=5 out=5 reasoning=0 cache.read=0 cache.write=0 cost=0.000050",
	)
}

// TestToolCallQuirks covers servers that send no call IDs, the name after
// the first fragment, a new call at a reused index, malformed arguments, and
// a call whose name never comes (dropped).
func TestToolCallQuirks(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"name":"first","arguments":"1}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"x2","function":{"name":"second","arguments":"{oops"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"x3","function":{"arguments":"{}"}}]}`, ""),
		chunk(`{}`, "stop"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_0 call_0 first",
		`tool-input-delta call_0 "{\"a\":1}"`,
		"tool-input-start x2 x2 second",
		`tool-input-delta x2 "{oops"`,
		"tool-input-end call_0 call_0 first",
		`tool-call call_0 first {"a":1}`,
		"tool-input-end x2 x2 second",
		`tool-call x2 second "{oops"`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

func TestFinishReasons(t *testing.T) {
	for _, tc := range []struct {
		name, delta, reason, want string
	}{
		{"length", `{"content":"trunc"}`, "length", llm.FinishLength},
		{"content_filter", `{"content":"par"}`, "content_filter", llm.FinishContentFilter},
		{"refusal", `{"refusal":"I can't help with that."}`, "stop", llm.FinishContentFilter},
		{"unknown", `{"content":"x"}`, "eos_token", llm.FinishOther},
		{"function_call", `{"content":"x"}`, "function_call", llm.FinishToolCalls},
		{"refusal cut short", `{"refusal":"I can't"}`, "length", llm.FinishLength},
		{"tool call cut short", `{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\""}}]}`, "length", llm.FinishLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := sse(chunk(tc.delta, ""), chunk(`{}`, tc.reason), usageChunk(`{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`), done)
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
			if err != nil {
				t.Fatal(err)
			}
			last := events[len(events)-1]
			if last.Kind != llm.StepFinish || last.Finish != tc.want {
				t.Fatalf("last event %s, want step-finish %s", ssetest.Line(last), tc.want)
			}
			if k := events[0].Kind; k != llm.TextStart && k != llm.ToolInputStart {
				t.Fatalf("first event %s, want a start", ssetest.Line(events[0]))
			}
		})
	}
}

// TestServerResourcesFinishFails: DeepSeek's finish reason
// insufficient_system_resource (its servers cut the answer short) fails the
// step as a server failure, keeping what was streamed, instead of finishing
// it as if the answer were whole.
func TestServerResourcesFinishFails(t *testing.T) {
	body := sse(chunk(`{"content":"half an ans"}`, ""), chunk(`{}`, "insufficient_system_resource"), done)
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
	wantError(t, err, messages.ErrProviderInternal, 0, 0)
	if len(events) == 0 || events[0].Kind != llm.TextStart {
		t.Fatalf("events %v: the partial text is lost", events)
	}
}

// TestFinishWithoutUsage covers servers that send no usage chunk, and a
// stream cut after the finish reason: the step is complete, only usage is
// missing.
func TestFinishWithoutUsage(t *testing.T) {
	for name, rep := range map[string]ssetest.Reply{
		"clean": {Chunks: []string{sse(chunk(`{"content":"ok"}`, "stop"), done)}},
		"cut":   {Chunks: []string{sse(chunk(`{"content":"ok"}`, "stop"))}, Abort: true},
	} {
		t.Run(name, func(t *testing.T) {
			events, _, err := run(t, simpleRequest(), rep)
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, events,
				"text-start text-0", `text-delta text-0 "ok"`, "text-end text-0",
				"step-finish stop in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000")
		})
	}
}

// TestStopEarly stops iterating after the first event; the response must be
// closed (goleak checks the connection's goroutines) and nothing yielded
// after the stop.
func TestStopEarly(t *testing.T) {
	body := sse(chunk(`{"content":"a"}`, ""), chunk(`{"content":"b"}`, "stop"), done)
	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: []string{body}, Hang: true})
	n := 0
	for _, err := range newTestProvider(t, srv).Stream(context.Background(), simpleRequest()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d events", n)
	}
}

// TestToolCallIDCollision covers made-up and duplicated call IDs: IDs stay
// unique within the response, and fragments that repeat a call's original
// ID stay with that call.
func TestToolCallIDCollision(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"a","arguments":"{}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"name":"b","arguments":"{"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":2,"id":"call_1","function":{"name":"c","arguments":"{\"x\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":2,"id":"call_1","function":{"arguments":"2}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_1 call_1 a",
		`tool-input-delta call_1 "{}"`,
		"tool-input-start call_2 call_2 b",
		`tool-input-delta call_2 "{"`,
		`tool-input-delta call_2 "}"`,
		"tool-input-start call_3 call_3 c",
		`tool-input-delta call_3 "{\"x\":"`,
		`tool-input-delta call_3 "2}"`,
		"tool-input-end call_1 call_1 a",
		`tool-call call_1 a {}`,
		"tool-input-end call_2 call_2 b",
		`tool-call call_2 b {}`,
		"tool-input-end call_3 call_3 c",
		`tool-call call_3 c {"x":2}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestToolCallsAtOneIndexWithoutIDs covers servers that send every call at
// index 0 (or no index) and no IDs: a name that arrives once the call's
// arguments are complete JSON, or a new name at a call without arguments,
// starts another call instead of being merged into the first.
func TestToolCallsAtOneIndexWithoutIDs(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"type":"function","function":{"name":"bash","arguments":"{\"command\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"noargs","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"read","arguments":"{\"path\":\"b\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_0 call_0 read",
		`tool-input-delta call_0 "{\"path\":\"a\"}"`,
		"tool-input-start call_1 call_1 bash",
		`tool-input-delta call_1 "{\"command\":"`,
		`tool-input-delta call_1 "\"ls\"}"`,
		"tool-input-start call_2 call_2 noargs",
		"tool-input-start call_3 call_3 read",
		`tool-input-delta call_3 "{\"path\":\"b\"}"`,
		"tool-input-end call_0 call_0 read",
		`tool-call call_0 read {"path":"a"}`,
		"tool-input-end call_1 call_1 bash",
		`tool-call call_1 bash {"command":"ls"}`,
		"tool-input-end call_2 call_2 noargs",
		`tool-call call_2 noargs {}`,
		"tool-input-end call_3 call_3 read",
		`tool-call call_3 read {"path":"b"}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestToolCallRepeatedName covers servers that repeat the call's name in
// every fragment: while the arguments are partial, even a partial argument
// ending in a brace, the fragments stay one call, which keeps its first
// name whatever name they bring; the same name after complete arguments,
// whitespace after them included, is another call.
func TestToolCallRepeatedName(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"write","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"write","arguments":"{\"text\":\"{}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"rewrite","arguments":"\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"write","arguments":"{\"text\":\"b\"} \n"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"write","arguments":"{}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_0 call_0 write",
		`tool-input-delta call_0 "{\"text\":\"{}"`,
		`tool-input-delta call_0 "\"}"`,
		"tool-input-start call_1 call_1 write",
		`tool-input-delta call_1 "{\"text\":\"b\"} \n"`,
		"tool-input-start call_2 call_2 write",
		`tool-input-delta call_2 "{}"`,
		"tool-input-end call_0 call_0 write",
		`tool-call call_0 write {"text":"{}"}`,
		"tool-input-end call_1 call_1 write",
		"tool-call call_1 write {\"text\":\"b\"} \n",
		"tool-input-end call_2 call_2 write",
		`tool-call call_2 write {}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestToolCallLateIDAfterName covers a server whose first fragment has the
// name but no ID: the ID that comes with the arguments belongs to the same
// call, which keeps the made-up ID its tool-input-start went out with, and
// later fragments repeating the server's ID stay with it.
func TestToolCallLateIDAfterName(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"read","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_abc","function":{"arguments":"{\"path\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_abc","function":{"arguments":"\"a\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_def","function":{"name":"bash","arguments":"{}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_0 call_0 read",
		`tool-input-delta call_0 "{\"path\":"`,
		`tool-input-delta call_0 "\"a\"}"`,
		"tool-input-start call_def call_def bash",
		`tool-input-delta call_def "{}"`,
		"tool-input-end call_0 call_0 read",
		`tool-call call_0 read {"path":"a"}`,
		"tool-input-end call_def call_def bash",
		`tool-call call_def bash {}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestToolCallLateIDBeforeName covers calls whose arguments come before
// their ID and name: the server's ID, arriving before tool-input-start went
// out, is the call's ID unless another call has it, fragments repeating it
// stay with the call, and the arguments so far, complete as they are,
// belong to it. A call whose name never comes is dropped, and the calls
// after it still end.
func TestToolCallLateIDBeforeName(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"id":"call_lost","function":{"arguments":"{}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"a\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_abc","function":{"arguments":"1}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_abc","type":"function","function":{"name":"f","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":2,"function":{"arguments":"{}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":2,"id":"call_abc","type":"function","function":{"name":"g"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_abc call_abc f",
		`tool-input-delta call_abc "{\"a\":1}"`,
		"tool-input-start call_3 call_3 g",
		`tool-input-delta call_3 "{}"`,
		"tool-input-end call_abc call_abc f",
		`tool-call call_abc f {"a":1}`,
		"tool-input-end call_3 call_3 g",
		`tool-call call_3 g {}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestReasoningThenToolCall: reasoning that a tool call follows is closed
// before the call's input starts, and an empty reasoning_content beside
// a reasoning field does not hide it.
func TestReasoningThenToolCall(t *testing.T) {
	body := sse(
		chunk(`{"role":"assistant","content":null,"reasoning_content":"","reasoning":"Plan."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"reasoning-start reasoning-0",
		`reasoning-delta reasoning-0 "Plan."`,
		`reasoning-end reasoning-0 {"native":true,"field":"reasoning"}`,
		"tool-input-start call_1 call_1 read",
		`tool-input-delta call_1 "{}"`,
		"tool-input-end call_1 call_1 read",
		`tool-call call_1 read {}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestOnlyTheFirstChoice: choices other than the first (n is never set, so
// none should come) are ignored; deltas after a finish reason go on (see
// TestFinishReasonBeforeTheEnd), the last finish reason counts, the usage
// chunk counts wherever it comes, and a chunk after it without usage does
// not undo it.
func TestOnlyTheFirstChoice(t *testing.T) {
	choices := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-test","choices":[` +
		`{"index":1,"delta":{"content":"other"},"finish_reason":"length"},` +
		`{"index":0,"delta":{"content":"b"},"finish_reason":null}],"usage":null}`
	body := sse(
		chunk(`{"content":"a"}`, ""),
		choices,
		chunk(`{}`, "stop"),
		chunk(`{"content":"late"}`, "length"),
		usageChunk(`{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`),
		chunk(`{"content":"later"}`, ""),
		done,
	)
	wantLines(t, streamed(t, body),
		"text-start text-0",
		`text-delta text-0 "a"`,
		`text-delta text-0 "b"`,
		`text-delta text-0 "late"`,
		`text-delta text-0 "later"`,
		"text-end text-0",
		"step-finish length in=3 out=2 reasoning=0 cache.read=0 cache.write=0 cost=0.000022",
	)
}

// TestReasoningCutShort: a response of reasoning only, cut by the output
// limit, closes its reasoning block before the StepFinish.
func TestReasoningCutShort(t *testing.T) {
	body := sse(chunk(`{"role":"assistant","content":null,"reasoning_content":"Let me"}`, ""), chunk(`{}`, "length"), done)
	wantLines(t, streamed(t, body),
		"reasoning-start reasoning-0",
		`reasoning-delta reasoning-0 "Let me"`,
		`reasoning-end reasoning-0 {"native":true,"field":"reasoning_content"}`,
		"step-finish length in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestStopAtEveryEvent stops iterating after each event in turn of a
// stream with every kind of block: nothing is yielded after the stop (the
// range-over-func runtime panics if it is).
func TestStopAtEveryEvent(t *testing.T) {
	body := sse(
		chunk(`{"reasoning_content":"Hmm."}`, ""),
		chunk(`{"content":"Reading."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"bash","arguments":"{}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk(`{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`),
		done,
	)
	p, err := New(Config{BaseURL: "http://openai.invalid/v1", HTTPClient: &http.Client{Transport: &ssetest.Transport{Chunks: []string{body}}}})
	if err != nil {
		t.Fatal(err)
	}
	all, err := ssetest.MustStream(t, p, simpleRequest())
	if err != nil || len(all) != 15 {
		t.Fatalf("%d events, %v", len(all), err)
	}
	for stop := 1; stop <= len(all); stop++ {
		n := 0
		for _, err := range p.Stream(context.Background(), simpleRequest()) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == stop {
				break
			}
		}
		if n != stop {
			t.Fatalf("stopped after %d events, got %d", stop, n)
		}
	}
}

// TestUsage: prompt_tokens includes cached and cache-write tokens and
// completion_tokens reasoning tokens; each is counted once, and a server
// reporting more of a part than the whole counts none of the rest.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		usage string
		want  messages.Tokens
	}{
		{`{"prompt_tokens":1000,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":100},"completion_tokens_details":{"reasoning_tokens":20}}`,
			messages.Tokens{Input: 300, Output: 30, Reasoning: 20, Cache: messages.CacheUsage{Read: 600, Write: 100}}},
		{`{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":8,"cache_write_tokens":4},"completion_tokens_details":{"reasoning_tokens":9}}`,
			messages.Tokens{Input: 0, Output: 0, Reasoning: 9, Cache: messages.CacheUsage{Read: 8, Write: 4}}},
	} {
		var u oa.CompletionUsage
		if err := json.Unmarshal([]byte(tc.usage), &u); err != nil {
			t.Fatal(err)
		}
		if got := usage(u); got != tc.want {
			t.Errorf("usage %s = %+v, want %+v", tc.usage, got, tc.want)
		}
	}
}

// TestFinishReasonBeforeTheEnd covers proxies that put a finish reason on
// chunks before the last (Open WebUI sets "stop" on a chunk whose content
// and reasoning are empty strings, the first chunk of a reasoning model's
// answer, and has been seen setting it on every chunk in front of vLLM):
// the response goes on after it, in the same blocks, its calls complete
// with all their arguments once the stream ends, and the last finish
// reason counts.
func TestFinishReasonBeforeTheEnd(t *testing.T) {
	body := sse(
		chunk(`{"role":"assistant","content":"","reasoning_content":""}`, "stop"),
		chunk(`{"reasoning_content":"Let me "}`, "stop"),
		chunk(`{"reasoning_content":"look."}`, "stop"),
		chunk(`{"content":"Reading "}`, "stop"),
		chunk(`{"content":"it."}`, "stop"),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":"}}]}`, "stop"),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"a.go\"}"}}]}`, "stop"),
		chunk(`{}`, "tool_calls"),
		usageChunk(`{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`),
		done,
	)
	wantLines(t, streamed(t, body),
		"reasoning-start reasoning-0",
		`reasoning-delta reasoning-0 "Let me "`,
		`reasoning-delta reasoning-0 "look."`,
		`reasoning-end reasoning-0 {"native":true,"field":"reasoning_content"}`,
		"text-start text-1",
		`text-delta text-1 "Reading "`,
		`text-delta text-1 "it."`,
		"text-end text-1",
		"tool-input-start call_1 call_1 read",
		`tool-input-delta call_1 "{\"path\":"`,
		`tool-input-delta call_1 "\"a.go\"}"`,
		"tool-input-end call_1 call_1 read",
		`tool-call call_1 read {"path":"a.go"}`,
		"step-finish tool-calls in=3 out=2 reasoning=0 cache.read=0 cache.write=0 cost=0.000022",
	)
}

// TestToolCallArgumentsRepeated covers gateways that send a call's
// arguments again once they are complete: alone, or in a closing fragment
// that repeats the call's ID and name as well. The repeat is neither
// appended to the arguments (which then were no JSON, and the call failed
// validation) nor taken for another call (which ran the tool twice). Calls
// with IDs of their own, or at other indexes, are still calls of their own.
func TestToolCallArgumentsRepeated(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_3","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":" {\"command\":\"ls\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_1 call_1 read",
		`tool-input-delta call_1 "{\"path\":\"a\"}"`,
		"tool-input-start call_2 call_2 read",
		`tool-input-delta call_2 "{\"path\":\"a\"}"`,
		"tool-input-start call_3 call_3 bash",
		`tool-input-delta call_3 "{\"command\":\"ls\"}"`,
		"tool-input-end call_1 call_1 read",
		`tool-call call_1 read {"path":"a"}`,
		"tool-input-end call_2 call_2 read",
		`tool-call call_2 read {"path":"a"}`,
		"tool-input-end call_3 call_3 bash",
		`tool-call call_3 bash {"command":"ls"}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}

// TestDoneWithoutFinishReason covers servers that end every response with
// [DONE] and never send a finish reason (some gateways' models do): the
// response is whole, its calls complete and the step finishes as other.
// A response that sent nothing before [DONE], or that ended without it,
// is still a stream cut short.
func TestDoneWithoutFinishReason(t *testing.T) {
	body := sse(
		chunk(`{"content":"Reading."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{}"}}]}`, ""),
		usageChunk(`{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}`),
		done,
	)
	wantLines(t, streamed(t, body),
		"text-start text-0",
		`text-delta text-0 "Reading."`,
		"text-end text-0",
		"tool-input-start call_1 call_1 read",
		`tool-input-delta call_1 "{}"`,
		"tool-input-end call_1 call_1 read",
		`tool-call call_1 read {}`,
		"step-finish other in=3 out=2 reasoning=0 cache.read=0 cache.write=0 cost=0.000022",
	)

	for _, body := range []string{sse(chunk(`{"role":"assistant","content":""}`, ""), done), sse(chunk(`{"content":"Read"}`, ""))} {
		_, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
		wantError(t, err, messages.ErrProviderTransport, 0, 0)
	}
}

// TestToolCallArgumentSnapshots covers servers that send a call's
// arguments so far in every fragment instead of what is new (a cumulative
// mode some compatible providers and gateways have): a fragment that
// starts with all the arguments so far, and that appended would make them
// no JSON, brings only what follows them. A fragment starting with the
// arguments that appended still makes JSON is appended as before.
func TestToolCallArgumentSnapshots(t *testing.T) {
	body := sse(
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"pa"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a.go\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a.go\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"set","arguments":"{\"x\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"x\":1}}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		done,
	)
	wantLines(t, streamed(t, body),
		"tool-input-start call_1 call_1 read",
		`tool-input-delta call_1 "{\"pa"`,
		`tool-input-delta call_1 "th\":\"a"`,
		`tool-input-delta call_1 ".go\"}"`,
		"tool-input-start call_2 call_2 set",
		`tool-input-delta call_2 "{\"x\":"`,
		`tool-input-delta call_2 "{\"x\":1}}"`,
		"tool-input-end call_1 call_1 read",
		`tool-call call_1 read {"path":"a.go"}`,
		"tool-input-end call_2 call_2 set",
		`tool-call call_2 set {"x":{"x":1}}`,
		"step-finish tool-calls in=0 out=0 reasoning=0 cache.read=0 cache.write=0 cost=0.000000",
	)
}
