package script_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

func TestParseAllStepKinds(t *testing.T) {
	src := `{
	  "description": "every step kind",
	  "chunkSize": 4,
	  "responses": [{
	    "name": "everything",
	    "times": 1,
	    "steps": [
	      {"reasoning": "let me think", "metadata": {"signature": "s1"}},
	      {"text": "Hello", "metadata": {"id":  "m1"}},
	      {"delayMs": 1},
	      {"toolCall": {"id": "call_1", "name": "read", "input": {"path":   "notes.txt"}, "metadata": {"x": 1}}},
	      {"toolCall": {"id": "ws_1", "name": "web_search", "executed": true}},
	      {"toolCall": {"id": "ws_2", "name": "web_search", "executed": true}},
	      {"toolResult": {"id": "ws_1", "name": "web_search", "output": "2 results", "metadata": {"r": 1}}},
	      {"toolResult": {"id": "ws_2", "name": "web_search", "output": "quota", "error": true}},
	      {"finish": "tool-calls", "usage": {"input": 10, "output": 5, "reasoning": 2, "cache": {"read": 7, "write": 1}}}
	    ]
	  }, {
	    "times": 1,
	    "steps": [
	      {"text": "half", "partial": true},
	      {"error": {"type": "provider.transport", "message": "connection reset"}}
	    ]
	  }],
	  "default": {"steps": [{"error": {"type": "provider.rate-limit", "retryAfterMs": 1500, "statusCode": 429}}]}
	}`
	p, err := script.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := collect(p.Stream(ctxT(t), userRequest("a")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`reasoning-start reasoning_1`, `reasoning-delta reasoning_1 "let "`, `reasoning-delta reasoning_1 "me t"`,
		`reasoning-delta reasoning_1 "hink"`, `reasoning-end reasoning_1 meta={"signature":"s1"}`,
		`text-start text_2`, `text-delta text_2 "Hell"`, `text-delta text_2 "o"`, `text-end text_2 meta={"id":"m1"}`,
		`tool-input-start tool_3 call_1:read`, `tool-input-delta tool_3 call_1:read "{\"pa"`,
		`tool-input-delta tool_3 call_1:read "th\":"`, `tool-input-delta tool_3 call_1:read "\"not"`,
		`tool-input-delta tool_3 call_1:read "es.t"`, `tool-input-delta tool_3 call_1:read "xt\"}"`,
		`tool-input-end tool_3 call_1:read`, `tool-call call_1:read {"path":"notes.txt"} meta={"x":1}`,
		`tool-input-start tool_4 ws_1:web_search`, `tool-input-delta tool_4 ws_1:web_search "{}"`,
		`tool-input-end tool_4 ws_1:web_search`, `tool-call ws_1:web_search {} executed`,
		`tool-input-start tool_5 ws_2:web_search`, `tool-input-delta tool_5 ws_2:web_search "{}"`,
		`tool-input-end tool_5 ws_2:web_search`, `tool-call ws_2:web_search {} executed`,
		`tool-result ws_1:web_search "2 results" meta={"r":1}`, `tool-result ws_2:web_search "quota" error`,
		`step-finish tool-calls in=10 out=5 reasoning=2 read=7 write=1`,
	}
	if got := describe(evs); !slices.Equal(got, want) {
		t.Errorf("first response:\n got %q\nwant %q", got, want)
	}

	evs, err = collect(p.Stream(ctxT(t), userRequest("b")))
	if got, want := describe(evs), []string{`text-start text_1`, `text-delta text_1 "half"`}; !slices.Equal(got, want) {
		t.Errorf("second response: got %q, want %q", got, want)
	}
	if e := asLLMError(t, err); *e != (llm.Error{Type: messages.ErrProviderTransport, Message: "connection reset"}) {
		t.Errorf("second response error = %+v", *e)
	}

	for range 2 {
		_, err = collect(p.Stream(ctxT(t), userRequest("c")))
		want := llm.Error{Type: messages.ErrProviderRateLimit, Message: "scripted provider.rate-limit error",
			RetryAfter: 1500 * time.Millisecond, StatusCode: 429}
		if e := asLLMError(t, err); *e != want {
			t.Errorf("default error = %+v, want %+v", *e, want)
		}
	}
}

func TestParseMatchesAndLoop(t *testing.T) {
	src := `{
	  "loop": true,
	  "responses": [
	    {"match": {"sessionKey": "ses_b"}, "times": 1, "steps": [{"text": "b only"}]},
	    {"match": {"lastUserContains": "weather", "round": 0}, "steps": [{"text": "sunny"}]},
	    {"match": {"afterTool": "read", "model": "script/test"}, "steps": [{"text": "read it"}]},
	    {"match": {"systemContains": "Summarize"}, "steps": [{"text": "## Objective"}]},
	    {"times": 1, "steps": [{"text": "first"}]},
	    {"times": 1, "steps": [{"text": "second"}]}
	  ]
	}`
	p, err := script.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	keyed := userRequest("weather?")
	keyed.CacheKey = "ses_b"
	afterRead := userRequest("x")
	afterRead.Messages = append(afterRead.Messages, call("c1", "read"), result(llm.RoleTool, "c1", "read"))
	summarize := userRequest("x")
	summarize.System = []string{"Summarize the conversation."}
	calls := []struct {
		req  llm.Request
		want string
	}{
		{keyed, "b only"},
		{keyed, "sunny"}, // the keyed reply is used up
		{afterRead, "read it"},
		{summarize, "## Objective"},
		{userRequest("x"), "first"},
		{userRequest("x"), "second"},
		{userRequest("x"), "first"}, // loop: every count resets, the first fit answers
		{userRequest("x"), "second"},
		{keyed, "b only"},
	}
	for i, c := range calls {
		if got := firstText(t, p, c.req); got != c.want {
			t.Errorf("call %d = %q, want %q", i+1, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		path string
		msg  string
	}{
		{"syntax", "{\n  \"responses\": [,]\n}", "", "invalid JSON at line 2, column 17"},
		{"empty input", "", "", "invalid JSON"},
		{"trailing data", `{"default": {"steps": []}} x`, "", "invalid JSON at line 1, column 28"},
		{"not an object", `[]`, "", "want an object, got array"},
		{"nothing to answer", `{"loop": true}`, "", `a script needs "responses", "default" or both`},
		{"unknown top-level field", `{"respones": []}`, "/respones", `unknown field (known: "description", "responses", "default", "loop", "chunkSize")`},
		{"duplicate field", `{"loop": true, "loop": false, "responses": []}`, "/loop", "duplicate field"},
		{"loop type", `{"loop": "yes", "responses": []}`, "/loop", "want a boolean, got string"},
		{"chunk size fraction", `{"chunkSize": 1.5, "responses": []}`, "/chunkSize", "want an integer, got 1.5"},
		{"chunk size negative", `{"chunkSize": -1, "responses": []}`, "/chunkSize", "-1 is out of range [0, 1048576]"},
		{"responses type", `{"responses": {}}`, "/responses", "want an array, got object"},
		{"response type", `{"responses": [1]}`, "/responses/0", "want an object, got number"},
		{"missing steps", `{"responses": [{"name": "x"}]}`, "/responses/0", `missing field "steps"`},
		{"null steps", `{"responses": [{"steps": null}]}`, "/responses/0", `missing field "steps"`},
		{"times negative", `{"responses": [{"times": -2, "steps": []}]}`, "/responses/0/times", "out of range"},
		{"match in default", `{"default": {"match": {}, "steps": []}}`, "/default/match", `unknown field (known: "name", "steps")`},
		{"unknown match rule", `{"responses": [{"match": {"turn": 1}, "steps": []}]}`, "/responses/0/match/turn", "unknown field"},
		{"round type", `{"responses": [{"match": {"round": "1"}, "steps": []}]}`, "/responses/0/match/round", "want an integer, got string"},
		{"empty afterTool", `{"responses": [{"match": {"afterTool": ""}, "steps": []}]}`, "/responses/0/match/afterTool", "must not be empty"},
		{"step without kind", `{"responses": [{"steps": [{}]}]}`, "/responses/0/steps/0", `want exactly one of "text", "reasoning", "toolCall", "toolResult", "error", "finish", "delayMs", got none`},
		{"step with two kinds", `{"responses": [{"steps": [{"text": "a", "finish": "stop"}]}]}`, "/responses/0/steps/0", `got "text", "finish"`},
		{"unknown step field", `{"responses": [{"steps": [{"txt": "a"}]}]}`, "/responses/0/steps/0/txt", "unknown field"},
		{"text type", `{"responses": [{"steps": [{"text": 3}]}]}`, "/responses/0/steps/0/text", "want a string, got number"},
		{"partial on reasoning", `{"responses": [{"steps": [{"reasoning": "a", "partial": true}]}]}`, "/responses/0/steps/0/partial", `not allowed in a "reasoning" step`},
		{"usage on text", `{"responses": [{"steps": [{"text": "a", "usage": {}}]}]}`, "/responses/0/steps/0/usage", `not allowed in a "text" step`},
		{"partial type", `{"responses": [{"steps": [{"text": "a", "partial": 1}]}]}`, "/responses/0/steps/0/partial", "want a boolean, got number"},
		{"tool result without name", `{"responses": [{"steps": [{"toolResult": {"id": "c"}}]}]}`, "/responses/0/steps/0/toolResult", `missing field "name"`},
		{"tool result output type", `{"responses": [{"steps": [{"toolResult": {"id": "c", "name": "n", "output": 1}}]}]}`, "/responses/0/steps/0/toolResult/output", "want a string, got number"},
		{"tool result error type", `{"responses": [{"steps": [{"toolResult": {"id": "c", "name": "n", "error": "yes"}}]}]}`, "/responses/0/steps/0/toolResult/error", "want a boolean, got string"},
		{"tool call without id", `{"responses": [{"steps": [{"toolCall": {"name": "read"}}]}]}`, "/responses/0/steps/0/toolCall", `missing field "id"`},
		{"tool call with empty name", `{"responses": [{"steps": [{"toolCall": {"id": "c", "name": ""}}]}]}`, "/responses/0/steps/0/toolCall/name", "must not be empty"},
		{"tool call unknown field", `{"responses": [{"steps": [{"toolCall": {"id": "c", "name": "r", "args": {}}}]}]}`, "/responses/0/steps/0/toolCall/args", "unknown field"},
		{"duplicate call id", `{"responses": [{"steps": [{"toolCall": {"id": "c", "name": "r"}}, {"toolCall": {"id": "c", "name": "r"}}]}]}`,
			"/responses/0/steps/1/toolCall/id", `duplicate tool call id "c" (also at /responses/0/steps/0)`},
		{"result of no call", `{"responses": [{"steps": [{"toolResult": {"id": "nope", "name": "r"}}]}]}`,
			"/responses/0/steps/0/toolResult/id", `no toolCall with id "nope" before it`},
		{"result of a local call", `{"responses": [{"steps": [{"toolCall": {"id": "a", "name": "r"}}, {"toolResult": {"id": "a", "name": "r"}}]}]}`,
			"/responses/0/steps/1/toolResult/id", `the toolCall "a" at /responses/0/steps/0 is not hosted`},
		{"second result", `{"responses": [{"steps": [{"toolCall": {"id": "h", "name": "r", "executed": true}}, {"toolResult": {"id": "h", "name": "r"}}, {"toolResult": {"id": "h", "name": "r"}}]}]}`,
			"/responses/0/steps/2/toolResult/id", `the hosted call "h" already has its result`},
		{"model without provider", `{"responses": [{"match": {"model": "demo"}, "steps": [{"text": "x"}]}]}`,
			"/responses/0/match/model", `"demo" is not a model reference`},
		{"unknown finish", `{"responses": [{"steps": [{"finish": "done"}]}]}`, "/responses/0/steps/0/finish", `unknown finish reason "done"`},
		{"usage negative", `{"responses": [{"steps": [{"finish": "stop", "usage": {"input": -1}}]}]}`, "/responses/0/steps/0/usage/input", "out of range"},
		{"cache usage type", `{"responses": [{"steps": [{"finish": "stop", "usage": {"cache": {"read": "1"}}}]}]}`, "/responses/0/steps/0/usage/cache/read", "want an integer, got string"},
		{"unknown usage field", `{"responses": [{"steps": [{"finish": "stop", "usage": {"total": 1}}]}]}`, "/responses/0/steps/0/usage/total", "unknown field"},
		{"step after finish", `{"responses": [{"steps": [{"finish": "stop"}, {"text": "a"}]}]}`, "/responses/0/steps/1", "unreachable: the stream already ends at /responses/0/steps/0"},
		{"step after error", `{"default": {"steps": [{"error": {"type": "provider.internal"}}, {"text": "a"}]}}`, "/default/steps/1", "unreachable"},
		{"error without type", `{"responses": [{"steps": [{"error": {"message": "x"}}]}]}`, "/responses/0/steps/0/error", `missing field "type"`},
		{"unknown error type", `{"responses": [{"steps": [{"error": {"type": "rate-limit"}}]}]}`, "/responses/0/steps/0/error/type", `unknown error type "rate-limit"`},
		{"retry after fraction", `{"responses": [{"steps": [{"error": {"type": "provider.rate-limit", "retryAfterMs": 0.5}}]}]}`, "/responses/0/steps/0/error/retryAfterMs", "want an integer, got 0.5"},
		{"status code range", `{"responses": [{"steps": [{"error": {"type": "provider.internal", "statusCode": 42}}]}]}`, "/responses/0/steps/0/error/statusCode", "42 is out of range [100, 599]"},
		{"delay too long", `{"responses": [{"steps": [{"delayMs": 600001}]}]}`, "/responses/0/steps/0/delayMs", "out of range"},
		{"huge integer", `{"chunkSize": 1e300, "responses": []}`, "/chunkSize", "want an integer, got 1e300"},
		{"escaped unknown key", `{"a/b~c": 1}`, "/a~1b~0c", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := script.Parse([]byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded (%v), want an error", p)
			}
			pe, ok := errors.AsType[*script.ParseError](err)
			if !ok {
				t.Fatalf("error = %T %v, want *ParseError", err, err)
			}
			if pe.Path != tt.path {
				t.Errorf("path = %q, want %q (error %v)", pe.Path, tt.path, err)
			}
			if !strings.Contains(pe.Message, tt.msg) {
				t.Errorf("message = %q, want it to contain %q", pe.Message, tt.msg)
			}
		})
	}
}

func TestParseAcceptsIntegralNumbers(t *testing.T) {
	p, err := script.Parse([]byte(`{"chunkSize": 2.0, "responses": [{"match": {"round": 1e0}, "steps": [{"text": "abcd"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req := userRequest("x")
	req.Messages = append(req.Messages, call("c", "read"), result(llm.RoleTool, "c", "read"))
	evs, err := collect(p.Stream(ctxT(t), req))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 { // start, "ab", "cd", end, finish
		t.Errorf("events = %q", describe(evs))
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"responses": [{"steps": [{"finish": "later"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := script.Load(bad)
	want := `script: ` + bad + `: /responses/0/steps/0/finish: unknown finish reason "later" (want one of "stop", "tool-calls", "length", "content-filter", "other", "pause")`
	if err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v\nwant %s", err, want)
	}

	_, err = script.Load(filepath.Join(dir, "missing.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want os.ErrNotExist", err)
	}

	if _, err := script.Load(filepath.Join("testdata", "demo.json")); err != nil {
		t.Errorf("Load(demo) = %v", err)
	}
}
