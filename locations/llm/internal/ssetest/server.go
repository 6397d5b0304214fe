package ssetest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Reply is one scripted HTTP response.
type Reply struct {
	// Status is the HTTP status; zero means 200.
	Status int
	// Header is added to the response. Content-Type defaults to
	// text/event-stream for a 200 and application/json otherwise.
	Header http.Header
	// Chunks are the body, written in order with a flush after each.
	Chunks []string
	// Abort drops the connection after the chunks, so the client sees the
	// body end without its terminating chunk (an unexpected EOF).
	Abort bool
	// Reset closes the TCP connection with a reset before any response is
	// written.
	Reset bool
	// Hang waits, after the chunks (if any), until the client goes away.
	// With no chunks nothing is written, not even the status line.
	Hang bool
}

// Request is what the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// Server is an httptest server that answers the i-th request with the i-th
// Reply (the last Reply repeats) and records every request.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// NewServer starts a Server that is closed when the test ends.
func NewServer(tb testing.TB, replies ...Reply) *Server {
	tb.Helper()
	if len(replies) == 0 {
		tb.Fatal("ssetest: NewServer needs at least one reply")
	}
	s := &Server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// LastBody returns the body of the last request, or nil.
func (s *Server) LastBody() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil
	}
	return s.requests[len(s.requests)-1].Body
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	rep := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()

	switch {
	case rep.Reset:
		reset(w)
		return
	case rep.Hang && len(rep.Chunks) == 0:
		<-r.Context().Done()
		return
	}
	status := rep.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := w.Header()
	for k, vs := range rep.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	if h.Get("Content-Type") == "" {
		if status == http.StatusOK {
			h.Set("Content-Type", "text/event-stream")
		} else {
			h.Set("Content-Type", "application/json")
		}
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	for _, c := range rep.Chunks {
		if _, err := io.WriteString(w, c); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	if rep.Hang {
		<-r.Context().Done()
		return
	}
	if rep.Abort {
		// The server closes the connection without the final zero-length
		// chunk and does not log ErrAbortHandler.
		panic(http.ErrAbortHandler)
	}
}

// reset hijacks the connection and closes it with SO_LINGER 0, which sends a
// TCP RST: the client sees "connection reset by peer".
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// Split cuts s at the given byte offsets (ascending, out-of-range offsets
// ignored) and returns the pieces.
func Split(s string, at ...int) []string {
	var out []string
	prev := 0
	for _, a := range at {
		if a <= prev || a >= len(s) {
			continue
		}
		out = append(out, s[prev:a])
		prev = a
	}
	return append(out, s[prev:])
}

// SplitAfter cuts s right after every occurrence of sep, so that each piece
// ends with sep, and then cuts each piece once more in the middle of its
// text: chunk boundaries land inside SSE lines and inside JSON.
func SplitAfter(s, sep string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.Index(s, sep)
		piece := s
		if i >= 0 {
			piece = s[:i+len(sep)]
		}
		s = s[len(piece):]
		if mid := len(piece) / 2; mid > 0 {
			out = append(out, piece[:mid], piece[mid:])
		} else {
			out = append(out, piece)
		}
	}
	return out
}
