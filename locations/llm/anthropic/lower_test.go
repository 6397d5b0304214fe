package anthropic

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

// okReply is a minimal successful stream.
var okReply = ssetest.Reply{Chunks: []string{textStream("ok")}}

func text(s string) llm.Part { return llm.Part{Kind: llm.PartText, Text: s} }

// richRequest exercises every lowering rule.
func richRequest() llm.Request {
	file := func(mime, name, url string) llm.Part {
		return llm.Part{Kind: llm.PartFile, File: &messages.File{Mime: mime, Filename: name, URL: url}}
	}
	return llm.Request{
		Model:  messages.ModelRef{ProviderID: "anthropic", ID: "claude-test"},
		System: []string{"You are sessiond.", "Be brief."},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Parts: []llm.Part{
				text("Look"),
				file("image/png", "dot.png", "data:image/png;base64,iVBORw0KGgo="),
				file("application/pdf", "spec.pdf", "data:application/pdf;base64,JVBERi0xLjQ="),
				file("text/plain", "notes.txt", "data:text/plain,hello%20notes"),
				file("application/zip", "a.zip", "https://example.com/a.zip"),
			}},
			{Role: llm.RoleSystem, Parts: []llm.Part{text("Instructions changed.")}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartReasoning, Text: "my thoughts", ProviderMetadata: json.RawMessage(`{"signature":"sig1"}`)},
				{Kind: llm.PartReasoning, ProviderMetadata: json.RawMessage(`{"redacted":"enc"}`)},
				text("Let me check."),
				{Kind: llm.PartToolCall, CallID: "call_1", Name: "read", Input: json.RawMessage(`{"path":"a.go"}`)},
				{Kind: llm.PartToolCall, CallID: "call_2", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, CallID: "call_2", Name: "bash", Output: "a.go"},
				{Kind: llm.PartToolResult, CallID: "call_1", Name: "read", Output: "no such file", IsError: true},
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{text("thanks")}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartReasoning, Text: "other model thoughts"},
				text(""),
				text("Done."),
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{text("next")}},
		},
		Tools: []llm.ToolDefinition{
			{Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "bash"},
		},
		ToolChoice:      llm.ToolChoiceNone,
		MaxOutputTokens: 2048,
		CacheKey:        "ses_01",
	}
}

