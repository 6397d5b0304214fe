package anthropic

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
)

// toolUseIDPattern is what the API accepts as tool_use.id and
// tool_result.tool_use_id.
var toolUseIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// FuzzLowerHistory lowers a history whose stored parts carry arbitrary
// provider metadata, call IDs and call arguments (what an earlier
// response, or a damaged store, left there): lowering never panics, the
// request encodes as JSON, and the body is one the API takes: every block
// has a type, no text block is blank, every tool_use has an ID the API
// accepts and an object input and is answered by a tool_result, and every
// server_tool_use is followed in its message by the result that answers
// it (unless the request continues that message).
func FuzzLowerHistory(f *testing.F) {
	for _, s := range []struct {
		meta, input, callID string
	}{
		{`{"signature":"sig"}`, `{"path":"a"}`, "toolu_1"},
		{`{"redacted":"enc"}`, `{}`, "functions.read:0"},
		{`{"citations":[{"type":"web_search_result_location","cited_text":"c","encrypted_index":"e","title":null,"url":"https://a"}]}`, `[1]`, "call|x"},
		{`{"type":"web_search_tool_result","tool_use_id":"s1","content":[]}`, `"{\"a\":"`, "s1"},
		{`{"type":"web_fetch_tool_result","tool_use_id":"s1","content":{"type":"web_fetch_tool_result_error","error_code":"x"}}`, ``, "s1"},
		{`{"caller":{"type":"direct"},"id":"other","input":7}`, `null`, "s1"},
		{`{"citations":[1,{"type":"web_search_result_location"}]}`, "\xff", ""},
		{`{"type":"code_execution_tool_result","tool_use_id":"","content":null}`, `{"a":1}`, ""},
		{`[]`, ` {"a":1} `, " "},
		{`null`, `1e400`, "s1"},
	} {
		for _, shape := range []uint8{0, 0x3f, 0x15, 0x2a} {
			f.Add([]byte(s.meta), []byte(s.input), s.callID, shape)
		}
	}
	f.Fuzz(func(t *testing.T, meta, input []byte, callID string, shape uint8) {
		metaIf := func(bit uint8) json.RawMessage {
			if shape&bit != 0 {
				return json.RawMessage(meta)
			}
			return nil
		}
		assistant := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartReasoning, Text: "thinking", ProviderMetadata: metaIf(1)},
			{Kind: llm.PartText, Text: "Looking.", ProviderMetadata: metaIf(2)},
			{Kind: llm.PartToolCall, CallID: callID, Name: "web_search", Input: json.RawMessage(input), Executed: true, ProviderMetadata: metaIf(4)},
			{Kind: llm.PartToolResult, CallID: callID, Name: "web_search", Output: "results", Executed: true, ProviderMetadata: metaIf(8)},
		}}
		req := simpleRequest()
		req.Messages = append(req.Messages, assistant)
		if shape&16 != 0 {
			assistant.Parts = append(assistant.Parts, llm.Part{Kind: llm.PartToolCall, CallID: callID, Name: "read", Input: json.RawMessage(input)})
			req.Messages[len(req.Messages)-1] = assistant
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, CallID: callID, Name: "read", Output: "ok"}}})
		}
		if shape&32 != 0 {
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("next")}})
		}
		params, err := lower(req, Config{MaxTokens: 1024})
		if err != nil {
			t.Fatalf("lower: %v", err)
		}
		body, err := json.Marshal(params)
		if err != nil {
			t.Fatalf("the request does not encode: %v", err)
		}
		var sent struct {
			Messages []sentTurn `json:"messages"`
		}
		if err := json.Unmarshal(body, &sent); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		var unanswered []string // tool_use IDs awaiting their tool_result
		for i, m := range sent.Messages {
			if i > 0 && m.Role == sent.Messages[i-1].Role {
				t.Fatalf("two %s turns in a row: %s", m.Role, body)
			}
			if m.Role == "user" && len(unanswered) > 0 {
				answered := map[string]bool{}
				for _, raw := range m.Content {
					var b struct {
						Type      string `json:"type"`
						ToolUseID string `json:"tool_use_id"`
					}
					_ = json.Unmarshal(raw, &b)
					if b.Type == "tool_result" {
						answered[b.ToolUseID] = true
					}
				}
				for _, id := range unanswered {
					if !answered[id] {
						t.Fatalf("tool_use %q has no tool_result in the next turn: %s", id, body)
					}
				}
				unanswered = nil
			}
			open := map[string]bool{} // server_tool_use IDs awaiting their result
			for _, raw := range m.Content {
				var b struct {
					Type      string          `json:"type"`
					Text      *string         `json:"text"`
					ID        *string         `json:"id"`
					Name      *string         `json:"name"`
					Input     json.RawMessage `json:"input"`
					ToolUseID *string         `json:"tool_use_id"`
				}
				if err := json.Unmarshal(raw, &b); err != nil {
					t.Fatalf("block %s: %v", raw, err)
				}
				switch {
				case b.Type == "":
					t.Fatalf("block without a type: %s", raw)
				case b.Type == "text" && (b.Text == nil || strings.TrimSpace(*b.Text) == ""):
					t.Fatalf("blank text block: %s", raw)
				case b.Type == "tool_use" || b.Type == "server_tool_use":
					var obj map[string]json.RawMessage
					if b.ID == nil || b.Name == nil || json.Unmarshal(b.Input, &obj) != nil || obj == nil {
						t.Fatalf("%s without an ID, a name or an object input: %s", b.Type, raw)
					}
					if b.Type == "tool_use" {
						if !toolUseIDPattern.MatchString(*b.ID) {
							t.Fatalf("tool_use ID %q is refused by the API: %s", *b.ID, raw)
						}
						unanswered = append(unanswered, *b.ID)
					} else {
						open[*b.ID] = true
					}
				case resultTypes[b.Type]:
					if b.ToolUseID == nil || !open[*b.ToolUseID] {
						t.Fatalf("%s answers no server_tool_use before it: %s", b.Type, body)
					}
					delete(open, *b.ToolUseID)
				}
			}
			// The request continues the assistant message when no user
			// turn follows it (its tool results may).
			continued := m.Role == "assistant" && shape&32 == 0
			if len(open) > 0 && !continued {
				t.Fatalf("server_tool_use without its result in a message the request does not continue: %s", body)
			}
		}
	})
}
