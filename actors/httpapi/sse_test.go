package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// readLog reads a log stream up to and including its log.synced marker and
// returns the events before it and the marker.
func readLog(t *testing.T, s *sseStream) ([]messages.Event, *messages.Synced) {
	t.Helper()
	var evs []messages.Event
	for {
		m := s.nextData()
		if syn := m.synced(t); syn != nil {
			if m.hasID {
				t.Fatalf("log.synced carries an id: %+v", m)
			}
			return evs, syn
		}
		ev := m.event(t)
		if !m.hasID || m.id != strconv.FormatInt(ev.Seq(), 10) {
			t.Fatalf("event seq %d sent with id %q", ev.Seq(), m.id)
		}
		evs = append(evs, ev)
	}
}

func TestLogReplayThenFollow(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Reply(script.Text("one"))
	e.model.Reply(script.Text("two"))
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "first"}})
	e.waitIdle(sid)
	want := e.allEvents(sid)

	s := e.stream("/api/session/" + string(sid) + "/log?follow=true")
	replayed, syn := readLog(t, s)
	if len(replayed) != len(want) || syn.AggregateID != sid || syn.Seq == nil || *syn.Seq != int64(len(want)-1) {
		t.Fatalf("replayed %d of %d, synced %+v", len(replayed), len(want), syn)
	}
	for i := range want {
		if replayed[i].ID != want[i].ID || replayed[i].Seq() != int64(i) {
			t.Fatalf("event %d: %+v vs %+v", i, replayed[i], want[i])
		}
	}
	// The tail delivers the next busy period as it commits.
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "second"}})
	next := int64(len(want))
	for {
		m := s.nextData()
		ev := m.event(t)
		if ev.Seq() != next || m.id != strconv.FormatInt(next, 10) {
			t.Fatalf("tail: got seq %d id %q, want %d", ev.Seq(), m.id, next)
		}
		next++
		if ev.Type == messages.TypeExecutionSucceeded {
			break
		}
	}
	// Leaving releases the store's tail.
	if e.store.Tails() != 1 {
		t.Fatalf("tails %d", e.store.Tails())
	}
	s.close()
	eventually(t, "tail released", func() bool { return e.store.Tails() == 0 })
}

