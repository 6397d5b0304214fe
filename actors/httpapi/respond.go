package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sessiond/sessiond/messages"
)

// errMethodNotAllowed is the error type of a 405. messages' status table
// has no entry for it (a wrong method is a routing fact, not a Session API
// error), so this adapter writes the status itself.
const errMethodNotAllowed messages.ErrorType = "method-not-allowed"

// errStopping is the cancellation cause of requests cut short because the
// Server is shutting down.
var errStopping = errors.New("httpapi: server shutting down")

// envelope is the success body: {"data": ...}.
type envelope struct {
	Data any `json:"data"`
}

// errorBody is the error body: {"error": {"type", "message"}}.
type errorBody struct {
	Error *messages.Error `json:"error"`
}

// writeJSON writes v with status. It encodes before writing anything, so
// an encoding failure can still become a 500.
func (a *api) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		a.fail(w, r, fmt.Errorf("httpapi: encode %T: %w", v, err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// data writes {"data": v} with 200.
func (a *api) data(w http.ResponseWriter, r *http.Request, v any) {
	a.writeJSON(w, r, http.StatusOK, envelope{Data: v})
}

// writeError writes a typed error with an explicit status.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, status int, e *messages.Error) {
	a.writeJSON(w, r, status, errorBody{Error: e})
}

// fail maps err to its status through messages' one status table and
// writes it. Server-side failures are logged with a reference and answered
// with a generic message that names only the reference.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	var e *messages.Error
	switch {
	case errors.As(err, &tooLarge):
		e = messages.Errorf(messages.ErrTooLarge, "body: larger than the limit of %d bytes", tooLarge.Limit)
	case errors.As(err, &e):
	case errors.Is(err, errStopping):
		e = messages.Errorf(messages.ErrShuttingDown, "sessiond is shutting down")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		return
	default:
		e = &messages.Error{Type: messages.ErrInternal, Message: err.Error()}
	}
	status := e.Type.HTTPStatus()
	if status == http.StatusInternalServerError {
		ref := a.refs.Add(1)
		a.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Uint64("ref", ref).Msg("request failed")
		e = messages.Errorf(messages.ErrInternal, "internal error (ref %d); see the server log", ref)
	}
	a.writeError(w, r, status, e)
}

// invalid returns a typed invalid error.
func invalid(format string, args ...any) error {
	return messages.Errorf(messages.ErrInvalid, format, args...)
}
