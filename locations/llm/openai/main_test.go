package openai

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixedNow is the clock of every test provider.
var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testPrices are the prices of model "gpt-test".
var testPrices = llm.Prices{Input: 2, Output: 8, CacheRead: 0.5, CacheWrite: 2.5}

// newTestProvider returns a Provider talking to srv.
func newTestProvider(t testing.TB, srv *ssetest.Server) *Provider {
	t.Helper()
	p, err := New(Config{
		BaseURL:    srv.URL + "/v1",
		APIKey:     "sk-test",
		HTTPClient: srv.Client(),
		Prices: func(id string) (llm.Prices, bool) {
			return testPrices, id == "gpt-test"
		},
		Now: func() time.Time { return fixedNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// simpleRequest is a one-message request.
func simpleRequest() llm.Request {
	return llm.Request{
		Model:    messages.ModelRef{ProviderID: "openai", ID: "gpt-test"},
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hi"}}}},
	}
}

// run streams req against a server answering with replies and checks the
// stream contract.
func run(t *testing.T, req llm.Request, replies ...ssetest.Reply) ([]llm.Event, *ssetest.Server, error) {
	t.Helper()
	srv := ssetest.NewServer(t, replies...)
	events, err := ssetest.MustStream(t, newTestProvider(t, srv), req)
	return events, srv, err
}

// streamed streams simpleRequest against a server that answers body in
// one piece, and returns the events; an error fails the test.
func streamed(t *testing.T, body string) []llm.Event {
	t.Helper()
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// sse frames data lines as Chat Completions server-sent events.
func sse(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		fmt.Fprintf(&b, "data: %s\n\n", d)
	}
	return b.String()
}

// chunk is one chat.completion.chunk with a delta for choice 0 and an
// optional finish reason ("" for null).
func chunk(delta, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-test","system_fingerprint":"fp_1",` +
		`"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + f + `}],"usage":null}`
}

// usageChunk is the final include_usage chunk.
func usageChunk(usage string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"gpt-test","choices":[],"usage":` + usage + `}`
}

// done is the stream terminator.
const done = "[DONE]"

// wantLines compares event lines.
func wantLines(t *testing.T, events []llm.Event, want ...string) {
	t.Helper()
	got := ssetest.Lines(events)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// wantError checks the final error's type, status and retry delay.
func wantError(t *testing.T, err error, typ messages.ErrorType, status int, retryAfter time.Duration) *llm.Error {
	t.Helper()
	le, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error %T %v, want *llm.Error", err, err)
	}
	if le.Type != typ || le.StatusCode != status || le.RetryAfter != retryAfter {
		t.Fatalf("error = {%s %d %v %q}, want {%s %d %v}", le.Type, le.StatusCode, le.RetryAfter, le.Message, typ, status, retryAfter)
	}
	return le
}

// openaiErr is an error body in OpenAI's shape; code is raw JSON.
func openaiErr(msg, typ, code string) string {
	return `{"error":{"message":"` + msg + `","type":"` + typ + `","param":null,"code":` + code + `}}`
}
