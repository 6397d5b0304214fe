package wire

import (
	"encoding/json"
	"strings"
)

// ToolInput returns the complete arguments of a tool call as JSON. Empty
// arguments become {} (models emit nothing for tools without parameters);
// valid JSON is returned as is; anything else, which only a malformed model
// output produces, becomes a JSON string holding the raw text, so that the
// runner's schema validation reports it to the model instead of the stream
// carrying invalid JSON.
func ToolInput(raw string) json.RawMessage {
	if strings.TrimSpace(raw) == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(raw)) {
		return json.RawMessage(raw)
	}
	b, _ := json.Marshal(raw) // a string always marshals
	return b
}
