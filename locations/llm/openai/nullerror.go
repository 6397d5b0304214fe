package openai

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/sessiond/sessiond/locations/llm/internal/wire"
)

// errorMember is in every line fixChunk changes: the name of an error
// member, or the value of a bare error object's object member. A quote
// inside a JSON string is escaped, so content and arguments never hold it.
var errorMember = []byte(`"error"`)

// withoutNullErrors returns res with a body whose chunks fixChunk puts in
// the shape the SDK reads, when res is a 200 event stream.
//
// Some compatible servers (Microsoft's Foundry Local) add "error": null to
// every chunk. The SDK fails a stream at the first chunk that has an error
// member, whatever its value, so every request to such a server failed as
// provider.internal, retried four times and failed again: no step could
// ever finish.
func withoutNullErrors(res *http.Response) *http.Response {
	if wire.EventStream(res) {
		res.Body = wire.RewriteLines(res.Body, fixChunk)
	}
	return res
}

// fixChunk returns line, a line of an event stream, with its chunk in the
// shape the SDK reads: without its error member when that member is null,
// and a bare error object ({"object": "error", "message": ...}, the shape
// of older vLLM's error bodies, which it also sends inside a stream before
// [DONE]) inside an error member. The SDK read a bare error object as a
// chunk without choices and skipped it, so a failure passed for a response
// cut short (provider.transport, whatever it said).
func fixChunk(line []byte) []byte {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(rest, errorMember) {
		return line
	}
	payload := bytes.TrimSpace(rest)
	var members map[string]json.RawMessage
	if json.Unmarshal(payload, &members) != nil {
		return line
	}
	var out []byte
	switch {
	case string(members["error"]) == "null":
		delete(members, "error")
		out, _ = json.Marshal(members) // raw JSON values always marshal
	case members["error"] == nil && string(members["object"]) == `"error"`:
		out, _ = json.Marshal(map[string]json.RawMessage{"error": payload})
	default:
		return line
	}
	end := line[len(bytes.TrimRight(line, "\r\n")):]
	return append(append([]byte("data: "), out...), end...)
}
