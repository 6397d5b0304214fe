package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	oa "github.com/openai/openai-go/v3"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// Error codes and types with a meaning of their own, whatever the status.
const (
	codeContextLength = "context_length_exceeded" // OpenAI
	typeContextSize   = "exceed_context_size_error"
	codeContentFilter = "content_filter" // Azure OpenAI prompt filtering
	// codeQuota comes with a 429 when the account has no credit left: it
	// is not a rate limit, and retrying it only delays the failure.
	codeQuota = "insufficient_quota"
)

// errorBody is the part of an OpenAI-style error object that classification
// reads. Code is a string for OpenAI and a number for vLLM and llama.cpp.
type errorBody struct {
	Message string
	Type    string
	Code    string
}

// UnmarshalJSON reads message, type and code, whatever JSON type code has.
func (e *errorBody) UnmarshalJSON(b []byte) error {
	var raw struct {
		Message string          `json:"message"`
		Type    *string         `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	e.Message = raw.Message
	if raw.Type != nil {
		e.Type = *raw.Type
	}
	var s string
	switch {
	case json.Unmarshal(raw.Code, &s) == nil: // null too, as ""
		e.Code = s
	case len(raw.Code) > 0: // a number, say
		e.Code = string(raw.Code)
	}
	return nil
}

// apiError classifies an HTTP error response. The SDK decodes OpenAI's
// {"error": {...}} envelope; servers that answer with a bare error object
// (vLLM's {"object": "error", "message": ...}) leave its fields empty, and
// the body the SDK keeps on the response is read instead.
func apiError(e *oa.Error, now time.Time) *llm.Error {
	body := errorBody{Message: e.Message, Type: e.Type, Code: e.Code}
	var header http.Header
	if e.Response != nil {
		header = e.Response.Header
		// A body the SDK parsed leniently can give a type or code without a
		// message; the body itself then says more than the status text.
		if body.Message == "" && e.Response.Body != nil {
			if b, err := io.ReadAll(io.LimitReader(e.Response.Body, 1<<20)); err == nil {
				var bare errorBody
				if json.Unmarshal(b, &bare) == nil && bare != (errorBody{}) {
					body = bare
				}
				if body.Message == "" {
					body.Message = strings.TrimSpace(string(b))
				}
			}
		}
	}
	if body.Message == "" {
		body.Message = http.StatusText(e.StatusCode)
	}
	return statusError(e.StatusCode, header, body, now)
}

// streamError classifies an error object that arrived inside a 200 stream:
// data: {"error": {...}}.
func streamError(data []byte) *llm.Error {
	var env struct {
		Error errorBody `json:"error"`
	}
	if err := json.Unmarshal(data, &env); err != nil || env.Error.Message == "" {
		env.Error.Message = strings.TrimSpace(string(data))
	}
	status := 0
	if n, err := strconv.Atoi(env.Error.Code); err == nil && n >= 400 && n <= 599 {
		status = n // vLLM and llama.cpp put the HTTP status in code
	}
	lerr := statusError(status, nil, env.Error, time.Time{})
	if status == 0 && lerr.Type == messages.ErrProviderUnknown {
		// The server accepted the request and then failed: server_error,
		// or a type this adapter does not know.
		lerr.Type = messages.ErrProviderInternal
	}
	return lerr
}

// statusError classifies an error from its status (0 inside a stream), its
// headers and its body. Typed fields decide first; the status table
// (wire.StatusType) decides the rest.
func statusError(status int, header http.Header, body errorBody, now time.Time) *llm.Error {
	lerr := &llm.Error{Message: body.Message, StatusCode: status}
	switch {
	case body.Code == codeContextLength || body.Type == typeContextSize:
		lerr.Type = messages.ErrProviderContextOverflow
	case body.Code == codeContentFilter:
		lerr.Type = messages.ErrProviderContentFilter
	case body.Code == codeQuota || body.Type == codeQuota:
		lerr.Type = messages.ErrProviderAuth
	case status == http.StatusBadRequest && genericCode(body.Code) && overflowMessage(body.Message):
		lerr.Type = messages.ErrProviderContextOverflow
	case status != 0:
		lerr.Type = wire.StatusType(status)
	default:
		lerr.Type = streamType(body.Type, body.Code)
	}
	lerr.NoRetry = wire.NoRetry(header)
	if lerr.Retryable() {
		lerr.RetryAfter = wire.RetryAfter(header, now)
	}
	return lerr
}

// genericCode reports whether an error code says nothing beyond "bad
// request": none, the status again (vLLM, OpenRouter, LiteLLM), or the
// error type repeated as its code (DeepSeek). Only then may the message
// decide (overflowMessage); a specific code means something else.
func genericCode(code string) bool {
	return code == "" || code == "400" || code == "invalid_request_error"
}

// overflowMessage recognizes a context overflow that carries no code or
// type of its own (vLLM, DeepSeek, OpenRouter, a LiteLLM proxy): only the
// message says what happened. The match is deliberately narrow, the fixed
// phrases these servers emit for this case: "… maximum context length is
// 4096 tokens …" (OpenAI's wording, which the first three reuse) and the
// name of LiteLLM's exception class, which wraps the upstream provider's
// own message ("prompt is too long" from Anthropic, for instance).
func overflowMessage(msg string) bool {
	return strings.Contains(msg, "maximum context length is") || strings.Contains(msg, "ContextWindowExceededError")
}

// streamType classifies an in-stream error without a status by its type or
// code.
func streamType(typ, code string) messages.ErrorType {
	switch {
	case typ == "rate_limit_error" || code == "rate_limit_exceeded":
		return messages.ErrProviderRateLimit
	case typ == "server_error" || typ == "internal_error" || typ == "api_error" || code == "server_error":
		return messages.ErrProviderInternal
	case typ == "invalid_request_error":
		return messages.ErrProviderInvalidRequest
	case typ == "authentication_error" || typ == "permission_error":
		return messages.ErrProviderAuth
	}
	return messages.ErrProviderUnknown
}
