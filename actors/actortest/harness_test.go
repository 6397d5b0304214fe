package actortest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recTB records the fatal message of a harness helper run on its own
// goroutine.
type recTB struct {
	testing.TB
	msg string
}

func (r *recTB) Fatal(args ...any) { r.msg = fmt.Sprint(args...); runtime.Goexit() }
func (r *recTB) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recTB) Helper() {}

// fatal runs f with h reporting to a recorder, and returns what f failed
// with ("" when it did not fail).
func fatal(t *testing.T, h *actortest.Harness, f func()) string {
	rec := &recTB{TB: t}
	h.T = rec
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	<-done
	h.T = t
	return rec.msg
}

// TestWaitIdleOfAnUnknownSession: a mistyped Session fails the test at
// once, naming it (the runtime's Wait treats an unknown Session as idle,
// so the test went on as if it had run).
func TestWaitIdleOfAnUnknownSession(t *testing.T) {
	h := actortest.New(t)
	msg := fatal(t, h, func() { h.WaitIdle("ses_0000000000000000000000000") })
	if !strings.Contains(msg, "WaitIdle(ses_0000000000000000000000000)") || !strings.Contains(msg, "not-found") {
		t.Fatalf("WaitIdle of an unknown Session: %q", msg)
	}
}

// TestRestartOnTheSameStore: Close stops one harness, and another opened
// on its store file goes on with its Sessions.
func TestRestartOnTheSameStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessiond.db")
	h := actortest.New(t, actortest.Options{StorePath: path})
	h.Model.Reply(script.Text("before"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	h.Close()
	h.Close() // once

	h2 := actortest.New(t, actortest.Options{StorePath: path})
	h2.Model.Reply(script.Text("after"))
	h2.Prompt(sid, "two")
	h2.WaitIdle(sid)
	if got := h2.Types(sid); got[len(got)-1] != "session.execution.succeeded" || h2.Model.Count() != 1 {
		t.Fatalf("after the restart: %v", got)
	}
}

// TestServicesBeforeTheSession: a change to Services before the Session
// is created serves its Location.
func TestServicesBeforeTheSession(t *testing.T) {
	h := actortest.New(t)
	other := script.New()
	other.Reply(script.Text("from the replacement"))
	h.Services.Provider = func(string) (llm.Provider, error) { return other, nil }
	sid := h.Session()
	h.Prompt(sid, "hello")
	h.WaitIdle(sid)
	ended := h.WaitEvent(sid, actortest.OfType(messages.TypeTextEnded))
	if p := ended.Data.(*messages.TextEnded); p.Text != "from the replacement" || h.Model.Count() != 0 {
		t.Fatalf("answered %q", p.Text)
	}
}

// TestLogSyncsCountsTheStoresFdatasyncs: with Sync, each commit a step
// makes durable is one fdatasync of the log that LogSyncs counts and
// times; without it the log is never synced.
func TestLogSyncsCountsTheStoresFdatasyncs(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprint("Sync=", sync), func(t *testing.T) {
			h := actortest.New(t, actortest.Options{Sync: sync})
			h.Model.Reply(script.Text("hi"))
			sid := h.Session()
			h.Prompt(sid, "hello")
			h.WaitIdle(sid)
			n, took := h.LogSyncs()
			switch {
			case sync && (n < 2 || n > h.Commits() || took <= 0):
				t.Fatalf("Sync: %d log syncs in %v for %d commits", n, took, h.Commits())
			case !sync && (n != 0 || took != 0):
				t.Fatalf("no Sync: %d log syncs in %v", n, took)
			}
		})
	}
}

// TestBlocking: the tool reports its call's ID as it starts, then answers
// once released, or fails with its context's error when that ends first.
func TestBlocking(t *testing.T) {
	started, release := make(chan string, 1), make(chan struct{})
	tool := actortest.Blocking(started, release)
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = tool(context.Background(), locations.ToolCall{CallID: "c1"})
		done <- err
	}()
	if id := <-started; id != "c1" {
		t.Fatalf("started %q, want c1", id)
	}
	select {
	case err := <-done:
		t.Fatalf("answered before release: %q, %v", out, err)
	default:
	}
	close(release)
	if err := <-done; err != nil || out != "released" {
		t.Fatalf("released: %q, %v", out, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := actortest.Blocking(started, make(chan struct{}))(ctx, locations.ToolCall{CallID: "c2"})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestBlockingSeesItsContextBeforeStarted: a call cancelled while its
// send on started waits (a second call, with room for one in started)
// ends with the context's error. It sent without a select, so an
// interrupt of a step with two such calls waited out the tool grace, and
// the harness's Close then failed.
func TestBlockingSeesItsContextBeforeStarted(t *testing.T) {
	started, release := make(chan string, 1), make(chan struct{})
	defer close(release)
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.ToolGrace = time.Hour }})
	entered := make(chan string, 2)
	blocking := actortest.Blocking(started, release)
	h.Tools.Add("slow", func(ctx context.Context, c locations.ToolCall) (string, error) {
		entered <- c.CallID
		return blocking(ctx, c)
	})
	h.Model.Reply(script.ToolCall("c1", "slow", `{}`), script.ToolCall("c2", "slow", `{}`), script.Finish("tool-calls", messages.Tokens{}))
	sid := h.Session()
	h.Prompt(sid, "go")
	<-entered
	<-entered // both run; started has room for one, and nobody reads it
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatalf("interrupt with a call waiting to report its start: %v", err)
	}
	failed := 0
	for _, ev := range h.Events(sid) {
		if f, ok := ev.Data.(*messages.ToolFailed); ok && f.Error.Type == messages.ErrAborted {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("%d calls aborted, want 2: %v", failed, h.Types(sid))
	}
}

