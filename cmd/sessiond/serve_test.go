package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// serveDaemon starts `sessiond serve` on a free port with extra args and
// returns it with its address once /api/health answers.
func serveDaemon(t *testing.T, env []string, args ...string) (*proc, string) {
	t.Helper()
	p := start(t, env, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	addr := p.waitFor(&p.stderr, `listening on http://(\S+)`)[1]
	eventually(t, "GET /api/health", func() bool {
		res, err := http.Get("http://" + addr + "/api/health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, p.stderr.String)
	return p, addr
}

// stop sends SIGTERM and checks a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 0 {
		p.t.Fatalf("serve exited %d after SIGTERM\nstderr:\n%s", code, p.stderr.String())
	}
}

// decode unmarshals a command's JSON output.
func decode[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return v
}

// TestServe drives a daemon through the client commands: create a Session,
// prompt it, answer its permission questions, follow its log, read its
// history; a second daemon cannot take the data dir, and after SIGTERM a
// new one can.
func TestServe(t *testing.T) {
	data := t.TempDir()
	const token = "s3cret-token"
	env := testEnv(t, "SESSIOND_DATA", data, "SESSIOND_TOKEN", token)
	srv, addr := serveDaemon(t, env)
	if !strings.Contains(srv.stderr.String(), demoNotice) {
		t.Errorf("serve did not announce the demo model:\n%s", srv.stderr.String())
	}
	client := testEnv(t, "SESSIOND_ADDR", addr, "SESSIOND_TOKEN", token)

	// The token is required; the error is the API's.
	r := sessiond(t, testEnv(t, "SESSIOND_ADDR", addr), nil, "session", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "sessiond session list: unauthorized: ") || !strings.Contains(r.stderr, "(HTTP 401)") {
		t.Fatalf("without a token: exit %d\nstderr:\n%s", r.code, r.stderr)
	}

	// A second daemon on the same data dir fails clearly and at once.
	r = sessiond(t, env, nil, "serve", "--addr", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "data dir is in use by another sessiond") {
		t.Fatalf("second serve: exit %d\nstderr:\n%s", r.code, r.stderr)
	}

	dir := t.TempDir()
	writeFile(t, dir, "notes.txt", "remember the milk\n")
	sess := decode[persistence.Session](t, ok(t, client, "session", "create", "--dir", dir))
	if sess.ID == "" || sess.Location.Directory != dir {
		t.Fatalf("created %+v", sess)
	}
	sid := string(sess.ID)
	if got := decode[persistence.Session](t, ok(t, client, "session", "get", sid)); got.ID != sess.ID {
		t.Fatalf("get = %+v", got)
	}

	follower := start(t, client, "log", sid, "--follow")
	follower.waitFor(&follower.stdout, `"type":"log.synced"`)

	admitted := decode[persistence.Admitted](t, ok(t, client, "prompt", sid, "Look around", "--id", "msg_cli_1"))
	if admitted.ID != "msg_cli_1" || admitted.Prompt.Text != "Look around" || admitted.Delivery != messages.Steer {
		t.Fatalf("admitted %+v", admitted)
	}
	// An identical retry returns the same receipt.
	if again := decode[persistence.Admitted](t, ok(t, client, "prompt", "--id", "msg_cli_1", sid, "Look around")); again.AdmittedSeq != admitted.AdmittedSeq {
		t.Fatalf("retry admitted %+v, first %+v", again, admitted)
	}

	// The demo asks for bash, then for edit: answer once, then always.
	for _, reply := range []string{"once", "always"} {
		var asks []struct {
			ID         string `json:"id"`
			Permission string `json:"permission"`
		}
		eventually(t, "a permission question", func() bool {
			asks = decode[[]struct {
				ID         string `json:"id"`
				Permission string `json:"permission"`
			}](t, ok(t, client, "permissions"))
			return len(asks) > 0
		}, follower.stdout.String)
		if active := decode[map[string]any](t, ok(t, client, "active")); active[sid] == nil {
			t.Fatalf("active = %v while %s waits for a reply", active, sid)
		}
		ok(t, client, "reply", asks[0].ID, reply)
	}

	follower.waitFor(&follower.stdout, `"type":"session.execution.succeeded.1"`)
	follower.signal(syscall.SIGINT)
	if code := follower.wait(); code != 0 {
		t.Fatalf("log --follow exited %d after SIGINT\nstderr:\n%s", code, follower.stderr.String())
	}
	if out := follower.stdout.String(); !strings.Contains(out, `"text":"Done. I read notes.txt`) || strings.Count(out, `"type":"session.created.1"`) != 1 {
		t.Fatalf("log:\n%s", out)
	}
	if hello := filepath.Join(dir, "hello.txt"); !fileHas(hello, "Hello from sessiond!\n") {
		t.Fatalf("%s missing", hello)
	}

	page := decode[persistence.Page[messages.Event]](t, ok(t, client, "history", sid, "--after", "0", "--limit", "2"))
	if len(page.Data) != 2 || page.Data[0].Seq() != 1 || page.Data[0].Type != messages.TypePromptAdmitted || !page.HasMore {
		t.Fatalf("history page = %+v", page)
	}
	replay := ok(t, client, "log", sid, "--after", "0")
	if strings.Contains(replay, messages.TypeSessionCreated) || !strings.HasSuffix(strings.TrimSpace(replay), `"type":"log.synced","aggregateID":"`+sid+`","seq":`+strconv.FormatInt(sessLastSeq(t, client, sid), 10)+`}`) {
		t.Fatalf("log --after 0:\n%s", replay)
	}
	// A cursor below -1 is refused alike by log and history: the daemon's
	// invalid, exit 1, nothing printed.
	for _, cmd := range []string{"log", "history"} {
		r := sessiond(t, client, nil, cmd, sid, "--after", "-5")
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "sessiond "+cmd+`: invalid: after: want an integer >= -1, got "-5" (HTTP 400)`) {
			t.Fatalf("%s --after -5: exit %d\nstdout:\n%s\nstderr:\n%s", cmd, r.code, r.stdout, r.stderr)
		}
	}
	if active := decode[map[string]any](t, ok(t, client, "active")); len(active) != 0 {
		t.Fatalf("active = %v after the busy period", active)
	}
	list := decode[[]persistence.Session](t, ok(t, client, "session", "list"))
	if len(list) != 1 || list[0].ID != sess.ID {
		t.Fatalf("list = %+v", list)
	}
	ok(t, client, "interrupt", sid) // idle: a no-op

	r = sessiond(t, client, nil, "session", "get", "ses_missing")
	if r.code != 1 || !strings.Contains(r.stderr, `session.not-found: `) {
		t.Fatalf("get of a missing Session: exit %d\nstderr:\n%s", r.code, r.stderr)
	}

	srv.stop()
	if !strings.Contains(srv.stderr.String(), `"message":"stopped"`) {
		t.Fatalf("serve log:\n%s", srv.stderr.String())
	}
	r = sessiond(t, client, nil, "active")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach sessiond at http://"+addr) {
		t.Fatalf("client of a stopped daemon: exit %d\nstderr:\n%s", r.code, r.stderr)
	}

	// The lock is released: a new daemon serves the same store.
	srv2, addr2 := serveDaemon(t, env)
	got := decode[persistence.Session](t, ok(t, testEnv(t, "SESSIOND_TOKEN", token), "session", "get", "--addr", addr2, sid))
	if got.ID != sess.ID || got.Tokens.Output == 0 {
		t.Fatalf("after restart: %+v", got)
	}
	srv2.stop()
}

