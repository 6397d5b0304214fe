package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

// okReply is a minimal successful stream.
var okReply = ssetest.Reply{Chunks: []string{sse(chunk(`{"content":"ok"}`, "stop"), done)}}

func text(s string) llm.Part { return llm.Part{Kind: llm.PartText, Text: s} }

func file(mime, name, url string) llm.Part {
	return llm.Part{Kind: llm.PartFile, File: &messages.File{Mime: mime, Filename: name, URL: url}}
}

// richRequest exercises every lowering rule.
func richRequest() llm.Request {
	return llm.Request{
		Model:  messages.ModelRef{ProviderID: "openai", ID: "gpt-test"},
		System: []string{"You are sessiond.", "", "Be brief."},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{
				text("Look at this"),
				file("image/png", "dot.png", "data:image/png;base64,iVBORw0KGgo="),
				file("text/plain", "notes.txt", "data:text/plain;base64,aGVsbG8gbm90ZXM="),
				file("application/pdf", "spec.pdf", "https://example.com/spec.pdf"),
				file("image/jpeg", "cat.jpg", "https://example.com/cat.jpg"),
				file("image/png", "shot.png", "file:///tmp/project/shot.png"),
				file("image/gif", "anim.gif", "http://example.com/anim.gif"),
				file("", "pasted", "data:image/png;base64,iVBORw0KGgo="), // the URL names the type
				text(""),
				{Kind: llm.PartFile}, // no file: left out
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartReasoning, Text: "my own thoughts", ProviderMetadata: json.RawMessage(`{"native":true}`)},
				text("Let me check."),
				{Kind: llm.PartToolCall, CallID: "call_1", Name: "read", Input: json.RawMessage(`{"path":"a.go"}`)},
				{Kind: llm.PartToolCall, CallID: "call_2", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, CallID: "call_2", Name: "bash", Output: "a.go\nb.go"},
				{Kind: llm.PartToolResult, CallID: "call_9", Name: "bash", Output: "orphan"},
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, CallID: "call_1", Name: "read", Output: "no such file", IsError: true},
			}},
			{Role: llm.RoleSystem, Parts: []llm.Part{text("Instructions changed.")}},
			{Role: llm.RoleUser, Parts: []llm.Part{text("thanks"), {Kind: llm.PartFile}}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartReasoning, Text: "another model's thoughts"},
				text("Done."),
				{Kind: llm.PartToolCall, CallID: "call_1", Name: "read", Input: nil},
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{text("next")}},
		},
		Tools: []llm.ToolDefinition{
			{Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "bash"},
		},
		ToolChoice:      llm.ToolChoiceNone,
		MaxOutputTokens: 1024,
		CacheKey:        "ses_01",
	}
}

const richWant = `{
  "model": "gpt-test",
  "stream": true,
  "stream_options": {"include_usage": true},
  "max_completion_tokens": 1024,
  "prompt_cache_key": "ses_01",
  "tool_choice": "none",
  "tools": [
    {"type": "function", "function": {"name": "read", "description": "Read a file.",
      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}
  ],
  "messages": [
    {"role": "system", "content": "You are sessiond.\n\nBe brief."},
    {"role": "user", "content": [
      {"type": "text", "text": "Look at this"},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
      {"type": "text", "text": "<file name=\"notes.txt\" type=\"text/plain\">\nhello notes\n</file>"},
      {"type": "text", "text": "[Attached file \"spec.pdf\" (application/pdf) at https://example.com/spec.pdf]"},
      {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
      {"type": "text", "text": "[Attached file \"shot.png\" (image/png) at file:///tmp/project/shot.png]"},
      {"type": "image_url", "image_url": {"url": "http://example.com/anim.gif"}},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    ]},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.go\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Error: no such file"},
    {"role": "tool", "tool_call_id": "call_2", "content": "a.go\nb.go"},
    {"role": "user", "content": "<system-reminder>\nInstructions changed.\n</system-reminder>\n\nthanks"},
    {"role": "assistant", "content": "another model's thoughts\n\nDone.", "tool_calls": [
      {"id": "call_1_2", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_1_2", "content": "Error: Tool result missing: the tool call was interrupted before it produced a result."},
    {"role": "user", "content": "next"}
  ]
}`

