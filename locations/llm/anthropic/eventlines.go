package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/sessiond/sessiond/locations/llm/internal/wire"
)

// withEventLines returns res with a body in which every event has an
// event line, when res is a 200 event stream.
//
// Some Anthropic-compatible proxies send each event as a data line alone,
// its type only inside the data. The SDK skips an event without an event
// line, so every event of their responses was lost and each stream failed
// as cut off before message_stop: a transport failure, retried four times
// and failed again. An event line naming the data's type now goes before
// a data line that starts an event without one.
func withEventLines(res *http.Response) *http.Response {
	if !wire.EventStream(res) {
		return res
	}
	named := false // the event being read has an event line
	res.Body = wire.RewriteLines(res.Body, func(line []byte) []byte {
		field := bytes.TrimRight(line, "\r\n")
		switch {
		case len(field) == 0:
			named = false // the blank line that ends an event
		case bytes.HasPrefix(field, []byte("event:")):
			named = true
		case !named && bytes.HasPrefix(field, []byte("data:")):
			var data struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(bytes.TrimSpace(field[len("data:"):]), &data) != nil || data.Type == "" {
				return line // not an event of the Messages stream ([DONE], say)
			}
			named = true
			return append([]byte("event: "+data.Type+"\n"), line...)
		}
		return line
	})
	return res
}