const richWant = `{
  "model": "claude-test",
  "max_tokens": 2048,
  "stream": true,
  "system": [
    {"type": "text", "text": "You are sessiond."},
    {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
  ],
  "messages": [
    {"role": "user", "content": [
      {"type": "text", "text": "Look"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
      {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
      {"type": "text", "text": "<file name=\"notes.txt\" type=\"text/plain\">\nhello notes\n</file>"},
      {"type": "text", "text": "[Attached file \"a.zip\" (application/zip) at https://example.com/a.zip]"},
      {"type": "text", "text": "<system-reminder>\nInstructions changed.\n</system-reminder>"}
    ]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "my thoughts", "signature": "sig1"},
      {"type": "redacted_thinking", "data": "enc"},
      {"type": "text", "text": "Let me check."},
      {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.go"}},
      {"type": "tool_use", "id": "call_2", "name": "bash", "input": {"command": "ls"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "no such file"}], "is_error": true},
      {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "a.go"}]},
      {"type": "text", "text": "thanks"}
    ]},
    {"role": "assistant", "content": [
      {"type": "text", "text": "other model thoughts"},
      {"type": "text", "text": "Done."}
    ]},
    {"role": "user", "content": [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}]}
  ],
  "tools": [
    {"name": "read", "description": "Read a file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}},
    {"name": "bash", "input_schema": {"type": "object"}}
  ],
  "tool_choice": {"type": "none"}
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
	if r.Method != "POST" || r.Path != "/v1/messages" || r.Header.Get("Authorization") != "Bearer sk-ant-test" || r.Header.Get("Anthropic-Version") == "" {
		t.Fatalf("request %s %s authorization %q anthropic-version %q", r.Method, r.Path, r.Header.Get("Authorization"), r.Header.Get("Anthropic-Version"))
	}
	wantJSON(t, r.Body, richWant)
}

func TestLoweringVariants(t *testing.T) {
	history := []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{text("go")}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartToolCall, CallID: "t1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
			{Kind: llm.PartToolCall, CallID: "t2", Name: "read", Input: json.RawMessage(`{}`)},
			{Kind: llm.PartToolCall, CallID: "t3", Name: "bash"},
			// Arguments cut off by max_tokens, kept as a JSON string, and
			// an array: tool_use.input is an object or the API refuses it.
			{Kind: llm.PartToolCall, CallID: "t4", Name: "bash", Input: json.RawMessage(`"{\"command\": \"ls -"`)},
			{Kind: llm.PartToolCall, CallID: "t5", Name: "bash", Input: json.RawMessage(`null`)},
		}},
		{Role: llm.RoleTool, Parts: []llm.Part{
			{Kind: llm.PartToolResult, CallID: "t1", Output: ""},
			{Kind: llm.PartToolResult, CallID: "t3", Output: "x"},
			{Kind: llm.PartToolResult, CallID: "t4", Output: "bad", IsError: true},
			{Kind: llm.PartToolResult, CallID: "t5", Output: "bad", IsError: true},
		}},
		{Role: llm.RoleSystem, Parts: []llm.Part{text("You have reached the maximum number of steps.")}},
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		req  llm.Request
		want string
	}{
		{
			name: "final step: placeholder tools, missing result, reminder merged",
			req:  llm.Request{Model: messages.ModelRef{ID: "claude-test"}, Messages: history, ToolChoice: llm.ToolChoiceNone},
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,
			  "messages":[
			    {"role":"user","content":[{"type":"text","text":"go"}]},
			    {"role":"assistant","content":[
			      {"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"}},
			      {"type":"tool_use","id":"t2","name":"read","input":{}},
			      {"type":"tool_use","id":"t3","name":"bash","input":{}},
			      {"type":"tool_use","id":"t4","name":"bash","input":{"invalid_input":"{\"command\": \"ls -"}},
			      {"type":"tool_use","id":"t5","name":"bash","input":{"invalid_input":"null"}}]},
			    {"role":"user","content":[
			      {"type":"tool_result","tool_use_id":"t1"},
			      {"type":"tool_result","tool_use_id":"t2","is_error":true,"content":[{"type":"text","text":"Tool result missing: the tool call was interrupted before it produced a result."}]},
			      {"type":"tool_result","tool_use_id":"t3","content":[{"type":"text","text":"x"}]},
			      {"type":"tool_result","tool_use_id":"t4","is_error":true,"content":[{"type":"text","text":"bad"}]},
			      {"type":"tool_result","tool_use_id":"t5","is_error":true,"content":[{"type":"text","text":"bad"}]},
			      {"type":"text","text":"<system-reminder>\nYou have reached the maximum number of steps.\n</system-reminder>","cache_control":{"type":"ephemeral"}}]}],
			  "tools":[
			    {"name":"bash","description":"Not available in this step.","input_schema":{"type":"object"}},
			    {"name":"read","description":"Not available in this step.","input_schema":{"type":"object"}}],
			  "tool_choice":{"type":"none"}}`,
		},
		{
			// tool_choice may only be sent with tools: the API refuses it
			// otherwise.
			name: "final step of an agent without tools: no tool_choice",
			req:  llm.Request{Model: messages.ModelRef{ID: "claude-test"}, Messages: simpleRequest().Messages, ToolChoice: llm.ToolChoiceNone},
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,
			  "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
		},
		{
			name: "thinking budget",
			cfg:  Config{ThinkingBudget: 1024},
			req:  simpleRequest(),
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},
			  "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
		},
		{
			name: "thinking budget above max_tokens is off",
			cfg:  Config{ThinkingBudget: 4096, MaxTokens: 4096},
			req:  simpleRequest(),
			want: `{"model":"claude-test","max_tokens":4096,"stream":true,
			  "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
		},
		{
			name: "adaptive thinking",
			cfg:  Config{AdaptiveThinking: true, ThinkingBudget: 1024},
			req:  simpleRequest(),
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,"thinking":{"type":"adaptive"},
			  "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := ssetest.NewServer(t, okReply)
			cfg := tc.cfg
			cfg.BaseURL, cfg.HTTPClient = srv.URL, srv.Client()
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ssetest.Collect(p.Stream(t.Context(), tc.req)); err != nil {
				t.Fatal(err)
			}
			wantJSON(t, srv.LastBody(), tc.want)
		})
	}
}

func TestLoweringErrors(t *testing.T) {
	t.Run("missing model", func(t *testing.T) {
		req := simpleRequest()
		req.Model.ID = ""
		_, srv, err := run(t, req, okReply)
		wantError(t, err, messages.ErrProviderInvalidRequest, 0, 0)
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
	for name, schema := range map[string]string{"not an object": `"x"`, "bad required": `{"required":"path"}`} {
		t.Run(name, func(t *testing.T) {
			req := simpleRequest()
			req.Tools = []llm.ToolDefinition{{Name: "x", InputSchema: json.RawMessage(schema)}}
			_, _, err := run(t, req, okReply)
			wantError(t, err, messages.ErrProviderInvalidRequest, 0, 0)
		})
	}
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

// TestLoweringWhatTheAPIRefuses: history may hold what the API refuses
// on every later request: a text of white space only (a model's "\n\n"
// before its tool calls; "text content blocks must contain non-whitespace
// text"), and tool call IDs another provider made ("functions.read:0",
// "call|abc": tool_use.id must match ^[a-zA-Z0-9_-]+$). Blank text is left
// out; a foreign ID is rewritten the same way in its call and its result,
// and distinct IDs stay distinct.
func TestLoweringWhatTheAPIRefuses(t *testing.T) {
	ids := []string{"functions.read:0", "functions.read_0", "call|abc", "call_abc", "toolu_01ok"}
	var calls, results []llm.Part
	calls = append(calls, text("\n\n"))
	for _, id := range ids {
		calls = append(calls, llm.Part{Kind: llm.PartToolCall, CallID: id, Name: "read", Input: json.RawMessage(`{"path":"a"}`)})
		results = append(results, llm.Part{Kind: llm.PartToolResult, CallID: id, Name: "read", Output: "  "})
	}
	req := simpleRequest()
	req.Tools = []llm.ToolDefinition{{Name: "read"}}
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: calls},
		llm.Message{Role: llm.RoleTool, Parts: results},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text(" "), text("go on")}},
	)
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	var used, answered []string
	for _, m := range sentMessages(t, srv.LastBody()) {
		for _, raw := range m.Content {
			var b struct {
				Type      string          `json:"type"`
				Text      *string         `json:"text"`
				ID        string          `json:"id"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatal(err)
			}
			switch {
			case b.Type == "text" && strings.TrimSpace(*b.Text) == "":
				t.Errorf("a blank text block went out: %s", raw)
			case b.Type == "tool_use":
				used = append(used, b.ID)
			case b.Type == "tool_result":
				answered = append(answered, b.ToolUseID)
				if b.Content != nil {
					t.Errorf("a blank result went out as text: %s", raw)
				}
			}
		}
	}
	if !slices.Equal(used, answered) || len(used) != len(ids) || used[len(used)-1] != "toolu_01ok" {
		t.Fatalf("calls %q, results %q", used, answered)
	}
	seen := map[string]bool{}
	for _, id := range used {
		if !valid.MatchString(id) || seen[id] {
			t.Fatalf("ID %q is refused or repeated: %q", id, used)
		}
		seen[id] = true
	}
}

