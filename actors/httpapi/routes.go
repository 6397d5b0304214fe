package httpapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// route is one row of the route table: the table registers the ServeMux
// patterns, decides which routes skip authentication, and is checked
// against the OpenAPI document by a test.
type route struct {
	method string
	path   string
	// public routes need no token (health checks and scrapers).
	public bool
	// body routes take a request body; other POST routes refuse one
	// (noBody). GET and DELETE bodies mean nothing in HTTP and are left
	// alone.
	body bool
	// query lists the query parameters the route reads; any other is
	// refused (unknownQuery), as an unknown body member is: a misspelled
	// filter (sessionId for sessionID) would otherwise widen a stream to
	// every Session's events without a word. Public routes, called by
	// health checkers and scrapers, are left alone.
	query  []string
	handle func(a *api, w http.ResponseWriter, r *http.Request)
}

// pattern returns the ServeMux pattern "METHOD /path".
func (rt route) pattern() string { return rt.method + " " + rt.path }

// routes is every route of the API (DESIGN.md §7). GET /api/session/active
// is a literal pattern, so the mux prefers it over GET /api/session/{id}.
var routes = []route{
	{method: http.MethodGet, path: "/api/health", public: true, handle: (*api).health},
	{method: http.MethodGet, path: "/metrics", public: true, handle: (*api).serveMetrics},
	{method: http.MethodGet, path: "/api/openapi.json", handle: (*api).openapi},
	{method: http.MethodGet, path: "/api/backup", handle: (*api).backup},

	{method: http.MethodPost, body: true, path: "/api/session", handle: (*api).createSession},
	{method: http.MethodGet, path: "/api/session", handle: (*api).listSessions},
	{method: http.MethodGet, path: "/api/session/active", handle: (*api).activeSessions},
	{method: http.MethodGet, path: "/api/session/{id}", handle: (*api).getSession},
	{method: http.MethodPost, body: true, path: "/api/session/{id}/prompt", handle: (*api).prompt},
	{method: http.MethodPost, path: "/api/session/{id}/resume", handle: (*api).resume},
	{method: http.MethodPost, path: "/api/session/{id}/compact", handle: (*api).compact},
	{method: http.MethodPost, path: "/api/session/{id}/wait", handle: (*api).wait},
	{method: http.MethodPost, path: "/api/session/{id}/interrupt", handle: (*api).interrupt},
	{method: http.MethodPost, body: true, path: "/api/session/{id}/agent", handle: (*api).selectAgent},
	{method: http.MethodPost, body: true, path: "/api/session/{id}/model", handle: (*api).selectModel},
	{method: http.MethodPost, body: true, path: "/api/session/{id}/move", handle: (*api).move},
	{method: http.MethodGet, path: "/api/session/{id}/history", query: []string{"after", "limit"}, handle: (*api).history},
	{method: http.MethodGet, path: "/api/session/{id}/log", query: []string{"after", "follow", "live"}, handle: (*api).logStream},
	{method: http.MethodGet, path: "/api/session/{id}/message", query: []string{"after", "limit"}, handle: (*api).listMessages},
	{method: http.MethodGet, path: "/api/session/{id}/instruction", handle: (*api).listInstructions},
	{method: http.MethodPut, body: true, path: "/api/session/{id}/instruction/{key}", handle: (*api).putInstruction},
	{method: http.MethodDelete, path: "/api/session/{id}/instruction/{key}", handle: (*api).deleteInstruction},

	{method: http.MethodGet, path: "/api/event", query: []string{"sessionID"}, handle: (*api).eventStream},
	{method: http.MethodGet, path: "/api/permission", query: []string{"sessionID"}, handle: (*api).listPermissions},
	{method: http.MethodPost, body: true, path: "/api/permission/{requestID}/reply", handle: (*api).replyPermission},
}

// methods are the methods the route table uses, for 405 answers.
var methods = func() []string {
	var out []string
	seen := map[string]bool{}
	for _, rt := range routes {
		if !seen[rt.method] {
			seen[rt.method] = true
			out = append(out, rt.method)
		}
	}
	return out
}()

// allowed returns the methods some route accepts for r's path (the Allow
// header of a 405), or nil when no route has that path.
func (a *api) allowed(r *http.Request) []string {
	var out []string
	for _, m := range methods {
		if m == r.Method {
			continue
		}
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, p := a.mux.Handler(probe); a.routeOf(p) != nil {
			out = append(out, m)
			if m == http.MethodGet {
				out = append(out, http.MethodHead)
			}
		}
	}
	return out
}

// singular returns r's path with its plural segments made singular
// ("/api/sessions/ses_1/messages" becomes "/api/session/ses_1/message")
// when r's method has a route there, else "". The routes name their
// collections in the singular, and a client written against an API that
// uses plurals would otherwise get a bare "no route".
func (a *api) singular(r *http.Request) string {
	segs := strings.Split(r.URL.Path, "/")
	changed := false
	for i, s := range segs {
		// IDs ("ses_…", "per_…") carry an underscore and stay as they are;
		// a wrong guess elsewhere only finds no route.
		if len(s) > 1 && strings.HasSuffix(s, "s") && !strings.Contains(s, "_") {
			segs[i], changed = s[:len(s)-1], true
		}
	}
	if !changed {
		return ""
	}
	probe := r.Clone(r.Context())
	probe.URL.Path, probe.URL.RawPath = strings.Join(segs, "/"), ""
	if _, p := a.mux.Handler(probe); a.routeOf(p) == nil {
		return ""
	}
	return clip(probe.URL.Path)
}

// noBody reads the body of a POST to a route that takes none and
// refuses anything but nothing or an empty object (which some client
// libraries send with every POST): a body there is a client's mistake,
// such as a prompt posted to /resume, which would otherwise pass as done.
func (a *api) noBody(w http.ResponseWriter, r *http.Request) error {
	b, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) == nil && obj != nil && len(obj) == 0 {
		return nil
	}
	return invalid("body: %s %s takes no body, got %d bytes", r.Method, clip(r.URL.Path), len(b))
}

// unknownQuery refuses a query parameter the route does not read, naming
// it and those it does. A malformed query is left to the route's own
// parsing, which reports it.
func (rt *route) unknownQuery(r *http.Request) error {
	if rt.public || r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if slices.Contains(rt.query, name) {
			continue
		}
		takes := "takes no query parameters"
		if len(rt.query) > 0 {
			takes = "takes " + strings.Join(rt.query, ", ")
		}
		for _, known := range rt.query {
			if strings.EqualFold(known, name) {
				takes = "did you mean " + known + "? (names are case-sensitive)"
			}
		}
		return invalid("query: unknown parameter %q: %s %s %s", clip(name), rt.method, rt.path, takes)
	}
	return nil
}

// routeOf returns the route registered under a mux pattern, or nil.
func (a *api) routeOf(pattern string) *route {
	return a.byPattern[pattern]
}

// allowHeader formats methods for the Allow header.
func allowHeader(ms []string) string { return strings.Join(ms, ", ") }
