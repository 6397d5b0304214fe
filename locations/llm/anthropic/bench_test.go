package anthropic

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
)

// benchTextBody is a stream of n text deltas.
func benchTextBody(n int) string {
	var b strings.Builder
	b.WriteString(messageStart(smallUsage))
	b.WriteString(blockStart("0", `{"type":"text","text":""}`))
	for i := range n {
		b.WriteString(blockDelta("0", `{"type":"text_delta","text":"tok`+strconv.Itoa(i%10)+` "}`))
	}
	b.WriteString(blockStop("0") + messageDelta("end_turn", `{"output_tokens":1000}`) + messageStop)
	return b.String()
}

// benchToolBody is a stream with one tool call whose input arrives in 16
// fragments.
func benchToolBody() string {
	var b strings.Builder
	b.WriteString(messageStart(smallUsage))
	b.WriteString(blockStart("0", `{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}`))
	b.WriteString(blockDelta("0", `{"type":"input_json_delta","partial_json":"{\"command\":\""}`))
	for range 14 {
		b.WriteString(blockDelta("0", `{"type":"input_json_delta","partial_json":"ls -la "}`))
	}
	b.WriteString(blockDelta("0", `{"type":"input_json_delta","partial_json":"\"}"}`))
	b.WriteString(blockStop("0") + messageDelta("tool_use", `{"output_tokens":30}`) + messageStop)
	return b.String()
}

// BenchmarkStream measures the adapter's cost per stream against an
// httptest server: text-1000 streams 1,000 text deltas, tool-call streams one
// tool call. The x-raw metric is the ratio to reading the same bytes through
// net/http without parsing (the raw/* rows), measured in the same run.
func BenchmarkStream(b *testing.B) {
	ssetest.BenchStream(b, []ssetest.BenchCase{
		{Name: "text-1000", Body: benchTextBody(1000), Events: 1003},
		{Name: "tool-call", Body: benchToolBody(), Events: 20},
	}, func(tb testing.TB, srv *ssetest.Server) llm.Provider { return newTestProvider(tb, srv) },
		simpleRequest(), "/v1/messages", `{"model":"claude-test"}`)
}