// sessLastSeq returns the Session's last seq through session get.
func sessLastSeq(t *testing.T, env []string, sid string) int64 {
	t.Helper()
	return decode[persistence.Session](t, ok(t, env, "session", "get", sid)).LastSeq
}

// TestServeGracefulShutdown: SIGTERM while a Session is mid-step
// interrupts it with reason shutdown, durably, before the daemon exits.
func TestServeGracefulShutdown(t *testing.T) {
	data := t.TempDir()
	env := testEnv(t, "SESSIOND_DATA", data)
	root := t.TempDir()
	srv, addr := serveDaemon(t, env, "--config", slowConfig(t), "--root", root)
	client := testEnv(t, "SESSIOND_ADDR", addr)

	// --root confines Session directories.
	r := sessiond(t, client, nil, "session", "create", "--dir", t.TempDir())
	if r.code != 1 || !strings.Contains(r.stderr, "forbidden: ") || !strings.Contains(r.stderr, "(HTTP 403)") {
		t.Fatalf("outside --root: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	project := filepath.Join(root, "project")
	if err := os.Mkdir(project, 0o700); err != nil {
		t.Fatal(err)
	}
	sid := decode[persistence.Session](t, ok(t, client, "session", "create", "--dir", project)).ID
	ok(t, client, "prompt", string(sid), "take your time")
	eventually(t, "a started step", func() bool {
		return strings.Contains(ok(t, client, "history", string(sid)), messages.TypeStepStarted)
	}, srv.stderr.String)

	follower := start(t, client, "log", string(sid), "--follow")
	follower.waitFor(&follower.stdout, `"type":"log.synced"`)
	// A client stalled in the middle of its request body holds the HTTP
	// phase of the stop only until its connection is cut: it held the
	// whole stop budget, and Sessions were never interrupted.
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := io.WriteString(stalled, "POST /api/session HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\""); err != nil {
		t.Fatal(err)
	}
	srv.stop()

	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.History(context.Background(), sid, persistence.Query{After: -1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	last := page.Data[len(page.Data)-1]
	p, isInterrupted := last.Data.(*messages.ExecutionInterrupted)
	if !isInterrupted || p.Reason != messages.ReasonShutdown {
		t.Fatalf("last event %s %+v, want %s reason shutdown", last.Type, last.Data, messages.TypeExecutionInterrupted)
	}
	var types []string
	for _, ev := range page.Data {
		types = append(types, ev.Type)
	}
	if !strings.Contains(strings.Join(types, " "), messages.TypeStepFailed+" "+messages.TypeExecutionInterrupted) {
		t.Fatalf("events: %v", types)
	}

	// The HTTP server went first and ended the stream; the follower keeps
	// trying to reconnect until it is stopped.
	follower.waitFor(&follower.stderr, `sessiond log: connection lost \(the server ended the stream\); reconnecting`)
	follower.signal(syscall.SIGTERM)
	if code := follower.wait(); code != 0 {
		t.Fatalf("log --follow exited %d\nstderr:\n%s", code, follower.stderr.String())
	}
}

// fileHas reports whether the file at path holds exactly content.
func fileHas(path, content string) bool {
	b, err := os.ReadFile(path)
	return err == nil && string(b) == content
}

// TestServeAppliesTheConfiguration: what the configuration file sets
// reaches the running daemon: the token, the CORS origins, the body and
// prompt limits and the inbox backlog.
func TestServeAppliesTheConfiguration(t *testing.T) {
	data := t.TempDir()
	cfg := `{"token": "tok", "cors": ["http://localhost:5173"],
	  "limits": {"bodyBytes": 4096, "promptBytes": 100, "inboxBacklog": 1}}`
	if err := os.WriteFile(filepath.Join(data, ConfigFileName), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, addr := serveDaemon(t, testEnv(t, "SESSIOND_DATA", data))
	defer srv.stop()
	base := "http://" + addr
	do := func(method, path, body string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	auth := []string{"Authorization", "Bearer tok", "Content-Type", "application/json"}
	if res := do("GET", "/api/session", ""); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", res.StatusCode)
	}
	res := do("OPTIONS", "/api/session", "", "Origin", "http://localhost:5173", "Access-Control-Request-Method", "POST")
	if res.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Fatalf("preflight from the configured origin: %d %v", res.StatusCode, res.Header)
	}
	dir, _ := json.Marshal(t.TempDir())
	if res := do("POST", "/api/session", `{"id": "ses_cfg", "location": {"directory": `+string(dir)+`}}`, auth...); res.StatusCode != http.StatusOK {
		t.Fatalf("create: %d", res.StatusCode)
	}
	// bodyBytes bounds every body, not only a prompt's (which promptBytes
	// bounds as well).
	if res := do("POST", "/api/session", `{"id": "ses_big", "title": "`+strings.Repeat("a", 5000)+`", "location": {"directory": `+string(dir)+`}}`, auth...); res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("create with a body over bodyBytes: %d", res.StatusCode)
	}
	prompt := func(text string) int {
		return do("POST", "/api/session/ses_cfg/prompt", `{"prompt": {"text": "`+text+`"}, "resume": false}`, auth...).StatusCode
	}
	for _, tc := range []struct {
		name string
		text string
		want int
	}{
		{"a body over bodyBytes", strings.Repeat("a", 5000), http.StatusRequestEntityTooLarge},
		{"a prompt over promptBytes", strings.Repeat("a", 101), http.StatusRequestEntityTooLarge},
		{"the first prompt", "one", http.StatusOK},
		{"a prompt over the inbox backlog", "two", http.StatusTooManyRequests},
	} {
		if got := prompt(tc.text); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestClientCommandsForSelectionAndCompaction drives the commands over the
// routes the first client commands left to curl: a prompt admitted
// without a wake runs on resume, wait returns once it is done, messages
// pages the transcript, session model and session agent select, and
// compact summarizes.
func TestClientCommandsForSelectionAndCompaction(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "s.json", `{"default": {"steps": [{"text": "## Objective\nanswered"}, {"finish": "stop"}]}}`)
	config := writeFile(t, dir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "s.json"}}, "model": "s/any",
		"agents": {"plan": {"steps": 3}}}`)
	srv, addr := serveDaemon(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), "--config", config)
	defer srv.stop()
	client := testEnv(t, "SESSIOND_ADDR", addr)
	sid := string(decode[persistence.Session](t, ok(t, client, "session", "create", "--dir", t.TempDir())).ID)

	ok(t, client, "prompt", sid, "hello", "--no-resume")
	ok(t, client, "resume", sid)
	ok(t, client, "wait", sid)
	page := decode[struct {
		Data []persistence.Message `json:"data"`
	}](t, ok(t, client, "messages", sid, "--limit", "10"))
	if len(page.Data) != 2 || page.Data[0].Role != persistence.RoleUser || page.Data[1].Role != persistence.RoleAssistant {
		t.Fatalf("messages %+v", page.Data)
	}

	ok(t, client, "session", "model", sid, "s/other")
	ok(t, client, "session", "agent", sid, "plan")
	if got := decode[persistence.Session](t, ok(t, client, "session", "get", sid)); got.Model.ID != "other" || got.Agent != "plan" {
		t.Fatalf("after selection: %+v", got)
	}
	if r := sessiond(t, client, nil, "session", "agent", sid, "nope"); r.code != 1 || !strings.Contains(r.stderr, "(HTTP 400)") {
		t.Fatalf("unknown agent: exit %d\n%s", r.code, r.stderr)
	}

	ok(t, client, "instruction", "set", sid, "style", "Answer briefly.")
	if got := decode[map[string]string](t, ok(t, client, "instruction", "list", sid)); got["style"] != "Answer briefly." || len(got) != 1 {
		t.Fatalf("instructions %v", got)
	}
	ok(t, client, "instruction", "delete", sid, "style")
	if r := sessiond(t, client, nil, "instruction", "delete", sid, "style"); r.code != 1 || !strings.Contains(r.stderr, "(HTTP 404)") {
		t.Fatalf("deleting a missing entry: exit %d\n%s", r.code, r.stderr)
	}

	ok(t, client, "compact", sid)
	ok(t, client, "wait", sid)
	if h := ok(t, client, "history", sid, "--limit", "100"); !strings.Contains(h, messages.TypeCompactionEnded) {
		t.Fatalf("no compaction in %s", h)
	}
}