func TestLowering(t *testing.T) {
	_, srv, err := run(t, richRequest(), okReply)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
		t.Fatalf("request %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
	}
	wantJSON(t, r.Body, richWant)
}

func TestLoweringVariants(t *testing.T) {
	t.Run("legacy max_tokens, no tools", func(t *testing.T) {
		srv := ssetest.NewServer(t, okReply)
		p, err := New(Config{BaseURL: srv.URL, HTTPClient: srv.Client(), LegacyMaxTokens: true})
		if err != nil {
			t.Fatal(err)
		}
		req := simpleRequest()
		req.MaxOutputTokens = 64
		req.ToolChoice = llm.ToolChoiceNone // no tools: tool_choice is left out
		if _, err := ssetest.Collect(p.Stream(t.Context(), req)); err != nil {
			t.Fatal(err)
		}
		wantJSON(t, srv.LastBody(), `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,
			"messages":[{"role":"user","content":"hi"}]}`)
		if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
			t.Fatalf("Authorization %q without an API key", h)
		}
	})
	t.Run("missing model", func(t *testing.T) {
		req := simpleRequest()
		req.Model.ID = ""
		_, srv, err := run(t, req, okReply)
		wantError(t, err, messages.ErrProviderInvalidRequest, 0, 0)
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
	t.Run("hosted parts are left out", func(t *testing.T) {
		req := simpleRequest()
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartToolCall, CallID: "h1", Name: "web_search", Input: json.RawMessage(`{}`), Executed: true},
			{Kind: llm.PartToolResult, CallID: "h1", Name: "web_search", Output: "found", Executed: true},
			{Kind: llm.PartText, Text: "done"},
			{Kind: llm.PartToolCall, CallID: "c1", Name: "read", Input: json.RawMessage(`{}`)}}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "c1", Name: "read", Output: "x"}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "more"}}})
		_, srv, err := run(t, req, okReply)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON(t, srv.LastBody(), `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","content":"done","tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"x"},
			{"role":"user","content":"more"}]}`)
	})
	t.Run("bad schema", func(t *testing.T) {
		req := simpleRequest()
		req.Tools = []llm.ToolDefinition{{Name: "x", InputSchema: json.RawMessage(`[1]`)}}
		_, _, err := run(t, req, okReply)
		wantError(t, err, messages.ErrProviderInvalidRequest, 0, 0)
	})
}

// wantJSON compares two JSON documents structurally.
func wantJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	canon := func(b []byte) string {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("invalid JSON %s: %v", b, err)
		}
		out, _ := json.MarshalIndent(v, "", "  ")
		return string(out)
	}
	if g, w := canon(got), canon([]byte(want)); g != w {
		t.Fatalf("request body:\n%s\nwant:\n%s", g, w)
	}
}

// TestUserTurns: two user messages in a row become one turn, an empty
// reminder is left out, and a reminder with nothing after it stands as its
// own user turn.
func TestUserTurns(t *testing.T) {
	req := llm.Request{Model: messages.ModelRef{ProviderID: "openai", ID: "gpt-test"}, Messages: []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{text("first steer")}},
		{Role: llm.RoleSystem, Parts: []llm.Part{text("")}}, // an empty reminder: left out
		{Role: llm.RoleUser, Parts: []llm.Part{text("second steer"), file("image/png", "a.png", "data:image/png;base64,iVBORw0KGgo=")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{text("ok")}},
		{Role: llm.RoleSystem, Parts: []llm.Part{text("Instructions changed.")}},
	}}
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, srv.LastBody(), `{"model": "gpt-test", "stream": true, "stream_options": {"include_usage": true},
	  "messages": [
	    {"role": "user", "content": [
	      {"type": "text", "text": "first steer"},
	      {"type": "text", "text": "second steer"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
	    {"role": "assistant", "content": "ok"},
	    {"role": "user", "content": "<system-reminder>\nInstructions changed.\n</system-reminder>"}]}`)

	// A turn of which nothing is sent (its own reasoning only, cut off by
	// the output limit) leaves no two user turns in a row either.
	req.Messages = []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{text("think hard")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartReasoning, Text: "hmm", ProviderMetadata: []byte(`{"x":1}`)}}},
		{Role: llm.RoleUser, Parts: []llm.Part{text("go on")}},
	}
	_, srv, err = run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, srv.LastBody(), `{"model": "gpt-test", "stream": true, "stream_options": {"include_usage": true},
	  "messages": [{"role": "user", "content": "think hard\n\ngo on"}]}`)
}

