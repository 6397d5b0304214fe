package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

func TestAuth(t *testing.T) {
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Token = "s3cret-token" })
	sid := e.createSession() // with the token

	for _, hdr := range [][]string{
		{"Authorization", ""},
		{"Authorization", "Bearer wrong"},
		{"Authorization", "Bearer s3cret-token-and-more"},
		{"Authorization", "Basic s3cret-token"},
		{"Authorization", "s3cret-token"},
	} {
		for _, path := range []string{"/api/session", "/api/session/" + string(sid), "/api/openapi.json", "/api/event", "/api/nope"} {
			r := e.do("GET", path, nil, hdr...)
			r.wantError(t, http.StatusUnauthorized, messages.ErrUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
		}
		e.do("POST", "/api/session/"+string(sid)+"/prompt", map[string]any{"prompt": map[string]string{"text": "x"}}, hdr...).
			wantError(t, http.StatusUnauthorized, messages.ErrUnauthorized)
	}
	e.do("GET", "/api/session", nil, "Authorization", "bearer s3cret-token").want(t, http.StatusOK)
	// Health and metrics need no token.
	e.do("GET", "/api/health", nil, "Authorization", "").want(t, http.StatusOK)
	e.do("GET", "/metrics", nil, "Authorization", "").want(t, http.StatusOK)
	// Nothing was admitted by the refused requests.
	if evs := e.allEvents(sid); len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
}

func TestRoots(t *testing.T) {
	root := t.TempDir()
	inside := filepath.Join(root, "project")
	outside := t.TempDir()
	sibling := root + "-sibling" // shares root's prefix but is not inside it
	for _, d := range []string{inside, sibling} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(sibling) })
	escape := filepath.Join(root, "escape")
	if err := os.Symlink(outside, escape); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(outside, "to-inside")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Roots = []string{root} })
	create := func(dir string) reply {
		return e.do("POST", "/api/session", map[string]any{"location": map[string]string{"directory": dir}})
	}
	canonInside, err := filepath.EvalSymlinks(inside)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{inside, root, link, inside + "/../project"} {
		s := dataOf[persistence.Session](t, create(dir))
		if canon, _ := filepath.EvalSymlinks(dir); s.Location.Directory != canon {
			t.Fatalf("%s stored as %q, want canonical %q", dir, s.Location.Directory, canon)
		}
	}
	if s := dataOf[persistence.Session](t, create(link)); s.Location.Directory != canonInside {
		t.Fatalf("link stored as %q", s.Location.Directory)
	}
	for _, dir := range []string{outside, sibling, escape, "/", filepath.Join(root, "..")} {
		m := create(dir).wantError(t, http.StatusForbidden, messages.ErrForbidden)
		if !strings.HasPrefix(m.Message, "location.directory:") {
			t.Fatalf("message %q", m.Message)
		}
	}
	for _, dir := range []string{filepath.Join(root, "missing"), file} {
		create(dir).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	}

	if _, err := New(Config{Runtime: e.rt, Roots: []string{filepath.Join(root, "missing")}}); err == nil {
		t.Fatal("New accepted a missing root")
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New accepted a Config without Runtime")
	}
}

func TestBodyLimits(t *testing.T) {
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.BodyBytes = 1024 })
	sid := e.createSession()
	big := map[string]any{"prompt": map[string]string{"text": strings.Repeat("x", 2048)}}
	m := e.do("POST", "/api/session/"+string(sid)+"/prompt", big).wantError(t, http.StatusRequestEntityTooLarge, messages.ErrTooLarge)
	if !strings.Contains(m.Message, "1024") {
		t.Fatalf("message %q", m.Message)
	}
	e.do("POST", "/api/session", map[string]any{"location": map[string]string{"directory": e.dir}, "title": strings.Repeat("t", 2048)}).
		wantError(t, http.StatusRequestEntityTooLarge, messages.ErrTooLarge)
	e.do("POST", "/api/session/"+string(sid)+"/agent", map[string]any{"agent": strings.Repeat("a", 2048)}).
		wantError(t, http.StatusRequestEntityTooLarge, messages.ErrTooLarge)
	e.do("PUT", "/api/session/"+string(sid)+"/instruction/k", map[string]any{"text": strings.Repeat("a", 2048)}).
		wantError(t, http.StatusRequestEntityTooLarge, messages.ErrTooLarge)
	if evs := e.allEvents(sid); len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
}

