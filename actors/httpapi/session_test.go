package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"github.com/rs/zerolog"
	"github.com/sessiond/sessiond/actors/actortest"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

func TestHealth(t *testing.T) {
	e := newHarnessEnv(t, nil)
	r := e.do("GET", "/api/health", nil).want(t, http.StatusOK)
	if strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
		t.Fatalf("health %s", r.body)
	}
}

func TestCreateGetList(t *testing.T) {
	e := newHarnessEnv(t, nil)
	s := dataOf[persistence.Session](t, e.do("POST", "/api/session",
		map[string]any{"location": map[string]string{"directory": e.dir}, "agent": "plan"}))
	if !strings.HasPrefix(string(s.ID), "ses_") || s.Location.Directory != e.dir || s.Agent != "plan" || s.LastSeq != 0 {
		t.Fatalf("created %+v", s)
	}

	// A supplied ID creates once and is reused after.
	body := map[string]any{"id": "ses_fixed", "location": map[string]string{"directory": e.dir}}
	first := dataOf[persistence.Session](t, e.do("POST", "/api/session", body))
	again := dataOf[persistence.Session](t, e.do("POST", "/api/session", body))
	if first.ID != "ses_fixed" || first != again {
		t.Fatalf("reuse: %+v vs %+v", first, again)
	}
	got := dataOf[persistence.Session](t, e.do("GET", "/api/session/ses_fixed", nil))
	if got != first {
		t.Fatalf("get %+v, want %+v", got, first)
	}
	list := dataOf[[]persistence.Session](t, e.do("GET", "/api/session", nil))
	if len(list) != 2 || !slices.ContainsFunc(list, func(x persistence.Session) bool { return x.ID == s.ID }) {
		t.Fatalf("list %+v", list)
	}

	e.do("GET", "/api/session/ses_missing", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	if m := e.do("GET", "/api/session/not-an-id", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid); !strings.HasPrefix(m.Message, "sessionID:") {
		t.Fatalf("message %q", m.Message)
	}
	for body, field := range map[string]string{
		`{}`: "location.directory",
		`{"location":{"directory":"relative/dir"}}`:         "location.directory",
		`{"location":{"directory":"/x"},"id":"bad"}`:        "id", // the body's field, as in a prompt
		`{"location":{"directory":"/x","workspaceID":"w"}}`: "location.workspaceID",
		`{"location":{"directory":5}}`:                      "location.directory",
	} {
		m := e.do("POST", "/api/session", body).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, field+":") {
			t.Errorf("%s: message %q does not name %s", body, m.Message, field)
		}
	}
}

func TestEmptyList(t *testing.T) {
	e := newHarnessEnv(t, nil)
	if r := e.do("GET", "/api/session", nil).want(t, http.StatusOK); strings.TrimSpace(string(r.body)) != `{"data":[]}` {
		t.Fatalf("empty list %s", r.body)
	}
	if r := e.do("GET", "/api/session/active", nil).want(t, http.StatusOK); strings.TrimSpace(string(r.body)) != `{"data":{}}` {
		t.Fatalf("empty active %s", r.body)
	}
}

func TestPromptAndActive(t *testing.T) {
	e := newHarnessEnv(t, nil)
	g := script.NewGate()
	e.model.Reply(script.Hold(g), script.Text("hello"))
	sid := e.createSession()
	adm := e.prompt(sid, map[string]any{"id": "msg_one", "prompt": map[string]any{"text": "hi"}})
	if adm.ID != "msg_one" || adm.SessionID != sid || adm.Prompt.Text != "hi" || adm.Delivery != messages.Steer || adm.AdmittedSeq != 1 {
		t.Fatalf("admitted %+v", adm)
	}
	if err := g.Reached(e.h.Ctx()); err != nil {
		t.Fatal(err)
	}
	// The active route is a literal pattern, not captured by {id}.
	active := dataOf[map[messages.SessionID]actors.Status](t, e.do("GET", "/api/session/active", nil))
	if len(active) != 1 || active[sid].Type != "running" {
		t.Fatalf("active %+v", active)
	}
	g.Release()
	e.waitIdle(sid)
	if active := dataOf[map[messages.SessionID]actors.Status](t, e.do("GET", "/api/session/active", nil)); len(active) != 0 {
		t.Fatalf("active after idle %+v", active)
	}
	evs := e.allEvents(sid)
	if last := evs[len(evs)-1].Type; last != messages.TypeExecutionSucceeded {
		t.Fatalf("last event %s", last)
	}
	// The retry after promotion returns the same receipt.
	retry := e.prompt(sid, map[string]any{"id": "msg_one", "prompt": map[string]any{"text": "hi"}, "resume": false})
	if !reflect.DeepEqual(retry, adm) {
		t.Fatalf("retry %+v, want %+v", retry, adm)
	}
}

// TestExactRetryWakes: an exact retry of an admission made with
// resume=false wakes the Session unless it too says resume=false.
func TestExactRetryWakes(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Default(script.Text("ran"))
	sid := e.createSession()
	body := map[string]any{"id": "msg_r", "prompt": map[string]any{"text": "hi"}, "resume": false}
	e.prompt(sid, body)
	e.prompt(sid, body) // an exact retry that still says resume=false
	e.waitIdle(sid)
	if e.model.Count() != 0 {
		t.Fatalf("resume=false ran the model")
	}
	delete(body, "resume")
	e.prompt(sid, body)
	e.waitIdle(sid)
	if e.model.Count() != 1 {
		t.Fatalf("the exact retry did not wake the Session: %d requests", e.model.Count())
	}
}

