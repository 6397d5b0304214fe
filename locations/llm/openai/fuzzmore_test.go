package openai

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
	ssetest.FuzzHTTPError(f, func(t *testing.T, transport http.RoundTripper) llm.Provider {
		p, err := New(Config{BaseURL: "http://fuzz.invalid/v1", HTTPClient: &http.Client{Transport: transport}, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}, simpleRequest())
}