// TestReasoningContentReplay: reasoning this adapter read from
// reasoning_content goes back in that field on every assistant message
// that has it, as DeepSeek in thinking mode requires of each message of a
// turn that called tools, the answer that ends the tool loop included (and
// the chat templates of Qwen3 and kin read); not when it came in another
// field or in metadata that does not decode, and never as text. Such a
// history is the server's thinking mode: messages without reasoning in
// that field send it empty.
func TestReasoningContentReplay(t *testing.T) {
	thought := func(field string) llm.Part {
		return llm.Part{Kind: llm.PartReasoning, Text: "thinking in " + field,
			ProviderMetadata: json.RawMessage(`{"native":true,"field":"` + field + `"}`)}
	}
	call := llm.Part{Kind: llm.PartToolCall, CallID: "call_1", Name: "read", Input: json.RawMessage(`{}`)}
	result := llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "call_1", Name: "read", Output: "x"}}}
	req := simpleRequest()
	req.Tools = []llm.ToolDefinition{{Name: "read"}}
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{thought("reasoning_content"), call}}, result,
		// The answer that ends the tool loop: DeepSeek refuses every later
		// request if it lacks its reasoning_content.
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{thought("reasoning_content"), text("done")}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("and?")}},
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{thought("reasoning_content"), text("no tools here")}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("again")}},
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{thought("reasoning"), {Kind: llm.PartToolCall, CallID: "call_2", Name: "read", Input: json.RawMessage(`{}`)}}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "call_2", Name: "read", Output: "y"}}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("last")}},
		// Metadata that does not decode names no field, whatever it holds.
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartReasoning, Text: "thinking in bad metadata",
			ProviderMetadata: json.RawMessage(`{"native":"yes","field":"reasoning_content"}`)}, text("ok")}},
	)
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range body.Messages {
		if string(m["role"]) == `"assistant"` {
			got = append(got, string(m["reasoning_content"]))
			if strings.Contains(string(m["content"]), "thinking") {
				t.Fatalf("reasoning sent as text: %s", m["content"])
			}
		}
	}
	want := []string{`"thinking in reasoning_content"`, `"thinking in reasoning_content"`, `"thinking in reasoning_content"`, `""`, `""`}
	if !slices.Equal(got, want) {
		t.Fatalf("reasoning_content of the assistant messages %q, want %q", got, want)
	}
}

// sentReasoningContent returns the reasoning_content of each assistant
// message of a request body, "" where it has none.
func sentReasoningContent(t *testing.T, body []byte) []string {
	t.Helper()
	var sent struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range sent.Messages {
		if string(m["role"]) == `"assistant"` {
			got = append(got, string(m["reasoning_content"]))
		}
	}
	return got
}

// failedStepHistory is a history whose one assistant message is a step
// that failed after calling a tool: the runner keeps its reasoning without
// the provider's metadata, so it reads as another model's.
func failedStepHistory() llm.Request {
	req := simpleRequest()
	req.Model.ID = "deepseek-test"
	req.Tools = []llm.ToolDefinition{{Name: "read"}}
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartReasoning, Text: "Read it."},
			{Kind: llm.PartToolCall, CallID: "call_1", Name: "read", Input: json.RawMessage(`{}`)}}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "call_1", Name: "read",
			Output: "Error (aborted): Tool execution interrupted", IsError: true}}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("go on")}})
	return req
}

// deepSeekRefusal is DeepSeek's answer to a thinking-mode history without
// reasoning_content on a message that called tools.
var deepSeekRefusal = ssetest.Reply{Status: 400, Chunks: []string{
	openaiErr("The reasoning_content in the thinking mode must be passed back to the API.", "invalid_request_error", `"invalid_request_error"`)}}