func TestPromptErrors(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	p := "/api/session/" + string(sid) + "/prompt"
	e.prompt(sid, map[string]any{"id": "msg_x", "prompt": map[string]any{"text": "a"}, "resume": false})

	e.do("POST", p, map[string]any{"id": "msg_x", "prompt": map[string]any{"text": "b"}, "resume": false}).
		wantError(t, http.StatusConflict, messages.ErrPromptConflict)
	e.do("POST", p, map[string]any{"id": "msg_x", "prompt": map[string]any{"text": "a"}, "delivery": "queue", "resume": false}).
		wantError(t, http.StatusConflict, messages.ErrPromptConflict)
	other := e.createSession()
	e.do("POST", "/api/session/"+string(other)+"/prompt", map[string]any{"id": "msg_x", "prompt": map[string]any{"text": "a"}, "resume": false}).
		wantError(t, http.StatusConflict, messages.ErrPromptConflict)
	e.do("POST", "/api/session/ses_missing/prompt", map[string]any{"prompt": map[string]any{"text": "a"}}).
		wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)

	for body, field := range map[string]string{
		`{"prompt":{"text":""}}`:                          "prompt.text",
		`{"prompt":{"text":"a"},"delivery":"later"}`:      "delivery",
		`{"prompt":{"text":"a"},"id":"nope"}`:             "id",
		`{"prompt":{"text":"a"},"sessionID":"ses_other"}`: "sessionID",
		`{"prompt":{"text":"a"},"sessionID":"bad"}`:       "sessionID",
		`{"prompt":{"text":"a","files":[{"mime":"x"}]}}`:  "prompt.files[0]",
		`{"prompt":{"text":"a"},"resume":"yes"}`:          "resume",
		`{"prompt":{"text":"a"},"bogus":true}`:            "body",
		`{"prompt":{"text":"a"}} {"prompt":{"text":"b"}}`: "body",
		`{"prompt":`: "body",
		``:           "body",
		`[1,2]`:      "body",
	} {
		m := e.do("POST", p, body).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, field+":") {
			t.Errorf("%s: message %q does not name %s", body, m.Message, field)
		}
	}
	// Only the first admission made a row.
	n := 0
	for _, ev := range e.allEvents(sid) {
		if ev.Type == messages.TypePromptAdmitted {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d admissions", n)
	}
}

// Twenty clients retrying one prompt concurrently make one inbox row and
// all get equal receipts.
func TestPromptIdempotentConcurrent(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Default(script.Text("done"))
	sid := e.createSession()
	body := map[string]any{"id": "msg_retry", "prompt": map[string]any{"text": "once only"}, "delivery": "queue"}
	const clients = 20
	replies := make([]reply, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { replies[i], errs[i] = e.try("POST", "/api/session/"+string(sid)+"/prompt", body) })
	}
	wg.Wait()
	var first persistence.Admitted
	for i := range clients {
		if errs[i] != nil {
			t.Fatalf("client %d: %v", i, errs[i])
		}
		got := dataOf[persistence.Admitted](t, replies[i])
		if i == 0 {
			first = got
		}
		// Equal also when the runner promoted the row between two retries.
		if !reflect.DeepEqual(first, got) {
			t.Fatalf("receipt %d differs: %+v vs %+v", i, got, first)
		}
	}
	e.waitIdle(sid)
	var admitted, promoted int
	for _, ev := range e.allEvents(sid) {
		switch ev.Type {
		case messages.TypePromptAdmitted:
			admitted++
		case messages.TypePromptPromoted:
			promoted++
		}
	}
	if admitted != 1 || promoted != 1 {
		t.Fatalf("admitted %d, promoted %d; want one row", admitted, promoted)
	}
	pending, err := e.store.Pending(e.h.Ctx(), sid)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending %v %v", pending, err)
	}
}

func TestPromptResumeFalse(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]any{"text": "later"}, "resume": false})
	e.waitIdle(sid)
	if got := types(e.allEvents(sid)); !slices.Equal(got, []string{messages.TypeSessionCreated, messages.TypePromptAdmitted}) {
		t.Fatalf("events %v", got)
	}
	// Resume runs it.
	e.model.Reply(script.Text("now"))
	e.do("POST", "/api/session/"+string(sid)+"/resume", nil).want(t, http.StatusNoContent)
	e.waitIdle(sid)
	if got := types(e.allEvents(sid)); got[len(got)-1] != messages.TypeExecutionSucceeded || !slices.Contains(got, messages.TypePromptPromoted) {
		t.Fatalf("events after resume %v", got)
	}
}