// TestHostedToolsEachOnce: a hosted tool named twice is declared once, and
// the names after it are still checked.
func TestHostedToolsEachOnce(t *testing.T) {
	tools, err := hostedTools([]string{"web_search", "web_search"})
	if err != nil || len(tools) != 1 {
		t.Fatalf("%d tools, %v; want one", len(tools), err)
	}
	_, err = hostedTools([]string{"web_search", "web_search", "bogus"})
	wantError(t, err, messages.ErrProviderInvalidRequest, 0, 0)
}

// TestContinuedMessageAtTheStart: the assistant message a request
// continues may be the first of its history (a compacted one can start
// there).
func TestContinuedMessageAtTheStart(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: "c1", Name: "read"}}},
		{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "c1", Output: "x"}}},
	}
	if i := continuedMessage(msgs); i != 0 {
		t.Fatalf("continued message %d, want 0", i)
	}
	if i := continuedMessage(append(msgs, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("next")}})); i != -1 {
		t.Fatalf("continued message %d after a user turn, want -1", i)
	}
}

// TestDeferredCallsPickOnlyUnansweredHostedCalls: of the message a request
// continues, only hosted calls (executed by the provider) that have an ID
// and a name and no hosted result in the same message are deferred; local
// calls, answered ones and results are not, and nothing is when the
// request does not continue an assistant message.
func TestDeferredCallsPickOnlyUnansweredHostedCalls(t *testing.T) {
	hosted := func(kind llm.PartKind, id, name string) llm.Part {
		return llm.Part{Kind: kind, CallID: id, Name: name, Executed: true}
	}
	asst := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
		hosted(llm.PartToolCall, "s1", "web_search"), // answered below
		hosted(llm.PartToolResult, "s1", "web_search"),
		hosted(llm.PartToolCall, "s2", "web_search"), // deferred
		hosted(llm.PartToolCall, "", "web_search"),
		hosted(llm.PartToolCall, "s3", ""),
		hosted(llm.PartToolResult, "s4", "web_search"),       // a result without its call
		{Kind: llm.PartToolCall, CallID: "c1", Name: "read"}, // local
	}}
	got := deferredCalls([]llm.Message{asst, {Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "c1", Output: "x"}}}})
	if len(got) != 1 || got["s2"].CallID != "s2" {
		t.Fatalf("deferred %v, want only s2", got)
	}
	if got := deferredCalls([]llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{text("go")}}, asst, {Role: llm.RoleUser, Parts: []llm.Part{text("next")}}}); got != nil {
		t.Fatalf("deferred %v from a message the request does not continue", got)
	}
}

