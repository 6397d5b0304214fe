package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestCreateReuseWithRoots: with --root, sessions.create with the ID
// of an existing Session returns that Session unchanged (SEED.md: "reused
// ID returns the existing Session identity"), as it does without roots:
// the roots check is for new Sessions. An exact retry of a create whose
// directory has gone since, or a reuse naming a directory outside every
// root, was refused (400, 403) instead.
func TestCreateReuseWithRoots(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "project")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Roots = []string{root} })
	body := map[string]any{"id": "ses_reused", "location": map[string]string{"directory": dir}}
	first := dataOf[persistence.Session](t, e.do("POST", "/api/session", body))

	// A reuse naming a directory outside every root is still a reuse.
	outside := map[string]any{"id": "ses_reused", "location": map[string]string{"directory": t.TempDir()}}
	if again := dataOf[persistence.Session](t, e.do("POST", "/api/session", outside)); again != first {
		t.Fatalf("reuse outside the roots: %+v, want %+v", again, first)
	}
	// The client lost the answer and retries after the directory went.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if again := dataOf[persistence.Session](t, e.do("POST", "/api/session", body)); again != first {
		t.Fatalf("exact retry: %+v, want %+v", again, first)
	}
	// New Sessions are still held to the roots, and nothing was written.
	e.do("POST", "/api/session", map[string]any{"id": "ses_fresh", "location": map[string]string{"directory": t.TempDir()}}).
		wantError(t, http.StatusForbidden, messages.ErrForbidden)
	e.do("POST", "/api/session", map[string]any{"id": "ses_fresh", "location": map[string]string{"directory": dir}}).
		wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	if list := dataOf[[]persistence.Session](t, e.do("GET", "/api/session", nil)); len(list) != 1 {
		t.Fatalf("%d Sessions, want 1", len(list))
	}
	if evs := e.allEvents(first.ID); len(evs) != 1 {
		t.Fatalf("%d events, want only the creation", len(evs))
	}
}

// TestMalformedQuery: a query string net/url cannot parse (a bad
// percent escape, a ";" separator) is 400 invalid. r.URL.Query() drops
// such pairs silently, so "after=5;limit=2" read as no cursor at all: a
// page from the start, and a log stream that replayed every event a
// resuming client had already seen.
func TestMalformedQuery(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	base := "/api/session/" + string(sid)
	for _, path := range []string{
		base + "/history?after=0;limit=1",
		base + "/history?after=%zz",
		base + "/message?limit=1;after=0",
		base + "/log?after=0;follow=false",
		base + "/log?after=0&follow=true&x=%",
		"/api/event?sessionID=" + string(sid) + ";x=1",
		"/api/event?sessionID=%zz",
	} {
		m := e.do("GET", path, nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, "query:") {
			t.Errorf("%s: message %q does not name the query", path, m.Message)
		}
	}
	// Well-formed queries, escapes included, are served as before.
	if p := pageOf(t, e.do("GET", base+"/history?after=%2D1&limit=%31", nil)); len(p.Data) != 1 {
		t.Fatalf("escaped query: %d events", len(p.Data))
	}
}

// flushFailingWriter is a ResponseWriter whose connection is gone: writes
// are buffered and succeed, and only FlushError reports the failure (as
// HTTP/2's ResponseWriter does), without cancelling the request.
type flushFailingWriter struct {
	header  http.Header
	mu      sync.Mutex
	flushes int
}

func (w *flushFailingWriter) Header() http.Header         { return w.header }
func (w *flushFailingWriter) WriteHeader(int)             {}
func (w *flushFailingWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *flushFailingWriter) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushes++
	return errors.New("connection reset by peer")
}