// TestReasoningContentAfterARefusal: a history without reasoning that came
// in reasoning_content sends no such field (OpenAI has none), until the
// server refuses the request for lacking it (DeepSeek's thinking mode,
// after a step that failed or a switch from another model): the request
// goes again at once with the field, empty, on every assistant message,
// and so do the model's later requests. Once is all: a second refusal, or
// a refusal for another reason, is the step's error.
func TestReasoningContentAfterARefusal(t *testing.T) {
	srv := ssetest.NewServer(t, deepSeekRefusal, okReply, okReply, okReply, deepSeekRefusal)
	p := newTestProvider(t, srv)
	if _, err := ssetest.MustStream(t, p, failedStepHistory()); err != nil {
		t.Fatalf("the request sent again: %v", err)
	}
	// The same model again, then another model (not refused yet).
	if _, err := ssetest.MustStream(t, p, failedStepHistory()); err != nil {
		t.Fatal(err)
	}
	other := failedStepHistory()
	other.Model.ID = "gpt-test"
	if _, err := ssetest.MustStream(t, p, other); err != nil {
		t.Fatal(err)
	}
	// Refused although it has the field: no third try.
	_, err := ssetest.MustStream(t, p, failedStepHistory())
	wantError(t, err, messages.ErrProviderInvalidRequest, 400, 0)
	var got [][]string
	for _, r := range srv.Requests() {
		got = append(got, sentReasoningContent(t, r.Body))
		if bytes.Contains(r.Body, []byte(`"reasoning_content":"Read it."`)) {
			t.Fatalf("reasoning without its metadata sent as this server's: %s", r.Body)
		}
	}
	want := [][]string{{""}, {`""`}, {`""`}, {""}, {`""`}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reasoning_content per request %q, want %q", got, want)
	}

	// A refusal for another reason is not sent again, and teaches nothing.
	srv = ssetest.NewServer(t, ssetest.Reply{Status: 400, Chunks: []string{
		openaiErr("Invalid max_tokens value", "invalid_request_error", `"invalid_request_error"`)}}, okReply)
	p = newTestProvider(t, srv)
	_, err = ssetest.MustStream(t, p, failedStepHistory())
	wantError(t, err, messages.ErrProviderInvalidRequest, 400, 0)
	if _, err := ssetest.MustStream(t, p, failedStepHistory()); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 2 || sentReasoningContent(t, srv.LastBody())[0] != "" {
		t.Fatalf("%d requests, the last with reasoning_content %q; want 2, without", n, sentReasoningContent(t, srv.LastBody()))
	}
}

// TestErrorResultsSayErrorOnce: a failed tool's output is marked as an
// error in its text, once: output the runner already wrote as "Error
// (type): …", or one that starts with "Error:", is not prefixed again.
func TestErrorResultsSayErrorOnce(t *testing.T) {
	req := simpleRequest()
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartToolCall, CallID: "call_1", Name: "bash", Input: json.RawMessage(`{}`)},
			{Kind: llm.PartToolCall, CallID: "call_2", Name: "bash", Input: json.RawMessage(`{}`)},
			{Kind: llm.PartToolCall, CallID: "call_3", Name: "bash", Input: json.RawMessage(`{}`)},
			{Kind: llm.PartToolCall, CallID: "call_4", Name: "bash", Input: json.RawMessage(`{}`)},
		}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
			{Kind: llm.PartToolResult, CallID: "call_1", Name: "bash", IsError: true, Output: "Error (tool.execution): exit status 1"},
			{Kind: llm.PartToolResult, CallID: "call_2", Name: "bash", IsError: true, Output: "no such file"},
			{Kind: llm.PartToolResult, CallID: "call_3", Name: "bash", IsError: true, Output: "Errors: 3"},
			{Kind: llm.PartToolResult, CallID: "call_4", Name: "bash", IsError: true, Output: "Error: exit status 2"},
		}})
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role, Content any
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, m := range body.Messages {
		if m.Role == "tool" {
			got = append(got, m.Content)
		}
	}
	if want := []any{"Error (tool.execution): exit status 1", "Error: no such file", "Error: Errors: 3", "Error: exit status 2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tool messages %q, want %q", got, want)
	}
}

