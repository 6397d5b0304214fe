package openai

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/sessiond/sessiond/locations/llm/internal/wire"
)

// errorMember is how a chunk's error member starts; a quote inside a JSON
// string is escaped, so content and arguments never hold it.
var errorMember = []byte(`"error"`)

// withoutNullErrors returns res with a body from whose chunks an
// "error": null member is left out, when res is a 200 event stream.
//
// Some compatible servers (Microsoft's Foundry Local) add "error": null to
// every chunk. The SDK fails a stream at the first chunk that has an error
// member, whatever its value, so every request to such a server failed as
// provider.internal, retried four times and failed again: no step could
// ever finish.
func withoutNullErrors(res *http.Response) *http.Response {
	if wire.EventStream(res) {
		res.Body = wire.RewriteLines(res.Body, dropNullError)
	}
	return res
}

// dropNullError returns line, a line of an event stream, without the
// error member of its chunk when that member is null.
func dropNullError(line []byte) []byte {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !bytes.Contains(rest, errorMember) {
		return line
	}
	payload := bytes.TrimSpace(rest)
	var members map[string]json.RawMessage
	if json.Unmarshal(payload, &members) != nil || string(members["error"]) != "null" {
		return line
	}
	delete(members, "error")
	out, err := json.Marshal(members)
	if err != nil {
		return line
	}
	end := line[len(bytes.TrimRight(line, "\r\n")):]
	return append(append([]byte("data: "), out...), end...)
}
