package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
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
		status         uint16
		body, ms, secs string
	}{
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "", "3"},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, "", ""},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"x","details":{"error_code":"model_context_window_exceeded"}}}`, "", ""},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "1500", "9"},
		{503, `upstream connect error`, "", "Wed, 21 Oct 2026 07:28:00 GMT"},
		{401, `{"type":"error","error":{"type":"authentication_error"}}`, "", ""},
		{404, ``, "", ""},
		{500, `{"type":"error","error":{"type":"api_error","message":null}}`, "", ""},
	} {
		f.Add(s.status, s.body, s.ms, s.secs)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status uint16, body, ms, secs string) {
		code := 400 + int(status)%200
		h := http.Header{"Content-Type": {"application/json"}}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if secs != "" {
			h.Set("Retry-After", secs)
		}
		p, err := New(Config{
			BaseURL:    "http://fuzz.invalid",
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
		if le.Message == "" && http.StatusText(code) != "" {
			t.Fatalf("status %d: empty message for body %q", code, body)
		}
		if le.Type == "" || le.Type == messages.ErrProviderUnknown {
			t.Fatalf("status %d: untyped error %+v", code, le)
		}
		if le.RetryAfter < 0 || (le.RetryAfter > 0 && !le.Retryable()) {
			t.Fatalf("status %d: retry after %v for %s", code, le.RetryAfter, le.Type)
		}
	})
}

// FuzzToolUseInput: whatever arguments a call was stored with, the
// tool_use input sent back is a JSON object (the API refuses anything
// else, and would refuse every later request of the Session); an object
// is sent unchanged.
func FuzzToolUseInput(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"a":1}`, `{"a":`, `[1]`, `"s"`, `"{\"a\":"`, `null`, ` {"a":1} `, "\xff", `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := toolUseInput(json.RawMessage(raw))
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil || obj == nil {
			t.Fatalf("toolUseInput(%q) = %s is not a JSON object: %v", raw, out, err)
		}
		if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(raw) && !bytes.Equal(out, raw) {
			t.Fatalf("object %q changed to %s", raw, out)
		}
	})
}