// TestBodyLimitOfBodilessCommands: resume and compact take no body, but
// they did not read one either, so a body of any size was answered 204
// (and the command run) where every other POST caps it with 413. They
// refuse it now as the others do, before anything runs: no compaction is
// admitted and no drain asks the model.
func TestBodyLimitOfBodilessCommands(t *testing.T) {
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.BodyBytes = 1024 })
	sid := e.createSession()
	big := strings.Repeat("x", 4096)
	for _, cmd := range []string{"resume", "compact"} {
		m := e.do("POST", "/api/session/"+string(sid)+"/"+cmd, big).
			wantError(t, http.StatusRequestEntityTooLarge, messages.ErrTooLarge)
		if !strings.Contains(m.Message, "1024") {
			t.Fatalf("%s: message %q", cmd, m.Message)
		}
	}
	e.waitIdle(sid)
	if evs := e.allEvents(sid); len(evs) != 1 {
		t.Fatalf("events %v, want only the creation", types(evs))
	}
	if n := e.model.Count(); n != 0 {
		t.Fatalf("%d model requests", n)
	}
	// A body within the limit is still ignored.
	e.do("POST", "/api/session/"+string(sid)+"/compact", "{}").want(t, http.StatusNoContent)
}

// A prompt within the body limit but over the store's prompt limit (1 MiB
// by default) is 413 too.
func TestPromptOverStoreLimit(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	big := map[string]any{"prompt": map[string]string{"text": strings.Repeat("x", 1<<20+1)}}
	m := e.do("POST", "/api/session/"+string(sid)+"/prompt", big).wantError(t, http.StatusRequestEntityTooLarge, messages.ErrTooLarge)
	if !strings.HasPrefix(m.Message, "prompt.text:") {
		t.Fatalf("message %q", m.Message)
	}
}

func TestInboxBacklog(t *testing.T) {
	e := newEnv(t, storeBackend(t, persistence.Options{NoSync: true, InboxBacklog: 2}), nil)
	sid := e.createSession()
	first := map[string]any{"id": "msg_q0", "prompt": map[string]string{"text": "queued 0"}, "resume": false}
	adm := e.prompt(sid, first)
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "queued 1"}, "resume": false})
	e.do("POST", "/api/session/"+string(sid)+"/prompt", map[string]any{"prompt": map[string]string{"text": "one too many"}, "resume": false}).
		wantError(t, http.StatusTooManyRequests, messages.ErrInboxFull)
	// An exact retry of an admitted row is still answered.
	if again := e.prompt(sid, first); !reflect.DeepEqual(again, adm) {
		t.Fatalf("retry %+v, want %+v", again, adm)
	}
}

func TestCORS(t *testing.T) {
	const app, evil = "https://app.example", "https://evil.example"
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.CORS = []string{app}; c.API.Token = "tok" })
	r := e.do("OPTIONS", "/api/session", nil, "Origin", app, "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "authorization, content-type", "Authorization", "")
	r.want(t, http.StatusNoContent)
	h := r.header
	if h.Get("Access-Control-Allow-Origin") != app || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Last-Event-ID") {
		t.Fatalf("preflight headers %v", h)
	}
	r = e.do("OPTIONS", "/api/session", nil, "Origin", evil, "Access-Control-Request-Method", "POST", "Authorization", "")
	if r.status == http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight for an unlisted origin: %d %v", r.status, r.header)
	}
	if got := e.do("GET", "/api/session", nil, "Origin", app).want(t, http.StatusOK).header.Get("Access-Control-Allow-Origin"); got != app {
		t.Fatalf("allow origin %q", got)
	}
	// A page of an unlisted origin is refused outright (TestBrowserPagesAreRefused).
	if got := e.do("GET", "/api/session", nil, "Origin", evil).wantError(t, http.StatusForbidden, messages.ErrForbidden); got.Message == "" {
		t.Fatal("no message")
	}

	off := newHarnessEnv(t, nil)
	off.do("GET", "/api/session", nil, "Origin", app).wantError(t, http.StatusForbidden, messages.ErrForbidden)
	off.do("OPTIONS", "/api/session", nil, "Origin", app, "Access-Control-Request-Method", "POST").
		wantError(t, http.StatusForbidden, messages.ErrForbidden)
	off.do("OPTIONS", "/api/session", nil).wantError(t, http.StatusMethodNotAllowed, errMethodNotAllowed)
}

