package httpapi

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/persistence"
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

// watchedBackups is a store whose backups report when their copy is
// first read and when it is closed (removed).
type watchedBackups struct {
	persistence.Store
	read, closed chan struct{}
}

func (s watchedBackups) Backup(ctx context.Context) (io.ReadCloser, int64, error) {
	rc, n, err := s.Store.(backupStore).Backup(ctx)
	if err != nil {
		return nil, 0, err
	}
	return &watchedCopy{ReadCloser: rc, s: s}, n, nil
}

type watchedCopy struct {
	io.ReadCloser
	s          watchedBackups
	read, shut sync.Once
}

func (c *watchedCopy) Read(p []byte) (int, error) {
	c.read.Do(func() { close(c.s.read) })
	return c.ReadCloser.Read(p)
}

func (c *watchedCopy) Close() error {
	c.shut.Do(func() { close(c.s.closed) })
	return c.ReadCloser.Close()
}

// TestStalledBackupClientIsCutOff: a client that stops reading a backup
// (without closing its connection) no longer holds the handler and the
// copy, a file the size of the store, for as long as the connection
// lives: the write timeout of streams ends it.
func TestStalledBackupClientIsCutOff(t *testing.T) {
	watched := watchedBackups{read: make(chan struct{}), closed: make(chan struct{})}
	b := harnessBackend(t, actortest.Options{Config: func(c *actors.Config) {
		watched.Store = c.Store
		c.Store = watched
	}})
	ctx, cancel, done := getStalled(t, b.rt, 50*time.Millisecond, "/api/backup")
	<-watched.read
	select {
	case <-watched.closed:
	case <-ctx.Done():
		t.Fatal("a stalled backup client held its copy")
	}
	cancel()
	<-done
}

// getStalled serves rt with the given write timeout to a client that
// sends GET path and then reads nothing of the answer (without closing its
// connection). done is closed once the request failed or its headers came;
// ctx, which cancel ends, bounds the wait at actortest.Timeout.
func getStalled(t *testing.T, rt *actors.Runtime, timeout time.Duration, path string) (ctx context.Context, cancel context.CancelFunc, done <-chan struct{}) {
	t.Helper()
	l := serveStalling(t, Config{Runtime: rt, Logger: zerolog.Nop(), StreamWriteTimeout: timeout})
	l.stalled.Store(true)
	ctx, cancel = context.WithTimeout(context.Background(), actortest.Timeout)
	t.Cleanup(cancel)
	return ctx, cancel, getInBackground(t, ctx, "http://"+l.Addr().String()+path)
}

// getInBackground sends GET url on a connection of its own and returns a
// channel closed once the answer's headers came (its body is closed
// unread) or the request failed, such as when ctx ends.
func getInBackground(t *testing.T, ctx context.Context, url string) <-chan struct{} {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	return done
}

// TestStalledJSONClientIsCutOff: a client that sends a request and then
// reads nothing of an ordinary JSON answer (without closing its
// connection) no longer holds the handler's goroutine and the connection
// for as long as the connection lives: the answer gets the write timeout
// once it starts, and the server closes the connection when it passes.
func TestStalledJSONClientIsCutOff(t *testing.T) {
	b := harnessBackend(t)
	ctx, _, done := getStalled(t, b.rt, 50*time.Millisecond, "/api/session")
	select {
	case <-done:
		if ctx.Err() != nil {
			t.Fatal("the stalled answer was never cut off")
		}
	case <-ctx.Done():
		t.Fatal("the stalled answer was never cut off")
	}
}
