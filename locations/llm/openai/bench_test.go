package openai

import (
	"strconv"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
)

// benchTextBody is a stream of n text deltas.
func benchTextBody(n int) string {
	data := []string{chunk(`{"role":"assistant","content":""}`, "")}
	for i := range n {
		data = append(data, chunk(`{"content":"tok`+strconv.Itoa(i%10)+` "}`, ""))
	}
	data = append(data, chunk(`{}`, "stop"), usageChunk(`{"prompt_tokens":100,"completion_tokens":1000,"total_tokens":1100}`), done)
	return sse(data...)
}

// benchToolBody is a stream with one tool call whose arguments arrive in 16
// fragments.
func benchToolBody() string {
	data := []string{
		chunk(`{"role":"assistant","content":null}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":\""}}]}`, ""),
	}
	for range 14 {
		data = append(data, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"ls -la "}}]}`, ""))
	}
	data = append(data,
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk(`{"prompt_tokens":100,"completion_tokens":30,"total_tokens":130}`),
		done)
	return sse(data...)
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
		simpleRequest(), "/v1/chat/completions", `{"model":"gpt-test"}`)
}
