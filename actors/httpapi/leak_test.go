package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/locations/llm/script"
)

// TestStreamAndWaitCyclesLeaveNothing drives many clients through the
// routes a daemon's clients come and go on while a Session is busy: a log
// follower and a live event subscriber that each leave after the first
// message, and a wait abandoned mid-request. Once they are gone the
// store's tails, the bus's subscribers and the goroutines are back where
// they started, however many cycles ran.
func TestStreamAndWaitCyclesLeaveNothing(t *testing.T) {
	e := newHarnessEnv(t, nil)
	g := script.NewGate()
	e.model.Reply(script.Hold(g), script.Text("done"))
	sid := e.createSession()
	e.prompt(sid, map[string]any{"prompt": map[string]string{"text": "long"}})
	if err := g.Reached(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr := e.client.Transport.(*http.Transport)
	tr.CloseIdleConnections()
	before := goleak.IgnoreCurrent()
	const cycles = 100
	for range cycles {
		s := e.stream("/api/session/" + string(sid) + "/log?follow=true")
		readLog(t, s)
		s.close()
		s = e.stream("/api/event?sessionID=" + string(sid))
		s.close()
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, "POST", e.base+"/api/session/"+string(sid)+"/wait", nil)
		if err != nil {
			t.Fatal(err)
		}
		// The wait is abandoned once the server holds it: a reply never
		// comes while the model holds, so the client gives up.
		time.AfterFunc(time.Millisecond, cancel)
		if resp, err := e.client.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("wait answered %d while the Session was busy", resp.StatusCode)
		}
		cancel()
	}
	eventually(t, "every stream to end", func() bool {
		return e.store.Tails() == 0 && e.rt.Bus().Subscribers() == 0
	})
	tr.CloseIdleConnections()
	if err := goleak.Find(before); err != nil {
		t.Fatalf("%d cycles left goroutines: %v", cycles, err)
	}
	g.Release()
	e.waitIdle(sid)
}