func TestResumeCompactWait(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Default(script.Text("## Objective\n(none)"))
	sid := e.createSession()
	base := "/api/session/" + string(sid)

	// A forced drain with nothing to promote still runs a step, from the
	// Session's history (one without any has nothing to continue).
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "hello"}})
	e.waitIdle(sid)
	steps := func() int {
		n := 0
		for _, typ := range types(e.allEvents(sid)) {
			if typ == messages.TypeStepEnded {
				n++
			}
		}
		return n
	}
	before := steps()
	e.do("POST", base+"/resume", nil).want(t, http.StatusNoContent)
	e.waitIdle(sid)
	if n := steps(); n != before+1 {
		t.Fatalf("resume ran %d steps: %v", n-before, types(e.allEvents(sid)))
	}

	e.do("POST", base+"/compact", nil).want(t, http.StatusNoContent)
	e.waitIdle(sid)
	got := types(e.allEvents(sid))
	if !slices.Contains(got, messages.TypeCompactionAdmitted) || !slices.Contains(got, messages.TypeCompactionStarted) {
		t.Fatalf("compact: %v", got)
	}

	for _, op := range []string{"resume", "compact", "wait", "interrupt"} {
		e.do("POST", "/api/session/ses_missing/"+op, nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
		e.do("POST", "/api/session/bad/"+op, nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	}
}

func TestInterrupt(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	p := "/api/session/" + string(sid) + "/interrupt"

	// Idle: a no-op, 204 at once. Unknown: 404, although the runtime
	// treats it as a no-op too.
	e.do("POST", p, nil).want(t, http.StatusNoContent)
	e.do("POST", "/api/session/ses_nobody/interrupt", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)

	g := script.NewGate()
	e.model.Reply(script.Hold(g), script.Text("never"))
	e.prompt(sid, map[string]any{"prompt": map[string]any{"text": "long job"}})
	if err := g.Reached(e.h.Ctx()); err != nil {
		t.Fatal(err)
	}
	// Admitted while the step is held: a queued prompt waits for the idle
	// boundary, and its wake is coalesced into a follow-up of the busy
	// period the interrupt is about to end.
	queued := e.prompt(sid, map[string]any{"prompt": map[string]any{"text": "queued before the interrupt"}, "delivery": "queue"})
	e.do("POST", p, nil).want(t, http.StatusNoContent)
	// 204 came after the terminal event: it is already in the log.
	evs := e.allEvents(sid)
	last := evs[len(evs)-1]
	if last.Type != messages.TypeExecutionInterrupted {
		t.Fatalf("last event after interrupt: %s", last.Type)
	}
	if r := last.Data.(*messages.ExecutionInterrupted).Reason; r != messages.ReasonUser {
		t.Fatalf("reason %q", r)
	}
	// The durable inbox is preserved: the queued prompt is still pending,
	// and the interrupt dropped its follow-up rather than running it (wait
	// would wait for that drain). Nothing is active.
	e.waitIdle(sid)
	if pending, err := e.store.Pending(e.h.Ctx(), sid); err != nil || len(pending) != 1 || pending[0].ID != queued.ID {
		t.Fatalf("pending after the interrupt %+v, %v; want only %s", pending, err, queued.ID)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("%d model requests after the interrupt, want 1", n)
	}
	if active := e.rt.Active(); len(active) != 0 {
		t.Fatalf("active %v", active)
	}
	// The next resume runs it.
	e.model.Reply(script.Text("ran after the interrupt"))
	e.do("POST", "/api/session/"+string(sid)+"/resume", nil).want(t, http.StatusNoContent)
	e.waitIdle(sid)
	if pending, err := e.store.Pending(e.h.Ctx(), sid); err != nil || len(pending) != 0 {
		t.Fatalf("pending after the resume %+v, %v", pending, err)
	}
	var answered []string
	for _, req := range e.model.Requests() {
		answered = append(answered, script.LastUserText(req))
	}
	if !slices.Equal(answered, []string{"long job", "queued before the interrupt"}) {
		t.Fatalf("the model answered %q, want the held prompt, then the queued one", answered)
	}
	evs = e.allEvents(sid)
	if last := evs[len(evs)-1].Type; last != messages.TypeExecutionSucceeded {
		t.Fatalf("last event after the resume: %s", last)
	}
}

// stuckTool is a tool that ignores cancellation: entered is closed once it
// runs and cancelled once its drain is cancelled (by an interrupt, or by a
// move superseding the busy period); it returns only after release, so
// whatever waits for that busy period to settle stays in flight until the
// test lets it end. The end of the test releases it too.
type stuckTool struct {
	entered, cancelled chan struct{}
	release            func()
}

func addStuckTool(t *testing.T, e *env, name string) *stuckTool {
	st := &stuckTool{entered: make(chan struct{}), cancelled: make(chan struct{})}
	r := make(chan struct{})
	e.h.Tools.Add(name, func(ctx context.Context, _ locations.ToolCall) (string, error) {
		close(st.entered)
		<-ctx.Done()
		close(st.cancelled)
		<-r
		return "", ctx.Err()
	})
	st.release = sync.OnceFunc(func() { close(r) })
	t.Cleanup(st.release)
	return st
}

// stuckToolEnv is newHarnessEnv whose cancelled steps wait for a stuck
// tool as long as the test runs: a test that keeps a busy period from
// settling with one must not see the default ten-second grace run out
// on a slow machine and settle it.
func stuckToolEnv(t *testing.T) *env {
	return newEnv(t, harnessBackend(t, actortest.Options{Config: func(c *actors.Config) { c.ToolGrace = time.Hour }}), nil)
}

// stuckSession starts a Session on stuckToolEnv whose first step calls a
// tool (stuck) that blocks until it is released, past its cancellation;
// later steps answer "done".
func stuckSession(t *testing.T) (*env, *stuckTool, messages.SessionID) {
	e := stuckToolEnv(t)
	tool := addStuckTool(t, e, "stuck")
	e.model.Reply(script.ToolCall("c1", "stuck", `{}`))
	e.model.Default(script.Text("done"))
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "run the tool"}})
	return e, tool, sid
}

// shutdownWith waits until tool runs, sends a request on another
// goroutine, waits until the tool's drain is cancelled (the Session actor
// has the request, and the stuck tool keeps its busy period from
// settling), shuts the Server down and returns the request's answer.
func shutdownWith(t *testing.T, e *env, tool *stuckTool, send func() (reply, error)) reply {
	t.Helper()
	select {
	case <-tool.entered:
	case <-e.h.Ctx().Done():
		t.Fatal("the tool never ran")
	}
	type answer struct {
		r   reply
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := send()
		answered <- answer{r, err}
	}()
	select {
	case <-tool.cancelled:
	case a := <-answered:
		t.Fatalf("answered (%d %s, %v) before the busy period it waits for could settle", a.r.status, a.r.body, a.err)
	case <-e.h.Ctx().Done():
		t.Fatal("the request never reached the Session")
	}
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Shutdown returns once in-flight requests are answered.
	a := <-answered
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.r
}

// TestShutdownCutsAnInterrupt: an interrupt still waiting for its busy
// period to settle when the Server shuts down answers 503 shutting-down,
// never 204 as if the terminal event were committed; the interrupt itself
// goes on and ends the busy period with reason user.
func TestShutdownCutsAnInterrupt(t *testing.T) {
	e, tool, sid := stuckSession(t)
	r := shutdownWith(t, e, tool, func() (reply, error) {
		return e.try("POST", "/api/session/"+string(sid)+"/interrupt", nil)
	})
	r.wantError(t, http.StatusServiceUnavailable, messages.ErrShuttingDown)
	if got := e.h.Types(sid); slices.Contains(got, "session.execution.interrupted") {
		t.Fatalf("terminal event before the stuck tool returned: %v", got)
	}
	tool.release()
	e.h.WaitIdle(sid)
	evs := e.h.Events(sid)
	last := evs[len(evs)-1]
	if p, ok := last.Data.(*messages.ExecutionInterrupted); !ok || p.Reason != messages.ReasonUser {
		t.Fatalf("last event %s %+v, want execution.interrupted with reason user", last.Type, last.Data)
	}
}

