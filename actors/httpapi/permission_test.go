package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

func TestPermissionRoutes(t *testing.T) {
	b := harnessBackend(t)
	bus := b.rt.Bus()
	now := func() int64 { return b.h.Clock.Now().UnixMilli() }
	ids := messages.NewIDs(nil, nil)
	pending := tools.NewPending(tools.PendingConfig{
		OnAsked: func(p *messages.PermissionAsked) {
			bus.Publish(messages.Event{ID: ids.Event(), Created: now(), Type: p.Type(), Data: p})
		},
		OnReplied: func(p *messages.PermissionReplied) {
			bus.Publish(messages.Event{ID: ids.Event(), Created: now(), Type: p.Type(), Data: p})
		},
	})
	e := newEnv(t, b, func(c *ServerConfig) { c.API.Pending = pending })
	sid := e.createSession()
	if got := dataOf[[]tools.Request](t, e.do("GET", "/api/permission", nil)); len(got) != 0 {
		t.Fatalf("pending before any ask: %v", got)
	}

	live := e.stream("/api/event?sessionID=" + string(sid))
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	answers := make(chan tools.Answer, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, pattern := range []string{"ls", "rm -rf /"} {
		wg.Go(func() {
			a, err := pending.Ask(ctx, tools.Request{SessionID: sid, Permission: "bash", Patterns: []string{pattern}})
			if err != nil {
				t.Error(err)
			}
			answers <- a
		})
	}
	asked := map[string]string{}
	for len(asked) < 2 {
		ev := live.nextData().event(t)
		if p, ok := ev.Data.(*messages.PermissionAsked); ok {
			asked[p.Patterns[0]] = p.RequestID
		}
	}
	list := dataOf[[]tools.Request](t, e.do("GET", "/api/permission", nil))
	if len(list) != 2 || list[0].Permission != "bash" || list[0].SessionID != sid {
		t.Fatalf("pending %+v", list)
	}
	// sessionID filters the list: another Session has none waiting; an
	// unknown or malformed one is refused, as on /api/event.
	if got := dataOf[[]tools.Request](t, e.do("GET", "/api/permission?sessionID="+string(sid), nil)); len(got) != 2 {
		t.Fatalf("pending of %s: %+v", sid, got)
	}
	other := e.createSession()
	if got := dataOf[[]tools.Request](t, e.do("GET", "/api/permission?sessionID="+string(other), nil)); len(got) != 0 {
		t.Fatalf("pending of another Session: %+v", got)
	}
	e.do("GET", "/api/permission?sessionID=ses_0000000000000000000000000", nil).wantError(t, http.StatusNotFound, messages.ErrSessionNotFound)
	e.do("GET", "/api/permission?sessionID=nope", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)

	ls := asked["ls"]
	reply := "/api/permission/" + ls + "/reply"
	for body, field := range map[string]string{`{"reply":"maybe"}`: "reply", `{}`: "reply", `{"reply":"once","x":1}`: "body", `{"reply":`: "body"} {
		m := e.do("POST", reply, body).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if len(m.Message) < len(field) || m.Message[:len(field)] != field {
			t.Errorf("%s: message %q does not name %s", body, m.Message, field)
		}
	}
	e.do("POST", "/api/permission/per_unknown/reply", map[string]string{"reply": "once"}).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	e.do("POST", reply, map[string]string{"reply": "once", "message": "fine"}).want(t, http.StatusNoContent)
	e.do("POST", reply, map[string]string{"reply": "once"}).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	e.do("POST", "/api/permission/"+asked["rm -rf /"]+"/reply", map[string]string{"reply": "reject", "message": "no"}).want(t, http.StatusNoContent)

	got := map[tools.Reply]string{}
	for range 2 {
		a := <-answers
		got[a.Reply] = a.Message
	}
	if got[tools.Once] != "fine" || got[tools.Reject] != "no" {
		t.Fatalf("answers %v", got)
	}
	// The replies reach the live stream too.
	for n := 0; n < 2; {
		if _, ok := live.nextData().event(t).Data.(*messages.PermissionReplied); ok {
			n++
		}
	}
	if list := dataOf[[]tools.Request](t, e.do("GET", "/api/permission", nil)); len(list) != 0 {
		t.Fatalf("pending after replies %+v", list)
	}
}

// Without a Pending broker nothing is ever pending.
func TestPermissionWithoutBroker(t *testing.T) {
	e := newHarnessEnv(t, nil)
	if got := dataOf[[]tools.Request](t, e.do("GET", "/api/permission", nil)); len(got) != 0 {
		t.Fatalf("pending %v", got)
	}
	m := e.do("POST", "/api/permission/per_x/reply", map[string]string{"reply": "always"}).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	if !strings.Contains(m.Message, "per_x") {
		t.Fatalf("message %q", m.Message)
	}
}

// TestPermissionReplyIDs: a malformed request ID is the client's mistake,
// 400 invalid naming requestID, while a well-formed one no question waits
// under is 404. A question a caller asked under an ID of its own choosing
// (Ask keeps it) is still answered, whatever its shape.
func TestPermissionReplyIDs(t *testing.T) {
	pending := tools.NewPending(tools.PendingConfig{})
	e := newHarnessEnv(t, func(c *ServerConfig) { c.API.Pending = pending })
	once := map[string]string{"reply": "once"}
	for _, id := range []string{"nope", "per_", "per_a.b", "PER_1", "per_" + strings.Repeat("x", 65), "per_%20"} {
		m := e.do("POST", "/api/permission/"+id+"/reply", once).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
		if !strings.HasPrefix(m.Message, "requestID:") {
			t.Errorf("%s: message %q does not name requestID", id, m.Message)
		}
	}
	e.do("POST", "/api/permission/per_01HZX0000000000000000000/reply", once).wantError(t, http.StatusNotFound, messages.ErrNotFound)
	// Without a broker the same holds.
	bare := newHarnessEnv(t, nil)
	bare.do("POST", "/api/permission/nope/reply", once).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
	bare.do("POST", "/api/permission/per_x/reply", once).wantError(t, http.StatusNotFound, messages.ErrNotFound)

	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	answered := make(chan tools.Answer, 1)
	go func() {
		a, err := pending.Ask(ctx, tools.Request{ID: "ask.1", SessionID: "ses_x", Permission: "bash", Patterns: []string{"ls"}})
		if err != nil {
			t.Error(err)
		}
		answered <- a
	}()
	eventually(t, "the question", func() bool { return len(pending.List()) == 1 })
	e.do("POST", "/api/permission/ask.1/reply", once).want(t, http.StatusNoContent)
	if a := <-answered; a.Reply != tools.Once {
		t.Fatalf("answer %+v", a)
	}
}