// TestBrowserPagesAreRefused checks what keeps web pages the user visits
// from driving a local daemon: a request a page sends to another origin
// carries Origin, which must be a listed CORS origin, and a server without
// a token answers only requests addressed to an IP address or localhost,
// since a page can re-point a name it controls at 127.0.0.1 (DNS
// rebinding) and then read the answers.
func TestBrowserPagesAreRefused(t *testing.T) {
	e := newHarnessEnv(t, nil)
	page := []string{"Content-Type", "text/plain;charset=UTF-8", "Origin", "https://evil.example"}
	e.do("POST", "/api/session", `{"id":"ses_page","location":{"directory":"`+e.dir+`"}}`, page...).
		wantError(t, http.StatusForbidden, messages.ErrForbidden)
	e.do("GET", "/api/session/ses_page", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	hostStatus := func(e *env, host, auth string) int {
		t.Helper()
		c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /api/session HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", host, auth)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for host, want := range map[string]int{"rebind.evil.example:4096": http.StatusForbidden, "127.0.0.1:4096": http.StatusOK,
		"[::1]:4096": http.StatusOK, "localhost:4096": http.StatusOK, "app.localhost": http.StatusOK, "192.168.1.5": http.StatusOK,
		// Host names compare case-insensitively, and a final dot (the
		// fully qualified form) names the same host; one dot only.
		"LOCALHOST": http.StatusOK, "LocalHost:4096": http.StatusOK, "App.LOCALHOST": http.StatusOK,
		"localhost.": http.StatusOK, "localhost.:4096": http.StatusOK, "app.localhost.": http.StatusOK,
		"localhost..": http.StatusForbidden, "localhost.evil.example": http.StatusForbidden, "evil.example.": http.StatusForbidden,
		"LOCALHOST.EVIL.EXAMPLE.": http.StatusForbidden, "notlocalhost": http.StatusForbidden} {
		if got := hostStatus(e, host, ""); got != want {
			t.Errorf("Host %s: status %d, want %d", host, got, want)
		}
	}
	// With a token a page cannot authenticate, and any name may be served.
	tok := newHarnessEnv(t, func(c *ServerConfig) { c.API.Token = "tok" })
	if got := hostStatus(tok, "sessiond.example.com", "Authorization: Bearer tok\r\n"); got != http.StatusOK {
		t.Errorf("with a token, Host sessiond.example.com: status %d", got)
	}
}

// TestTitleLimit: a title is at most persistence.MaxTitleBytes bytes of
// UTF-8, over HTTP and through the Go API alike; a refused create is 400
// invalid naming title and leaves the store as it was.
func TestTitleLimit(t *testing.T) {
	e := newHarnessEnv(t, nil)
	loc := map[string]string{"directory": e.dir}
	create := func(title string) reply {
		return e.do("POST", "/api/session", map[string]any{"id": "ses_titled", "location": loc, "title": title})
	}
	for _, title := range []string{strings.Repeat("t", persistence.MaxTitleBytes+1), strings.Repeat("é", persistence.MaxTitleBytes/2+1),
		strings.Repeat("t", 3<<19)} {
		m := create(title).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, "title:") || !strings.Contains(m.Message, "1024") {
			t.Errorf("%d bytes: message %q", len(title), m.Message)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	for _, title := range []string{"bad \xff byte", strings.Repeat("t", persistence.MaxTitleBytes+1)} {
		_, _, err := e.rt.Create(ctx, persistence.CreateSession{ID: "ses_titled", Location: messages.Location{Directory: e.dir}, Title: title})
		if messages.TypeOf(err) != messages.ErrInvalid || !strings.Contains(err.Error(), "title:") {
			t.Errorf("Go API, title %.20q: %v", title, err)
		}
	}
	if list := dataOf[[]persistence.Session](t, e.do("GET", "/api/session", nil)); len(list) != 0 {
		t.Fatalf("refused creates left %d Sessions", len(list))
	}
	// At the limit is fine: 1,024 bytes, also as 512 two-byte characters.
	for i, title := range []string{strings.Repeat("t", persistence.MaxTitleBytes), strings.Repeat("é", persistence.MaxTitleBytes/2)} {
		body := map[string]any{"id": "ses_titled" + itoa(int64(i)), "location": loc, "title": title}
		if s := dataOf[persistence.Session](t, e.do("POST", "/api/session", body)); s.Title != title {
			t.Fatalf("title %q", s.Title)
		}
	}
}

func TestMetricsRoute(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	s := e.stream("/api/session/" + string(sid) + "/log?follow=true")
	for s.nextData().synced(t) == nil {
	}
	body := string(e.do("GET", "/metrics", nil).want(t, http.StatusOK).body)
	if !strings.Contains(body, `sessiond_sse_subscribers{stream="log"} 1`) {
		t.Fatalf("metrics:\n%s", body)
	}
	s.close()
	eventually(t, "subscriber gauge back to 0", func() bool {
		return strings.Contains(string(e.do("GET", "/metrics", nil).body), `sessiond_sse_subscribers{stream="log"} 0`)
	})
}

// TestBodyCutOffByTheClient: a body the client cut off (it went away, or
// sent less than its Content-Length) is the client's failure, invalid,
// not an internal error logged as one.
func TestBodyCutOffByTheClient(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	req := httptest.NewRequest("POST", "/api/session/"+string(sid)+"/prompt", iotest.ErrReader(io.ErrUnexpectedEOF))
	req.Host = "127.0.0.1"
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.srv.api.ServeHTTP(rec, req)
	var body struct{ Error messages.Error }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusBadRequest || body.Error.Type != messages.ErrInvalid ||
		!strings.Contains(body.Error.Message, "unexpected EOF") {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}

// failedStore is a store that has failed (persistence.Bolt.Failed).
type failedStore struct{ persistence.Store }

func (failedStore) Failed() error { return errors.New("injected: no space left on device") }

// TestHealthReportsAFailedStore: once the store refuses every write until
// a restart, /api/health answers 503, so a supervisor that polls it
// restarts the daemon (it answered ok); the details stay in the log.
func TestHealthReportsAFailedStore(t *testing.T) {
	e := newEnv(t, harnessBackend(t, actortest.Options{Config: func(c *actors.Config) { c.Store = failedStore{c.Store} }}), nil)
	r := e.do("GET", "/api/health", nil, "Authorization", "")
	m := r.wantError(t, http.StatusServiceUnavailable, messages.ErrInternal)
	if strings.Contains(string(r.body), "space") || !strings.Contains(string(r.body), `"status":"failed"`) || !strings.Contains(m.Message, "restart") {
		t.Fatalf("health of a failed store: %s", r.body)
	}
}

// fullStore is a store whose disk has no room: it refuses admissions as
// persistence.Bolt does then.
type fullStore struct{ persistence.Store }

func (fullStore) Admit(context.Context, persistence.Admission) (persistence.Admitted, bool, error) {
	return persistence.Admitted{}, false, fmt.Errorf("%w: %w",
		messages.Errorf(messages.ErrStorageFull, "the disk has no room for sessiond's store (no space left on device): writes succeed again once there is room"),
		fmt.Errorf("write /data/sessiond.db-wal: %w", syscall.ENOSPC))
}

// TestFullDiskIs507: a write refused for want of room on the disk answers
// 507 storage.full, with a message a user can act on and without the
// server's paths; the health check stays ok (the store has not failed).
func TestFullDiskIs507(t *testing.T) {
	e := newEnv(t, harnessBackend(t, actortest.Options{Config: func(c *actors.Config) { c.Store = fullStore{c.Store} }}), nil)
	sid := e.createSession()
	r := e.do("POST", "/api/session/"+string(sid)+"/prompt", map[string]any{"prompt": map[string]any{"text": "hi"}})
	m := r.wantError(t, http.StatusInsufficientStorage, messages.ErrStorageFull)
	if !strings.Contains(m.Message, "no room") || strings.Contains(string(r.body), "/data") {
		t.Fatalf("prompt on a full disk: %s", r.body)
	}
	e.do("GET", "/api/health", nil, "Authorization", "").want(t, http.StatusOK)
}
