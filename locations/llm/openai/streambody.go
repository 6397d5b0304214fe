package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/sessiond/sessiond/locations/llm/internal/wire"
)

// errorMember is in every line fixChunk changes: the name of an error
// member, or the value of a bare error object's object member. A quote
// inside a JSON string is escaped, so content and arguments never hold it.
var errorMember = []byte(`"error"`)

// streamBody returns res with the body the SDK reads, when res is a 200
// event stream: one whose chunks fixChunk puts in the shape the SDK reads,
// and which records in done, when it is not nil, that the [DONE] line came.
//
// Some compatible servers (Microsoft's Foundry Local) add "error": null to
// every chunk. The SDK fails a stream at the first chunk that has an error
// member, whatever its value, so every request to such a server failed as
// provider.internal, retried four times and failed again: no step could
// ever finish.
//
// The SDK ends a stream at [DONE] as at the end of the body, which a cut
// connection gives too; only done tells them apart (see Provider.stream).
func streamBody(res *http.Response, done *atomic.Bool) *http.Response {
	if wire.EventStream(res) {
		res.Body = wire.RewriteLines(res.Body, func(line []byte) []byte {
			if done != nil && isDone(line) {
				done.Store(true)
			}
			return fixChunk(line)
		})
	}
	return res
}

// isDone reports whether line is the data line that ends a stream.
func isDone(line []byte) bool {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	return ok && bytes.HasPrefix(bytes.TrimSpace(data), []byte("[DONE]"))
}

// doneKey is the context key of the flag a request's streamBody sets at
// [DONE].
type doneKey struct{}

// fixChunk returns line, a line of an event stream, with its chunk in the
// shape the SDK reads: without its error member when that member is null,
// and a bare error object ({"object": "error", "message": ...}, the shape
// of older vLLM's error bodies, which it also sends inside a stream before
// [DONE]) inside an error member. The SDK read a bare error object as a
// chunk without choices and skipped it, so a failure passed for a response
// cut short, or for a whole one once [DONE] ends a response without a
// finish reason (see Provider.stream).
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