// TestShutdownCutsAMove: a move still waiting for the busy period it
// supersedes to settle when the Server shuts down answers 503
// shutting-down, not the Session it has not moved yet.
func TestShutdownCutsAMove(t *testing.T) {
	e, tool, sid := stuckSession(t)
	before, err := e.store.Get(e.h.Ctx(), sid)
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	r := shutdownWith(t, e, tool, func() (reply, error) {
		return e.try("POST", "/api/session/"+string(sid)+"/move", map[string]any{"location": map[string]string{"directory": dest}})
	})
	r.wantError(t, http.StatusServiceUnavailable, messages.ErrShuttingDown)
	if s, err := e.store.Get(e.h.Ctx(), sid); err != nil || s.Location != before.Location {
		t.Fatalf("Session at %+v (%v) before the superseded busy period settled, want %+v", s.Location, err, before.Location)
	}
	tool.release()
	e.h.WaitIdle(sid)
}

func TestSelectAgentAndModel(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	base := "/api/session/" + string(sid)
	e.do("POST", base+"/agent", map[string]string{"agent": "plan"}).want(t, http.StatusNoContent)
	e.do("POST", base+"/model", map[string]string{"providerID": "script", "id": "other"}).want(t, http.StatusNoContent)
	s := dataOf[persistence.Session](t, e.do("GET", base, nil))
	if s.Agent != "plan" || s.Model != (messages.ModelRef{ProviderID: "script", ID: "other"}) {
		t.Fatalf("session %+v", s)
	}
	for path, cases := range map[string]map[string]string{
		"/agent": {`{}`: "agent", `{"agent":1}`: "agent", `{"agent":"x","more":1}`: "body", `nope`: "body"},
		"/model": {`{"id":"m"}`: "providerID", `{"providerID":"p"}`: "id", `{"providerID":1,"id":"m"}`: "providerID"},
	} {
		for body, field := range cases {
			m := e.do("POST", base+path, body).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
			if !strings.HasPrefix(m.Message, field+":") {
				t.Errorf("%s %s: message %q does not name %s", path, body, m.Message, field)
			}
		}
	}
	// An agent or model the Location does not configure is refused, at
	// selection and at creation, rather than run without its rules.
	m := e.do("POST", base+"/agent", map[string]string{"agent": "nope"}).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	if !strings.HasPrefix(m.Message, "agent:") || !strings.Contains(m.Message, "plan") {
		t.Errorf("unknown agent: message %q", m.Message)
	}
	loc := map[string]string{"directory": e.dir}
	e.do("POST", "/api/session", map[string]any{"location": loc, "agent": "nope"}).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	e.do("POST", "/api/session", map[string]any{"location": loc, "model": map[string]string{"providerID": "script", "id": "nope"}}).
		wantError(t, messages.ErrModelNotFound.HTTPStatus(), messages.ErrModelNotFound)
	e.do("POST", "/api/session", map[string]any{"location": loc, "agent": "plan", "model": map[string]string{"providerID": "script", "id": "other"}}).
		want(t, http.StatusOK)
	if s := dataOf[persistence.Session](t, e.do("GET", base, nil)); s.Agent != "plan" {
		t.Fatalf("a refused selection changed the Session: %+v", s)
	}
	e.do("POST", "/api/session/ses_missing/agent", map[string]string{"agent": "plan"}).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("POST", "/api/session/ses_missing/model", map[string]string{"providerID": "script", "id": "demo"}).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
}

// TestMalformedModel: a partial model reference, or one with white space
// around a part, is 400 invalid naming the part, at creation and at
// selection; model.not-found stays for a well-formed reference that does
// not resolve. Nothing is written on refusal.
func TestMalformedModel(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	loc := map[string]string{"directory": e.dir}
	for _, tc := range []struct {
		model map[string]string
		field string
	}{
		{map[string]string{"providerID": "", "id": "x"}, "providerID"},
		{map[string]string{"id": "x"}, "providerID"},
		{map[string]string{"providerID": "script", "id": ""}, "id"},
		{map[string]string{"providerID": "script"}, "id"},
		{map[string]string{"providerID": " script", "id": "demo"}, "providerID"},
		{map[string]string{"providerID": "script", "id": "demo\n"}, "id"},
	} {
		m := e.do("POST", "/api/session", map[string]any{"location": loc, "model": tc.model}).
			wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, "model."+tc.field+":") {
			t.Errorf("create with %v: message %q does not name model.%s", tc.model, m.Message, tc.field)
		}
		m = e.do("POST", "/api/session/"+string(sid)+"/model", tc.model).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, tc.field+":") {
			t.Errorf("select %v: message %q does not name %s", tc.model, m.Message, tc.field)
		}
	}
	// An empty model object is no model: the Location's default.
	e.do("POST", "/api/session", map[string]any{"location": loc, "model": map[string]string{}}).want(t, http.StatusOK)
	unknown := map[string]string{"providerID": "nope", "id": "x"}
	e.do("POST", "/api/session", map[string]any{"location": loc, "model": unknown}).wantError(t, http.StatusBadRequest, messages.ErrModelNotFound)
	e.do("POST", "/api/session/"+string(sid)+"/model", unknown).wantError(t, http.StatusBadRequest, messages.ErrModelNotFound)
	if list := dataOf[[]persistence.Session](t, e.do("GET", "/api/session", nil)); len(list) != 2 {
		t.Fatalf("%d Sessions, want 2", len(list))
	}
	if evs := e.allEvents(sid); len(evs) != 1 {
		t.Fatalf("refused selections wrote %d events", len(evs)-1)
	}
}

