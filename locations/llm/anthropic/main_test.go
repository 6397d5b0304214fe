package anthropic

import (
	"os"
	"path/filepath"
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

// testPrices are the prices of model "claude-test".
var testPrices = llm.Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}

// newTestProvider returns a Provider talking to srv.
func newTestProvider(t testing.TB, srv *ssetest.Server) *Provider {
	t.Helper()
	p, err := New(Config{
		BaseURL:    srv.URL,
		APIKey:     "sk-ant-test",
		HTTPClient: srv.Client(),
		Prices: func(id string) (llm.Prices, bool) {
			return testPrices, id == "claude-test"
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
		Model:    messages.ModelRef{ProviderID: "anthropic", ID: "claude-test"},
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

// ev frames one Messages server-sent event.
func ev(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// Events of the Messages stream, written as the API sends them.
func messageStart(usage string) string {
	return ev("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],`+
		`"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":`+usage+`}}`)
}

func blockStart(index, block string) string {
	return ev("content_block_start", `{"type":"content_block_start","index":`+index+`,"content_block":`+block+`}`)
}

func blockDelta(index, delta string) string {
	return ev("content_block_delta", `{"type":"content_block_delta","index":`+index+`,"delta":`+delta+`}`)
}

func blockStop(index string) string {
	return ev("content_block_stop", `{"type":"content_block_stop","index":`+index+`}`)
}

func messageDelta(stopReason, usage string) string {
	return ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stopReason+`","stop_sequence":null},"usage":`+usage+`}`)
}

var (
	ping        = ev("ping", `{"type": "ping"}`)
	messageStop = ev("message_stop", `{"type":"message_stop"}`)
	smallUsage  = `{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}`
)

// fixture returns the recorded stream testdata/name.
func fixture(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err) // a missing fixture breaks every test that reads it
	}
	return string(b)
}

// textStream is a complete stream answering text.
func textStream(text string) string {
	return messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) +
		blockDelta("0", `{"type":"text_delta","text":"`+text+`"}`) + blockStop("0") +
		messageDelta("end_turn", `{"output_tokens":5}`) + messageStop
}

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
