package anthropic

import (
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// codeContextWindow is the error_code (error.details.error_code) that names a
// context window overflow, when the API sends one.
const codeContextWindow sdk.ErrorCode = "model_context_window_exceeded"

// apiError classifies an API error: an HTTP error response, or an error event
// inside a stream (whose StatusCode is the stream's 200). The error type and
// code decide first; the status table (wire.StatusType) decides the rest.
func apiError(e *sdk.Error, now time.Time) *llm.Error {
	lerr := &llm.Error{Message: e.Message, StatusCode: e.StatusCode}
	if lerr.Message == "" {
		lerr.Message = strings.TrimSpace(e.RawJSON())
	}
	if lerr.Message == "" {
		lerr.Message = http.StatusText(e.StatusCode)
	}
	inStream := e.StatusCode < 400
	if inStream {
		lerr.StatusCode = 0 // the 200 of the stream says nothing about the error
	}
	switch t := e.Type(); {
	case e.ErrorCode() == codeContextWindow, t == sdk.ErrorTypeInvalidRequestError && promptTooLong(e.Message):
		lerr.Type = messages.ErrProviderContextOverflow
	case t == sdk.ErrorTypeInvalidRequestError && outputBlocked(e.Message):
		// The content filter stopped the response, before its first byte
		// (a 400) or in the middle of the stream: not a malformed request,
		// nor a server failure that a retry would get past.
		lerr.Type = messages.ErrProviderContentFilter
	case t == sdk.ErrorTypeOverloadedError || t == sdk.ErrorTypeAPIError:
		lerr.Type = messages.ErrProviderInternal
	case spendLimit(e.ErrorCode()):
		// A 429 rate_limit_error, but no retry succeeds before the limit
		// resets (a month, or a contract's term): like an exhausted balance.
		lerr.Type = messages.ErrProviderAuth
	case t == sdk.ErrorTypeRateLimitError:
		lerr.Type = messages.ErrProviderRateLimit
	case t == sdk.ErrorTypeAuthenticationError || t == sdk.ErrorTypePermissionError || t == sdk.ErrorTypeBillingError:
		lerr.Type = messages.ErrProviderAuth
	case t == sdk.ErrorTypeTimeoutError:
		lerr.Type = messages.ErrProviderTransport
	case inStream && t == sdk.ErrorTypeInvalidRequestError:
		// Refused inside the stream (the 200 came first): still a refusal
		// of this request, which a retry would repeat.
		lerr.Type = messages.ErrProviderInvalidRequest
	case inStream:
		// The request was accepted and then failed on the server side.
		lerr.Type = messages.ErrProviderInternal
	default:
		lerr.Type = wire.StatusType(e.StatusCode)
	}
	if e.Response != nil && !inStream {
		lerr.NoRetry = wire.NoRetry(e.Response.Header)
	}
	if lerr.Retryable() && e.Response != nil {
		lerr.RetryAfter = wire.RetryAfter(e.Response.Header, now)
	}
	return lerr
}

// spendLimit reports whether code (error.details.error_code) says an
// organization reached a spending limit.
func spendLimit(code sdk.ErrorCode) bool {
	return strings.HasSuffix(string(code), "spend_limit_reached")
}

// promptTooLong recognizes a context overflow from the message of an
// invalid_request_error: the API gives it no type or code of its own. The
// match is deliberately narrow, the two fixed phrases the API uses:
// "prompt is too long: 208310 tokens > 200000 maximum" and "input length and
// `max_tokens` exceed context limit: …".
func promptTooLong(msg string) bool {
	return strings.HasPrefix(msg, "prompt is too long") || strings.Contains(msg, "exceed context limit")
}

// outputBlocked recognizes the content filter's refusal of a response from
// the message of an invalid_request_error, which like promptTooLong's has
// no type or code of its own: the fixed phrase "Output blocked by content
// filtering policy".
func outputBlocked(msg string) bool {
	return strings.HasPrefix(msg, "Output blocked by content filtering policy")
}
