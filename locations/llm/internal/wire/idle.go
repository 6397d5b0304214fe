package wire

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is how long a response body may go without a byte
// before IdleBody gives up on it. Generous, because a reasoning model may
// think for minutes before its first token on an API that sends no
// keep-alive in between; a connection stalled for longer is not coming
// back, and without a bound its Session would wait until interrupted.
const DefaultIdleTimeout = 10 * time.Minute

// StalledError is the failure of a read that waited longer than the idle
// timeout. It is a net.Error that timed out, so Failure classifies it as
// provider.transport.
type StalledError struct{ Idle time.Duration }

func (e *StalledError) Error() string {
	return fmt.Sprintf("no data from the provider for %s: the stream stalled", e.Idle)
}

// Timeout reports true: the read timed out.
func (e *StalledError) Timeout() bool { return true }

// Temporary reports true, as a timeout is.
func (e *StalledError) Temporary() bool { return true }

// IdleBody returns body such that a Read that waits longer than idle for
// data fails with a *StalledError; the body is closed then, which unblocks
// the Read. Only time spent inside Read counts: a consumer that is slow
// between reads does not stall the stream. A non-positive idle returns
// body unchanged.
func IdleBody(body io.ReadCloser, idle time.Duration) io.ReadCloser {
	if idle <= 0 || body == nil || body == http.NoBody {
		return body
	}
	b := &idleBody{body: body, idle: idle}
	b.timer = time.AfterFunc(time.Hour, func() {
		b.stalled.Store(true)
		_ = body.Close()
	})
	b.timer.Stop()
	return b
}

// idleBody is IdleBody's reader.
type idleBody struct {
	body    io.ReadCloser
	idle    time.Duration
	timer   *time.Timer
	stalled atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.stalled.Load() {
		return 0, &StalledError{Idle: b.idle}
	}
	b.timer.Reset(b.idle)
	n, err := b.body.Read(p)
	b.timer.Stop()
	if err != nil && b.stalled.Load() {
		return n, &StalledError{Idle: b.idle}
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.body.Close()
}

// IdleMiddleware wraps each response body of an SDK client in IdleBody
// (both SDKs take it as option.WithMiddleware).
func IdleMiddleware(idle time.Duration) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		res, err := next(req)
		if err == nil && res != nil {
			res.Body = IdleBody(res.Body, idle)
		}
		return res, err
	}
}

// Transport returns the transport of an adapter's default HTTP client:
// http.DefaultTransport's settings, with response headers bounded by idle
// (when positive) as IdleBody bounds the body.
func Transport(idle time.Duration) http.RoundTripper {
	if idle == DefaultIdleTimeout {
		return defaultTransport() // one connection pool for every adapter
	}
	return newTransport(idle)
}

var defaultTransport = sync.OnceValue(func() http.RoundTripper { return newTransport(DefaultIdleTimeout) })

func newTransport(idle time.Duration) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if idle > 0 {
		t.ResponseHeaderTimeout = idle
	}
	return t
}
