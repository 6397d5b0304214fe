package wire

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/sessiond/sessiond/tools"
)

// MaxToolName is the longest tool name both APIs accept, in a tool's
// definition and in a call of the history (tools.ValidName's limit).
const MaxToolName = 64

// ToolName returns the name of a call in the history as both APIs accept
// it (^[a-zA-Z0-9_-]{1,64}$): unchanged when it does. A model may call a
// name no tool has: "functions.read", "read file", a chat template's
// leaked tokens ("read<|channel|>commentary"), an empty one. The runner
// refuses such a call as an unknown tool, but the call stays in the
// history, and a provider that checks names (after a switch to it, or the
// same one) would refuse every later request of the Session. Such a name
// goes with each other byte replaced by "_", cut to fit, and a hash of the
// whole name appended, so that distinct names stay distinct and the same
// name always lowers the same way (a request's prefix, and its cache,
// stay stable).
func ToolName(name string) string {
	if tools.ValidName(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tag := "_" + hex.EncodeToString(sum[:6])
	b := []byte(name)[:min(len(name), MaxToolName-len(tag))]
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		b = []byte("tool")
	}
	return string(b) + tag
}

// nameByte reports whether c may appear in a tool name.
func nameByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
