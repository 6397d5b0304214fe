package openai

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	for _, bc := range []struct {
		name, body string
		events     int
	}{
		{"text-1000", benchTextBody(1000), 1003},
		{"tool-call", benchToolBody(), 20},
	} {
		srv := ssetest.NewServer(b, ssetest.Reply{Chunks: []string{bc.body}})
		var raw float64
		b.Run("raw/"+bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				rawRead(b, srv)
			}
			raw = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run("adapter/"+bc.name, func(b *testing.B) {
			p := newTestProvider(b, srv)
			req := simpleRequest()
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for ev, err := range p.Stream(context.Background(), req) {
					if err != nil {
						b.Fatal(err)
					}
					n++
					if ev.Kind == llm.StepFinish && n != bc.events {
						b.Fatalf("%d events, want %d", n, bc.events)
					}
				}
			}
			if raw > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/raw, "x-raw")
			}
		})
	}
}

// rawRead posts to srv and reads the whole response without parsing it.
func rawRead(b *testing.B, srv *ssetest.Server) {
	res, err := srv.Client().Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-test"}`))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		b.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatal(res.Status)
	}
}
