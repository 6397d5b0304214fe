package ssetest

import (
	"cmp"
	"io"
	"net/http"
	"strings"
)

// Transport is an in-memory http.RoundTripper that answers every request
// with the same status and a body delivered exactly in Chunks, one chunk per
// Read call at most. It lets fuzz tests drive an adapter's decoding path with
// arbitrary chunk boundaries, without sockets.
type Transport struct {
	Status int
	Header http.Header
	Chunks []string
	// Err, when set, fails the body's Read after the chunks instead of
	// io.EOF: a connection that breaks in a way no error kind names.
	Err error
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	status := t.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := t.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/event-stream")
	}
	return &http.Response{
		Status:     http.StatusText(status),
		StatusCode: status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Body:       &chunkReader{chunks: t.Chunks, err: t.Err},
		Request:    req,
	}, nil
}

// chunkReader returns its chunks one Read at a time.
type chunkReader struct {
	chunks []string
	cur    *strings.Reader
	err    error // instead of io.EOF
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for r.cur == nil || r.cur.Len() == 0 {
		if len(r.chunks) == 0 {
			return 0, cmp.Or(r.err, io.EOF)
		}
		r.cur = strings.NewReader(r.chunks[0])
		r.chunks = r.chunks[1:]
	}
	return r.cur.Read(p)
}

func (r *chunkReader) Close() error { return nil }