// TestToolsAddRefusesWhatTheRegistryWould: a nil function or a name no
// provider takes panics at Add, naming the tool, instead of failing later
// as an unknown tool or a provider's refusal.
func TestToolsAddRefusesWhatTheRegistryWould(t *testing.T) {
	ok := func(context.Context, locations.ToolCall) (string, error) { return "", nil }
	for name, add := range map[string]func(*actortest.Tools){
		"nil":   func(ts *actortest.Tools) { ts.Add("nilfunc", nil) },
		"space": func(ts *actortest.Tools) { ts.Add("read file", ok) },
		"empty": func(ts *actortest.Tools) { ts.Add("", ok) },
		"long":  func(ts *actortest.Tools) { ts.Add(strings.Repeat("x", 65), ok) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "actortest: Tools.Add(") {
					t.Fatalf("Add did not panic with its name: %v", p)
				}
			}()
			add(actortest.NewTools())
		})
	}
	actortest.NewTools().Add(strings.Repeat("x", 64), ok).Add("a_b-C9", ok)
}

// TestWaitMessagesNameWhatTheyWaitedFor: WaitType names the type it
// waited for, WaitIdle mentions the fake clock only when timers wait for
// it, BlockUntil says how many timers there were, and Options.Timeout
// bounds each wait.
func TestWaitMessagesNameWhatTheyWaitedFor(t *testing.T) {
	h := actortest.New(t, actortest.Options{Timeout: 200 * time.Millisecond})
	if h.Timeout() != 200*time.Millisecond {
		t.Fatalf("Timeout() = %v", h.Timeout())
	}
	g := script.NewGate()
	defer g.Release()
	h.Model.Reply(script.Hold(g), script.Text("late"))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	msg := fatal(t, h, func() { h.WaitType(sid, messages.TypeToolCalled) })
	if !strings.Contains(msg, "no "+messages.TypeToolCalled+" event within 200ms") {
		t.Fatalf("WaitType: %q", msg)
	}
	msg = fatal(t, h, func() { h.WaitIdle(sid) })
	if !strings.Contains(msg, "still busy after 200ms") || strings.Contains(msg, "clock") {
		t.Fatalf("WaitIdle held at a gate, no timer pending: %q", msg)
	}
	err := h.Clock.BlockUntil(h.Ctx(), 1)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waited for 1 pending timers, 0 are") {
		t.Fatalf("BlockUntil: %v", err)
	}
}

// TestRetryHintWhenATimerWaits: a Session waiting out a retry's backoff on
// the fake clock gets the hint to advance it.
func TestRetryHintWhenATimerWaits(t *testing.T) {
	h := actortest.New(t, actortest.Options{Timeout: 200 * time.Millisecond})
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderRateLimit, "slow down")))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil {
		t.Fatal(err)
	}
	msg := fatal(t, h, func() { h.WaitIdle(sid) })
	if !strings.Contains(msg, "1 timers wait for the fake clock") {
		t.Fatalf("WaitIdle in a backoff: %q", msg)
	}
}

// TestMessagesPagesThemAll: Messages returns every message, across pages.
func TestMessagesPagesThemAll(t *testing.T) {
	h := actortest.New(t)
	sid := h.Session()
	for i := range 3 {
		h.Model.Reply(script.Text(fmt.Sprint("answer ", i)))
		h.Prompt(sid, fmt.Sprint("question ", i))
		h.WaitIdle(sid)
	}
	ms := h.Messages(sid)
	if len(ms) != 6 || ms[0].Role != "user" || ms[5].Role != "assistant" {
		t.Fatalf("%d messages: %+v", len(ms), ms)
	}
}
