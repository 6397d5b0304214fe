package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// backend is the runtime an env serves: the actortest harness, or one
// built here around a store with custom options (backlog limits, fsync).
type backend struct {
	rt    *actors.Runtime
	store *persistence.Bolt
	model *script.Provider
	dir   string
	// h is set for harness backends.
	h *actortest.Harness
}

// harnessBackend starts an actortest harness.
func harnessBackend(t testing.TB, opts ...actortest.Options) backend {
	h := actortest.New(t, opts...)
	return backend{rt: h.Runtime, store: h.Store, model: h.Model, dir: h.Dir, h: h}
}

// storeBackend builds a runtime like actortest does, but on a store opened
// with o (actortest offers no hook for store options) and the real clock.
func storeBackend(tb testing.TB, o persistence.Options) backend {
	tb.Helper()
	st, err := persistence.Open(filepath.Join(tb.TempDir(), "sessiond.db"), o)
	if err != nil {
		tb.Fatal(err)
	}
	model := script.New()
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "script", Type: llm.ProviderScript,
		Models: map[string]llm.ModelSpec{"demo": {Context: 200000, Output: 8000}}}})
	if err != nil {
		tb.Fatal(err)
	}
	svc := locations.Services{Catalog: catalog, DefaultModel: messages.ModelRef{ProviderID: "script", ID: "demo"},
		Provider: func(string) (llm.Provider, error) { return model, nil },
		Agents:   map[string]locations.Agent{"build": {Name: "build", Steps: 25}}, Tools: actortest.NewTools()}
	mgr := locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
		s := svc
		s.Location = loc
		return &s, nil
	})
	rt, err := actors.New(actors.Config{Store: st, Locations: mgr, Logger: zerolog.Nop(),
		ActorOptions: []actor.ConfigOption{actor.WithDeadLetterThrottleInterval(10 * time.Millisecond)}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := st.Close(); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return backend{rt: rt, store: st, model: model, dir: tb.TempDir()}
}

// env is one API server on a real loopback listener.
type env struct {
	backend
	t       testing.TB
	srv     *Server
	base    string
	client  *http.Client
	token   string
	reg     *prometheus.Registry
	metrics *actors.Metrics
}

// newEnv serves b; mutate adjusts the server config and hooks the Server
// before it starts serving.
func newEnv(t testing.TB, b backend, mutate func(*ServerConfig), hooks ...func(*Server)) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := actors.NewMetrics(reg)
	cfg := ServerConfig{API: Config{Runtime: b.rt, Metrics: m, Gatherer: reg, Logger: zerolog.Nop(), Heartbeat: time.Hour}}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		h(srv)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	e := &env{backend: b, t: t, srv: srv, base: "http://" + l.Addr().String(), client: &http.Client{Transport: tr},
		token: cfg.API.Token, reg: reg, metrics: m}
	if err := srv.Start(l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		select {
		case err := <-srv.Failed():
			t.Errorf("serve: %v", err)
		default:
		}
		tr.CloseIdleConnections()
	})
	return e
}

// newHarnessEnv is the common case: a harness backend with default config.
func newHarnessEnv(t testing.TB, mutate func(*ServerConfig)) *env {
	return newEnv(t, harnessBackend(t), mutate)
}

// reply is one HTTP answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request. body is nil, a string or []byte (sent raw) or any
// other value (sent as JSON). hdr are header name/value pairs. The env's
// token is sent unless hdr sets Authorization. do fails the test on a
// transport error, so it must run on the test's goroutine; other
// goroutines use try.
func (e *env) do(method, path string, body any, hdr ...string) reply {
	e.t.Helper()
	r, err := e.try(method, path, body, hdr...)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// setHeaders sets the name/value pairs of hdr on h. A name given again
// adds a value rather than replacing the first, so a test can send a
// header more than once.
func setHeaders(h http.Header, hdr []string) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(hdr); i += 2 {
		if seen[http.CanonicalHeaderKey(hdr[i])] {
			h.Add(hdr[i], hdr[i+1])
			continue
		}
		seen[http.CanonicalHeaderKey(hdr[i])] = true
		h.Set(hdr[i], hdr[i+1])
	}
}