// TestMove: POST /api/session/{id}/move answers the moved Session (the
// directory in canonical form inside a root), refuses bad bodies and
// destinations outside every root without writing anything, and a moved
// Session runs at its new Location.
func TestMove(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Roots = []string{root} })
	s := dataOf[persistence.Session](t, e.do("POST", "/api/session", map[string]any{"location": map[string]string{"directory": a}}))
	base := "/api/session/" + string(s.ID)
	before := len(e.allEvents(s.ID))
	for body, status := range map[string]int{
		`{}`:                               http.StatusBadRequest,
		`{"location":{"directory":"rel"}}`: http.StatusBadRequest,
		`{"location":{"directory":"/tmp"},"x":1}`: http.StatusBadRequest,
		`nope`: http.StatusBadRequest,
		`{"location":{"directory":"` + root + `/missing"}}`: http.StatusBadRequest,
		`{"location":{"directory":"` + t.TempDir() + `"}}`:  http.StatusForbidden,
	} {
		r := e.do("POST", base+"/move", body)
		if r.status != status {
			t.Errorf("%s: status %d, want %d (%s)", body, r.status, status, r.body)
		}
	}
	if after := len(e.allEvents(s.ID)); after != before {
		t.Fatalf("refused moves wrote %d events", after-before)
	}
	e.do("POST", "/api/session/ses_missing/move", map[string]any{"location": map[string]string{"directory": b}}).
		wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)

	moved := dataOf[persistence.Session](t, e.do("POST", base+"/move", map[string]any{"location": map[string]string{"directory": b + "/../b"}}))
	if canon, _ := filepath.EvalSymlinks(b); moved.ID != s.ID || moved.Location.Directory != canon {
		t.Fatalf("moved Session %+v, want %s at %s", moved, s.ID, canon)
	}
	if got := dataOf[persistence.Session](t, e.do("GET", base, nil)); got.Location != moved.Location {
		t.Fatalf("GET after the move: %+v", got.Location)
	}
	e.model.Reply(script.Text("hello from b"))
	e.prompt(s.ID, map[string]any{"prompt": map[string]string{"text": "hi"}})
	e.waitIdle(s.ID)
	evs := e.allEvents(s.ID)
	if last := evs[len(evs)-1].Type; last != messages.TypeExecutionSucceeded {
		t.Fatalf("last event after the move %s", last)
	}
}

