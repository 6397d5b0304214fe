package script_test

import (
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// text returns a message of role holding the text s.
func text(role llm.Role, s string) llm.Message {
	return llm.Message{Role: role, Parts: []llm.Part{{Kind: llm.PartText, Text: s}}}
}

// call returns an assistant message calling the tool name.
func call(id, name string) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: id, Name: name, Input: []byte(`{}`)}}}
}

// result returns a message of role holding a result of the tool name.
func result(role llm.Role, id, name string) llm.Message {
	return llm.Message{Role: role, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: id, Name: name, Output: "ok"}}}
}

func TestRoundAndLastUserText(t *testing.T) {
	tests := []struct {
		name     string
		messages []llm.Message
		round    int
		lastUser string
	}{
		{"empty", nil, 0, ""},
		{"first prompt", []llm.Message{text(llm.RoleUser, "hi")}, 0, "hi"},
		{"after one tool round", []llm.Message{text(llm.RoleUser, "hi"), call("c1", "read"), result(llm.RoleTool, "c1", "read")}, 1, "hi"},
		{"after two tool rounds", []llm.Message{text(llm.RoleUser, "hi"), call("c1", "read"), result(llm.RoleTool, "c1", "read"),
			call("c2", "bash"), result(llm.RoleTool, "c2", "bash")}, 2, "hi"},
		{"a new prompt resets the round", []llm.Message{text(llm.RoleUser, "hi"), call("c1", "read"), result(llm.RoleTool, "c1", "read"),
			text(llm.RoleAssistant, "done"), text(llm.RoleUser, "again")}, 0, "again"},
		{"tool results lowered as user turns do not reset", []llm.Message{text(llm.RoleUser, "hi"), call("c1", "read"),
			result(llm.RoleUser, "c1", "read")}, 1, "hi"},
		{"system messages do not count", []llm.Message{text(llm.RoleUser, "hi"), text(llm.RoleSystem, "update"), call("c1", "read")}, 1, "hi"},
		{"no user message counts every assistant message", []llm.Message{text(llm.RoleAssistant, "a"), text(llm.RoleAssistant, "b")}, 2, ""},
		{"text parts are joined", []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "a"},
			{Kind: llm.PartFile, File: &messages.File{URL: "x"}}, {Kind: llm.PartText, Text: "b"}}}}, 0, "a\nb"},
		{"a file-only prompt is a user message", []llm.Message{text(llm.RoleUser, "old"), call("c", "read"),
			{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartFile, File: &messages.File{URL: "x"}}}}}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := llm.Request{Messages: tt.messages}
			if got := script.Round(req); got != tt.round {
				t.Errorf("Round = %d, want %d", got, tt.round)
			}
			if got := script.LastUserText(req); got != tt.lastUser {
				t.Errorf("LastUserText = %q, want %q", got, tt.lastUser)
			}
		})
	}
}

func TestMatchers(t *testing.T) {
	base := llm.Request{
		Model:    messages.ModelRef{ProviderID: "demo", ID: "meta/llama"},
		System:   []string{"You are helpful.", "Summarize the conversation."},
		CacheKey: "ses_1",
		Messages: []llm.Message{text(llm.RoleUser, "please read notes"), call("c1", "read"), result(llm.RoleTool, "c1", "read")},
	}
	tests := []struct {
		name string
		m    script.Matcher
		want bool
	}{
		{"session key", script.SessionKey("ses_1"), true},
		{"other session key", script.SessionKey("ses_2"), false},
		{"model", script.ForModel("demo/meta/llama"), true},
		{"other model", script.ForModel("demo/meta"), false},
		{"last user contains", script.LastUserContains("notes"), true},
		{"last user lacks", script.LastUserContains("bash"), false},
		{"system contains", script.SystemContains("Summarize"), true},
		{"system lacks", script.SystemContains("compact"), false},
		{"round", script.OnRound(1), true},
		{"other round", script.OnRound(0), false},
		{"after tool", script.AfterTool("read"), true},
		{"after any tool", script.AfterTool("*"), true},
		{"after other tool", script.AfterTool("bash"), false},
		{"all hold", script.All(script.OnRound(1), script.AfterTool("read"), nil), true},
		{"one fails", script.All(script.OnRound(1), script.AfterTool("bash")), false},
		{"empty all", script.All(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m(base); got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
	if script.AfterTool("*")(llm.Request{}) {
		t.Error("AfterTool matched a request without messages")
	}
	if script.AfterTool("*")(userRequest("hi")) {
		t.Error("AfterTool matched a request ending in a prompt")
	}
}
