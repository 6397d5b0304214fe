package openai

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

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
		{"429 retry-after-ms", 429, hdr("retry-after-ms", "1500", "retry-after", "9"),
			openaiErr("Rate limit reached for gpt-test", "requests", `"rate_limit_exceeded"`), messages.ErrProviderRateLimit, 1500 * time.Millisecond, "Rate limit reached"},
		{"429 retry-after seconds", 429, hdr("retry-after", "7"),
			openaiErr("slow down", "requests", `"rate_limit_exceeded"`), messages.ErrProviderRateLimit, 7 * time.Second, "slow down"},
		{"429 retry-after date", 429, hdr("retry-after", fixedNow.Add(90*time.Second).Format(http.TimeFormat)),
			openaiErr("slow down", "requests", `"rate_limit_exceeded"`), messages.ErrProviderRateLimit, 90 * time.Second, "slow down"},
		{"429 without header", 429, nil, openaiErr("slow down", "requests", "null"), messages.ErrProviderRateLimit, 0, "slow down"},
		{"429 insufficient_quota", 429, hdr("retry-after", "3"),
			openaiErr("You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", `"insufficient_quota"`),
			messages.ErrProviderAuth, 0, "You exceeded your current quota"},
		{"500", 500, nil, openaiErr("The server had an error", "server_error", "null"), messages.ErrProviderInternal, 0, "The server had an error"},
		{"503 with retry-after", 503, hdr("retry-after", "2"), openaiErr("overloaded", "server_error", "null"), messages.ErrProviderInternal, 2 * time.Second, "overloaded"},
		{"529", 529, nil, `{"error":{"message":"overloaded"}}`, messages.ErrProviderInternal, 0, "overloaded"},
		{"529 without a message", 529, nil, `{"error":{"code":"overloaded"}}`, messages.ErrProviderInternal, 0, `{"error":{"code":"overloaded"}}`},
		{"401", 401, nil, openaiErr("Incorrect API key provided", "invalid_request_error", `"invalid_api_key"`), messages.ErrProviderAuth, 0, "Incorrect API key"},
		{"403", 403, nil, openaiErr("Project does not have access", "invalid_request_error", `"model_not_found"`), messages.ErrProviderAuth, 0, "Project does not"},
		{"context_length_exceeded", 400, nil,
			openaiErr("This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", "invalid_request_error", `"context_length_exceeded"`),
			messages.ErrProviderContextOverflow, 0, "This model's maximum context length"},
		{"llama.cpp exceed_context_size_error", 400, nil,
			`{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`,
			messages.ErrProviderContextOverflow, 0, "the request exceeds the available context size"},
		{"vLLM bare overflow", 400, nil,
			`{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`,
			messages.ErrProviderContextOverflow, 0, "This model's maximum context length is 4096"},
		{"vLLM bare other", 400, nil,
			`{"object":"error","message":"temperature must be non-negative","type":"BadRequestError","param":null,"code":400}`,
			messages.ErrProviderInvalidRequest, 0, "temperature must be"},
		// DeepSeek repeats its error type as the code: no more specific
		// than none, so the message decides, as for vLLM.
		{"DeepSeek overflow", 400, nil,
			openaiErr("This model's maximum context length is 131072 tokens. However, you requested 141980 tokens (133980 in the messages, 8000 in the completion). Please reduce the length of the messages or completion.", "invalid_request_error", `"invalid_request_error"`),
			messages.ErrProviderContextOverflow, 0, "This model's maximum context length is 131072"},
		{"DeepSeek other 400", 400, nil,
			openaiErr("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", "invalid_request_error", `"invalid_request_error"`),
			messages.ErrProviderInvalidRequest, 0, "Invalid max_tokens"},
		{"OpenRouter overflow", 400, nil,
			`{"error":{"message":"This endpoint's maximum context length is 163840 tokens. However, you requested about 200000 tokens (200000 of text input). Please reduce the length of either one.","code":400}}`,
			messages.ErrProviderContextOverflow, 0, "This endpoint's maximum context length is 163840"},
		// A LiteLLM proxy wraps the upstream provider's message (here
		// Anthropic's) in its own exception's name.
		{"LiteLLM overflow", 400, nil,
			`{"error":{"message":"litellm.BadRequestError: litellm.ContextWindowExceededError: AnthropicError - {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 209303 tokens > 200000 maximum\"}}","type":null,"param":null,"code":"400"}}`,
			messages.ErrProviderContextOverflow, 0, "litellm.BadRequestError: litellm.ContextWindowExceededError"},
		{"Azure content filter", 400, nil,
			openaiErr("The response was filtered due to the prompt triggering content management policy.", "null", `"content_filter"`),
			messages.ErrProviderContentFilter, 0, "The response was filtered"},
		{"other 400", 400, nil, openaiErr("Invalid value for 'tool_choice'", "invalid_request_error", "null"), messages.ErrProviderInvalidRequest, 0, "Invalid value"},
		// Without a code the message decides, as with a generic one.
		{"overflow without a code", 400, nil,
			openaiErr("This model's maximum context length is 8192 tokens.", "invalid_request_error", "null"),
			messages.ErrProviderContextOverflow, 0, "This model's maximum context length is 8192"},
		// A specific code means something else, whatever the message says.
		{"overflow wording with a specific code", 400, nil,
			openaiErr("This model's maximum context length is 8192 tokens, so max_tokens must be at most 4096", "invalid_request_error", `"invalid_value"`),
			messages.ErrProviderInvalidRequest, 0, "This model's maximum context length is 8192"},
		// Only a 400 is read as an overflow from its message.
		{"500 naming the context length", 500, nil,
			openaiErr("maximum context length is unknown: the model failed to load", "server_error", "null"),
			messages.ErrProviderInternal, 0, "maximum context length is unknown"},
		// A code without a message still classifies: the SDK's fields are
		// kept when the body has nothing at its top level.
		{"insufficient_quota without a message", 429, hdr("retry-after", "3"), `{"error":{"code":"insufficient_quota"}}`,
			messages.ErrProviderAuth, 0, `{"error":{"code":"insufficient_quota"}}`},
		// The envelope's message wins: the body's top level is read only
		// when the envelope has none.
		{"envelope before top level", 400, nil,
			`{"error":{"message":"Invalid value for 'n'","type":"invalid_request_error","code":null},"message":"This model's maximum context length is 1 tokens","code":"context_length_exceeded"}`,
			messages.ErrProviderInvalidRequest, 0, "Invalid value for 'n'"},
		{"404 model", 404, nil, openaiErr("The model `nope` does not exist", "invalid_request_error", `"model_not_found"`), messages.ErrProviderInvalidRequest, 0, "The model `nope` does not exist"},
		{"plain text body", 502, hdr("Content-Type", "text/html"), "\n<html>Bad Gateway</html>\n", messages.ErrProviderInternal, 0, "<html>Bad Gateway</html>"},
		{"string error field", 400, nil, `{"error":"model is required"}`, messages.ErrProviderInvalidRequest, 0, ""},
		{"string error field, retry-after date", 429, hdr("retry-after", fixedNow.Add(90*time.Second).Format(http.TimeFormat)),
			`{"error":"slow down"}`, messages.ErrProviderRateLimit, 90 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, simpleRequest(), ssetest.Reply{Status: tc.status, Header: tc.header, Chunks: []string{tc.body}})
			le := wantError(t, err, tc.want, tc.status, tc.retryAfter)
			if !strings.HasPrefix(le.Message, tc.message) {
				t.Fatalf("message %q does not start with %q", le.Message, tc.message)
			}
		})
	}
}

func TestStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		want    messages.ErrorType
		status  int
		message string // "" for data itself
	}{
		{"server_error", `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`, messages.ErrProviderInternal, 0,
			"The server had an error while processing your request."},
		{"unknown type", `{"error":{"message":"boom","type":"weird","code":null}}`, messages.ErrProviderInternal, 0, "boom"},
		{"overflow code", `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`, messages.ErrProviderContextOverflow, 0, "too long"},
		{"rate limit type", `{"error":{"message":"slow","type":"rate_limit_error","code":null}}`, messages.ErrProviderRateLimit, 0, "slow"},
		{"rate limit code", `{"error":{"message":"slow","type":"requests","code":"rate_limit_exceeded"}}`, messages.ErrProviderRateLimit, 0, "slow"},
		{"quota", `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, messages.ErrProviderAuth, 0, "You exceeded your current quota"},
		{"quota type", `{"error":{"message":"no credit","type":"insufficient_quota","code":null}}`, messages.ErrProviderAuth, 0, "no credit"},
		{"invalid request type", `{"error":{"message":"bad tool","type":"invalid_request_error","code":null}}`, messages.ErrProviderInvalidRequest, 0, "bad tool"},
		{"authentication type", `{"error":{"message":"key revoked","type":"authentication_error","code":null}}`, messages.ErrProviderAuth, 0, "key revoked"},
		{"permission type", `{"error":{"message":"no access","type":"permission_error","code":null}}`, messages.ErrProviderAuth, 0, "no access"},
		{"vLLM numeric code", `{"error":{"object":"error","message":"busy","type":"ServiceUnavailableError","param":null,"code":503}}`, messages.ErrProviderInternal, 503, "busy"},
		{"numeric 429", `{"error":{"message":"slow","type":"TooManyRequests","code":429}}`, messages.ErrProviderRateLimit, 429, "slow"},
		// Codes from 400 to 599 are read as an HTTP status, others are not.
		{"numeric 400", `{"error":{"message":"bad","type":"BadRequestError","code":400}}`, messages.ErrProviderInvalidRequest, 400, "bad"},
		{"numeric 599", `{"error":{"message":"odd","type":"weird","code":599}}`, messages.ErrProviderInternal, 599, "odd"},
		{"numeric 399", `{"error":{"message":"odd","type":"rate_limit_error","code":399}}`, messages.ErrProviderRateLimit, 0, "odd"},
		{"numeric 600", `{"error":{"message":"odd","type":"rate_limit_error","code":600}}`, messages.ErrProviderRateLimit, 0, "odd"},
		// Without a message, the data says what happened.
		{"no message", `{"error":{"type":"server_error","code":null}}`, messages.ErrProviderInternal, 0, ""},
		{"string error", `{"error":"upstream failed"}`, messages.ErrProviderInternal, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := sse(chunk(`{"content":"partial"}`, ""), tc.data)
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "\n")})
			le := wantError(t, err, tc.want, tc.status, 0)
			if want := cmp.Or(tc.message, tc.data); le.Message != want {
				t.Fatalf("message %q, want %q", le.Message, want)
			}
			// Partial content stays visible; no block is closed on error.
			wantLines(t, events, "text-start text-0", `text-delta text-0 "partial"`)
		})
	}
}

func TestTransportErrors(t *testing.T) {
	partial := sse(chunk(`{"content":"par"}`, ""), chunk(`{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\""}}]}`, ""))
	for _, tc := range []struct {
		name string
		rep  ssetest.Reply
	}{
		{"cut mid-stream", ssetest.Reply{Chunks: ssetest.Split(partial, 30, len(partial)-20), Abort: true}},
		{"cut mid-line", ssetest.Reply{Chunks: []string{partial[:len(partial)-9]}, Abort: true}},
		{"clean EOF without finish", ssetest.Reply{Chunks: []string{partial}}},
		{"clean EOF after [DONE] without finish", ssetest.Reply{Chunks: []string{partial + sse(done)}}},
		{"connection reset", ssetest.Reply{Reset: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := run(t, simpleRequest(), tc.rep)
			wantError(t, err, messages.ErrProviderTransport, 0, 0)
		})
	}
}

// TestTimeout uses a response-header timeout: the server never answers.
func TestTimeout(t *testing.T) {
	srv := ssetest.NewServer(t, ssetest.Reply{Hang: true})
	client := srv.Client()
	tr := client.Transport.(*http.Transport).Clone()
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

// streamCancelling streams simpleRequest from p and cancels the context
// once cancelAt accepts an event; it returns the events and the final
// error.
func streamCancelling(p *Provider, cancelAt func(llm.Event) bool) (events []llm.Event, final error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for ev, err := range p.Stream(ctx, simpleRequest()) {
		if err != nil {
			final = err
			continue
		}
		events = append(events, ev)
		if cancelAt(ev) {
			cancel()
		}
	}
	return events, final
}

// TestCancel cancels the context in the middle of a stream whose server
// then waits for the client to go away.
func TestCancel(t *testing.T) {
	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: []string{sse(chunk(`{"content":"a"}`, ""))}, Hang: true})
	events, final := streamCancelling(newTestProvider(t, srv), func(llm.Event) bool { return true })
	if len(events) != 2 { // text-start, text-delta
		t.Fatalf("events %v", ssetest.Lines(events))
	}
	wantError(t, final, messages.ErrAborted, 0, 0)
}

func TestCancelledBeforeStart(t *testing.T) {
	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: []string{sse(chunk(`{"content":"a"}`, "stop"))}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	events, err := ssetest.Collect(newTestProvider(t, srv).Stream(ctx, simpleRequest()))
	if len(events) != 0 {
		t.Fatalf("events %v", ssetest.Lines(events))
	}
	wantError(t, err, messages.ErrAborted, 0, 0)
}

// TestCancelAfterFinishReason: a context cancelled after the finish
// reason, while the usage chunk is awaited, aborts the step: the consumer
// gave up on it, so no StepFinish follows. The text's block is still open
// (more may follow a finish reason), and the runner closes it.
func TestCancelAfterFinishReason(t *testing.T) {
	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: []string{sse(chunk(`{"content":"a"}`, "stop"))}, Hang: true})
	events, final := streamCancelling(newTestProvider(t, srv), func(ev llm.Event) bool { return ev.Kind == llm.TextDelta })
	wantLines(t, events, "text-start text-0", `text-delta text-0 "a"`)
	wantError(t, final, messages.ErrAborted, 0, 0)
}

// TestCancelWinsOverAnErrorEvent: an error event read after the context
// was cancelled (it came in the same read as the event the consumer
// cancelled on) is aborted, not the error it says, which the runner might
// retry.
func TestCancelWinsOverAnErrorEvent(t *testing.T) {
	body := sse(chunk(`{"content":"a"}`, ""), `{"error":{"message":"The server had an error","type":"server_error","code":null}}`)
	p, err := New(Config{BaseURL: "http://openai.invalid/v1", HTTPClient: &http.Client{Transport: &ssetest.Transport{Chunks: []string{body}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, final := streamCancelling(p, func(ev llm.Event) bool { return ev.Kind == llm.TextDelta })
	wantError(t, final, messages.ErrAborted, 0, 0)
}

// TestUnknownFailureAfterTheResponse: a body that fails in the middle of
// a stream, with an error of no known kind, is a transport failure (the
// request was answered, and the connection then failed), which the runner
// retries, not an unknown provider failure.
func TestUnknownFailureAfterTheResponse(t *testing.T) {
	tr := &ssetest.Transport{Chunks: []string{sse(chunk(`{"content":"a"}`, ""))}, Err: errors.New("an odd failure of the body")}
	p, err := New(Config{BaseURL: "http://openai.invalid/v1", HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ssetest.Collect(p.Stream(context.Background(), simpleRequest()))
	wantError(t, err, messages.ErrProviderTransport, 0, 0)
}

// TestConfigDefaults: validate fills what the zero Config leaves out and
// keeps what is given, a negative IdleTimeout (never) included.
func TestConfigDefaults(t *testing.T) {
	var cfg Config
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.BaseURL != DefaultBaseURL || cfg.IdleTimeout != wire.DefaultIdleTimeout || cfg.HTTPClient == nil || cfg.Now == nil {
		t.Fatalf("defaults %+v", cfg)
	}
	client := &http.Client{}
	cfg = Config{BaseURL: "http://127.0.0.1:11434/v1", IdleTimeout: -1, HTTPClient: client, Now: func() time.Time { return fixedNow }}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.BaseURL != "http://127.0.0.1:11434/v1" || cfg.IdleTimeout != -1 || cfg.HTTPClient != client || !cfg.Now().Equal(fixedNow) {
		t.Fatalf("given values changed: %+v", cfg)
	}
}

func TestNewRejectsBadBaseURL(t *testing.T) {
	for _, u := range []string{"localhost:8080", "ftp://x/v1", "http://", "::"} {
		if _, err := New(Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}

// TestShouldRetryHeader: x-should-retry: false, which the API sends and its
// SDK obeys over the status code, makes an error the runner would retry
// final; without it the status decides.
func TestShouldRetryHeader(t *testing.T) {
	body := `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`
	for _, tc := range []struct {
		status int
		header string
		retry  bool
	}{
		{500, "false", false},
		{429, "false", false},
		{503, "true", true},
		{503, "", true},
	} {
		h := http.Header{}
		if tc.header != "" {
			h.Set("x-should-retry", tc.header)
		}
		_, _, err := run(t, simpleRequest(), ssetest.Reply{Status: tc.status, Header: h, Chunks: []string{body}})
		le, ok := err.(*llm.Error)
		if !ok || le.Retryable() != tc.retry || le.StatusCode != tc.status {
			t.Errorf("%d with x-should-retry %q: %v (retryable %v), want retryable %v", tc.status, tc.header, err, ok && le.Retryable(), tc.retry)
		}
	}
}

// TestNullErrorMember covers servers that add "error": null to every chunk
// (Foundry Local): the stream is read as if the member were not there,
// where the SDK failed it at the first chunk, and an error member with a
// value still fails the stream.
func TestNullErrorMember(t *testing.T) {
	withError := func(c, value string) string { return strings.TrimSuffix(c, "}") + `, "error" : ` + value + `}` }
	body := strings.ReplaceAll(sse(
		withError(chunk(`{"content":"\"error\": null"}`, ""), "null"),
		withError(chunk(`{}`, "stop"), "null"),
		withError(usageChunk(`{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`), "null"),
		done,
	), "\n", "\r\n")
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, `"error"`)})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, events,
		"text-start text-0",
		`text-delta text-0 "\"error\": null"`,
		"text-end text-0",
		"step-finish stop in=1 out=1 reasoning=0 cache.read=0 cache.write=0 cost=0.000010",
	)

	body = sse(chunk(`{"content":"a"}`, ""), withError(chunk(`{}`, ""), `{"message":"overloaded","type":"server_error"}`))
	_, _, err = run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
	wantError(t, err, messages.ErrProviderInternal, 0, 0)
}

// TestBareErrorObjectInTheStream covers servers that report a failure
// inside the stream as a bare error object, {"object": "error", ...}, the
// shape of their HTTP error bodies (older vLLM), and then end the stream
// with [DONE]: it fails the stream as an error event does, classified by
// its code (an HTTP status). The SDK read it as a chunk without choices
// and skipped it, so the response passed for one cut short, or for a whole
// one once [DONE] can end a response without a finish reason.
func TestBareErrorObjectInTheStream(t *testing.T) {
	for _, tc := range []struct {
		before string
		code   string
		want   messages.ErrorType
	}{
		{sse(chunk(`{"content":"par"}`, "")), "500", messages.ErrProviderInternal},
		{"", "400", messages.ErrProviderContextOverflow},
	} {
		body := tc.before + sse(`{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":`+tc.code+`}`, done)
		_, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
		le, ok := err.(*llm.Error)
		if !ok || le.Type != tc.want || !strings.Contains(le.Message, "maximum context length") {
			t.Fatalf("error %v, want %s", err, tc.want)
		}
	}
}
