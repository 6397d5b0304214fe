package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"
)

func TestBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:4096":            "http://127.0.0.1:4096",
		":8080":                     "http://127.0.0.1:8080",
		"0.0.0.0:9":                 "http://127.0.0.1:9",
		"[::]:9":                    "http://[::1]:9",
		"example.com:80":            "http://example.com:80",
		"https://sd.example/":       "https://sd.example",
		"http://10.0.0.1:4096/base": "http://10.0.0.1:4096/base",
		"http://h:1//":              "http://h:1",
		"http://h:1/base//":         "http://h:1/base",
	} {
		u, err := baseURL(addr)
		if err != nil || u.String() != want {
			t.Errorf("baseURL(%q) = %v, %v; want %s", addr, u, err, want)
		}
	}
	for _, bad := range []string{"localhost", "ftp://x", "http://", ""} {
		if _, err := baseURL(bad); err == nil {
			t.Errorf("baseURL(%q) accepted", bad)
		}
	}
}

func TestReadSSE(t *testing.T) {
	stream := ": ping\n\nid: 3\ndata: {\"a\":1}\n\ndata: line one\ndata: line two\n\nevent: x\nid:4\ndata:{}\n\nid: 5\ndata: cut off"
	var got []sseEvent
	err := readSSE(strings.NewReader(stream), func(ev sseEvent) error {
		got = append(got, ev)
		return nil
	})
	want := []sseEvent{
		{ID: "3", Data: `{"a":1}`},
		{Data: "line one\nline two"},
		{ID: "4", Event: "x", Data: "{}"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("readSSE = %+v, %v; want %+v", got, err, want)
	}

	// Lines may end in CR or CRLF too, and a byte order mark may open
	// the stream; bytes may arrive one at a time.
	stream = "\uFEFFid: 1\rdata: a\r\rdata: b\r\ndata: c\r\n\r\nevent: e\ndata: d\n\n"
	got = nil
	err = readSSE(iotest.OneByteReader(strings.NewReader(stream)), func(ev sseEvent) error {
		got = append(got, ev)
		return nil
	})
	want = []sseEvent{{ID: "1", Data: "a"}, {Data: "b\nc"}, {Event: "e", Data: "d"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("readSSE with CR line ends = %+v, %v; want %+v", got, err, want)
	}

	// An event may be larger than bufio's default limit of 64 KiB.
	big := strings.Repeat("x", 100<<10)
	got = nil
	err = readSSE(strings.NewReader("data: "+big+"\n\n"), func(ev sseEvent) error {
		got = append(got, ev)
		return nil
	})
	if err != nil || len(got) != 1 || got[0].Data != big {
		t.Fatalf("readSSE of a 100 KiB event: %d events, %v", len(got), err)
	}
}

// fakeLog serves /api/session/ses_1/log: seqs 0..total-1, then the synced
// marker. Its first drops streams, following or not, end after dropAfter
// events without the marker (as the server's do on a store error or a
// shutdown); later ones serve the rest from Last-Event-ID.
type fakeLog struct {
	total, dropAfter, drops int
	mu                      sync.Mutex
	requests                []string // "after|Last-Event-ID" of each request
}

func (f *fakeLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer tok" {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"type":"unauthorized","message":"missing bearer token"}}`)
		return
	}
	if r.URL.Path != "/api/session/ses_1/log" {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"type":"session.not-found","message":"session not found"}}`)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.Query().Get("after")+"|"+r.Header.Get("Last-Event-ID"))
	nth := len(f.requests)
	f.mu.Unlock()
	after := int64(-1)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	} else if v := r.URL.Query().Get("after"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	}
	follow := r.URL.Query().Get("follow") == "true"
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	sent := 0
	// A reconnect resends one event it already delivered, which the client
	// must drop.
	if nth > 1 && after >= 0 {
		after--
	}
	for seq := after + 1; seq < int64(f.total); seq++ {
		if nth <= f.drops && sent == f.dropAfter {
			return // the stream ends mid-replay
		}
		fmt.Fprintf(w, "id: %d\ndata: {\"seq\":%d}\n\n: ping\n\n", seq, seq)
		fl.Flush()
		sent++
	}
	fmt.Fprintf(w, "data: {\"type\":\"log.synced\"}\n\n")
	fl.Flush()
	if follow {
		<-r.Context().Done()
	}
}

// fakeDaemon serves h as the daemon for the test's duration and returns a
// client of it.
func fakeDaemon(t *testing.T, h http.Handler) *client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := newClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// followUntil runs streamLog on Session ses_1 with opts (its notes
// collected) until cond holds for what it printed, then cancels it, which
// must end it without an error. It returns the output and the notes.
func followUntil(t *testing.T, c *client, opts logOptions, what string, cond func(out string) bool) (out, notes string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	printed, noted := &syncBuffer{}, &syncBuffer{}
	opts.Notify = func(s string) { fmt.Fprintln(noted, s) }
	done := make(chan error, 1)
	go func() { done <- c.streamLog(ctx, "ses_1", opts, printed) }()
	eventually(t, what, func() bool { return cond(printed.String()) }, func() string {
		return fmt.Sprintf("got:\n%s\nnotes:\n%s", printed.String(), noted.String())
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("streamLog = %v", err)
	}
	return printed.String(), noted.String()
}

func TestStreamLogReconnects(t *testing.T) {
	f := &fakeLog{total: 6, dropAfter: 3, drops: 1}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := newClient(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"seq\":0}\n{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3}\n{\"seq\":4}\n{\"seq\":5}\n{\"type\":\"log.synced\"}\n"
	_, notes := followUntil(t, c, logOptions{After: -1, Follow: true, Retry: time.Millisecond}, "the whole log",
		func(out string) bool { return out == want })
	f.mu.Lock()
	defer f.mu.Unlock()
	if !reflect.DeepEqual(f.requests, []string{"|", "2|2"}) {
		t.Fatalf("requests (after|Last-Event-ID) = %q", f.requests)
	}
	if !strings.Contains(notes, "connection lost (the server ended the stream); reconnecting") ||
		!strings.Contains(notes, "reconnected; resuming after seq 2") {
		t.Fatalf("notes:\n%s", notes)
	}
}

func TestStreamLogOnce(t *testing.T) {
	f := &fakeLog{total: 3}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := newClient(srv.URL, "tok")
	var out bytes.Buffer
	if err := c.streamLog(context.Background(), "ses_1", logOptions{After: 0}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "{\"seq\":1}\n{\"seq\":2}\n{\"type\":\"log.synced\"}\n"; out.String() != want {
		t.Fatalf("log after 0 = %q, want %q", out.String(), want)
	}

	// Errors are the API's and end the stream, following or not.
	for _, follow := range []bool{false, true} {
		err := c.streamLog(context.Background(), "ses_2", logOptions{After: -1, Follow: follow}, io.Discard)
		if err == nil || err.Error() != "session.not-found: session not found (HTTP 404)" {
			t.Fatalf("follow %v: %v", follow, err)
		}
	}
	noToken, _ := newClient(srv.URL, "")
	if err := noToken.streamLog(context.Background(), "ses_1", logOptions{Follow: true}, io.Discard); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("without a token: %v", err)
	}

	// A daemon that is not there fails at once instead of retrying.
	srv.Close()
	err := c.streamLog(context.Background(), "ses_1", logOptions{Follow: true}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cannot reach sessiond at "+srv.URL) {
		t.Fatalf("no daemon: %v", err)
	}
}

// TestStreamLogResumesReplay: a log without follow whose stream ends before
// log.synced resumes from Last-Event-ID until the marker arrives, so that
// the output is the whole log, once.
func TestStreamLogResumesReplay(t *testing.T) {
	f := &fakeLog{total: 6, dropAfter: 3, drops: 2}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := newClient(srv.URL, "tok")
	var out, notes bytes.Buffer
	err := c.streamLog(context.Background(), "ses_1", logOptions{After: -1, Retry: time.Millisecond,
		Notify: func(s string) { fmt.Fprintln(&notes, s) }}, &out)
	if err != nil {
		t.Fatalf("streamLog = %v\nnotes:\n%s", err, notes.String())
	}
	want := "{\"seq\":0}\n{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3}\n{\"seq\":4}\n{\"seq\":5}\n{\"type\":\"log.synced\"}\n"
	if out.String() != want {
		t.Fatalf("log = %q, want %q", out.String(), want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !reflect.DeepEqual(f.requests, []string{"|", "2|2", "4|4"}) {
		t.Fatalf("requests (after|Last-Event-ID) = %q", f.requests)
	}
	if n := notes.String(); !strings.Contains(n, "connection lost (the server ended the stream); reconnecting") ||
		!strings.Contains(n, "reconnected; resuming after seq 4") {
		t.Fatalf("notes:\n%s", n)
	}
}

// TestStreamLogIncomplete: a log without follow whose streams keep ending
// before log.synced with nothing new gives up after maxStalled of them
// with an error, instead of passing a partial log for a whole one.
func TestStreamLogIncomplete(t *testing.T) {
	// Each resumed stream resends the event it resumes after, then ends.
	f := &fakeLog{total: 6, dropAfter: 1, drops: 100}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := newClient(srv.URL, "tok")
	var out bytes.Buffer
	err := c.streamLog(context.Background(), "ses_1", logOptions{After: -1, Retry: time.Millisecond}, &out)
	want := "log incomplete: 6 streams in a row ended before log.synced without a new event " +
		"(last: the server ended the stream); printed up to seq 0, resume with --after 0"
	if err == nil || err.Error() != want {
		t.Fatalf("streamLog = %v, want %s", err, want)
	}
	if out.String() != "{\"seq\":0}\n" {
		t.Fatalf("log = %q", out.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) != 1+maxStalled {
		t.Fatalf("requests (after|Last-Event-ID) = %q, want %d", f.requests, 1+maxStalled)
	}
}

// recorder is a fake daemon that records requests and answers with a
// canned status and body.
type recorder struct {
	mu     sync.Mutex
	method string
	path   string
	query  string
	body   map[string]any
	ctype  string // Content-Type
	auth   string // Authorization
	status int
	answer string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.method, r.path, r.query, r.body = req.Method, req.URL.EscapedPath(), req.URL.RawQuery, nil
	r.ctype, r.auth = req.Header.Get("Content-Type"), req.Header.Get("Authorization")
	if b, _ := io.ReadAll(req.Body); len(b) > 0 {
		_ = json.Unmarshal(b, &r.body)
	}
	w.WriteHeader(r.status)
	fmt.Fprint(w, r.answer)
}

// TestClientCommands checks the requests the client commands send and how
// they print answers and errors.
func TestClientCommands(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	env := map[string]string{"SESSIOND_ADDR": srv.URL, "SESSIOND_DATA": t.TempDir()}
	dir := t.TempDir()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args                []string
		status              int
		answer              string
		method, path, query string
		body                map[string]any
		stdout              string
	}{
		{[]string{"session", "create", "--dir", dir, "--model", "p/m/x", "--agent", "plan"}, 200, `{"data":{"id":"ses_1"}}`,
			"POST", "/api/session", "", map[string]any{"location": map[string]any{"directory": dir}, "agent": "plan",
				"model": map[string]any{"providerID": "p", "id": "m/x"}}, `{"id":"ses_1"}` + "\n"},
		{[]string{"session", "list"}, 200, `{"data":[]}`, "GET", "/api/session", "", nil, "[]\n"},
		{[]string{"session", "move", "ses_1", "--dir", dir}, 200, `{"data":{"id":"ses_1"}}`,
			"POST", "/api/session/ses_1/move", "", map[string]any{"location": map[string]any{"directory": dir}}, `{"id":"ses_1"}` + "\n"},
		{[]string{"session", "move", "ses_1", "--dir", "rel/sub"}, 200, `{"data":{"id":"ses_1"}}`,
			"POST", "/api/session/ses_1/move", "", map[string]any{"location": map[string]any{"directory": filepath.Join(cwd, "rel/sub")}}, `{"id":"ses_1"}` + "\n"},
		{[]string{"session", "get", "ses_1"}, 200, `{"data": {"id": "ses_1"}}`, "GET", "/api/session/ses_1", "", nil, `{"id":"ses_1"}` + "\n"},
		{[]string{"prompt", "ses_1", "fix", "the", "bug", "--delivery", "queue", "--no-resume", "--id", "msg_9"}, 200, `{"data":{"id":"msg_9"}}`,
			"POST", "/api/session/ses_1/prompt", "", map[string]any{"prompt": map[string]any{"text": "fix the bug"}, "delivery": "queue",
				"resume": false, "id": "msg_9"}, `{"id":"msg_9"}` + "\n"},
		{[]string{"history", "ses_1", "--after", "4", "--limit", "2"}, 200, `{"data":[],"hasMore":false}`,
			"GET", "/api/session/ses_1/history", "after=4&limit=2", nil, `{"data":[],"hasMore":false}` + "\n"},
		// Set values go as set, for the server to refuse: --limit 0 is not "unset".
		{[]string{"history", "ses_1", "--limit", "0"}, 200, `{"data":[],"hasMore":false}`,
			"GET", "/api/session/ses_1/history", "limit=0", nil, `{"data":[],"hasMore":false}` + "\n"},
		{[]string{"history", "ses_1"}, 200, `{"data":[],"hasMore":false}`,
			"GET", "/api/session/ses_1/history", "", nil, `{"data":[],"hasMore":false}` + "\n"},
		{[]string{"active"}, 200, `{"data":{}}`, "GET", "/api/session/active", "", nil, "{}\n"},
		{[]string{"interrupt", "ses_1"}, 204, "", "POST", "/api/session/ses_1/interrupt", "", nil, ""},
		{[]string{"permissions"}, 200, `{"data":[]}`, "GET", "/api/permission", "", nil, "[]\n"},
		{[]string{"permissions", "ses_1"}, 200, `{"data":[]}`, "GET", "/api/permission", "sessionID=ses_1", nil, "[]\n"},
		{[]string{"reply", "per_1", "reject", "--message", "not now"}, 204, "", "POST", "/api/permission/per_1/reply", "",
			map[string]any{"reply": "reject", "message": "not now"}, ""},
		{[]string{"reply", "per_1", "always"}, 204, "", "POST", "/api/permission/per_1/reply", "",
			map[string]any{"reply": "always"}, ""},
		{[]string{"session", "agent", "ses_1", "plan"}, 204, "", "POST", "/api/session/ses_1/agent", "",
			map[string]any{"agent": "plan"}, ""},
		{[]string{"session", "model", "ses_1", "p/m/x"}, 204, "", "POST", "/api/session/ses_1/model", "",
			map[string]any{"providerID": "p", "id": "m/x"}, ""},
		{[]string{"resume", "ses_1"}, 204, "", "POST", "/api/session/ses_1/resume", "", nil, ""},
		{[]string{"wait", "ses_1"}, 204, "", "POST", "/api/session/ses_1/wait", "", nil, ""},
		{[]string{"compact", "ses_1"}, 204, "", "POST", "/api/session/ses_1/compact", "", nil, ""},
		{[]string{"messages", "ses_1", "--limit", "3"}, 200, `{"data":[],"hasMore":true}`,
			"GET", "/api/session/ses_1/message", "limit=3", nil, `{"data":[],"hasMore":true}` + "\n"},
		{[]string{"instruction", "list", "ses_1"}, 200, `{"data":{"k":"v"}}`, "GET", "/api/session/ses_1/instruction", "", nil, `{"k":"v"}` + "\n"},
		{[]string{"instruction", "set", "ses_1", "a b", "be brief"}, 204, "", "PUT", "/api/session/ses_1/instruction/a%20b", "",
			map[string]any{"text": "be brief"}, ""},
		{[]string{"instruction", "delete", "ses_1", ".."}, 204, "", "DELETE", "/api/session/ses_1/instruction/%2E%2E", "", nil, ""},
		{[]string{"instruction", "delete", "ses_1", "."}, 204, "", "DELETE", "/api/session/ses_1/instruction/%2E", "", nil, ""},
	} {
		rec.mu.Lock()
		rec.status, rec.answer = tt.status, tt.answer
		rec.mu.Unlock()
		code, out, errOut := runApp(t, env, tt.args...)
		rec.mu.Lock()
		if code != 0 || out != tt.stdout || errOut != "" || rec.method != tt.method || rec.path != tt.path || rec.query != tt.query ||
			!reflect.DeepEqual(rec.body, tt.body) {
			t.Errorf("%v: exit %d stdout %q stderr %q; request %s %s?%s %v", tt.args, code, out, errOut, rec.method, rec.path, rec.query, rec.body)
		}
		// A body is JSON and says so; without a token there is no
		// Authorization header, not an empty bearer.
		if wantType := map[bool]string{true: "application/json"}[tt.body != nil]; rec.ctype != wantType || rec.auth != "" {
			t.Errorf("%v: Content-Type %q, want %q; Authorization %q", tt.args, rec.ctype, wantType, rec.auth)
		}
		rec.mu.Unlock()
	}

	// Error answers: the API's type and message, exit 1.
	rec.mu.Lock()
	rec.status, rec.answer = 409, `{"error":{"type":"prompt.conflict","message":"msg_9 was admitted with another prompt"}}`
	rec.mu.Unlock()
	code, out, errOut := runApp(t, env, "prompt", "ses_1", "other", "--id", "msg_9")
	if code != 1 || out != "" || errOut != "sessiond prompt: prompt.conflict: msg_9 was admitted with another prompt (HTTP 409)\n" {
		t.Fatalf("conflict: exit %d stdout %q stderr %q", code, out, errOut)
	}
	rec.mu.Lock()
	rec.status, rec.answer = 502, "bad gateway"
	rec.mu.Unlock()
	if code, _, errOut := runApp(t, env, "active"); code != 1 || errOut != "sessiond active: http: bad gateway (HTTP 502)\n" {
		t.Fatalf("502: exit %d stderr %q", code, errOut)
	}
	// Any status from 300 on is an error, not only those a client does not
	// follow on its own.
	rec.mu.Lock()
	rec.status, rec.answer = 300, ""
	rec.mu.Unlock()
	if code, out, errOut := runApp(t, env, "active"); code != 1 || out != "" || errOut != "sessiond active: http: Multiple Choices (HTTP 300)\n" {
		t.Fatalf("300: exit %d stdout %q stderr %q", code, out, errOut)
	}

	// A configuration file the user names must load, even where the
	// address is known without it.
	missing := filepath.Join(t.TempDir(), ConfigFileName)
	if code, _, errOut := runApp(t, env, "active", "--config", missing); code != 1 || !strings.Contains(errOut, "config: open "+missing) {
		t.Fatalf("--config of a missing file: exit %d stderr %q", code, errOut)
	}
	// A default file that does not load (a daemon-only mistake) does not
	// stop a client whose address is known, which still sends the token.
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, ConfigFileName), []byte(`{"limits": {"inboxBacklog": -1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.status, rec.answer = 200, `{"data":{}}`
	rec.mu.Unlock()
	code, _, errOut = runApp(t, map[string]string{"SESSIOND_ADDR": srv.URL, "SESSIOND_DATA": data, "SESSIOND_TOKEN": "tok"}, "active")
	rec.mu.Lock()
	if code != 0 || rec.auth != "Bearer tok" {
		t.Errorf("a daemon-only mistake in the file: exit %d stderr %q, Authorization %q", code, errOut, rec.auth)
	}
	rec.mu.Unlock()

	// --addr and --token win over the environment.
	rec.mu.Lock()
	rec.status, rec.answer = 200, `{"data":{}}`
	rec.mu.Unlock()
	env["SESSIOND_ADDR"] = "127.0.0.1:1"
	if code, _, errOut := runApp(t, env, "active", "--addr", srv.URL); code != 0 {
		t.Fatalf("--addr: exit %d stderr %q", code, errOut)
	}
	// An empty --addr is unset (scripts pass --addr "$X"): the environment's.
	env["SESSIOND_ADDR"] = srv.URL
	if code, _, errOut := runApp(t, env, "active", "--addr", ""); code != 0 {
		t.Fatalf("--addr \"\": exit %d stderr %q", code, errOut)
	}
}

// TestPrintJSON indents for a terminal and compacts otherwise.
func TestPrintJSON(t *testing.T) {
	var out bytes.Buffer
	a := &app{stdout: &out, stdoutTTY: true}
	if err := a.printJSON([]byte(`{"data": {"id": "x", "n": [1, 2]}}`), "data"); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"id\": \"x\",\n  \"n\": [\n    1,\n    2\n  ]\n}\n"; out.String() != want {
		t.Fatalf("pretty = %q", out.String())
	}
	if err := a.printJSON([]byte(`{"other": 1}`), "data"); err == nil {
		t.Fatal("a body without data printed")
	}
}

// TestURLAddr: a URL names the daemon for clients, which still take the
// configuration's token with it; run, which dials nothing, ignores it;
// serve, which listens, refuses it.
func TestURLAddr(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"data":{}}`))
	}))
	defer srv.Close()
	data := t.TempDir()
	file := filepath.Join(data, ConfigFileName)
	if err := os.WriteFile(file, []byte(`{"token": "s3cret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SESSIOND_DATA": data}
	for _, args := range [][]string{
		{"active", "--addr", srv.Listener.Addr().String()},
		{"active", "--addr", srv.URL},
		{"active", "--addr", srv.URL, "--config", file},
	} {
		if code, _, errOut := runApp(t, env, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	if !slices.Equal(auth, []string{"Bearer s3cret", "Bearer s3cret", "Bearer s3cret"}) {
		t.Fatalf("Authorization headers %q", auth)
	}
	urlEnv := map[string]string{"SESSIOND_DATA": t.TempDir(), "SESSIOND_ADDR": "https://sd.example"}
	if code, _, errOut := runApp(t, urlEnv, "run", "--yes", "--dir", t.TempDir(), "hello"); code != 0 {
		t.Fatalf("run with a URL in SESSIOND_ADDR: exit %d: %s", code, errOut)
	}
	code, _, errOut := runApp(t, urlEnv, "serve")
	if code == 0 || !strings.Contains(errOut, `SESSIOND_ADDR: "https://sd.example": want host:port to listen on`) {
		t.Fatalf("serve with a URL address: exit %d: %s", code, errOut)
	}
}

// TestLogAfterGoesAsSet: log sends --after as given, as history does, so
// a cursor below -1 is refused by the daemon (invalid, exit 1) with the
// same message for both, rather than silently replaying from the start.
func TestLogAfterGoesAsSet(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		// The daemon's check of the cursor (httpapi parseAfter).
		if v := r.URL.Query().Get("after"); v != "" {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < -1 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				msg, _ := json.Marshal(fmt.Sprintf("after: want an integer >= -1, got %q", v))
				fmt.Fprintf(w, `{"error":{"type":"invalid","message":%s}}`, msg)
				return
			}
		}
		if strings.HasSuffix(r.URL.Path, "/history") {
			fmt.Fprint(w, `{"data":[],"hasMore":false}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"type\":\"log.synced\"}\n\n")
	}))
	defer srv.Close()
	env := map[string]string{"SESSIOND_ADDR": srv.URL, "SESSIOND_DATA": t.TempDir()}
	for _, cmd := range []string{"history", "log"} {
		code, out, errOut := runApp(t, env, cmd, "ses_1", "--after", "-5")
		want := "sessiond " + cmd + `: invalid: after: want an integer >= -1, got "-5" (HTTP 400)` + "\n"
		if code != 1 || out != "" || errOut != want {
			t.Errorf("%s --after -5: exit %d stdout %q stderr %q; want exit 1 and %q", cmd, code, out, errOut, want)
		}
	}
	for _, args := range [][]string{{"log", "ses_1"}, {"log", "ses_1", "--after", "-1"}, {"log", "ses_1", "--after", "3"}} {
		if code, _, errOut := runApp(t, env, args...); code != 0 {
			t.Errorf("%v: exit %d stderr %q", args, code, errOut)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/api/session/ses_1/history?after=-5", "/api/session/ses_1/log?after=-5",
		"/api/session/ses_1/log?", "/api/session/ses_1/log?", "/api/session/ses_1/log?after=3"}
	if !slices.Equal(queries, want) {
		t.Fatalf("requests %q, want %q", queries, want)
	}
}

// TestStreamLogPrintsTheMarkerOnce: a follow that reconnects after the
// marker gets a fresh one from the server, which is not printed again.
func TestStreamLogPrintsTheMarkerOnce(t *testing.T) {
	var n atomic.Int32
	c := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("follow") != "true" {
			w.WriteHeader(http.StatusBadRequest) // a replay would end, not follow
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch n.Add(1) {
		case 1:
			fmt.Fprint(w, "id: 0\ndata: {\"seq\":0}\n\ndata: {\"type\":\"log.synced\",\"seq\":0}\n\nid: 1\ndata: {\"seq\":1}\n\n")
			return // the connection drops while following
		case 2:
			return // and the next one before its marker
		}
		fmt.Fprint(w, "data: {\"type\":\"log.synced\",\"seq\":1}\n\nid: 2\ndata: {\"seq\":2}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	out, _ := followUntil(t, c, logOptions{After: -1, Follow: true, Retry: time.Millisecond}, "seq 2",
		func(out string) bool { return strings.Contains(out, `{"seq":2}`) })
	if want := "{\"seq\":0}\n{\"type\":\"log.synced\",\"seq\":0}\n{\"seq\":1}\n{\"seq\":2}\n"; out != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
}

// TestStreamLogLive: --live asks for live=true and prints the live events
// (event type "live", no id) as they come; another named event (a live
// stream's "dropped" notice before it ends) is not printed, and the
// reconnect resumes after the last durable event.
func TestStreamLogLive(t *testing.T) {
	var n atomic.Int32
	var mu sync.Mutex
	var resumes []string
	c := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Get("follow") != "true" || q.Get("live") != "true" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		resumes = append(resumes, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n.Add(1) == 1 {
			fmt.Fprint(w, "id: 0\ndata: {\"seq\":0}\n\ndata: {\"type\":\"log.synced\",\"seq\":0}\n\n"+
				"event: live\ndata: {\"type\":\"session.text.delta\"}\n\n"+
				"event: dropped\ndata: {\"type\":\"dropped\",\"message\":\"subscriber fell behind\"}\n\n")
			return
		}
		fmt.Fprint(w, "data: {\"type\":\"log.synced\",\"seq\":0}\n\nid: 1\ndata: {\"seq\":1}\n\nevent: live\ndata: {\"type\":\"session.usage.updated\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	out, _ := followUntil(t, c, logOptions{After: -1, Follow: true, Live: true, Retry: time.Millisecond}, "the usage event",
		func(out string) bool { return strings.Contains(out, "usage") })
	want := "{\"seq\":0}\n{\"type\":\"log.synced\",\"seq\":0}\n{\"type\":\"session.text.delta\"}\n{\"seq\":1}\n{\"type\":\"session.usage.updated\"}\n"
	if out != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(resumes, []string{"", "0"}) {
		t.Fatalf("Last-Event-ID of each request = %q", resumes)
	}
}

// TestStreamLogReconnectDelays: the wait before a reconnect starts at
// Retry (200 ms when zero), doubles while streams bring nothing, stops at
// maxRetry, and starts over after a stream that brought events.
func TestStreamLogReconnectDelays(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int32
	c := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		switch n.Add(1) {
		case 1:
			fmt.Fprint(w, "id: 0\ndata: {\"seq\":0}\n\n")
		case 7:
			fmt.Fprint(w, "id: 1\ndata: {\"seq\":1}\n\n")
		case 8:
			cancel()
		} // each stream ends at once, as a dropped connection does
	}))
	var delays []time.Duration
	now := make(chan time.Time)
	close(now)
	opts := logOptions{After: -1, Follow: true, after: func(d time.Duration) <-chan time.Time {
		delays = append(delays, d)
		return now
	}}
	if err := c.streamLog(ctx, "ses_1", opts, &syncBuffer{}); err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	if want := []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, maxRetry, 200 * ms}; !slices.Equal(delays, want) {
		t.Fatalf("reconnect delays %v, want %v", delays, want)
	}
}

// TestStreamLogRetriesServerErrors: once a stream was open, a server
// error (HTTP 500 and up: a store failure, a gateway while the daemon
// restarts) passes like a dropped connection, and the log resumes; before
// that it is the answer.
func TestStreamLogRetriesServerErrors(t *testing.T) {
	var n atomic.Int32
	c := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: 0\ndata: {\"seq\":0}\n\n") // then the stream ends
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"type":"internal","message":"store failed"}}`)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			// An event without data prints nothing.
			fmt.Fprint(w, "id: 1\ndata: {\"seq\":1}\n\nevent: ping\n\ndata: {\"type\":\"log.synced\"}\n\n")
		}
	}))
	var out, notes bytes.Buffer
	err := c.streamLog(context.Background(), "ses_1", logOptions{After: -1, Retry: time.Millisecond,
		Notify: func(s string) { fmt.Fprintln(&notes, s) }}, &out)
	if err != nil {
		t.Fatalf("streamLog = %v", err)
	}
	if want := "{\"seq\":0}\n{\"seq\":1}\n{\"type\":\"log.synced\"}\n"; out.String() != want || n.Load() != 3 {
		t.Fatalf("%d requests, log %q, want %q", n.Load(), out.String(), want)
	}
	// One outage, one note each way: the failed attempt in between is
	// part of it.
	if want := "connection lost (the server ended the stream); reconnecting\nreconnected; resuming after seq 0\n"; notes.String() != want {
		t.Fatalf("notes:\n%s\nwant:\n%s", notes.String(), want)
	}

	// The first answer is the answer, a server error included.
	n.Store(1)
	err = c.streamLog(context.Background(), "ses_1", logOptions{After: -1, Retry: time.Millisecond}, io.Discard)
	if err == nil || err.Error() != "internal: store failed (HTTP 500)" || n.Load() != 2 {
		t.Fatalf("%d requests, streamLog = %v", n.Load(), err)
	}
}

