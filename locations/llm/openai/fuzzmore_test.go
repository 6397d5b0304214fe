package openai

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

// FuzzHTTPError feeds an error response (status 400-599, any body, any
// Retry-After headers) through the adapter: the stream yields no event
// and one *llm.Error with the status, a known type and a message; only a
// retryable error carries a delay, and the delay is never negative.
func FuzzHTTPError(f *testing.F) {
	for _, s := range []struct {
		status     uint16
		body, ms   string
		retryAfter string
	}{
		{429, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`, "", "3"},
		{400, `{"error":{"message":"This model's maximum context length is 10","type":"invalid_request_error","code":"context_length_exceeded"}}`, "", ""},
		{400, `{"object":"error","message":"This model's maximum context length is 4096 tokens","type":"BadRequestError","param":null,"code":400}`, "", ""},
		{500, `{"error":"text"}`, "1500", "9"},
		{503, `upstream connect error`, "", "Wed, 21 Oct 2026 07:28:00 GMT"},
		{429, `{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`, "", ""},
		{404, ``, "", ""},
		{413, `{"error":{"message":null,"code":{"x":1}}}`, "", ""},
	} {
		f.Add(s.status, s.body, s.ms, s.retryAfter)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status uint16, body, ms, retryAfter string) {
		code := 400 + int(status)%200
		h := http.Header{"Content-Type": {"application/json"}}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		p, err := New(Config{
			BaseURL:    "http://fuzz.invalid/v1",
			HTTPClient: &http.Client{Transport: &ssetest.Transport{Status: code, Header: h, Chunks: []string{body}}},
			Now:        func() time.Time { return now },
		})
		if err != nil {
			t.Fatal(err)
		}
		events, err := ssetest.Collect(p.Stream(context.Background(), simpleRequest()))
		if bad := ssetest.Check(events, err); bad != nil {
			t.Fatalf("stream contract: %v", bad)
		}
		if len(events) != 0 {
			t.Fatalf("status %d gave %d events", code, len(events))
		}
		var le *llm.Error
		if !errors.As(err, &le) {
			t.Fatalf("status %d: error %T %v", code, err, err)
		}
		if le.StatusCode != code {
			t.Fatalf("status %d reported as %d (%v)", code, le.StatusCode, le)
		}
		// A message is always there, from the body or else the status
		// text, which is "" only for statuses like 520 (and a blank body).
		if le.Message == "" && (strings.TrimSpace(body) != "" || http.StatusText(code) != "") {
			t.Fatalf("status %d: empty message for body %q", code, body)
		}
		if le.Type == "" || le.Type == messages.ErrProviderUnknown {
			t.Fatalf("status %d: untyped or empty error %+v", code, le)
		}
		if le.RetryAfter < 0 || (le.RetryAfter > 0 && !le.Retryable()) {
			t.Fatalf("status %d: retry after %v for %s", code, le.RetryAfter, le.Type)
		}
	})
}
