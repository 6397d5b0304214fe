package wire

import (
	"bytes"
	"encoding/json"

	"github.com/sessiond/sessiond/locations/llm"
)

// ObjectInput returns a call's arguments, as history keeps them, as the
// JSON object a provider takes back: Anthropic refuses a tool_use input that
// is not one, and OpenAI-compatible servers that render history through a
// chat template (vLLM, llama.cpp) decode the arguments and expect an object.
// Arguments that are not an object (a call cut off by the output limit, or
// another model's malformed output, which the runner keeps as a JSON string
// and answers with a validation error) go under invalid_input, so the model
// still sees what it sent: refused, they would fail every later request of
// the Session.
func ObjectInput(raw json.RawMessage) json.RawMessage {
	in := llm.ToolInput(raw)
	if t := bytes.TrimSpace(in); t[0] == '{' {
		return in
	}
	text := string(raw)
	var s string
	if bytes.HasPrefix(bytes.TrimSpace(in), []byte(`"`)) && json.Unmarshal(in, &s) == nil {
		text = s // the raw text of malformed arguments, kept as a string
	}
	b, _ := json.Marshal(map[string]string{"invalid_input": text}) // a map of strings always marshals
	return b
}
