package wire

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// NoRetry reports whether a response forbids a retry with the
// x-should-retry header both providers send, which their own SDKs obey over
// the status code: "false" on an error that would otherwise be retried.
func NoRetry(h http.Header) bool {
	return h != nil && strings.EqualFold(strings.TrimSpace(h.Get("x-should-retry")), "false")
}

// RetryAfter returns the delay a response asks the client to wait before
// retrying. The non-standard retry-after-ms header (milliseconds, sent by
// OpenAI and Anthropic) wins over the standard retry-after header, which is
// either delta-seconds or an HTTP date interpreted relative to now. The
// result is zero when neither header is present, parseable and positive.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return clampDuration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("retry-after"))
	if v == "" {
		return 0
	}
	// Delta-seconds; servers in the wild sometimes send fractions.
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && !math.IsInf(s, 0) {
			return clampDuration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// clampDuration converts nanoseconds to a Duration without overflowing.
func clampDuration(ns float64) time.Duration {
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}