func TestLogWithoutFollow(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Reply(script.Text("answer"))
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "q"}})
	e.waitIdle(sid)
	total := int64(len(e.allEvents(sid)))
	base := "/api/session/" + string(sid) + "/log"

	check := func(s *sseStream, from int64) {
		t.Helper()
		evs, syn := readLog(t, s)
		if int64(len(evs)) != total-from || (len(evs) > 0 && evs[0].Seq() != from) || *syn.Seq != total-1 {
			t.Fatalf("from %d: %d events, synced %+v", from, len(evs), syn)
		}
		if _, err := s.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("stream did not end after log.synced: %v", err)
		}
	}
	check(e.stream(base), 0)
	check(e.stream(base+"?follow=false&after=-1"), 0)
	check(e.stream(base+"?after=3"), 4)
	// Last-Event-ID is the cursor when the query has none, and wins when
	// it is later (an EventSource reconnecting repeats its URL's after).
	check(e.stream(base, "Last-Event-ID", "5"), 6)
	check(e.stream(base+"?after=1", "Last-Event-ID", "5"), 6)
	check(e.stream(base+"?after=5", "Last-Event-ID", "1"), 6)
	check(e.stream(base+"?after="+itoa(total+10)), total)

	for q, param := range map[string]string{"?after=-2": "after", "?after=x": "after", "?follow=maybe": "follow", "?follow=T": "follow",
		"?follow=False": "follow", "?after=1&after=2": "after"} {
		m := e.do("GET", base+q, nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, param+":") {
			t.Errorf("%s: message %q", q, m.Message)
		}
	}
	m := e.do("GET", base, nil, "Last-Event-ID", "abc").wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	if !strings.HasPrefix(m.Message, "Last-Event-ID:") {
		t.Fatalf("message %q", m.Message)
	}
	// A Last-Event-ID sent twice with different values is ambiguous, as
	// a repeated after is: the first one was taken, and the stream began
	// from a cursor the client may not have meant. The same value twice is
	// that value.
	m = e.do("GET", base, nil, "Last-Event-ID", "1", "Last-Event-ID", "5").wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	if !strings.HasPrefix(m.Message, "Last-Event-ID:") {
		t.Fatalf("message %q", m.Message)
	}
	check(e.stream(base, "Last-Event-ID", "5", "Last-Event-ID", "5"), 6)
	e.do("GET", "/api/session/ses_missing/log?follow=true", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("GET", "/api/session/bad/log", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
}

// A client that disconnects at random points and reconnects with
// Last-Event-ID, while the runner keeps committing, sees every event
// exactly once and in order.
func TestLogReconnectWhileCommitting(t *testing.T) {
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Heartbeat = 5 * time.Millisecond })
	e.model.Default(script.Text("a reply long enough to stream a few deltas"))
	sid := e.createSession()

	const prompts = 30
	final := make(chan int64, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range prompts {
			delivery := "steer"
			if i%3 == 0 {
				delivery = "queue"
			}
			r, err := e.try("POST", "/api/session/"+string(sid)+"/prompt",
				map[string]any{"prompt": map[string]string{"text": "prompt " + itoa(int64(i))}, "delivery": delivery})
			if err != nil || r.status != http.StatusOK {
				t.Errorf("prompt %d: %d %s %v", i, r.status, r.body, err)
			}
		}
		if err := e.rt.Wait(e.h.Ctx(), sid); err != nil {
			t.Error(err)
		}
		w, err := e.store.Watermark(e.h.Ctx(), sid)
		if err != nil {
			t.Error(err)
		}
		final <- w
	})
	defer wg.Wait()

	rng := rand.New(rand.NewPCG(1, 2))
	var seen []int64
	last := int64(-1)
	target := int64(-2)
	connections := 0
	for target != last {
		connections++
		var hdr []string
		if last >= 0 {
			hdr = []string{"Last-Event-ID", strconv.FormatInt(last, 10)}
		}
		s := e.stream("/api/session/"+string(sid)+"/log?follow=true", hdr...)
		budget := 1 + rng.IntN(12)
		synced := 0
		for budget > 0 && target != last {
			m, err := s.next()
			if err != nil {
				t.Fatalf("connection %d: %v", connections, err)
			}
			if m.comment != "" {
				select {
				case target = <-final:
				default:
				}
				continue
			}
			if syn := m.synced(t); syn != nil {
				synced++
				if syn.Seq == nil || *syn.Seq < last {
					t.Fatalf("synced %+v behind cursor %d", syn, last)
				}
				continue
			}
			ev := m.event(t)
			seen = append(seen, ev.Seq())
			last = ev.Seq()
			budget--
		}
		if synced > 1 {
			t.Fatalf("connection %d: %d log.synced markers", connections, synced)
		}
		s.close()
		if target < -1 {
			select {
			case target = <-final:
			default:
			}
		}
	}
	for i, seq := range seen {
		if seq != int64(i) {
			t.Fatalf("after %d reconnects: position %d has seq %d (lost or duplicated); seen %v", connections, i, seq, seen)
		}
	}
	if int64(len(seen)) != target+1 || connections < 5 {
		t.Fatalf("saw %d events over %d connections, watermark %d", len(seen), connections, target)
	}
	eventually(t, "tails released", func() bool { return e.store.Tails() == 0 })
}

func TestLogHeartbeat(t *testing.T) {
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Heartbeat = 10 * time.Millisecond })
	sid := e.createSession()
	s := e.stream("/api/session/" + string(sid) + "/log?follow=true")
	readLog(t, s)
	for range 3 {
		m, err := s.next()
		if err != nil || m.comment != "ping" {
			t.Fatalf("heartbeat: %+v %v", m, err)
		}
	}
}