// try is do for any goroutine: it returns transport errors.
func (e *env) try(method, path string, body any, hdr ...string) (reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.base+path, rd)
	if err != nil {
		return reply{}, err
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	setHeaders(req.Header, hdr)
	resp, err := e.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// want fails unless the reply has status.
func (r reply) want(t testing.TB, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

// wantError fails unless the reply is an error of status and type.
func (r reply) wantError(t testing.TB, status int, typ messages.ErrorType) *messages.Error {
	t.Helper()
	r.want(t, status)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error content type %q", ct)
	}
	var b struct {
		Error *messages.Error `json:"error"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error == nil {
		t.Fatalf("error body %s: %v", r.body, err)
	}
	if b.Error.Type != typ {
		t.Fatalf("error type %q, want %q (%s)", b.Error.Type, typ, b.Error.Message)
	}
	return b.Error
}

// dataOf decodes {"data": T} from a 200 reply.
func dataOf[T any](t testing.TB, r reply) T {
	t.Helper()
	r.want(t, http.StatusOK)
	var b struct {
		Data *T `json:"data"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Data == nil {
		t.Fatalf("data body %s: %v", r.body, err)
	}
	return *b.Data
}

// eventPage is a decoded history page.
type eventPage struct {
	Data    []messages.Event `json:"data"`
	HasMore bool             `json:"hasMore"`
}

func pageOf(t testing.TB, r reply) eventPage {
	t.Helper()
	r.want(t, http.StatusOK)
	var p eventPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("page %s: %v", r.body, err)
	}
	return p
}

// createSession creates a Session in the backend's directory over HTTP.
func (e *env) createSession() messages.SessionID {
	e.t.Helper()
	s := dataOf[persistence.Session](e.t, e.do("POST", "/api/session", map[string]any{"location": map[string]string{"directory": e.dir}}))
	return s.ID
}

// prompt admits a prompt over HTTP.
func (e *env) prompt(sid messages.SessionID, body any) persistence.Admitted {
	e.t.Helper()
	return dataOf[persistence.Admitted](e.t, e.do("POST", "/api/session/"+string(sid)+"/prompt", body))
}

// waitIdle is POST wait.
func (e *env) waitIdle(sid messages.SessionID) {
	e.t.Helper()
	e.do("POST", "/api/session/"+string(sid)+"/wait", nil).want(e.t, http.StatusNoContent)
}

// allEvents reads the Session's whole history over HTTP, page by page.
func (e *env) allEvents(sid messages.SessionID) []messages.Event {
	e.t.Helper()
	var out []messages.Event
	after := int64(-1)
	for {
		p := pageOf(e.t, e.do("GET", "/api/session/"+string(sid)+"/history?limit=100&after="+itoa(after), nil))
		out = append(out, p.Data...)
		if !p.HasMore {
			return out
		}
		after = p.Data[len(p.Data)-1].Seq()
	}
}

func types(evs []messages.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// sseMsg is one server-sent message: an event (data, optional id) or a
// comment.
type sseMsg struct {
	id      string
	hasID   bool
	name    string // the event type, when named
	data    string
	comment string
}

// sseStream is a client of one event stream.
type sseStream struct {
	t      testing.TB
	resp   *http.Response
	rd     *bufio.Reader
	cancel context.CancelFunc
}

// stream opens an event stream and fails unless it answers 200
// text/event-stream. The stream is closed at the end of the test.
func (e *env) stream(path string, hdr ...string) *sseStream {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	req, err := http.NewRequestWithContext(ctx, "GET", e.base+path, nil)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	setHeaders(req.Header, hdr)
	resp, err := e.client.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		e.t.Fatalf("stream %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sseStream{t: e.t, resp: resp, rd: bufio.NewReader(resp.Body), cancel: cancel}
	e.t.Cleanup(s.close)
	return s
}

// close ends the stream from the client side.
func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next reads one message or comment; io.EOF when the server ended it.
func (s *sseStream) next() (sseMsg, error) {
	var m sseMsg
	have := false
	for {
		line, err := s.rd.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && line == "" && !have {
				return m, io.EOF
			}
			return m, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if have {
				return m, nil
			}
		case strings.HasPrefix(line, ":"):
			return sseMsg{comment: strings.TrimSpace(line[1:])}, nil
		case strings.HasPrefix(line, "id: "):
			m.id, m.hasID, have = line[4:], true, true
		case strings.HasPrefix(line, "data: "):
			m.data, have = line[6:], true
		case strings.HasPrefix(line, "event: "):
			m.name, have = line[7:], true
		default:
			s.t.Fatalf("unexpected SSE line %q", line)
		}
	}
}

// nextData reads the next message that is not a comment.
func (s *sseStream) nextData() sseMsg {
	s.t.Helper()
	for {
		m, err := s.next()
		if err != nil {
			s.t.Fatalf("stream: %v", err)
		}
		if m.comment == "" {
			return m
		}
	}
}

// event decodes a message's data as an event.
func (m sseMsg) event(t testing.TB) messages.Event {
	t.Helper()
	var ev messages.Event
	if err := json.Unmarshal([]byte(m.data), &ev); err != nil {
		t.Fatalf("event %q: %v", m.data, err)
	}
	return ev
}

// synced decodes a log.synced marker, or returns nil for another message.
func (m sseMsg) synced(t testing.TB) *messages.Synced {
	t.Helper()
	if !strings.Contains(m.data, `"log.synced"`) {
		return nil
	}
	var s messages.Synced
	if err := json.Unmarshal([]byte(m.data), &s); err != nil || s.Type != messages.TypeLogSynced {
		t.Fatalf("synced %q: %v", m.data, err)
	}
	return &s
}

// eventually polls cond until it holds or the harness timeout passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(actortest.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not synchronization
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