// TestObjectSchemaGetsProperties: a tool whose schema is an object without
// properties (a tool with no parameters) is sent with empty properties,
// which OpenAI requires; a schema with properties, or one that does not say
// it is an object, is sent as it is.
func TestObjectSchemaGetsProperties(t *testing.T) {
	req := simpleRequest()
	req.Tools = []llm.ToolDefinition{
		{Name: "now", InputSchema: json.RawMessage(`{"type": "object"}`)},
		{Name: "read", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "either", InputSchema: json.RawMessage(`{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"b":{"type":"string"}}}]}`)},
	}
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Tools []struct {
			Function struct {
				Parameters map[string]json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(srv.Requests()[0].Body, &body); err != nil || len(body.Tools) != 3 {
		t.Fatalf("tools %+v, %v", body.Tools, err)
	}
	if got := string(body.Tools[0].Function.Parameters["properties"]); got != "{}" {
		t.Fatalf("the parameterless tool's properties: %q", got)
	}
	if got := string(body.Tools[1].Function.Parameters["properties"]); got != `{"path":{"type":"string"}}` {
		t.Fatalf("the read tool's properties: %q", got)
	}
	if got, ok := body.Tools[2].Function.Parameters["properties"]; ok {
		t.Fatalf("a schema that is not an object got properties %s", got)
	}
}

// TestLongCallIDs: a call ID longer than the API's 40 characters (another
// provider's, from before a model switch) is shortened the same way in the
// call and in its result; two IDs that share a long start stay distinct;
// a character is never cut in two; an ID that fits, 40 bytes included, is
// sent unchanged.
func TestLongCallIDs(t *testing.T) {
	long := strings.Repeat("a", 45)
	ids := []string{long + "1", long + "2", strings.Repeat("é", 30), "call_short", strings.Repeat("b", 40), strings.Repeat("c", 41)}
	req := simpleRequest()
	for _, id := range ids {
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: id, Name: "read", Input: json.RawMessage(`{}`)}}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: id, Name: "read", Output: "ok"}}})
	}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "go on"}}})
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	body := sentCalls(t, srv.LastBody())
	var calls, results []string
	for _, m := range body.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID)
		}
		if m.Role == "tool" {
			results = append(results, m.ToolCallID)
		}
	}
	if !slices.Equal(calls, results) || len(calls) != len(ids) {
		t.Fatalf("calls %q, results %q", calls, results)
	}
	seen := map[string]bool{}
	for i, id := range calls {
		if len(id) > 40 || !utf8.ValidString(id) || seen[id] {
			t.Fatalf("call %d: ID %q (%d bytes) is too long, not UTF-8 or repeated", i, id, len(id))
		}
		seen[id] = true
	}
	if calls[3] != "call_short" || calls[4] != ids[4] || calls[5] == ids[5] || !strings.HasPrefix(calls[0], strings.Repeat("a", 20)) {
		t.Fatalf("IDs %q: a fitting ID changed or a long one lost its start", calls)
	}
}

// TestMergeLeavesTheRequestAlone: merging user turns never writes into
// the request's parts, whose spare capacity may hold another message's.
func TestMergeLeavesTheRequestAlone(t *testing.T) {
	parts := []llm.Part{text("first"), text("later")}
	req := simpleRequest()
	req.Messages = []llm.Message{
		{Role: llm.RoleUser, Parts: parts[:1]},
		{Role: llm.RoleUser, Parts: []llm.Part{text("second")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{text("ok")}},
		{Role: llm.RoleUser, Parts: parts[1:]},
	}
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, srv.LastBody(), `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[
		{"role":"user","content":"first\n\nsecond"},{"role":"assistant","content":"ok"},{"role":"user","content":"later"}]}`)
	if parts[1].Text != "later" {
		t.Fatalf("the request's parts changed: %+v", parts)
	}
}

