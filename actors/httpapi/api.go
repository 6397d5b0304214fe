package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// api is the HTTP handler: the route table on a ServeMux, wrapped with
// CORS, authentication, JSON 404/405 answers and request logs.
type api struct {
	cfg            Config
	roots          []string
	mux            *http.ServeMux
	byPattern      map[string]*route
	store          persistence.Store
	log            zerolog.Logger
	metricsHandler http.Handler
	// tokenSum is the SHA-256 of Config.Token; comparing sums keeps the
	// constant-time comparison independent of the token's length.
	tokenSum [32]byte
	// refs numbers logged server-side failures.
	refs atomic.Uint64

	// stopped is cancelled with errStopping when the Server shuts down:
	// streams and long polls derive from it and end.
	stopped context.Context
	stop    context.CancelCauseFunc
	once    sync.Once
	// healthOnce logs a failed store once, at the first health check
	// that finds it.
	healthOnce sync.Once
}

// New returns the HTTP API handler of cfg.Runtime: every route of
// DESIGN.md §7 plus /api/health, /api/openapi.json and /metrics. Streams
// served by this handler end when their client goes away; use Server to
// also end them at shutdown.
func New(cfg Config) (http.Handler, error) {
	return newAPI(cfg)
}

func newAPI(cfg Config) (*api, error) {
	roots, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	a := &api{cfg: cfg, roots: roots, mux: http.NewServeMux(), byPattern: map[string]*route{},
		store: cfg.Runtime.Store(), log: cfg.Logger,
		metricsHandler: promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})}
	if cfg.Token != "" {
		a.tokenSum = sha256.Sum256([]byte(cfg.Token))
	}
	a.stopped, a.stop = context.WithCancelCause(context.Background())
	for i := range routes {
		rt := &routes[i]
		a.mux.HandleFunc(rt.pattern(), func(w http.ResponseWriter, r *http.Request) { rt.handle(a, w, r) })
		a.byPattern[rt.pattern()] = rt
	}
	return a, nil
}

// shutdown ends every stream and long poll in flight, and every one that
// starts later.
func (a *api) shutdown() {
	a.once.Do(func() { a.stop(errStopping) })
}

// ServeHTTP implements http.Handler.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := a.cfg.Now()
	sw := &statusWriter{ResponseWriter: w, timeout: a.cfg.StreamWriteTimeout}
	defer func() {
		if e := a.log.Debug(); e.Enabled() {
			e.Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.status).
				Dur("duration", a.cfg.Now().Sub(start)).Msg("request")
		}
	}()
	if a.cors(sw, r) {
		return
	}
	if err := a.fromBrowser(r); err != nil {
		a.writeError(sw, r, http.StatusForbidden, err)
		return
	}
	// ServeMux answers a path that is not in canonical form ("//api/session",
	// "/api/./session") with a redirect and an HTML body; every answer of
	// this API is JSON and no client needs a redirect, so such a path is no
	// route at all.
	canonical := isCanonical(r.URL.EscapedPath())
	var rt *route
	if canonical {
		_, pattern := a.mux.Handler(r)
		rt = a.routeOf(pattern)
	}
	if (rt == nil || !rt.public) && !a.authorized(r) {
		sw.Header().Set("WWW-Authenticate", `Bearer realm="sessiond"`)
		a.writeError(sw, r, http.StatusUnauthorized, messages.Errorf(messages.ErrUnauthorized, "missing or wrong bearer token"))
		return
	}
	if rt == nil {
		if !canonical {
			a.writeError(sw, r, http.StatusNotFound, messages.Errorf(messages.ErrNotFound,
				"no route for %s %s: the path is not in canonical form (no empty, \".\" or \"..\" segments)", r.Method, clip(r.URL.Path)))
			return
		}
		if allow := a.allowed(r); len(allow) > 0 {
			sw.Header().Set("Allow", allowHeader(allow))
			a.writeError(sw, r, http.StatusMethodNotAllowed,
				&messages.Error{Type: errMethodNotAllowed, Message: r.Method + " " + r.URL.Path + ": allowed methods are " + allowHeader(allow)})
			return
		}
		msg := "no route for " + r.Method + " " + clip(r.URL.Path)
		if alt := a.singular(r); alt != "" {
			msg += "; did you mean " + alt + "?"
		}
		a.writeError(sw, r, http.StatusNotFound, &messages.Error{Type: messages.ErrNotFound, Message: msg})
		return
	}
	if err := rt.unknownQuery(r); err != nil {
		a.fail(sw, r, err)
		return
	}
	if r.Method == http.MethodPost && !rt.body {
		if err := a.noBody(sw, r); err != nil {
			a.fail(sw, r, err)
			return
		}
	}
	// The mux matches again to set the request's path values.
	a.mux.ServeHTTP(sw, r)
}

