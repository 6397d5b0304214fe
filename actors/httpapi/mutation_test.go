package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/messages"
)

// TestCORSOnlyWhereItApplies: CORS headers go only on requests from a
// listed origin, and only a real preflight (OPTIONS with
// Access-Control-Request-Method) is answered as one. A request without
// Origin gets no Vary and no allowed origin even when "*" is listed; a
// server without CORS adds nothing; an OPTIONS without the method header,
// or a GET that carries it, goes to the routes as any request does.
func TestCORSOnlyWhereItApplies(t *testing.T) {
	const app = "https://app.example"
	star := newHarnessEnv(t, func(c *ServerConfig) { c.API.CORS = []string{"*"}; c.API.Token = "tok" })
	r := star.do("GET", "/api/session", nil).want(t, http.StatusOK)
	if _, ok := r.header["Access-Control-Allow-Origin"]; ok || r.header.Get("Vary") != "" {
		t.Fatalf("CORS headers on a request without Origin: %v", r.header)
	}
	// Not a preflight: no Access-Control-Request-Method.
	r = star.do("OPTIONS", "/api/session", nil, "Origin", app)
	if r.status == http.StatusNoContent || r.header.Get("Access-Control-Allow-Methods") != "" {
		t.Fatalf("an OPTIONS without Access-Control-Request-Method answered as a preflight: %d %v", r.status, r.header)
	}
	r.wantError(t, http.StatusMethodNotAllowed, errMethodNotAllowed)
	// A GET carrying the header is served, not answered as a preflight.
	r = star.do("GET", "/api/session", nil, "Origin", app, "Access-Control-Request-Method", "POST").want(t, http.StatusOK)
	if r.header.Get("Access-Control-Allow-Origin") != app || r.header.Get("Access-Control-Allow-Methods") != "" {
		t.Fatalf("GET with Access-Control-Request-Method: %v", r.header)
	}

	off := newHarnessEnv(t, nil)
	r = off.do("GET", "/api/session", nil, "Origin", app)
	if r.header.Get("Vary") != "" || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("CORS headers from a server without CORS: %v", r.header)
	}
}

// TestRequestLogStatus: the request log records the status the client
// got: the first WriteHeader, or 200 for a body written without one.
func TestRequestLogStatus(t *testing.T) {
	var logs syncLog
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel) })
	e.do("GET", "/api/session/ses_missing", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("GET", "/api/health", nil).want(t, http.StatusOK)
	want := map[string]int{"/api/session/ses_missing": http.StatusNotFound, "/api/health": http.StatusOK}
	got := map[string]int{}
	eventually(t, "both requests logged", func() bool {
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec struct {
				Message string `json:"message"`
				Path    string `json:"path"`
				Status  int    `json:"status"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Message == "request" {
				got[rec.Path] = rec.Status
			}
		}
		return len(got) == len(want)
	})
	for path, status := range want {
		if got[path] != status {
			t.Errorf("%s logged with status %d, want %d", path, got[path], status)
		}
	}
}

// TestClipKeepsSixtyFourBytes: a value echoed in an error message is kept
// whole up to 64 bytes, and cut with an ellipsis beyond.
func TestClipKeepsSixtyFourBytes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{strings.Repeat("x", 65), strings.Repeat("x", 64) + "…"},
	} {
		if got := clip(tc.in); got != tc.want {
			t.Errorf("clip of %d bytes: %q, want %q", len(tc.in), got, tc.want)
		}
	}
}

// TestServerTimeoutDefaults: a zero or negative timeout of ServerConfig
// takes its default, and a positive one is kept.
func TestServerTimeoutDefaults(t *testing.T) {
	b := harnessBackend(t)
	for _, tc := range []struct {
		set  time.Duration
		want [3]time.Duration
	}{
		{0, [3]time.Duration{DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultIdleTimeout}},
		{-time.Second, [3]time.Duration{DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultIdleTimeout}},
		{time.Nanosecond, [3]time.Duration{time.Nanosecond, time.Nanosecond, time.Nanosecond}},
	} {
		srv, err := NewServer(ServerConfig{API: Config{Runtime: b.rt, Logger: zerolog.Nop()},
			ReadHeaderTimeout: tc.set, ReadTimeout: tc.set, IdleTimeout: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		if got := [3]time.Duration{srv.http.ReadHeaderTimeout, srv.http.ReadTimeout, srv.http.IdleTimeout}; got != tc.want {
			t.Errorf("timeouts set to %v: %v, want %v", tc.set, got, tc.want)
		}
	}
}