// TestRepeatedCallIDsAfterASwitch: call IDs are unique only within a step
// (a server that sends none gets call_0, call_1… in each response, and
// Kimi's IDs start over too), and OpenAI refuses a request whose
// tool_call_id values repeat ("Duplicate value for 'tool_call_id'"), so
// after a switch from such a server every later request would be refused.
// Each repeat goes with an ID of its own, its result with it.
func TestRepeatedCallIDsAfterASwitch(t *testing.T) {
	req := simpleRequest()
	req.Tools = []llm.ToolDefinition{{Name: "read"}}
	for _, out := range []string{"first", "second"} {
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: "call_0", Name: "read", Input: json.RawMessage(`{}`)}}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "call_0", Name: "read", Output: out}}})
	}
	srv := ssetest.NewServer(t, okReply)
	if _, err := ssetest.MustStream(t, newTestProvider(t, srv), req); err != nil {
		t.Fatal(err)
	}
	body := sentCalls(t, srv.LastBody())
	var calls []string
	results := map[string]any{}
	for _, m := range body.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID)
		}
		if m.Role == "tool" {
			if _, dup := results[m.ToolCallID]; dup {
				t.Fatalf("tool_call_id %q repeats: %s", m.ToolCallID, srv.LastBody())
			}
			results[m.ToolCallID] = m.Content
		}
	}
	if len(calls) != 2 || calls[0] == calls[1] {
		t.Fatalf("tool call ids %q, want two distinct: %s", calls, srv.LastBody())
	}
	if results[calls[0]] != "first" || results[calls[1]] != "second" {
		t.Fatalf("results by tool_call_id %v for ids %q: %s", results, calls, srv.LastBody())
	}
}

// TestRequestEndsWithTheUsersTurn: an explicit run after a step that was
// interrupted mid-answer (or that answered) sends a history ending with an
// assistant message, which servers that complete a final assistant message
// as a prefix refuse without their own flag for it (Mistral), for every
// run until a new prompt. The request ends with a user turn asking to go
// on instead, and the step answering it follows that turn in later
// requests; one that ends with tool results is left as it is.
func TestRequestEndsWithTheUsersTurn(t *testing.T) {
	req := simpleRequest()
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{text("The answer is")}},
		// Nothing of it is sent: the assistant message before it is last.
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartReasoning, Text: "hmm", ProviderMetadata: json.RawMessage(`{"native":true}`)}}})
	srv := ssetest.NewServer(t, okReply)
	p := newTestProvider(t, srv)
	if _, err := ssetest.MustStream(t, p, req); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
		t.Fatal(err)
	}
	last := body.Messages[len(body.Messages)-1]
	if n := len(body.Messages); n != 3 || last.Role != "user" || !strings.Contains(fmt.Sprint(last.Content), "Continue from where") {
		t.Fatalf("the request does not end with the user's turn: %s", srv.LastBody())
	}

	// The answer to that request follows the same turn in later ones: two
	// assistant messages in a row, which many chat templates refuse, are
	// not sent.
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{text("42.")}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("thanks")}})
	if _, err := ssetest.MustStream(t, p, req); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role)
	}
	if want := []string{"user", "assistant", "user", "assistant", "user"}; !slices.Equal(roles, want) ||
		!strings.Contains(fmt.Sprint(body.Messages[2].Content), "Continue from where") {
		t.Fatalf("roles %q, want %q with the user's turn asking to go on: %s", roles, want, srv.LastBody())
	}

	req = failedStepHistory()
	req.Messages = req.Messages[:len(req.Messages)-1] // ends with the tool result
	if _, err := ssetest.MustStream(t, p, req); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(srv.LastBody()), "Continue from where") {
		t.Fatalf("a request ending with tool results got a user turn: %s", srv.LastBody())
	}
}

