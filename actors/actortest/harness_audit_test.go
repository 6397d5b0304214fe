package actortest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// answeredHello runs the package documentation's example: a Session
// prompted "hello" that the model answered "hi".
func answeredHello(t *testing.T) (*actortest.Harness, messages.SessionID) {
	t.Helper()
	h := actortest.New(t)
	h.Model.Reply(script.Text("hi"))
	sid := h.Session()
	h.Prompt(sid, "hello")
	h.WaitIdle(sid)
	return h, sid
}

// TestPackageExample runs the package documentation's example as
// written, and checks what its last line reads.
func TestPackageExample(t *testing.T) {
	h, sid := answeredHello(t)
	types := h.Types(sid)
	want := []string{"session.created", "session.prompt.admitted", "session.execution.started", "session.prompt.promoted",
		"session.step.started", "session.text.started", "session.text.ended", "session.step.ended", "session.execution.succeeded"}
	if !slices.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
}

// TestOfTypeTakesTheNamesTypesPrints: OfType matches a type named as
// Types prints it (without ".1") as well as in full. It compared the full
// string only, so OfType("session.text.ended"), copied from a Types
// listing, matched nothing, and WaitEvent waited out its whole Timeout
// for an event that was in the log.
func TestOfTypeTakesTheNamesTypesPrints(t *testing.T) {
	h, sid := answeredHello(t)
	evs := h.Events(sid)
	for i, name := range h.Types(sid) {
		if !actortest.OfType(name)(evs[i]) || !actortest.OfType(evs[i].Type)(evs[i]) {
			t.Fatalf("OfType(%q) or OfType(%q) does not match event %d (%s)", name, evs[i].Type, i, evs[i].Type)
		}
	}
	if actortest.OfType("session.text")(evs[len(evs)-1]) || actortest.OfType("session.text.ended")(evs[0]) {
		t.Fatal("OfType matches another type")
	}
}

// TestWaitIdleSaysWhyTheRuntimeRefused: a wait the runtime refuses at
// once (it is shutting down) fails with the runtime's reason, not with
// "still busy after 30s" and a hint about the fake clock: nothing waited,
// and nothing may have run.
func TestWaitIdleSaysWhyTheRuntimeRefused(t *testing.T) {
	h := actortest.New(t)
	sid := h.Session()
	if err := h.Runtime.Shutdown(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	msg := fatal(t, h, func() { h.WaitIdle(sid) })
	if !strings.Contains(msg, "WaitIdle("+string(sid)+")") || !strings.Contains(msg, "shutting down") || strings.Contains(msg, "still busy") {
		t.Fatalf("WaitIdle on a stopped runtime: %q", msg)
	}
	if last := h.Types(sid); !slices.Equal(last, []string{"session.created"}) {
		t.Fatalf("types %v", last)
	}
}