func TestHistoryAndMessages(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.model.Reply(script.Text("first answer"))
	e.model.Reply(script.Text("second answer"))
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]any{"text": "one"}})
	e.waitIdle(sid)
	e.prompt(sid, map[string]any{"prompt": map[string]any{"text": "two"}})
	e.waitIdle(sid)
	base := "/api/session/" + string(sid)

	full := pageOf(t, e.do("GET", base+"/history", nil))
	if full.HasMore || len(full.Data) < 10 {
		t.Fatalf("default page: %d events, hasMore %v", len(full.Data), full.HasMore)
	}
	for i, ev := range full.Data {
		if ev.Seq() != int64(i) || ev.Durable.AggregateID != sid {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	// Paging with limit=3 and the exclusive cursor visits every event once.
	var paged []messages.Event
	after := int64(-1)
	for {
		p := pageOf(t, e.do("GET", base+"/history?limit=3&after="+itoa(after), nil))
		if len(p.Data) > 3 {
			t.Fatalf("page of %d", len(p.Data))
		}
		paged = append(paged, p.Data...)
		if !p.HasMore {
			break
		}
		after = p.Data[len(p.Data)-1].Seq()
	}
	if !slices.Equal(types(paged), types(full.Data)) {
		t.Fatalf("paged %v\nfull %v", types(paged), types(full.Data))
	}
	if p := pageOf(t, e.do("GET", base+"/history?after="+itoa(full.Data[len(full.Data)-1].Seq()), nil)); len(p.Data) != 0 || p.HasMore {
		t.Fatalf("past the end: %+v", p)
	}
	if r := e.do("GET", base+"/history?after=1000", nil).want(t, http.StatusOK); !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("empty page encodes as %s", r.body)
	}

	type msgPage struct {
		Data    []persistence.Message `json:"data"`
		HasMore bool                  `json:"hasMore"`
	}
	var mp msgPage
	r := e.do("GET", base+"/message", nil).want(t, http.StatusOK)
	if err := jsonUnmarshal(r.body, &mp); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range mp.Data {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"user", "assistant", "user", "assistant"}) || mp.HasMore {
		t.Fatalf("roles %v hasMore %v", roles, mp.HasMore)
	}
	var first msgPage
	if err := jsonUnmarshal(e.do("GET", base+"/message?limit=1", nil).want(t, http.StatusOK).body, &first); err != nil {
		t.Fatal(err)
	}
	if len(first.Data) != 1 || !first.HasMore || first.Data[0].Prompt.Text != "one" {
		t.Fatalf("first message page %+v", first)
	}
	var rest msgPage
	if err := jsonUnmarshal(e.do("GET", base+"/message?after="+itoa(first.Data[0].Seq), nil).want(t, http.StatusOK).body, &rest); err != nil {
		t.Fatal(err)
	}
	if len(rest.Data) != 3 || rest.Data[0].Role != "assistant" {
		t.Fatalf("rest %+v", rest)
	}

	for _, route := range []string{"/history", "/message"} {
		for q, param := range map[string]string{
			"limit=0": "limit", "limit=101": "limit", "limit=abc": "limit", "limit=": "limit", "limit=1&limit=2": "limit",
			"after=-2": "after", "after=x": "after", "after=1.5": "after", "after=99999999999999999999": "after",
		} {
			m := e.do("GET", base+route+"?"+q, nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
			if !strings.HasPrefix(m.Message, param+":") {
				t.Errorf("%s?%s: message %q does not name %s", route, q, m.Message, param)
			}
		}
		e.do("GET", base+route+"?limit=100&after=-1", nil).want(t, http.StatusOK)
		e.do("GET", "/api/session/ses_missing"+route, nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	}
}

func TestInstructionEntries(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	base := "/api/session/" + string(sid) + "/instruction"
	e.do("PUT", base+"/style", map[string]string{"text": "Be brief."}).want(t, http.StatusNoContent)
	e.do("PUT", base+"/empty", map[string]string{"text": ""}).want(t, http.StatusNoContent)
	got := dataOf[map[string]string](t, e.do("GET", base, nil))
	if len(got) != 2 || got["style"] != "Be brief." {
		t.Fatalf("entries %v", got)
	}
	entries, err := e.store.Entries(context.Background(), sid)
	if err != nil || entries["style"] != "Be brief." {
		t.Fatalf("store entries %v %v", entries, err)
	}
	e.do("DELETE", base+"/style", nil).want(t, http.StatusNoContent)
	e.do("DELETE", base+"/style", nil).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	if got := dataOf[map[string]string](t, e.do("GET", base, nil)); len(got) != 1 {
		t.Fatalf("entries after delete %v", got)
	}

	e.do("PUT", base+"/style", map[string]string{}).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	e.do("PUT", base+"/style", `{"text":1}`).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	e.do("PUT", base+"/"+strings.Repeat("k", 201), map[string]string{"text": "x"}).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	e.do("PUT", "/api/session/ses_missing/instruction/k", map[string]string{"text": "x"}).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("DELETE", "/api/session/ses_missing/instruction/k", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("GET", "/api/session/ses_missing/instruction", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newHarnessEnv(t, nil)
	e.do("GET", "/api/nope", nil).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	e.do("GET", "/", nil).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	// The dedicated init route is gone (SEED.md): initialization is part
	// of the first drain.
	sid := e.createSession()
	e.do("POST", "/api/session/"+string(sid)+"/init", nil).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	r := e.do("DELETE", "/api/session", nil)
	r.wantError(t, http.StatusMethodNotAllowed, errMethodNotAllowed)
	if allow := r.header.Get("Allow"); allow != "GET, HEAD, POST" {
		t.Fatalf("Allow %q", allow)
	}
	r = e.do("GET", "/api/session/ses_x/prompt", nil)
	r.wantError(t, http.StatusMethodNotAllowed, errMethodNotAllowed)
	if allow := r.header.Get("Allow"); allow != "POST" {
		t.Fatalf("Allow %q", allow)
	}
	r = e.do("POST", "/api/session/ses_x/instruction/k", nil)
	r.wantError(t, http.StatusMethodNotAllowed, errMethodNotAllowed)
	if allow := r.header.Get("Allow"); allow != "PUT, DELETE" {
		t.Fatalf("Allow %q", allow)
	}
}

// goTerms matches what a message describing a body must not contain: Go
// type names ("persistence.CreateSession", "[]messages.File", "int64") and
// the decoder's "json:" prefix. Clients know their JSON, not our types.
var goTerms = regexp.MustCompile(`\b(persistence|messages|tools|httpapi|actors|llm)\.\w|\[\][\w*]|map\[|\b(u?int(8|16|32|64)?|float(32|64)|struct|interface)\b|\bwant (string|bool)\b|\bjson: `)

// TestBodyErrorsDescribeJSON: a body, or a field of it, of the wrong JSON
// type is 400 invalid naming the field and the JSON wanted, on every route
// that takes a body, and no message names a Go type.
func TestBodyErrorsDescribeJSON(t *testing.T) {
	pending := tools.NewPending(tools.PendingConfig{})
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Pending = pending })
	sid := e.createSession()
	base := "/api/session/" + string(sid)
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/api/session", `[]`, "body: want a JSON object, got an array"},
		{"POST", "/api/session", `"x"`, "body: want a JSON object, got a string"},
		{"POST", "/api/session", `{"location":[]}`, "location: want a JSON object, got an array"},
		{"POST", "/api/session", `{"location":{"directory":5}}`, "location.directory: want a string, got a number"},
		{"POST", "/api/session", `{"location":{"directory":"/x"},"model":"p/m"}`, "model: want a JSON object, got a string"},
		{"POST", "/api/session", `{"location":{"directory":"/x"},"id":true}`, "id: want a string, got a boolean"},
		{"POST", "/api/session", `{"location":{"directory":"/x"},"nope":1}`, `body: unknown field "nope"`},
		{"POST", "/api/session", `{"location":{"directory":"/x"},"id":"x"}`, `id: want "ses_" followed by 1 to 64 characters, got "x"`},
		{"POST", base + "/prompt", `[]`, "body: want a JSON object, got an array"},
		{"POST", base + "/prompt", `{"prompt":{"text":"a","files":{}}}`, "prompt.files: want a JSON array, got an object"},
		{"POST", base + "/prompt", `{"prompt":{"text":"a","files":[5]}}`, "prompt.files: want a JSON object, got a number"},
		{"POST", base + "/prompt", `{"prompt":{"text":"a"},"resume":"yes"}`, "resume: want true or false, got a string"},
		{"POST", base + "/agent", `[]`, "body: want a JSON object, got an array"},
		{"POST", base + "/model", `[]`, "body: want a JSON object, got an array"},
		{"POST", base + "/model", `{"providerID":1,"id":"m"}`, "providerID: want a string, got a number"},
		{"POST", base + "/move", `[]`, "body: want a JSON object, got an array"},
		{"POST", base + "/move", `{"location":"/x"}`, "location: want a JSON object, got a string"},
		{"PUT", base + "/instruction/k", `[]`, "body: want a JSON object, got an array"},
		{"PUT", base + "/instruction/k", `{"text":["a"]}`, "text: want a string, got an array"},
		{"POST", "/api/permission/per_x/reply", `[]`, "body: want a JSON object, got an array"},
		{"POST", "/api/permission/per_x/reply", `{"reply":1}`, "reply: want a string, got a number"},
	} {
		m := e.do(tc.method, tc.path, tc.body).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if m.Message != tc.want {
			t.Errorf("%s %s %s: message %q, want %q", tc.method, tc.path, tc.body, m.Message, tc.want)
		}
		if goTerms.MatchString(m.Message) {
			t.Errorf("%s %s %s: message %q names a Go type", tc.method, tc.path, tc.body, m.Message)
		}
	}
}