// TestStreamLogWriteError: a failure to write the output ends the log
// for good, following or not: nobody reads it any more.
func TestStreamLogWriteError(t *testing.T) {
	srv := httptest.NewServer(&fakeLog{total: 3})
	defer srv.Close()
	c, err := newClient(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	for _, follow := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		err := c.streamLog(ctx, "ses_1", logOptions{After: -1, Follow: follow, Retry: time.Millisecond}, &failingWriter{})
		cancel()
		if err == nil || err.Error() != "write output: broken pipe" {
			t.Fatalf("follow %v: streamLog = %v", follow, err)
		}
	}
}

// TestClientWithoutHome: with no data directory in the environment a
// client command still dials the built-in address; it needs no data.
func TestClientWithoutHome(t *testing.T) {
	code, _, errOut := runApp(t, map[string]string{}, "active")
	if strings.Contains(errOut, "no data directory") || (code != 0 && !strings.Contains(errOut, "127.0.0.1:4096")) {
		t.Fatalf("exit %d: %s", code, errOut) // (exit 0 when a daemon happens to listen there)
	}
	// A daemon needs one.
	if code, _, errOut := runApp(t, map[string]string{}, "serve"); code != 1 || !strings.Contains(errOut, "no data directory") {
		t.Fatalf("serve: exit %d: %s", code, errOut)
	}
}

