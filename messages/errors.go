package messages

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrorType is a stable error code. Clients match on it; it never changes
// meaning once shipped.
type ErrorType string

// Error types recorded in events and returned by the API.
const (
	ErrProviderTransport       ErrorType = "provider.transport"
	ErrProviderRateLimit       ErrorType = "provider.rate-limit"
	ErrProviderInternal        ErrorType = "provider.internal"
	ErrProviderInvalidRequest  ErrorType = "provider.invalid-request"
	ErrProviderContextOverflow ErrorType = "provider.context-overflow"
	ErrProviderContentFilter   ErrorType = "provider.content-filter"
	ErrProviderAuth            ErrorType = "provider.auth"
	ErrProviderUnknown         ErrorType = "provider.unknown"
	ErrAborted                 ErrorType = "aborted"
	ErrToolExecution           ErrorType = "tool.execution"
	ErrToolResultMissing       ErrorType = "tool.result-missing"
	ErrPermissionRejected      ErrorType = "permission.rejected"
	ErrCompactionUnavailable   ErrorType = "compaction.unavailable"
	ErrCompactionFailed        ErrorType = "compaction.failed"
	ErrUnknown                 ErrorType = "unknown"

	// API errors.
	ErrInvalid          ErrorType = "invalid"
	ErrUnauthorized     ErrorType = "unauthorized"
	ErrForbidden        ErrorType = "forbidden"
	ErrSessionNotFound  ErrorType = "session.not-found"
	ErrNotFound         ErrorType = "not-found"
	ErrPromptConflict   ErrorType = "prompt.conflict"
	ErrTooLarge         ErrorType = "request.too-large"
	ErrInboxFull        ErrorType = "inbox.full"
	ErrInputPromoted    ErrorType = "input.promoted"
	ErrInstructions     ErrorType = "instructions.unavailable"
	ErrModelNotFound    ErrorType = "model.not-found"
	ErrInternal         ErrorType = "internal"
	ErrShuttingDown     ErrorType = "shutting-down"
	ErrStorageFull      ErrorType = "storage.full"
	ErrAlreadyPublished ErrorType = "event.conflict"
)

// httpStatus is the one table mapping error types to HTTP statuses. Types
// absent here are server-side failures (500).
var httpStatus = map[ErrorType]int{
	ErrInvalid:                http.StatusBadRequest,
	ErrProviderInvalidRequest: http.StatusBadRequest,
	ErrUnauthorized:           http.StatusUnauthorized,
	ErrForbidden:              http.StatusForbidden,
	ErrSessionNotFound:        http.StatusNotFound,
	ErrNotFound:               http.StatusNotFound,
	ErrModelNotFound:          http.StatusBadRequest,
	ErrPromptConflict:         http.StatusConflict,
	ErrInputPromoted:          http.StatusConflict,
	ErrAlreadyPublished:       http.StatusConflict,
	ErrTooLarge:               http.StatusRequestEntityTooLarge,
	ErrInboxFull:              http.StatusTooManyRequests,
	ErrShuttingDown:           http.StatusServiceUnavailable,
	ErrStorageFull:            http.StatusInsufficientStorage,
}

// HTTPStatus returns the HTTP status for errors of type t.
func (t ErrorType) HTTPStatus() int {
	if s, ok := httpStatus[t]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is a typed error: a stable Type and a human-readable Message. It is
// stored in events (tool and step failures) and returned by the API.
type Error struct {
	Type    ErrorType `json:"type" msgpack:"t"`
	Message string    `json:"message" msgpack:"m"`
}

// Error implements error.
func (e *Error) Error() string { return string(e.Type) + ": " + e.Message }

// Is matches another *Error of the same Type, so callers can write
// errors.Is(err, &messages.Error{Type: messages.ErrPromptConflict}); a
// target that has a Message matches only that message too.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Type == e.Type && (t.Message == "" || t.Message == e.Message)
	}
	return false
}

// Errorf returns an *Error of type t with a formatted message.
func Errorf(t ErrorType, format string, args ...any) *Error {
	return &Error{Type: t, Message: fmt.Sprintf(format, args...)}
}

// TypeOf returns the ErrorType of err: the Type of the first *Error in its
// chain, or ErrUnknown.
func TypeOf(err error) ErrorType {
	var e *Error
	if errors.As(err, &e) {
		return e.Type
	}
	return ErrUnknown
}

// AsError converts any error to an *Error, keeping a typed error's type and
// message and classifying everything else as fallback. A nil err gives nil.
func AsError(err error, fallback ErrorType) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Type: fallback, Message: err.Error()}
}