// isCanonical reports whether ServeMux would take the escaped request
// path p as it is: an absolute path without empty, "." or ".." segments
// (a final "/" is kept). Anything else it would redirect to its clean
// form. CONNECT requests, which ServeMux does not clean, are held to the
// same rule: no route of this API takes a path that is not canonical.
func isCanonical(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// authorized reports whether r carries the configured bearer token (always
// true without one).
func (a *api) authorized(r *http.Request) bool {
	if a.cfg.Token == "" {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

// fromBrowser refuses what web pages the user visits could send: a page
// may POST to any address without asking (a text/plain body needs no CORS
// preflight), and a name it controls can be re-pointed at 127.0.0.1 (DNS
// rebinding), after which the page reads the answers too. Browsers mark
// the first with an Origin header, which must then be an allowed CORS
// origin. Against the second, a server without a token answers only
// requests addressed to an IP address or localhost: a rebound name
// arrives as the Host. (With a token, a page cannot authenticate.)
func (a *api) fromBrowser(r *http.Request) *messages.Error {
	if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(a.cfg.CORS, origin) && !slices.Contains(a.cfg.CORS, "*") {
		return messages.Errorf(messages.ErrForbidden, "requests from web pages of origin %s are refused; list it in cors to allow them", clip(origin))
	}
	if a.cfg.Token != "" {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	// Host names are case-insensitive, and a final dot only makes a name
	// fully qualified: "LOCALHOST" and "localhost." name the same host as
	// "localhost". A page cannot abuse either, since names under localhost
	// never resolve through DNS the page's owner controls (RFC 6761). One
	// dot only: "localhost.." is not a valid name.
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") || net.ParseIP(host) != nil {
		return nil
	}
	return messages.Errorf(messages.ErrForbidden, "requests addressed to %s are refused: without a token, sessiond answers only requests to an IP address or localhost (a web page could re-point its own name at this server); set a token to serve other names", clip(host))
}

// cors sets the CORS headers for listed origins and answers preflights; it
// reports whether the request was answered.
func (a *api) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(a.cfg.CORS) == 0 {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if !slices.Contains(a.cfg.CORS, origin) && !slices.Contains(a.cfg.CORS, "*") {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}

// statusWriter records the status for the request log, and bounds writing
// the response. Unwrap lets http.ResponseController reach the connection
// (flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
	// timeout is Config.StreamWriteTimeout: see bound.
	timeout time.Duration
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.bound()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.bound()
	}
	return w.ResponseWriter.Write(b)
}

// bound gives the response, once it starts, timeout to be written: a
// client that stops reading without closing its connection would
// otherwise hold the handler's goroutine and the connection for as long as
// the connection lives (the Server has no WriteTimeout, which would also
// cut long polls while they wait). Streams arm the deadline again before
// each write; net/http clears it once the response is done, so it never
// reaches the connection's next request.
func (w *statusWriter) bound() {
	if w.timeout > 0 {
		// Not every ResponseWriter supports deadlines (test recorders).
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets handlers that type-assert http.Flusher (promhttp) flush.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// FlushError flushes and reports a failure. http.ResponseController tries
// it before Flush: without it, the controller would find Flush, whose
// error is dropped, and a stream would never learn that its client is gone.
func (w *statusWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// withStop returns a context that ends with the request or when the Server
// shuts down (cause errStopping), for streams and long polls.
func (a *api) withStop(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(r.Context())
	unhook := context.AfterFunc(a.stopped, func() { cancel(errStopping) })
	return ctx, func() {
		unhook()
		cancel(context.Canceled)
	}
}

// cause returns the reason ctx ended when it did, else err: a runtime call
// cut short by shutdown then answers 503 rather than a bare "canceled".
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil {
			return c
		}
	}
	return err
}
