package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestReadsDoNotQueueBehindExecution: DESIGN.md §3, reads (get, history,
// log, messages) go straight to the read-side store and never queue behind
// execution. Here the Session's commands are held: a move waits for the
// busy period it supersedes, which a stuck tool keeps from settling, so
// the router holds every command for the Session until it settles. Every
// read still answers at once, with what the log holds so far; a read
// routed through the Session's actor, or one that waited for execution,
// would answer only after the tool is released.
func TestReadsDoNotQueueBehindExecution(t *testing.T) {
	e, tool, sid := stuckSession(t)
	select {
	case <-tool.entered:
	case <-e.h.Ctx().Done():
		t.Fatal("the tool never ran")
	}
	dest := t.TempDir()
	moved := make(chan reply, 1)
	go func() {
		r, err := e.try("POST", "/api/session/"+string(sid)+"/move", map[string]any{"location": map[string]string{"directory": dest}})
		if err != nil {
			t.Error(err)
		}
		moved <- r
	}()
	select {
	case <-tool.cancelled: // the move reached the Session and superseded its busy period
	case <-e.h.Ctx().Done():
		t.Fatal("the move never reached the Session")
	}

	base := "/api/session/" + string(sid)
	if s := dataOf[persistence.Session](t, e.do("GET", base, nil)); s.ID != sid {
		t.Fatalf("GET session: %+v", s)
	}
	page := pageOf(t, e.do("GET", base+"/history?limit=100", nil))
	if !slices.ContainsFunc(page.Data, func(ev messages.Event) bool { return ev.Type == messages.TypeToolCalled }) {
		t.Fatalf("history during the held move lacks the tool call: %d events", len(page.Data))
	}
	if r := e.do("GET", base+"/message", nil).want(t, http.StatusOK); !strings.Contains(string(r.body), `"role":"assistant"`) {
		t.Fatalf("messages during the held move: %s", r.body)
	}
	if r := e.do("GET", base+"/log", nil).want(t, http.StatusOK); !strings.Contains(string(r.body), messages.TypeLogSynced) {
		t.Fatalf("log during the held move has no log.synced marker: %s", r.body)
	}
	select {
	case r := <-moved:
		t.Fatalf("the move answered (%d %s) before the stuck tool returned; the reads above were not made while it was held", r.status, r.body)
	default:
	}

	tool.release()
	(<-moved).want(t, http.StatusOK)
	e.h.WaitIdle(sid)
}