// Server.ReadTimeout bounds reading requests; it must cut neither a stream
// nor a long poll that outlives it.
func TestReadTimeoutDoesNotCutStreams(t *testing.T) {
	const readTimeout = 100 * time.Millisecond
	e := newHarnessEnv(t, func(c *ServerConfig) {
		c.ReadTimeout = readTimeout
		c.API.Heartbeat = 10 * time.Millisecond
	})
	g := script.NewGate()
	e.model.Reply(script.Hold(g), script.Text("late"))
	sid := e.createSession()
	s := e.stream("/api/session/" + string(sid) + "/log?follow=true")
	readLog(t, s)
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "take your time"}})
	if err := g.Reached(e.h.Ctx()); err != nil {
		t.Fatal(err)
	}
	waited := make(chan int, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		r, err := e.try("POST", "/api/session/"+string(sid)+"/wait", nil)
		if err != nil {
			t.Error(err)
		}
		waited <- r.status
	})
	defer wg.Wait()
	// Let three read timeouts pass while the stream idles on heartbeats.
	start := time.Now()
	for time.Since(start) < 3*readTimeout {
		// Pings, and the events committed before the gate.
		if m, err := s.next(); err != nil || (m.comment != "ping" && m.data == "") {
			t.Fatalf("after %v: %+v %v", time.Since(start), m, err)
		}
	}
	g.Release()
	if status := <-waited; status != http.StatusNoContent {
		t.Fatalf("wait: %d", status)
	}
	for {
		if ev := s.nextData().event(t); ev.Type == messages.TypeExecutionSucceeded {
			break
		}
	}
}

// TestHeadOnStreamsAnswersHeadersOnly checks that HEAD on a stream route
// gets the stream's headers and ends: net/http drops a HEAD response's
// body, so a stream would never notice its client leave and would hold the
// keep-alive connection the client reuses for its next request.
func TestHeadOnStreamsAnswersHeadersOnly(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: actortest.Timeout}
	for _, path := range []string{"/api/event", "/api/session/" + string(sid) + "/log?follow=true"} {
		req, err := http.NewRequest(http.MethodHead, e.base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("HEAD %s: %d %q", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		// The same connection serves the next request.
		res, err = c.Get(e.base + "/api/health")
		if err != nil {
			t.Fatalf("GET after HEAD %s: %v", path, err)
		}
		res.Body.Close()
	}
}

func TestEventStream(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Reply(script.TextChunks("hel", "lo"))
	sid := e.createSession()
	all := e.stream("/api/event")
	mine := e.stream("/api/event?sessionID=" + string(sid))
	other := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "hi"}})

	read := func(s *sseStream) (types []string, sessions map[messages.SessionID]bool) {
		sessions = map[messages.SessionID]bool{}
		for {
			m := s.nextData()
			if m.hasID {
				t.Fatalf("live stream message with id: %+v", m)
			}
			ev := m.event(t)
			types = append(types, ev.Type)
			sessions[ev.Data.Session()] = true
			if ev.Type == messages.TypeExecutionSucceeded {
				return types, sessions
			}
		}
	}
	got, sessions := read(mine)
	if len(sessions) != 1 || !sessions[sid] {
		t.Fatalf("filtered stream saw sessions %v", sessions)
	}
	deltas := 0
	for _, typ := range got {
		if typ == messages.TypeTextDelta {
			deltas++
		}
	}
	for _, typ := range []string{messages.TypePromptAdmitted, messages.TypeExecutionStarted, messages.TypeTextEnded, messages.TypeStepEnded} {
		if !strings.Contains(strings.Join(got, " "), typ) {
			t.Fatalf("filtered stream misses %s: %v", typ, got)
		}
	}
	if deltas != 2 {
		t.Fatalf("%d text deltas in %v", deltas, got)
	}
	_, sessions = read(all)
	if !sessions[other] || !sessions[sid] {
		t.Fatalf("unfiltered stream saw sessions %v", sessions)
	}
	e.do("GET", "/api/event?sessionID=nope", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
}