// TestStreamEndsOnFlushError: a stream ends once a flush fails. The
// request logger's statusWriter implemented only http.Flusher, whose Flush
// has no error, so http.ResponseController found it first and every flush
// of a stream reported success: a following stream whose client was gone
// held its goroutines and store tail (until the Session's next commit, or
// for ever on a quiet Session) when nothing else cancelled the request.
func TestStreamEndsOnFlushError(t *testing.T) {
	b := harnessBackend(t)
	a, err := newAPI(Config{Runtime: b.rt})
	if err != nil {
		t.Fatal(err)
	}
	sid := b.h.Session()
	for _, path := range []string{"/api/session/" + string(sid) + "/log?follow=true", "/api/event"} {
		ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
		req := httptest.NewRequestWithContext(ctx, "GET", path, nil)
		req.Host = "127.0.0.1"
		w := &flushFailingWriter{header: http.Header{}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.ServeHTTP(w, req)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			t.Errorf("%s: the stream did not end after its flush failed", path)
			<-done // the deadline cancelled the request
		}
		cancel()
		w.mu.Lock()
		if w.flushes == 0 {
			t.Errorf("%s: never flushed", path)
		}
		w.mu.Unlock()
	}
	eventually(t, "the store tail released", func() bool { return b.store.Tails() == 0 })
}

// TestOpenAPIListsTooLarge: every route that answers 413 for a body
// over the server's limit says so in the OpenAPI document. wait and
// interrupt read (and so cap) the body a client sends, but their
// operations listed no 413.
func TestOpenAPIListsTooLarge(t *testing.T) {
	const limit = 1024
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.BodyBytes = limit })
	sid := e.createSession()
	doc := loadOpenAPI(t)
	big := `{"x":"` + strings.Repeat("x", 2*limit) + `"}`
	for _, rt := range routes {
		if rt.method == http.MethodGet {
			continue // GET routes take no body (and two of them stream)
		}
		path := strings.NewReplacer("{id}", string(sid), "{key}", "k", "{requestID}", "per_x").Replace(rt.path)
		r := e.do(rt.method, path, big)
		if r.status != http.StatusRequestEntityTooLarge {
			continue
		}
		r.wantError(t, http.StatusRequestEntityTooLarge, messages.ErrTooLarge)
		if _, ok := doc.Paths[rt.path][strings.ToLower(rt.method)].Responses["413"]; !ok {
			t.Errorf("%s %s answers 413, but openapi.json lists no 413", rt.method, rt.path)
		}
	}
}

// TestInstructionKeyNotUTF8: an instruction key is unescaped from the
// path as bytes, so "%FF" named a key that is not UTF-8. It was stored
// (204), listed as "\ufffd" (JSON cannot carry it), and a DELETE of the key
// the listing shows was 404: the entry could not be removed by what the
// API showed. It is 400 invalid naming key, and nothing is stored.
func TestInstructionKeyNotUTF8(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	base := "/api/session/" + string(sid) + "/instruction"
	m := e.do("PUT", base+"/%FF", map[string]string{"text": "x"}).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	if !strings.HasPrefix(m.Message, "key:") {
		t.Fatalf("message %q does not name key", m.Message)
	}
	if got := dataOf[map[string]string](t, e.do("GET", base, nil)); len(got) != 0 {
		t.Fatalf("entries %q", got)
	}
	// Escaped UTF-8 keys are fine.
	e.do("PUT", base+"/caf%C3%A9", map[string]string{"text": "x"}).want(t, http.StatusNoContent)
	if got := dataOf[map[string]string](t, e.do("GET", base, nil)); got["café"] != "x" {
		t.Fatalf("entries %q", got)
	}
	e.do("DELETE", base+"/caf%C3%A9", nil).want(t, http.StatusNoContent)
}

// TestCleanStopLogsNoDeadLetters: a graceful Server.Shutdown stops the
// adapter actor once. It stopped itself and was then stopped again, and
// every clean stop of the daemon logged two [DeadLetter] lines.
func TestCleanStopLogsNoDeadLetters(t *testing.T) {
	var logs lockedLog
	b := harnessBackend(t, actortest.Options{Config: func(c *actors.Config) { c.Logger = zerolog.New(&logs) }})
	e := newEnv(t, b, nil)
	e.do("GET", "/api/health", nil)
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "DeadLetter") {
		t.Fatalf("a clean stop logged dead letters:\n%s", logs.String())
	}
}

// lockedLog is a goroutine-safe log sink.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
