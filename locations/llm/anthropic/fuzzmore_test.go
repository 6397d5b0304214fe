package anthropic

import (
	"net/http"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
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
	ssetest.FuzzHTTPError(f, func(t *testing.T, transport http.RoundTripper) llm.Provider {
		p, err := New(Config{BaseURL: "http://fuzz.invalid", HTTPClient: &http.Client{Transport: transport}, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, simpleRequest())
}
