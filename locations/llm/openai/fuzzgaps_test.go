package openai

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// FuzzLowerHistory lowers a history whose stored parts carry arbitrary
// provider metadata, call IDs, call arguments and attachment URLs:
// lowering never panics, the request encodes as JSON, and its messages are
// what Chat Completions and the chat templates of compatible servers take:
// a system message only first, never two user messages in a row, no empty
// assistant message, tool call IDs of at most 40 bytes whose arguments
// are JSON, and each call answered by exactly one tool message right
// after its assistant message.
func FuzzLowerHistory(f *testing.F) {
	for _, s := range []struct {
		meta, input, callID, url string
	}{
		{`{"native":true,"field":"reasoning_content"}`, `{"path":"a"}`, "call_1", "data:image/png;base64,AAAA"},
		{`{"native":true}`, `{}`, "toolu_0123456789012345678901234567890123456789", "https://a/b.png"},
		{`{"field":"reasoning_content"}`, `[1]`, "functions.read:0", "file:///etc/passwd"},
		{`{`, `"{\"a\":"`, "", "data:,x"},
		{`null`, ``, "é" + string(make([]byte, 45)), "data:text/plain;base64,@@"},
		{`{"field":5}`, "\xff", "call_1", ""},
	} {
		for _, shape := range []uint8{0, 0xff, 0x55, 0xaa} {
			f.Add([]byte(s.meta), []byte(s.input), s.callID, s.url, shape)
		}
	}
	f.Fuzz(func(t *testing.T, meta, input []byte, callID, url string, shape uint8) {
		if !utf8.ValidString(callID) {
			// Call IDs come from providers' JSON, which is UTF-8; JSON
			// would carry another as U+FFFD, three bytes for each byte.
			return
		}
		metaIf := func(bit uint8) json.RawMessage {
			if shape&bit != 0 {
				return json.RawMessage(meta)
			}
			return nil
		}
		textIf := func(bit uint8, s string) string {
			if shape&bit != 0 {
				return s
			}
			return ""
		}
		req := simpleRequest()
		req.System = []string{textIf(1, "system")}
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
				{Kind: llm.PartFile, File: &messages.File{Mime: "image/png", Filename: "f", URL: url}}}},
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartReasoning, Text: "thinking", ProviderMetadata: metaIf(2)},
				{Kind: llm.PartText, Text: textIf(4, "Looking.")},
			}},
			llm.Message{Role: llm.RoleSystem, Parts: []llm.Part{text(textIf(8, "Instructions changed."))}},
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartReasoning, Text: "more", ProviderMetadata: metaIf(16)},
				{Kind: llm.PartToolCall, CallID: callID, Name: "read", Input: json.RawMessage(input)},
				{Kind: llm.PartToolCall, CallID: callID + "x", Name: "web_search", Input: json.RawMessage(input), Executed: true},
			}},
		)
		if shape&32 != 0 {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, CallID: callID, Name: "read", Output: textIf(64, "out"), IsError: shape&128 != 0}}})
		}
		if shape&64 != 0 {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("next")}})
		}
		// shape's bits are all taken: echo follows the input's length.
		params, err := lower(req, shape&128 != 0, options{echo: len(input)%2 == 1, textOnly: len(input)%3 == 1})
		if err != nil {
			t.Fatalf("lower: %v", err)
		}
		body, err := json.Marshal(params)
		if err != nil {
			t.Fatalf("the request does not encode: %v", err)
		}
		var sent struct {
			Messages []struct {
				Role       string          `json:"role"`
				Content    json.RawMessage `json:"content"`
				ToolCallID *string         `json:"tool_call_id"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		var awaiting map[string]bool // calls of the last assistant message not yet answered
		for i, m := range sent.Messages {
			if m.Role != "tool" && len(awaiting) > 0 {
				t.Fatalf("calls %v unanswered before a %s message: %s", awaiting, m.Role, body)
			}
			switch m.Role {
			case "system":
				if i != 0 {
					t.Fatalf("a system message at %d: %s", i, body)
				}
			case "user":
				if i > 0 && sent.Messages[i-1].Role == "user" {
					t.Fatalf("two user messages in a row: %s", body)
				}
				if len(m.Content) == 0 || string(m.Content) == `""` || string(m.Content) == `null` || string(m.Content) == `[]` {
					t.Fatalf("empty user message: %s", body)
				}
			case "assistant":
				if (len(m.Content) == 0 || string(m.Content) == `null` || string(m.Content) == `""`) && len(m.ToolCalls) == 0 {
					t.Fatalf("empty assistant message: %s", body)
				}
				awaiting = map[string]bool{}
				for _, c := range m.ToolCalls {
					var args map[string]json.RawMessage
					if len(c.ID) > maxCallID || c.Function.Name == "" || json.Unmarshal([]byte(c.Function.Arguments), &args) != nil || args == nil {
						t.Fatalf("tool call %+v is refused by the API: %s", c, body)
					}
					if awaiting[c.ID] {
						t.Fatalf("two calls with ID %q: %s", c.ID, body)
					}
					awaiting[c.ID] = true
				}
			case "tool":
				if m.ToolCallID == nil || !awaiting[*m.ToolCallID] {
					t.Fatalf("tool message answers no open call: %s", body)
				}
				delete(awaiting, *m.ToolCallID)
			default:
				t.Fatalf("role %q: %s", m.Role, body)
			}
		}
		if len(awaiting) > 0 {
			t.Fatalf("calls %v unanswered at the end: %s", awaiting, body)
		}
	})
}