// TestBodiesMustBeUTF8: a body with a byte that is not UTF-8 is refused
// on every route that takes one, and nothing is written: decoded, the byte
// would have become U+FFFD, a title, prompt or entry other than the one
// sent.
func TestBodiesMustBeUTF8(t *testing.T) {
	pending := tools.NewPending(tools.PendingConfig{})
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Pending = pending })
	sid := e.createSession()
	base := "/api/session/" + string(sid)
	dir := t.TempDir()
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/api/session", `{"location":{"directory":"` + dir + `"},"title":"caf` + "\xe9" + `"}`},
		{"POST", base + "/prompt", `{"prompt":{"text":"caf` + "\xe9" + `"},"resume":false}`},
		{"POST", base + "/agent", `{"agent":"build` + "\xff" + `"}`},
		{"POST", base + "/model", `{"providerID":"p","id":"m` + "\xff" + `"}`},
		{"POST", base + "/move", `{"location":{"directory":"` + dir + "\xff" + `"}}`},
		{"PUT", base + "/instruction/k", `{"text":"caf` + "\xe9" + `"}`},
		{"POST", "/api/permission/per_x/reply", `{"reply":"reject","message":"` + "\xff" + `"}`},
	} {
		m := e.do(tc.method, tc.path, tc.body).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, "body: not valid UTF-8") {
			t.Errorf("%s %s: message %q", tc.method, tc.path, m.Message)
		}
	}
	if list := dataOf[[]persistence.Session](t, e.do("GET", "/api/session", nil)); len(list) != 1 {
		t.Errorf("sessions after the refused create: %+v", list)
	}
	if evs := e.allEvents(sid); len(evs) != 1 {
		t.Errorf("history after the refused bodies: %v, want only the creation", types(evs))
	}
	if got := dataOf[map[string]string](t, e.do("GET", base+"/instruction", nil)); len(got) != 0 {
		t.Errorf("entries after the refused PUT: %v", got)
	}
}

// TestNonCanonicalPaths: a path ServeMux would redirect to its clean form
// is answered as no route, 404 with a JSON error and no redirect, before
// and after authentication alike.
func TestNonCanonicalPaths(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	raw := func(e *env, method, target, auth string) (int, http.Header, []byte) {
		t.Helper()
		c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: 0\r\nConnection: close\r\n\r\n", method, target, auth)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, res.Header, b
	}
	for _, target := range []string{
		"//api/session", "/api//session", "/api/./session", "/api/x/../session", "/api/session/",
		"//api/health", "/api/session/" + string(sid) + "/../" + string(sid), "/api/session/" + string(sid) + "/log/.",
		"/api/session/x%2F..%2F" + string(sid), "/api/session?x=/../", "//", "/./",
	} {
		for _, method := range []string{"GET", "POST"} {
			status, h, body := raw(e, method, target, "")
			r := reply{status: status, header: h, body: body}
			if target == "/api/session?x=/../" {
				// The query is not part of the path: this is the route.
				if status == http.StatusNotFound {
					t.Errorf("%s %s: %d %s", method, target, status, body)
				}
				continue
			}
			if strings.Contains(target, "%2F") {
				// An escaped slash is part of the ID: the path is the
				// route of one Session, whose ID is malformed.
				if method == "GET" {
					r.wantError(t, http.StatusBadRequest, messages.ErrInvalid)
				} else {
					r.wantError(t, http.StatusMethodNotAllowed, errMethodNotAllowed)
				}
				continue
			}
			if m := r.wantError(t, http.StatusNotFound, messages.ErrNotFound); !strings.Contains(m.Message, "canonical") && target != "/api/session/" {
				t.Errorf("%s %s: message %q", method, target, m.Message)
			}
			if loc := h.Get("Location"); loc != "" {
				t.Errorf("%s %s: redirected to %s", method, target, loc)
			}
		}
	}
	// With a token, the token comes first, as for any unknown route.
	tok := newHarnessEnv(t, func(c *ServerConfig) { c.API.Token = "tok" })
	status, h, body := raw(tok, "GET", "//api/session", "")
	reply{status: status, header: h, body: body}.wantError(t, http.StatusUnauthorized, messages.ErrUnauthorized)
	status, h, body = raw(tok, "GET", "//api/session", "Authorization: Bearer tok\r\n")
	reply{status: status, header: h, body: body}.wantError(t, http.StatusNotFound, messages.ErrNotFound)
}

func TestInternalErrorsHideDetails(t *testing.T) {
	b := storeBackend(t, persistence.Options{NoSync: true})
	e := newEnv(t, b, nil)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	m := e.do("GET", "/api/session", nil).wantError(t, http.StatusInternalServerError, messages.ErrInternal)
	if !strings.Contains(m.Message, "ref 1") || strings.Contains(m.Message, "database") || strings.Contains(m.Message, "bolt") {
		t.Fatalf("500 message %q", m.Message)
	}
}

// TestAbandonedWaitEnds checks that a wait whose client leaves ends at
// once, even when the client sent a body (which net/http must read before
// it notices the connection close): abandoned long polls must not pile up.
func TestAbandonedWaitEnds(t *testing.T) {
	var logs syncLog
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel) })
	g := script.NewGate()
	e.model.Reply(script.Hold(g), script.Text("late"))
	defer g.Release()
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "take your time"}})
	if err := g.Reached(e.h.Ctx()); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/session/" + string(sid) + "/wait"
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", path)
	c.Close()
	deadline := time.Now().Add(actortest.Timeout)
	for !strings.Contains(logs.String(), `"path":"`+path+`"`) {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned wait is still running")
		}
		time.Sleep(5 * time.Millisecond) // polling the log, not synchronisation
	}
}

// syncLog is a log sink safe for the server's goroutines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBackupRoute: GET /api/backup streams a copy of the store with its
// length, and the copy opens as a store of its own holding the Session's
// whole log; a store without backups answers 500.
func TestBackupRoute(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "hi"}})
	e.waitIdle(sid)
	want := e.allEvents(sid)

	r := e.do("GET", "/api/backup", nil).want(t, http.StatusOK)
	if ct, cl := r.header.Get("Content-Type"), r.header.Get("Content-Length"); ct != "application/octet-stream" || cl != itoa(int64(len(r.body))) {
		t.Fatalf("Content-Type %q, Content-Length %q for %d bytes", ct, cl, len(r.body))
	}
	if cd := r.header.Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="sessiond-`) {
		t.Fatalf("Content-Disposition %q", cd)
	}
	path := filepath.Join(t.TempDir(), "sessiond.db")
	if err := os.WriteFile(path, r.body, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.History(context.Background(), sid, persistence.Query{After: -1, Limit: 100})
	if err != nil || len(page.Data) != len(want) || page.Data[len(want)-1].ID != want[len(want)-1].ID {
		t.Fatalf("the copy's log: %d events (%v), want %d", len(page.Data), err, len(want))
	}

	// HEAD makes no copy, so its answer has no length.
	if r := e.do("HEAD", "/api/backup", nil).want(t, http.StatusOK); r.header.Get("Content-Length") != "" {
		t.Fatalf("HEAD: Content-Length %q, want none", r.header.Get("Content-Length"))
	}

	failed := newEnv(t, harnessBackend(t, actortest.Options{Config: func(c *actors.Config) { c.Store = failedStore{c.Store} }}), nil)
	failed.do("GET", "/api/backup", nil).wantError(t, http.StatusInternalServerError, messages.ErrInternal)
}