// TestEventStreamUnknownSession: a sessionID that names no Session is
// answered like the log stream answers it, 404 session.not-found with a
// JSON body, before any stream starts; a malformed or repeated one is 400.
func TestEventStreamUnknownSession(t *testing.T) {
	e := newHarnessEnv(t, nil)
	for _, method := range []string{"GET", "HEAD"} {
		r := e.do(method, "/api/event?sessionID=ses_nope", nil).want(t, http.StatusNotFound)
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: content type %q", method, ct)
		}
	}
	e.do("GET", "/api/event?sessionID=ses_nope", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("GET", "/api/session/ses_nope/log", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("GET", "/api/event?sessionID=ses_a&sessionID=ses_b", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	if m := e.do("GET", "/api/event?sessionID=nope", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid); !strings.HasPrefix(m.Message, "sessionID:") {
		t.Fatalf("message %q", m.Message)
	}
	// An existing Session streams.
	sid := e.createSession()
	e.stream("/api/event?sessionID=" + string(sid)).close()
}

// stuckWriter is a ResponseWriter whose client never reads: every Write
// blocks until released.
type stuckWriter struct {
	header  http.Header
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	body    strings.Builder
}

func (w *stuckWriter) Header() http.Header { return w.header }
func (w *stuckWriter) WriteHeader(int)     { close(w.started) }
func (w *stuckWriter) Flush()              {}
func (w *stuckWriter) Write(b []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.body.Write(b)
}

// A subscriber that stops reading is cut off by the Bus; the runner never
// waits for it. So is a live log stream's, which ends with the same notice.
func TestSlowEventSubscriberCutOff(t *testing.T) {
	t.Run("event", func(t *testing.T) { slowSubscriberCutOff(t, "/api/event") })
	t.Run("live-log", func(t *testing.T) { slowSubscriberCutOff(t, "/api/session/%s/log?follow=true&live=true") })
}

func slowSubscriberCutOff(t *testing.T, path string) {
	b := harnessBackend(t)
	a, err := newAPI(Config{Runtime: b.rt})
	if err != nil {
		t.Fatal(err)
	}
	sid := b.h.Session()
	if strings.Contains(path, "%s") {
		path = fmt.Sprintf(path, sid)
	}
	w := &stuckWriter{header: http.Header{}, started: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "GET", path, nil)
	req.Host = "127.0.0.1" // not httptest's example.com, which a server without a token refuses
	var wg sync.WaitGroup
	wg.Go(func() { a.ServeHTTP(w, req) })
	defer wg.Wait()
	<-w.started

	b.model.SetChunkSize(1)
	b.model.Reply(script.Text(strings.Repeat("x", 3*eventBuffer)))
	b.h.Prompt(sid, "flood")
	b.h.WaitIdle(sid) // the runner finished although the subscriber read nothing
	if n := b.rt.Bus().Subscribers(); n != 0 {
		t.Fatalf("%d bus subscribers after the cut-off", n)
	}
	close(w.release)
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !strings.HasSuffix(w.body.String(), ": dropped: subscriber fell behind; resynchronize from the log\n\n"+
		"event: dropped\ndata: {\"type\":\"dropped\",\"message\":\"subscriber fell behind; resynchronize from the log\"}\n\n") {
		tail := w.body.String()
		t.Fatalf("stream did not end with the drop notice: …%s", tail[max(0, len(tail)-200):])
	}
}

// Shutdown ends streams and long polls, and stops accepting.
func TestShutdownEndsStreams(t *testing.T) {
	var mu sync.Mutex
	conns := map[net.Conn]http.ConnState{}
	activeConns := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, st := range conns {
			if st == http.StateActive {
				n++
			}
		}
		return n
	}
	e := newEnv(t, harnessBackend(t), nil, func(s *Server) {
		s.http.ConnState = func(c net.Conn, st http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			conns[c] = st
		}
	})
	g := script.NewGate()
	e.model.Reply(script.Hold(g), script.Text("x"))
	sid := e.createSession()
	eventually(t, "no active connection", func() bool { return activeConns() == 0 })
	log := e.stream("/api/session/" + string(sid) + "/log?follow=true")
	readLog(t, log)
	liveLog := e.stream("/api/session/" + string(sid) + "/log?follow=true&live=true")
	readLog(t, liveLog)
	live := e.stream("/api/event")
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "hold"}})
	if err := g.Reached(e.h.Ctx()); err != nil {
		t.Fatal(err)
	}
	// Only the three streams are active once the prompt's connection is
	// idle again; then the wait makes four. It must be in flight before
	// shutdown; the runner is held, so it cannot have returned.
	eventually(t, "prompt connection idle", func() bool { return activeConns() == 3 })
	waited := make(chan reply, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		r, err := e.try("POST", "/api/session/"+string(sid)+"/wait", nil)
		if err != nil {
			t.Error(err)
		}
		waited <- r
	})
	eventually(t, "wait in flight", func() bool { return activeConns() == 4 })
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// The Session is still running (the gate holds it): the wait is cut
	// by the shutdown, never answered as if the Session were idle.
	(<-waited).wantError(t, http.StatusServiceUnavailable, messages.ErrShuttingDown)
	for _, s := range []*sseStream{log, liveLog, live} {
		for {
			_, err := s.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("stream after shutdown: %v", err)
			}
		}
	}
	if _, err := e.client.Get(e.base + "/api/health"); err == nil {
		t.Fatal("server still accepts after Shutdown")
	}
	g.Release()
}