// TestImagesAfterARefusal: a model that reads no images (DeepSeek) refuses
// a request with an image part ("unknown variant `image_url`, expected
// `text`"), and the prompt that brought it stays in history, so every
// later request of the Session would be refused. The request goes again
// at once with each image as a text note, and so do the model's later
// requests; other models still get the image. Once is all: a second
// refusal is the step's error.
func TestImagesAfterARefusal(t *testing.T) {
	refusal := ssetest.Reply{Status: 400, Chunks: []string{openaiErr("Failed to deserialize the JSON body into the target type: "+
		"messages[1]: unknown variant `image_url`, expected `text` at line 1 column 211", "invalid_request_error", `"invalid_request_error"`)}}
	srv := ssetest.NewServer(t, refusal, okReply, okReply, okReply, refusal)
	p := newTestProvider(t, srv)
	req := simpleRequest()
	req.Model.ID = "deepseek-test"
	req.Messages = []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{text("What is this?"),
		{Kind: llm.PartFile, File: &messages.File{Mime: "image/png", Filename: "dot.png", URL: "data:image/png;base64,iVBORw0KGgo="}}}}}
	if _, err := ssetest.MustStream(t, p, req); err != nil {
		t.Fatalf("the request sent again: %v", err)
	}
	if _, err := ssetest.MustStream(t, p, req); err != nil {
		t.Fatal(err)
	}
	other := req
	other.Model.ID = "gpt-test"
	if _, err := ssetest.MustStream(t, p, other); err != nil {
		t.Fatal(err)
	}
	// Refused although it sent no image: no third try.
	_, err := ssetest.MustStream(t, p, req)
	wantError(t, err, messages.ErrProviderInvalidRequest, 400, 0)
	var got []bool
	for _, r := range srv.Requests() {
		got = append(got, bytes.Contains(r.Body, []byte(`"image_url"`)))
		if !bytes.Contains(r.Body, []byte(`What is this?`)) {
			t.Fatalf("the prompt's text was lost: %s", r.Body)
		}
	}
	if want := []bool{true, false, false, true, false}; !slices.Equal(got, want) {
		t.Fatalf("image_url sent per request %v, want %v", got, want)
	}
	if body := string(srv.Requests()[1].Body); !strings.Contains(body, `[Attached file \"dot.png\" (image/png)`) {
		t.Fatalf("the image is not named in a text note: %s", body)
	}
}

// callsBody is what tests read of a request body: its messages' roles,
// contents and tool call IDs.
type callsBody struct {
	Messages []struct {
		Role       string `json:"role"`
		Content    any    `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

// functions returns the name or the arguments (pick) of every tool call
// the request sent, in order.
func (b callsBody) functions(pick func(name, args string) string) []string {
	var out []string
	for _, m := range b.Messages {
		for _, c := range m.ToolCalls {
			out = append(out, pick(c.Function.Name, c.Function.Arguments))
		}
	}
	return out
}

// sentCalls decodes a request body as callsBody.
func sentCalls(t *testing.T, b []byte) callsBody {
	t.Helper()
	var body callsBody
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// TestArgumentsGoBackAsAnObject: a call's arguments go back as a JSON
// object, which chat templates (vLLM, llama.cpp) decode and expect;
// arguments that are not one (a call cut off by the output limit, kept by
// the runner as a JSON string) go under invalid_input, as on Anthropic.
func TestArgumentsGoBackAsAnObject(t *testing.T) {
	req := simpleRequest()
	req.Tools = []llm.ToolDefinition{{Name: "bash"}}
	inputs := []string{`{"command":"ls"}`, `"{\"command\": \"ls -"`, `null`, `[1]`, ``}
	for i, in := range inputs {
		id := fmt.Sprintf("call_%d", i)
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: id, Name: "bash", Input: json.RawMessage(in)}}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: id, Name: "bash", Output: "x"}}})
	}
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	got := sentCalls(t, srv.LastBody()).functions(func(_, args string) string { return args })
	want := []string{`{"command":"ls"}`, `{"invalid_input":"{\"command\": \"ls -"}`, `{"invalid_input":"null"}`, `{"invalid_input":"[1]"}`, `{}`}
	if !slices.Equal(got, want) {
		t.Fatalf("arguments %q, want %q", got, want)
	}
}

// TestMadeUpToolNames: a call of a name no tool has ("functions.read", a
// chat template's leaked tokens), which the runner refused, goes back in
// the history under a name the API accepts (^[a-zA-Z0-9_-]{1,64}$): the
// API, and servers that check names the same way, would refuse every
// later request of the Session otherwise.
func TestMadeUpToolNames(t *testing.T) {
	req := simpleRequest()
	history, want := ssetest.MadeUpToolCalls("call_")
	req.Messages = append(req.Messages, history...)
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	names := sentCalls(t, srv.LastBody()).functions(func(name, _ string) string { return name })
	if !slices.Equal(names, want) {
		t.Fatalf("function names %q, want %q", names, want)
	}
}