// TestResponseErrorIsText: a long error body that is not the API's
// envelope is cut at a character boundary.
func TestResponseErrorIsText(t *testing.T) {
	err := responseError(502, []byte("0"+strings.Repeat("é", 150)))
	ae, ok := err.(*apiError)
	if !ok || !utf8.ValidString(ae.Message) || !strings.HasSuffix(ae.Message, "é…") || len(ae.Message) > 200+len("…") {
		t.Fatalf("%#v", err)
	}
}

// TestErrorsAreTerminalSafe: an error's text comes from wherever it
// comes from (here a body from whatever answers at the daemon's address):
// its control characters reach stderr escaped, not as a terminal's escape
// sequences.
func TestErrorsAreTerminalSafe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "proxy says \x1b]0;owned\x07 no\r")
	}))
	defer srv.Close()
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_ADDR": srv.URL}, "active")
	if code != exitFailed || strings.ContainsAny(errOut, "\x1b\x07\r") || !strings.Contains(errOut, `proxy says \x1b]0;owned\x07 no`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestStreamLogWarnsOfALogBehindTheCursor: a cursor past the log's end
// (the store was restored from an older backup, or repaired, since the
// cursor was taken) replays nothing and gets the marker of the shorter
// log; the new events will take seqs the cursor skips, so log says so.
// A cursor at the end, or an empty log from the start, is not warned of.
func TestStreamLogWarnsOfALogBehindTheCursor(t *testing.T) {
	c := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if r.URL.Query().Get("after") == "" {
			fmt.Fprint(w, "data: {\"type\":\"log.synced\"}\n\n")
			return
		}
		fmt.Fprint(w, "data: {\"type\":\"log.synced\",\"seq\":32}\n\n")
	}))
	for _, tc := range []struct {
		after int64
		warn  bool
	}{{50, true}, {32, false}, {-1, false}} {
		var notes bytes.Buffer
		if err := c.streamLog(context.Background(), "ses_1", logOptions{After: tc.after, Notify: func(s string) { fmt.Fprintln(&notes, s) }}, io.Discard); err != nil {
			t.Fatal(err)
		}
		want := "the log ends at seq 32, before the cursor 50: the store was restored or repaired to an earlier point, " +
			"and new events will take seqs the cursor skips; follow again with --after 32 or lower\n"
		if got := notes.String(); (got == want) != tc.warn || !tc.warn && got != "" {
			t.Fatalf("after %d: notes %q", tc.after, got)
		}
	}
}