// TestWebCitationsGoBackAlone: of a text part's kept citations only web
// search ones with an encrypted index and a URL go back; the others (other
// kinds, incomplete, not JSON objects) are skipped wherever they stand.
func TestWebCitationsGoBackAlone(t *testing.T) {
	meta := `{"citations":[
	  "not an object",
	  {"type":"char_location","cited_text":"c","encrypted_index":"e","url":"https://a"},
	  {"type":"web_search_result_location","cited_text":"c","url":"https://a"},
	  {"type":"web_search_result_location","cited_text":"c","encrypted_index":"e"},
	  {"type":"web_search_result_location","cited_text":"kept","encrypted_index":"e1","title":"T","url":"https://kept"}]}`
	got := webCitations(json.RawMessage(meta))
	if len(got) != 1 {
		t.Fatalf("%d citations, want 1", len(got))
	}
	if w := got[0].OfWebSearchResultLocation; w == nil || w.CitedText != "kept" || w.EncryptedIndex != "e1" || w.URL != "https://kept" || w.Title.Value != "T" {
		t.Fatalf("citation %+v", got[0])
	}
}

// TestToolUseIDCharacterRange: an ID of the characters the API allows
// (^[a-zA-Z0-9_-]+$, the ends of each range included) goes unchanged; one
// with the characters just outside them is rewritten.
func TestToolUseIDCharacterRange(t *testing.T) {
	if id := "09azAZ_-"; toolUseID(id) != id {
		t.Fatalf("%q rewritten to %q", id, toolUseID(id))
	}
	for _, c := range "/:`{@[" {
		if id := "a" + string(c); toolUseID(id) == id {
			t.Errorf("%q kept, which the API refuses", id)
		}
	}
}

// TestServerToolUseWithNullMetadata: a hosted call whose kept metadata is
// JSON null (valid JSON, no members) lowers to the call's own fields.
func TestServerToolUseWithNullMetadata(t *testing.T) {
	b := serverToolUse(llm.Part{Kind: llm.PartToolCall, CallID: "srvtoolu_1", Name: "web_search", Executed: true,
		Input: json.RawMessage(`{"query":"q"}`), ProviderMetadata: json.RawMessage(`null`)})
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, raw, `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"q"}}`)
}

