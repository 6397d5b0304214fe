package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors/httpapi"
	"github.com/sessiond/sessiond/persistence"
)

// auditProxy is a reverse proxy in front of a daemon, as a gateway such as
// nginx or Caddy is in front of a sessiond that clients reach by URL. Its
// target can change (the daemon restarted on another port); while the
// daemon is down it answers 502 Bad Gateway, as such gateways do.
type auditProxy struct {
	target     atomic.Pointer[string]
	badGateway atomic.Int64 // 502s answered
	srv        *httptest.Server
}

// newAuditProxy starts a proxy to the daemon at addr (host:port).
func newAuditProxy(t *testing.T, addr string) *auditProxy {
	t.Helper()
	p := &auditProxy{}
	p.point(addr)
	tr := &http.Transport{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: *p.target.Load()})
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.badGateway.Add(1)
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>\n"))
		},
	}
	p.srv = httptest.NewServer(rp)
	t.Cleanup(func() {
		p.srv.Close()
		tr.CloseIdleConnections()
	})
	return p
}

// point sends the proxy's requests to the daemon at addr from now on.
func (p *auditProxy) point(addr string) { p.target.Store(&addr) }

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// waitOrExit polls the buffer until it contains want, and fails the test
// at once if the process exits first (a follower that gave up) instead of
// at the deadline.
func (p *proc) waitOrExit(b *syncBuffer, want string) {
	p.t.Helper()
	exited := false
	eventually(p.t, "output containing "+want, func() bool {
		if strings.Contains(b.String(), want) {
			return true
		}
		if !p.running() {
			// It may have printed want just before it exited.
			exited = !strings.Contains(b.String(), want)
			return true
		}
		return false
	}, func() string {
		return "stdout:\n" + p.stdout.String() + "\nstderr:\n" + p.stderr.String()
	})
	if exited {
		p.t.Fatalf("sessiond %s exited (%v) before printing %s\nstdout:\n%s\nstderr:\n%s",
			strings.Join(p.cmd.Args[1:], " "), p.err, want, p.stdout.String(), p.stderr.String())
	}
}

// TestLogFollowThroughAGatewayAcrossARestart: a client that reaches
// the daemon through a gateway (a URL --addr, as docs/cli.md offers) gets
// 502 Bad Gateway, not a refused connection, while the daemon restarts.
// log --follow must keep reconnecting through that, as it does when it
// dials the daemon itself, and resume after the last event it printed; it
// gave up at the first 502 ("http: <html>… (HTTP 502)", exit 1), so a
// restart ended every follower behind a proxy.
func TestLogFollowThroughAGatewayAcrossARestart(t *testing.T) {
	env := testEnv(t, "SESSIOND_DATA", t.TempDir())
	srv, addr := serveDaemon(t, env)
	sid := string(decode[persistence.Session](t, ok(t, testEnv(t, "SESSIOND_ADDR", addr), "session", "create", "--dir", t.TempDir())).ID)

	gw := newAuditProxy(t, addr)
	follower := start(t, testEnv(t), "log", sid, "--follow", "--addr", gw.srv.URL)
	follower.waitOrExit(&follower.stdout, `"type":"log.synced"`)

	srv.stop()
	eventually(t, "a 502 from the gateway while the daemon is down", func() bool { return gw.badGateway.Load() > 0 }, follower.stderr.String)

	srv2, addr2 := serveDaemon(t, env)
	gw.point(addr2)
	admitted := decode[persistence.Admitted](t, ok(t, testEnv(t, "SESSIOND_ADDR", addr2), "prompt", sid, "after the restart", "--no-resume"))
	follower.waitOrExit(&follower.stdout, `"inputID":"`+string(admitted.ID)+`"`)

	follower.signal(syscall.SIGINT)
	if code := follower.wait(); code != 0 {
		t.Fatalf("log --follow exited %d\nstderr:\n%s", code, follower.stderr.String())
	}
	out := follower.stdout.String()
	if strings.Count(out, `"type":"log.synced"`) != 1 || strings.Count(out, `"type":"session.created.1"`) != 1 {
		t.Fatalf("log --follow printed:\n%s", out)
	}
	if errs := follower.stderr.String(); !strings.Contains(errs, "sessiond log: connection lost") || !strings.Contains(errs, "sessiond log: reconnected; resuming after seq 0") {
		t.Fatalf("log --follow said:\n%s", errs)
	}
	srv2.stop()
}

// TestLogFollowReconnectsASilentStream: a followed log stream whose
// connection died without a close (a network that dropped it, a gateway or
// NAT that forgot it, a daemon host that went away) brings nothing any
// more, not even the heartbeat the daemon sends every 15 s while
// following. log --follow waited on it forever, printing nothing, while
// the daemon went on committing events; it must take such a stream for
// lost and reconnect, resuming after the last event it printed.
func TestLogFollowReconnectsASilentStream(t *testing.T) {
	var requests atomic.Int64
	c := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			fmt.Fprint(w, "id: 0\ndata: {\"seq\":0}\n\ndata: {\"type\":\"log.synced\",\"seq\":0}\n\n")
		} else {
			if got := r.Header.Get("Last-Event-ID"); got != "0" {
				t.Errorf("reconnect %d: Last-Event-ID %q, want 0", n, got)
			}
			fmt.Fprint(w, "id: 1\ndata: {\"seq\":1}\n\n")
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then silence: no event, no heartbeat
	}))
	want := "{\"seq\":0}\n{\"type\":\"log.synced\",\"seq\":0}\n{\"seq\":1}\n"
	_, n := followUntil(t, c, logOptions{After: -1, Follow: true, Retry: time.Millisecond, Idle: 200 * time.Millisecond},
		"the event sent after the silent stream", func(out string) bool { return out == want })
	if !strings.Contains(n, "connection lost (nothing received for 200ms, not even a heartbeat); reconnecting") ||
		!strings.Contains(n, "reconnected; resuming after seq 0") {
		t.Fatalf("notes:\n%s", n)
	}

	// Without --follow the daemon sends no heartbeat: a replay is not
	// cut for being slow.
	if d := (logOptions{}).idle(); d != 0 {
		t.Fatalf("idle without follow = %v, want 0", d)
	}
	if d := (logOptions{Follow: true}).idle(); d != 3*httpapi.DefaultHeartbeat {
		t.Fatalf("idle when following = %v, want three heartbeats", d)
	}
}