// TestPluralPathHint: a path with plural nouns that names a route in the
// singular gets a 404 that says which path was meant; one that names no
// route either way, or the singular path with a method it lacks, gets no
// guess.
func TestPluralPathHint(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	for _, c := range []struct{ method, path, hint string }{
		{"GET", "/api/sessions", "/api/session"},
		{"POST", "/api/sessions", "/api/session"},
		{"GET", "/api/sessions/" + string(sid) + "/messages", "/api/session/" + string(sid) + "/message"},
		{"POST", "/api/sessions/" + string(sid) + "/prompts", "/api/session/" + string(sid) + "/prompt"},
		{"DELETE", "/api/sessions", ""}, // no DELETE /api/session either
		{"GET", "/api/permissions", "/api/permission"},
		{"GET", "/api/events", "/api/event"},
		{"GET", "/api/nothings", ""},
		{"GET", "/api/nothing", ""},
	} {
		m := e.do(c.method, c.path, nil).wantError(t, http.StatusNotFound, messages.ErrNotFound)
		want := "no route for " + c.method + " " + c.path
		if c.hint != "" {
			want += "; did you mean " + c.hint + "?"
		}
		if m.Message != want {
			t.Errorf("%s %s: message %q, want %q", c.method, c.path, m.Message, want)
		}
	}
	// The real route is untouched by the guessing.
	e.do("GET", "/api/session/"+string(sid), nil).want(t, http.StatusOK)
}

// TestPostWithoutBodyRefusesOne: the POST routes that take no body
// (resume, compact, wait, interrupt) refuse one with 400 and do nothing,
// so a prompt posted to /resume is not taken for a resume; nothing, white
// space or an empty object (which some clients send with every POST) is
// no body.
func TestPostWithoutBodyRefusesOne(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	base := "/api/session/" + string(sid)
	for _, op := range []string{"resume", "compact", "wait", "interrupt"} {
		for _, body := range []string{`{"prompt":{"text":"hi"}}`, `garbage`, `[]`, `null`, `{"x":1}`} {
			m := e.do("POST", base+"/"+op, body).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
			if want := "body: POST " + base + "/" + op + " takes no body"; !strings.HasPrefix(m.Message, want) {
				t.Errorf("%s %s: message %q, want it to start %q", op, body, m.Message, want)
			}
		}
		if op == "compact" || op == "resume" {
			continue // these start work; the refused ones must not have
		}
		for _, body := range []string{"", " \n", "{}", " { } "} {
			e.do("POST", base+"/"+op, body).want(t, http.StatusNoContent)
		}
	}
	// Nothing the refused requests asked for happened: no compaction was
	// admitted, no execution started.
	h := e.do("GET", base+"/history", nil)
	h.want(t, http.StatusOK)
	for _, typ := range []string{messages.TypeCompactionAdmitted, messages.TypeExecutionStarted} {
		if strings.Contains(string(h.body), `"`+typ+`"`) {
			t.Errorf("a refused request left %s in the log: %s", typ, h.body)
		}
	}
}

// TestAfterOutOfRange: a cursor past 64 bits is said to be out of range,
// not to be no integer.
func TestAfterOutOfRange(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	m := e.do("GET", "/api/session/"+string(sid)+"/history?after=99999999999999999999", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	if want := `after: "99999999999999999999" is out of range (seqs fit in 64 bits)`; m.Message != want {
		t.Errorf("message %q, want %q", m.Message, want)
	}
}

// TestUnusableDirectoryIsOneMessage: a Location directory that does not
// exist, or is a file, is refused in the same words whether the server
// has roots (it resolves the directory itself) or not (the Location is
// built): they had said "lstat …: no such file or directory" and
// "\"…\" does not exist" for one mistake.
func TestUnusableDirectoryIsOneMessage(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "missing")
	for _, roots := range [][]string{nil, {root}} {
		e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Roots = roots })
		for dir, want := range map[string]string{
			missing: fmt.Sprintf("location.directory: %q does not exist", missing),
			file:    fmt.Sprintf("location.directory: %q is not a directory", file),
		} {
			body := map[string]any{"location": map[string]string{"directory": dir}}
			if m := e.do("POST", "/api/session", body).wantError(t, http.StatusBadRequest, messages.ErrInvalid); m.Message != want {
				t.Errorf("roots %v, %s: message %q, want %q", roots, dir, m.Message, want)
			}
		}
	}
}

// TestUnknownQueryParameterIsRefused: a query parameter the route does not
// take is 400 invalid, naming it and what the route takes. Ignored, a
// misspelled filter (sessionId for sessionID) widened /api/event to every
// Session's events, and history's "limt" gave a page of the default size.
// The public routes, which health checkers and scrapers call, take any.
func TestUnknownQueryParameterIsRefused(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := string(e.createSession())
	for path, want := range map[string]string{
		"/api/event?sessionId=" + sid:                          `query: unknown parameter "sessionId": GET /api/event did you mean sessionID? (names are case-sensitive)`,
		"/api/session/" + sid + "/history?limt=5":              `query: unknown parameter "limt": GET /api/session/{id}/history takes after, limit`,
		"/api/session/" + sid + "/log?after=0&z=1&follow=true": `query: unknown parameter "z": GET /api/session/{id}/log takes after, follow, live`,
		"/api/session?x=1&a=2":                                 `query: unknown parameter "a": GET /api/session takes no query parameters`,
	} {
		if m := e.do("GET", path, nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid); m.Message != want {
			t.Errorf("GET %s: %q, want %q", path, m.Message, want)
		}
	}
	e.do("GET", "/api/health?probe=1", nil).want(t, http.StatusOK)
	e.do("GET", "/api/session/"+sid+"/history?after=0&limit=5", nil).want(t, http.StatusOK)
}