// stallListener hands out connections whose writes stall, as a client that
// stops reading (without closing) makes them once the socket buffers are
// full: a stalled Write returns only when its write deadline passes, or
// when the connection is closed.
type stallListener struct {
	net.Listener
	stalled atomic.Bool
}

// serveStalling starts a server with cfg on a stallListener of a free
// local port, shut down when the test ends.
func serveStalling(t *testing.T, cfg Config) *stallListener {
	t.Helper()
	var l *stallListener
	serveOn(t, cfg, func(inner net.Listener) net.Listener {
		l = &stallListener{Listener: inner}
		return l
	})
	return l
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: c, l: l, closed: make(chan struct{}), moved: make(chan struct{})}, nil
}

type stallConn struct {
	net.Conn
	l         *stallListener
	mu        sync.Mutex
	deadline  time.Time
	moved     chan struct{} // closed when the deadline changes
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *stallConn) Write(b []byte) (int, error) {
	if !c.l.stalled.Load() {
		return c.Conn.Write(b)
	}
	for {
		c.mu.Lock()
		dl, moved := c.deadline, c.moved
		c.mu.Unlock()
		var expired <-chan time.Time
		if !dl.IsZero() {
			t := time.NewTimer(time.Until(dl))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		case <-moved:
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
}

func (c *stallConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	close(c.moved)
	c.moved = make(chan struct{})
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

func (c *stallConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *stallConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestStalledStreamClientsAreCutOff: a client of /log?follow or /api/event
// that stops reading without closing its connection is cut off once a
// write has waited StreamWriteTimeout, releasing the stream's goroutines
// and store tail, instead of holding them until Shutdown.
func TestStalledStreamClientsAreCutOff(t *testing.T) {
	b := harnessBackend(t)
	sid := b.h.Session()
	for stream, path := range map[string]string{streamLog: "/api/session/" + string(sid) + "/log?follow=true", streamEvent: "/api/event"} {
		t.Run(stream, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := actors.NewMetrics(reg)
			l := serveStalling(t, Config{Runtime: b.rt, Metrics: m, Gatherer: reg, Logger: zerolog.Nop(),
				Heartbeat: 10 * time.Millisecond, StreamWriteTimeout: 50 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+l.Addr().String()+path, nil)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			subscribers := func() float64 {
				return testutil.ToFloat64(m.Subscribers.WithLabelValues(stream))
			}
			if subscribers() != 1 {
				t.Fatalf("%v subscribers while streaming", subscribers())
			}
			l.stalled.Store(true) // the client reads no more
			eventually(t, "the stalled stream to end", func() bool { return subscribers() == 0 })
		})
	}
}

// TestReadingStreamClientsAreNotCutOff: the write timeout bounds a client
// that stops reading, not a stream's age: a client that keeps reading
// outlives StreamWriteTimeout many times over.
func TestReadingStreamClientsAreNotCutOff(t *testing.T) {
	e := newHarnessEnv(t, func(c *ServerConfig) {
		c.API.Heartbeat = 5 * time.Millisecond
		c.API.StreamWriteTimeout = 20 * time.Millisecond
	})
	s := e.stream("/api/event")
	start := time.Now()
	pings := 0
	for time.Since(start) < 300*time.Millisecond {
		m, err := s.next()
		if err != nil {
			t.Fatalf("the stream ended after %v and %d pings: %v", time.Since(start), pings, err)
		}
		if m.comment == "ping" {
			pings++
		}
	}
}

// TestFollowingStreamsCapTheirSendBuffer: a following stream caps its
// connection's send buffer (so that a client reading slower than the
// stream runs gets the dropped notice before the write timeout ends the
// connection) and closes the connection when it ends, which keeps the cap
// from a later request on it; a replay without follow does neither.
func TestFollowingStreamsCapTheirSendBuffer(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := string(e.createSession())
	for path, capped := range map[string]bool{
		"/api/event":                                true,
		"/api/event?sessionID=" + sid:               true,
		"/api/session/" + sid + "/log?follow=true":  true,
		"/api/session/" + sid + "/log":              false,
		"/api/session/" + sid + "/log?follow=false": false,
	} {
		s := e.stream(path)
		if s.resp.Close != capped {
			t.Errorf("%s: Connection: close is %v, want %v", path, s.resp.Close, capped)
		}
		s.close()
	}
}
