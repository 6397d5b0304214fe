package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// Failure classifies err, a failure that is not an API error response.
// responded says whether an HTTP response had arrived, so that err happened
// while reading its body.
//
//   - An *llm.Error is returned unchanged.
//   - Cancellation of ctx is aborted; its deadline passing is a transport
//     timeout.
//   - Malformed stream data (a JSON event that does not decode, an SSE line
//     too long to buffer) is provider.unknown: retrying would not help.
//   - Network errors (every *url.Error from the HTTP client, timeouts, resets,
//     broken pipes, unexpected EOF) and any failure while reading a response
//     body are provider.transport.
//   - Anything else, such as a request that could not be built, is
//     provider.unknown.
func Failure(ctx context.Context, err error, responded bool) *llm.Error {
	var le *llm.Error
	if errors.As(err, &le) {
		return le
	}
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled):
		return &llm.Error{Type: messages.ErrAborted, Message: ctx.Err().Error()}
	case ctx.Err() != nil:
		return &llm.Error{Type: messages.ErrProviderTransport, Message: "timeout: " + ctx.Err().Error()}
	case errors.Is(err, context.Canceled):
		return &llm.Error{Type: messages.ErrAborted, Message: err.Error()}
	}
	var (
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &syntax), errors.As(err, &typeErr), errors.Is(err, bufio.ErrTooLong):
		return &llm.Error{Type: messages.ErrProviderUnknown, Message: "malformed stream: " + err.Error()}
	case errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE),
		responded:
		return &llm.Error{Type: messages.ErrProviderTransport, Message: err.Error()}
	}
	return &llm.Error{Type: messages.ErrProviderUnknown, Message: err.Error()}
}

// Truncated is the transport failure for a stream whose body ended cleanly
// before the provider's end marker (what is a connection cut by a proxy or a
// crashed upstream looks like).
func Truncated(what string) *llm.Error {
	return &llm.Error{Type: messages.ErrProviderTransport, Message: "stream ended before " + what}
}