// TestThinkingNeedsASignedStartToGoOnWithTools: with thinking on, the API
// refuses a history whose last assistant message called tools without
// starting with a thinking block, which is what the runner sends for a
// step that failed or another model's step (their provider state is not
// replayed). Such a request goes without thinking, so the Session can go
// on; thinking comes back once the last assistant message is this model's
// own or called no tools.
func TestThinkingNeedsASignedStartToGoOnWithTools(t *testing.T) {
	reasoning := func(meta string) llm.Part {
		p := llm.Part{Kind: llm.PartReasoning, Text: "Read it."}
		if meta != "" {
			p.ProviderMetadata = json.RawMessage(meta)
		}
		return p
	}
	call := func(id string) llm.Part {
		return llm.Part{Kind: llm.PartToolCall, CallID: id, Name: "read", Input: json.RawMessage(`{}`)}
	}
	result := func(id string) llm.Message {
		return llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: id, Name: "read",
			Output: "Error (aborted): Tool execution interrupted", IsError: true}}}
	}
	assistant := func(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleAssistant, Parts: parts} }
	user := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "go on"}}}
	for _, tc := range []struct {
		name     string
		adaptive bool
		history  []llm.Message
		thinking bool
	}{
		{"no assistant message yet", false, nil, true},
		{"signed thinking before the calls", false, []llm.Message{assistant(reasoning(`{"signature":"sig"}`), call("t1")), result("t1")}, true},
		{"redacted thinking before the calls", false, []llm.Message{assistant(reasoning(`{"redacted":"data"}`), call("t1")), result("t1")}, true},
		{"a failed step's reasoning, as text", false, []llm.Message{assistant(reasoning(""), call("t1")), result("t1")}, false},
		{"another model's calls", false, []llm.Message{assistant(call("t1")), result("t1")}, false},
		{"another model's calls, adaptive", true, []llm.Message{assistant(call("t1")), result("t1")}, false},
		{"a new prompt after them", false, []llm.Message{assistant(call("t1")), result("t1"), user}, false},
		{"the loop ended with an answer", false, []llm.Message{assistant(call("t1")), result("t1"),
			assistant(reasoning(`{"signature":"sig"}`), llm.Part{Kind: llm.PartText, Text: "Done."}), user}, true},
		{"an answer without thinking after them", false, []llm.Message{assistant(call("t1")), result("t1"),
			assistant(llm.Part{Kind: llm.PartText, Text: "Done."}), user}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := ssetest.NewServer(t, okReply)
			p, err := New(Config{BaseURL: srv.URL, HTTPClient: srv.Client(), ThinkingBudget: 1024, AdaptiveThinking: tc.adaptive})
			if err != nil {
				t.Fatal(err)
			}
			req := simpleRequest()
			req.Tools = []llm.ToolDefinition{{Name: "read"}}
			req.Messages = append(req.Messages, tc.history...)
			if _, err := ssetest.Collect(p.Stream(t.Context(), req)); err != nil {
				t.Fatal(err)
			}
			var body map[string]json.RawMessage
			if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
				t.Fatal(err)
			}
			if _, on := body["thinking"]; on != tc.thinking {
				t.Fatalf("thinking sent: %v, want %v: %s", on, tc.thinking, srv.LastBody())
			}
		})
	}
}

// switchedToolLoop is a history of two steps of another provider whose
// call IDs start over each response (Kimi's "functions.read:0"), each step
// answered: what the runner sends after a switch from it.
func switchedToolLoop() []llm.Message {
	step := func(out string) []llm.Message {
		return []llm.Message{
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: "functions.read:0", Name: "read", Input: json.RawMessage(`{}`)}}},
			{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "functions.read:0", Name: "read", Output: out}}},
		}
	}
	return append(step("first"), step("second")...)
}

