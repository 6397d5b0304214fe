package anthropic

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

// apiErr is an Anthropic error body.
func apiErr(typ, msg string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_011"}`
}

func TestHTTPErrors(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, tc := range []struct {
		name       string
		status     int
		header     http.Header
		body       string
		want       messages.ErrorType
		retryAfter time.Duration
		message    string
	}{
		{"429 retry-after", 429, hdr("retry-after", "12"), apiErr("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
			messages.ErrProviderRateLimit, 12 * time.Second, "per-minute rate limit"},
		{"429 retry-after-ms", 429, hdr("retry-after-ms", "250", "retry-after", "1"), apiErr("rate_limit_error", "slow down"),
			messages.ErrProviderRateLimit, 250 * time.Millisecond, "slow down"},
		{"429 retry-after date", 429, hdr("retry-after", fixedNow.Add(time.Minute).Format(http.TimeFormat)), apiErr("rate_limit_error", "slow down"),
			messages.ErrProviderRateLimit, time.Minute, "slow down"},
		{"529 overloaded", 529, nil, apiErr("overloaded_error", "Overloaded"), messages.ErrProviderInternal, 0, "Overloaded"},
		{"500 api_error", 500, nil, apiErr("api_error", "Internal server error"), messages.ErrProviderInternal, 0, "Internal server error"},
		{"503 without body", 503, hdr("Content-Type", "text/plain"), "upstream connect error", messages.ErrProviderInternal, 0, "upstream connect error"},
		{"401", 401, nil, apiErr("authentication_error", "invalid x-api-key"), messages.ErrProviderAuth, 0, "invalid x-api-key"},
		{"403", 403, nil, apiErr("permission_error", "Your API key does not have permission"), messages.ErrProviderAuth, 0, "permission"},
		{"402 billing_error", 402, nil, apiErr("billing_error", "Your credit balance is too low"), messages.ErrProviderAuth, 0, "credit balance"},
		// A spending limit is a 429 that no retry gets past this month.
		{"429 spend limit", 429, hdr("retry-after", "12"),
			`{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your monthly usage limit.","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			messages.ErrProviderAuth, 0, "monthly usage limit"},
		{"429 contract spend limit", 429, nil,
			`{"type":"error","error":{"type":"rate_limit_error","message":"limit reached","details":{"error_code":"contract_spend_limit_reached"}}}`,
			messages.ErrProviderAuth, 0, "limit reached"},
		{"prompt too long", 400, nil, apiErr("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
			messages.ErrProviderContextOverflow, 0, "prompt is too long"},
		{"input and max_tokens exceed limit", 400, nil,
			apiErr("invalid_request_error", "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000, decrease input length or `max_tokens` and try again"),
			messages.ErrProviderContextOverflow, 0, "exceed context limit"},
		{"error_code context window", 400, nil,
			`{"type":"error","error":{"type":"invalid_request_error","message":"too many tokens","details":{"error_code":"model_context_window_exceeded"}}}`,
			messages.ErrProviderContextOverflow, 0, "too many tokens"},
		// The content filter refused the response before it began: the
		// API gives it no type or code of its own.
		{"output blocked", 400, nil, apiErr("invalid_request_error", "Output blocked by content filtering policy"),
			messages.ErrProviderContentFilter, 0, "content filtering"},
		{"other 400", 400, nil, apiErr("invalid_request_error", "messages: text content blocks must be non-empty"),
			messages.ErrProviderInvalidRequest, 0, "must be non-empty"},
		{"404", 404, nil, apiErr("not_found_error", "model: claude-nope"), messages.ErrProviderInvalidRequest, 0, "claude-nope"},
		{"413", 413, nil, apiErr("request_too_large", "Request exceeds the maximum allowed number of bytes."), messages.ErrProviderInvalidRequest, 0, "maximum allowed"},
		{"504 timeout_error", 504, nil, apiErr("timeout_error", "Request timed out"), messages.ErrProviderTransport, 0, "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, simpleRequest(), ssetest.Reply{Status: tc.status, Header: tc.header, Chunks: []string{tc.body}})
			le := wantError(t, err, tc.want, tc.status, tc.retryAfter)
			if !strings.Contains(le.Message, tc.message) {
				t.Fatalf("message %q does not contain %q", le.Message, tc.message)
			}
		})
	}
}

// TestShouldRetryHeaderOfAStream: the x-should-retry header of a stream's
// 200 answered that request, not the error an event reports later inside
// it: an overloaded_error there stays retryable.
func TestShouldRetryHeaderOfAStream(t *testing.T) {
	body := messageStart(smallUsage) + ev("error", apiErr("overloaded_error", "Overloaded"))
	h := http.Header{}
	h.Set("x-should-retry", "false")
	_, _, err := run(t, simpleRequest(), ssetest.Reply{Header: h, Chunks: []string{body}})
	if le := wantError(t, err, messages.ErrProviderInternal, 0, 0); !le.Retryable() {
		t.Fatalf("%v is not retryable", le)
	}
}

// TestStreamErrors covers error events inside a 200 stream.
func TestStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       messages.ErrorType
	}{
		{"overloaded", apiErr("overloaded_error", "Overloaded"), messages.ErrProviderInternal},
		{"api_error", apiErr("api_error", "Internal server error"), messages.ErrProviderInternal},
		{"rate limit", apiErr("rate_limit_error", "slow down"), messages.ErrProviderRateLimit},
		{"billing", apiErr("billing_error", "Your credit balance is too low"), messages.ErrProviderAuth},
		{"unknown type", apiErr("brand_new_error", "?"), messages.ErrProviderInternal},
		{"prompt too long", apiErr("invalid_request_error", "prompt is too long: 2 tokens > 1 maximum"), messages.ErrProviderContextOverflow},
		// The content filter stopped the response midway: not a server
		// failure, which the runner would retry.
		{"output blocked", apiErr("invalid_request_error", "Output blocked by content filtering policy"), messages.ErrProviderContentFilter},
		// Any other refusal of the request is one: asking again, as for a
		// server failure, would be refused again.
		{"invalid request", apiErr("invalid_request_error", "messages.1: tool_use ids must be unique"), messages.ErrProviderInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) +
				blockDelta("0", `{"type":"text_delta","text":"partial"}`) + ev("error", tc.data)
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "\n")})
			wantError(t, err, tc.want, 0, 0)
			// Partial content stays visible; no block is closed on error.
			wantLines(t, events, "text-start 0", `text-delta 0 "partial"`)
		})
	}
}

func TestContextWindowStopReason(t *testing.T) {
	body := messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) +
		blockDelta("0", `{"type":"text_delta","text":"long answer"}`) + blockStop("0") +
		messageDelta("model_context_window_exceeded", `{"output_tokens":3}`) + messageStop
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
	wantError(t, err, messages.ErrProviderContextOverflow, 0, 0)
	wantLines(t, events, "text-start 0", `text-delta 0 "long answer"`, "text-end 0")
}

func TestTransportErrors(t *testing.T) {
	partial := messageStart(smallUsage) + blockStart("0", `{"type":"tool_use","id":"toolu_1","name":"f","input":{}}`) +
		blockDelta("0", `{"type":"input_json_delta","partial_json":"{\"a\":"}`)
	// message_delta with a block still open: that block may be incomplete.
	blockOpen := partial + messageDelta("tool_use", `{"output_tokens":3}`)
	for _, tc := range []struct {
		name string
		rep  ssetest.Reply
	}{
		{"cut mid-stream", ssetest.Reply{Chunks: ssetest.Split(partial, 40, len(partial)-25), Abort: true}},
		{"cut mid-line", ssetest.Reply{Chunks: []string{partial[:len(partial)-12]}, Abort: true}},
		{"clean EOF without message_stop", ssetest.Reply{Chunks: []string{partial}}},
		{"clean EOF after message_delta with a block open", ssetest.Reply{Chunks: []string{blockOpen}}},
		{"cut after message_delta with a block open", ssetest.Reply{Chunks: []string{blockOpen}, Abort: true}},
		{"connection reset", ssetest.Reply{Reset: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, simpleRequest(), tc.rep)
			wantError(t, err, messages.ErrProviderTransport, 0, 0)
		})
	}
}

// TestEndAfterMessageDelta: a stream that ends after message_delta, every
// block closed, lost only message_stop; the step finishes with the stop
// reason and usage message_delta brought, whether the body ended cleanly
// or the connection was cut.
func TestEndAfterMessageDelta(t *testing.T) {
	body := messageStart(smallUsage) +
		blockStart("0", `{"type":"text","text":""}`) +
		blockDelta("0", `{"type":"text_delta","text":"Reading."}`) + blockStop("0") +
		blockStart("1", `{"type":"tool_use","id":"toolu_1","name":"read","input":{}}`) +
		blockDelta("1", `{"type":"input_json_delta","partial_json":"{\"path\":\"a\"}"}`) + blockStop("1") +
		messageDelta("tool_use", `{"output_tokens":20}`)
	for name, rep := range map[string]ssetest.Reply{
		"clean EOF": {Chunks: []string{body}},
		"cut":       {Chunks: []string{body}, Abort: true},
	} {
		t.Run(name, func(t *testing.T) {
			events, _, err := run(t, simpleRequest(), rep)
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, events,
				"text-start 0",
				`text-delta 0 "Reading."`,
				"text-end 0",
				"tool-input-start 1 toolu_1 read",
				`tool-input-delta 1 "{\"path\":\"a\"}"`,
				"tool-input-end 1 toolu_1 read",
				`tool-call toolu_1 read {"path":"a"}`,
				"step-finish tool-calls in=10 out=20 reasoning=0 cache.read=0 cache.write=0 cost=0.000330",
			)
		})
	}
}

// TestTimeout uses a response-header timeout: the server never answers.
func TestTimeout(t *testing.T) {
	srv := ssetest.NewServer(t, ssetest.Reply{Hang: true})
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = time.Millisecond
	defer tr.CloseIdleConnections()
	p, err := New(Config{BaseURL: srv.URL, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	events, err := ssetest.Collect(p.Stream(context.Background(), simpleRequest()))
	if len(events) != 0 {
		t.Fatalf("events %v", ssetest.Lines(events))
	}
	wantError(t, err, messages.ErrProviderTransport, 0, 0)
}

// TestCancel cancels the context in the middle of a stream whose server
// then waits for the client to go away.
func TestCancel(t *testing.T) {
	body := messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) + blockDelta("0", `{"type":"text_delta","text":"a"}`)
	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: []string{body}, Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		events []llm.Event
		final  error
	)
	for ev, err := range newTestProvider(t, srv).Stream(ctx, simpleRequest()) {
		if err != nil {
			final = err
			continue
		}
		events = append(events, ev)
		if ev.Kind == llm.TextDelta {
			cancel()
		}
	}
	if len(events) != 2 {
		t.Fatalf("events %v", ssetest.Lines(events))
	}
	wantError(t, final, messages.ErrAborted, 0, 0)
}

func TestCancelledBeforeStart(t *testing.T) {
	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: []string{textStream("a")}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	events, err := ssetest.Collect(newTestProvider(t, srv).Stream(ctx, simpleRequest()))
	if len(events) != 0 {
		t.Fatalf("events %v", ssetest.Lines(events))
	}
	wantError(t, err, messages.ErrAborted, 0, 0)
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"api.anthropic.com", "ftp://x", "http://", "::"} {
		if _, err := New(Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}

// TestShouldRetryHeader: x-should-retry: false, which the API sends and its
// SDK obeys over the status code, makes an error the runner would retry
// final; without it (or with true) the status decides.
func TestShouldRetryHeader(t *testing.T) {
	for _, tc := range []struct {
		status int
		header string
		body   string
		retry  bool
	}{
		{529, "false", apiErr("overloaded_error", "Overloaded"), false},
		{429, "false", apiErr("rate_limit_error", "slow down"), false},
		{500, "False", apiErr("api_error", "Internal server error"), false},
		{529, "true", apiErr("overloaded_error", "Overloaded"), true},
		{529, "", apiErr("overloaded_error", "Overloaded"), true},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("x-should-retry", tc.header)
		}
		_, _, err := run(t, simpleRequest(), ssetest.Reply{Status: tc.status, Header: h, Chunks: []string{tc.body}})
		le, ok := err.(*llm.Error)
		if !ok || le.Retryable() != tc.retry || le.StatusCode != tc.status {
			t.Errorf("%d with x-should-retry %q: %v (retryable %v), want retryable %v", tc.status, tc.header, err, ok && le.Retryable(), tc.retry)
		}
	}
}

// failingBody yields its data, then fails with an error no transport
// classification names.
type failingBody struct{ r io.Reader }

func (b failingBody) Read(p []byte) (int, error) {
	if n, _ := b.r.Read(p); n > 0 {
		return n, nil
	}
	return 0, errors.New("an odd failure of the body")
}

func (failingBody) Close() error { return nil }

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestUnknownFailureAfterTheResponse: a body that fails in the middle of
// a stream, with an error of no known kind, is a transport failure (the
// request was answered, and the connection then failed), which the runner
// retries, not an unknown provider failure.
func TestUnknownFailureAfterTheResponse(t *testing.T) {
	body := messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`)
	tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
			Body: failingBody{strings.NewReader(body)}, Request: r}, nil
	})
	p, err := New(Config{BaseURL: "http://anthropic.invalid", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ssetest.Collect(p.Stream(context.Background(), simpleRequest()))
	wantError(t, err, messages.ErrProviderTransport, 0, 0)
}