// TestRepeatedCallIDsAfterASwitch: call IDs are unique only within a step,
// and the API refuses a request whose tool_use IDs repeat ("tool_use ids
// must be unique"), so a switch from a server that starts its IDs over each
// response would have every later request refused. Each repeat goes with
// an ID of its own, its result with it.
func TestRepeatedCallIDsAfterASwitch(t *testing.T) {
	req := simpleRequest()
	req.Tools = []llm.ToolDefinition{{Name: "read"}}
	req.Messages = append(req.Messages, switchedToolLoop()...)
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Content []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
				Content   []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
		t.Fatal(err)
	}
	var uses []string
	results := map[string]string{}
	for _, m := range body.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				uses = append(uses, b.ID)
			case "tool_result":
				results[b.ToolUseID] = b.Content[0].Text
			}
		}
	}
	if len(uses) != 2 || uses[0] == uses[1] {
		t.Fatalf("tool_use ids %q, want two distinct: %s", uses, srv.LastBody())
	}
	if results[uses[0]] != "first" || results[uses[1]] != "second" {
		t.Fatalf("results by tool_use id %q for ids %q: %s", results, uses, srv.LastBody())
	}
}

// TestRequestEndsWithTheUsersTurn: an explicit run after a step that was
// interrupted mid-answer (or that answered) sends a history that ends with
// an assistant message. The API takes it as a prefill, which recent models
// refuse ("This model does not support assistant message prefill. The
// conversation must end with a user message."), as it refuses one ending
// in white space or, with thinking on, one not starting with a thinking
// block: every run would be refused until a new prompt. The request ends
// with a user turn asking to go on instead, and goes with thinking. A
// paused turn of hosted tool use is sent back as the last message, as the
// API asks, with the white space its text ends with trimmed. The step that
// answers either request follows it in later ones as it was sent.
func TestRequestEndsWithTheUsersTurn(t *testing.T) {
	srv := ssetest.NewServer(t, okReply)
	p, err := New(Config{BaseURL: srv.URL, HTTPClient: srv.Client(), ThinkingBudget: 1024})
	if err != nil {
		t.Fatal(err)
	}
	req := simpleRequest()
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
		{Kind: llm.PartReasoning, Text: "Thinking it over."}, text("The answer is \n\n")}})
	if _, err := ssetest.Collect(p.Stream(t.Context(), req)); err != nil {
		t.Fatal(err)
	}
	sent := sentMessages(t, srv.LastBody())
	if len(sent) != 3 || sent[2].Role != "user" || !strings.Contains(string(sent[2].Content[0]), "Continue from where") {
		t.Fatalf("the request does not end with the user's turn: %s", srv.LastBody())
	}
	if !strings.Contains(string(srv.LastBody()), `"thinking":{`) {
		t.Fatalf("thinking not sent: %s", srv.LastBody())
	}
	// The answer to that request follows the same turn in later ones: two
	// assistant messages in a row are not one prefilled turn.
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{text("42.")}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("thanks")}})
	if _, err := ssetest.Collect(p.Stream(t.Context(), req)); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range sentMessages(t, srv.LastBody()) {
		roles = append(roles, m.Role)
	}
	if want := []string{"user", "assistant", "user", "assistant", "user"}; !slices.Equal(roles, want) ||
		!strings.Contains(string(sentMessages(t, srv.LastBody())[2].Content[0]), "Continue from where") {
		t.Fatalf("roles %q, want %q with the user's turn asking to go on: %s", roles, want, srv.LastBody())
	}

	// A paused turn goes back last, trimmed, and without thinking: it
	// starts with no thinking block.
	paused := simpleRequest()
	paused.HostedTools = []string{"web_search"}
	paused.Messages = append(paused.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
		{Kind: llm.PartToolCall, CallID: "srvtoolu_1", Name: "web_search", Input: json.RawMessage(`{"query":"go"}`), Executed: true},
		{Kind: llm.PartToolResult, CallID: "srvtoolu_1", Name: "web_search", Executed: true,
			ProviderMetadata: json.RawMessage(`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}`)},
		text("Searching more. \n")}})
	if _, err := ssetest.Collect(p.Stream(t.Context(), paused)); err != nil {
		t.Fatal(err)
	}
	sent = sentMessages(t, srv.LastBody())
	if len(sent) != 2 || sent[1].Role != "assistant" || len(sent[1].Content) != 3 {
		t.Fatalf("the paused turn is not sent back last: %s", srv.LastBody())
	}
	wantJSON(t, sent[1].Content[2], `{"type":"text","text":"Searching more.","cache_control":{"type":"ephemeral"}}`)
	if strings.Contains(string(srv.LastBody()), `"thinking":{`) {
		t.Fatalf("thinking sent with a final assistant message that does not start with it: %s", srv.LastBody())
	}
	// The step that went on with it is the same turn.
	paused.Messages = append(paused.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{text("Found it.")}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("thanks")}})
	if _, err := ssetest.Collect(p.Stream(t.Context(), paused)); err != nil {
		t.Fatal(err)
	}
	if sent = sentMessages(t, srv.LastBody()); len(sent) != 3 || len(sent[1].Content) != 4 {
		t.Fatalf("the paused turn and the step going on with it are not one turn: %s", srv.LastBody())
	}
}

// TestPlaceholderForACutOffHostedCall: a hosted call cut off before its
// input was complete reaches history as a local call (the stream had not
// said it was hosted when it broke off), named after the hosted tool. On
// the final step, whose tools are placeholders for the names history uses,
// it must not declare that name a second time beside the hosted tool: the
// API refuses a request whose tool names repeat, every final step of the
// Session.
func TestPlaceholderForACutOffHostedCall(t *testing.T) {
	req := simpleRequest()
	req.HostedTools = []string{"web_search"}
	req.ToolChoice = llm.ToolChoiceNone
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartToolCall, CallID: "srvtoolu_1", Name: "web_search"},
			{Kind: llm.PartToolCall, CallID: "toolu_1", Name: "read", Input: json.RawMessage(`{}`)}}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
			{Kind: llm.PartToolResult, CallID: "srvtoolu_1", Name: "web_search", IsError: true,
				Output: "Error (tool.result-missing): The tool call web_search was cut off before its input was complete"},
			{Kind: llm.PartToolResult, CallID: "toolu_1", Name: "read", Output: "a"}}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("go on")}})
	_, srv, err := run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range body.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"read", "web_search"}) {
		t.Fatalf("tool names %q, want read's placeholder and the hosted web_search once: %s", names, srv.LastBody())
	}
}

// TestMadeUpToolNames: a model may call a name no tool has (another
// provider's "functions.read", a chat template's leaked tokens); the
// runner refuses the call, but it stays in the history, and the API
// refuses a tool_use or tool name outside ^[a-zA-Z0-9_-]{1,64}$ on every
// later request. Such a name goes back in a form it accepts, the same in
// the call and in the placeholder a request without tools declares.
func TestMadeUpToolNames(t *testing.T) {
	for _, tools := range []bool{true, false} {
		req := simpleRequest()
		if tools {
			req.Tools = []llm.ToolDefinition{{Name: "read"}}
		}
		history, want := ssetest.MadeUpToolCalls("toolu_")
		req.Messages = append(req.Messages, history...)
		_, srv, err := run(t, req, okReply)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Tools    []struct{ Name string } `json:"tools"`
			Messages []struct {
				Content []struct {
					Type string `json:"type"`
					Name string `json:"name"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(srv.LastBody(), &body); err != nil {
			t.Fatal(err)
		}
		valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
		var used []string
		for _, m := range body.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_use" {
					used = append(used, b.Name)
				}
			}
		}
		if !slices.Equal(used, want) {
			t.Fatalf("tools %v: tool_use names %q, want %q", tools, used, want)
		}
		var declared []string
		for _, tool := range body.Tools {
			if !valid.MatchString(tool.Name) {
				t.Errorf("tools %v: declared %q", tools, tool.Name)
			}
			declared = append(declared, tool.Name)
		}
		if !tools && !slices.Equal(declared, want) {
			t.Errorf("placeholders %q, want one per name called: %q", declared, want)
		}
	}
}
