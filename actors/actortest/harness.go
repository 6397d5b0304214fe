package actortest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// Harness is one test runtime.
type Harness struct {
	// T is the test the harness reports to.
	T testing.TB
	// Dir is the directory of the Sessions Session creates.
	Dir string
	// Store is the runtime's store (fsync off unless Options.Sync).
	Store *persistence.Bolt
	// Model is the scripted model every request goes to: script its
	// replies before prompting, and read the requests it recorded. Each
	// request reads this field, so a test may replace the provider (with
	// one from script.Load, say) before it prompts. The catalog's models
	// are script/demo (the default) and script/other: a script file's
	// "model" match names one of them.
	Model *script.Provider
	// Clock is the runtime's fake clock: a retry's backoff waits until
	// the test advances it (BlockUntil, then Advance).
	Clock *Clock
	// Tools are the Go-function tools every Location offers.
	Tools *Tools
	// Agents are the configured agents, "build" (the default) and "plan"
	// ("You plan."); tests may add or change agents before selecting them.
	Agents map[string]locations.Agent
	// Runtime is the runtime under test.
	Runtime *actors.Runtime
	// Services is the service set every Location of the harness copies
	// each time its set is built: to check it (creating a Session there,
	// Session or Runtime.Create), and for the Location actor that runs its
	// Sessions: change it before the first Session of a directory is
	// created (Session, Runtime.Create), not after.
	Services *locations.Services

	timeout  time.Duration
	commits  atomic.Int64
	syncs    atomic.Int64
	syncedNs atomic.Int64
	close    sync.Once
}

// Commits returns the number of store transactions committed so far.
func (h *Harness) Commits() int64 { return h.commits.Load() }

// LogSyncs returns how many fdatasyncs of the store's write-ahead log have
// made commits durable so far, and the time they took in all (none
// unless Options.Sync).
func (h *Harness) LogSyncs() (n int64, took time.Duration) {
	return h.syncs.Load(), time.Duration(h.syncedNs.Load())
}

// Options adjust a Harness before it starts.
type Options struct {
	// Steps is the step allowance of both agents, build and plan
	// (default 25).
	Steps int
	// Config adjusts the runtime config.
	Config func(*actors.Config)
	// Instructions configures instruction sources; nil means none. Its Dir
	// is replaced by each Location's directory.
	Instructions *locations.InstructionsConfig
	// StorePath reuses a store file (for restart tests).
	StorePath string
	// Sync turns fsync on (benchmarks of durable throughput).
	Sync bool
	// Timeout bounds every wait of the harness (Harness.Timeout); zero
	// means the package's Timeout.
	Timeout time.Duration
}

// Timeout is the default bound of every wait of a harness. A test run
// with a shorter -timeout gets a shorter one: nine tenths of the time its
// deadline leaves when the harness starts, so that a wait that never ends
// fails with its own message rather than the test binary's panic.
const Timeout = 30 * time.Second

// Timeout returns the bound of each of the harness's waits.
func (h *Harness) Timeout() time.Duration { return h.timeout }

// waitBound is the default Timeout, shortened to fit t's deadline.
func waitBound(t testing.TB) time.Duration {
	d := Timeout
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := dt.Deadline(); ok {
			d = min(d, max(time.Until(end)*9/10, time.Second))
		}
	}
	return d
}

// New starts a harness whose runtime stops at the end of the test.
func New(t testing.TB, opts ...Options) *Harness {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Steps == 0 {
		o.Steps = 25
	}
	h := &Harness{T: t, Dir: t.TempDir(), Model: script.New(), Clock: NewClock(time.UnixMilli(1_767_225_600_000)), Tools: NewTools(),
		timeout: o.Timeout}
	if h.timeout <= 0 {
		h.timeout = waitBound(t)
	}
	path := o.StorePath
	if path == "" {
		path = filepath.Join(t.TempDir(), "sessiond.db")
	}
	st, err := persistence.Open(path, persistence.Options{Clock: h.Clock.Now, NoSync: !o.Sync,
		OnCommit: func(int, time.Duration) { h.commits.Add(1) },
		OnSync: func(d time.Duration) {
			h.syncs.Add(1)
			h.syncedNs.Add(int64(d))
		}})
	if err != nil {
		t.Fatal(err)
	}
	h.Store = st
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "script", Type: llm.ProviderScript,
		Models: map[string]llm.ModelSpec{"demo": {Context: 200000, Output: 8000}, "other": {Context: 200000, Output: 8000}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.Agents = map[string]locations.Agent{"build": {Name: "build", Steps: o.Steps}, "plan": {Name: "plan", Steps: o.Steps, Prompt: "You plan."}}
	h.Services = &locations.Services{Catalog: catalog, DefaultModel: messages.ModelRef{ProviderID: "script", ID: "demo"},
		Provider: func(string) (llm.Provider, error) { return h.Model, nil }, Agents: h.Agents, Tools: h.Tools, Instructions: o.Instructions}
	mgr := locations.NewManager(func(loc messages.Location) (*locations.Services, error) {
		svc := *h.Services
		svc.Location = loc
		if svc.Instructions != nil {
			// As the daemon's builder does: each Location observes its own
			// directory.
			ic := *svc.Instructions
			ic.Dir = loc.Directory
			svc.Instructions = &ic
		}
		return &svc, nil
	})
	cfg := actors.Config{Store: st, Locations: mgr, Clock: h.Clock, Logger: zerolog.Nop(),
		ActorOptions: []actor.ConfigOption{actor.WithDeadLetterThrottleInterval(10 * time.Millisecond)}}
	if o.Config != nil {
		o.Config(&cfg)
	}
	rt, err := actors.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.Runtime = rt
	t.Cleanup(h.Close)
	return h
}

// Close shuts the runtime down (interrupting running Sessions with reason
// shutdown) and closes the store, once; the end of the test does it too.
// A restart test closes one harness and opens another on its store file
// (Options.StorePath).
func (h *Harness) Close() {
	h.close.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		defer cancel()
		if err := h.Runtime.Shutdown(ctx); err != nil {
			h.T.Errorf("shutdown: %v", err)
		}
		if err := h.Store.Close(); err != nil {
			h.T.Errorf("close store: %v", err)
		}
	})
}

// Ctx returns a context bounded by the harness's Timeout.
func (h *Harness) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	h.T.Cleanup(cancel)
	return ctx
}

// Session creates a Session in the harness directory.
func (h *Harness) Session() messages.SessionID {
	h.T.Helper()
	s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: messages.Location{Directory: h.Dir}})
	if err != nil {
		h.T.Fatal(err)
	}
	return s.ID
}

// Prompt admits a steer prompt and wakes the Session.
func (h *Harness) Prompt(sid messages.SessionID, text string) persistence.Admitted {
	h.T.Helper()
	return h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: text}})
}

// PromptWith admits an arbitrary prompt request.
func (h *Harness) PromptWith(req persistence.PromptRequest) persistence.Admitted {
	h.T.Helper()
	a, err := h.Runtime.Prompt(h.Ctx(), req)
	if err != nil {
		h.T.Fatal(err)
	}
	return a
}

// WaitIdle waits until the Session has no execution and no wake in
// flight, and fails the test when the Session does not exist or is still
// busy after Timeout.
func (h *Harness) WaitIdle(sid messages.SessionID) {
	h.T.Helper()
	if _, err := h.Store.Get(h.Ctx(), sid); err != nil {
		h.T.Fatalf("WaitIdle(%s): %v", sid, err)
	}
	if err := h.Runtime.Wait(h.Ctx(), sid); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, actor.ErrTimeout) {
			// Not a timeout: the runtime refused the wait (it is shutting
			// down, say), and the Session may never have run.
			h.T.Fatalf("WaitIdle(%s): %v; its last event: %s", sid, err, h.lastEvent(sid))
		}
		hint := ""
		if n := h.Clock.Waiters(); n > 0 {
			hint = fmt.Sprintf("; %d timers wait for the fake clock (a retry's backoff does): Clock.Advance moves it", n)
		}
		h.T.Fatalf("WaitIdle(%s): still busy after %v (%v); its last event: %s%s",
			sid, h.timeout, err, h.lastEvent(sid), hint)
	}
}

// lastEvent describes the Session's newest durable event.
func (h *Harness) lastEvent(sid messages.SessionID) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	last := "none"
	for item, err := range h.Store.Log(ctx, sid, -1, false) {
		if err != nil {
			return err.Error()
		}
		if item.Event != nil {
			last = fmt.Sprintf("seq %d %s", item.Event.Durable.Seq, item.Event.Type)
		}
	}
	return last
}

// Events returns every durable event of the Session.
func (h *Harness) Events(sid messages.SessionID) []messages.Event {
	h.T.Helper()
	var out []messages.Event
	for item, err := range h.Store.Log(h.Ctx(), sid, -1, false) {
		if err != nil {
			h.T.Fatal(err)
		}
		if item.Event != nil {
			out = append(out, *item.Event)
		}
	}
	return out
}

// Types returns the type strings of the Session's durable events, with the
// ".1" version suffix removed for readability.
func (h *Harness) Types(sid messages.SessionID) []string {
	h.T.Helper()
	var out []string
	for _, ev := range h.Events(sid) {
		out = append(out, trimVersion(ev.Type))
	}
	return out
}

func trimVersion(t string) string {
	if n := len(t); n > 2 && t[n-2:] == ".1" {
		return t[:n-2]
	}
	return t
}

// WaitEvent follows the Session's log until an event satisfies match, and
// returns it. WaitType names the type it waits for in its failure.
func (h *Harness) WaitEvent(sid messages.SessionID, match func(messages.Event) bool) messages.Event {
	h.T.Helper()
	return h.waitEvent(sid, match, "matching event")
}

// WaitType follows the Session's log until an event of a durable type
// (named as OfType takes it) is there, and returns the first.
func (h *Harness) WaitType(sid messages.SessionID, typ string) messages.Event {
	h.T.Helper()
	return h.waitEvent(sid, OfType(typ), typ+" event")
}

func (h *Harness) waitEvent(sid messages.SessionID, match func(messages.Event) bool, what string) messages.Event {
	h.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	defer cancel()
	for item, err := range h.Store.Log(ctx, sid, -1, true) {
		if err != nil && ctx.Err() != nil {
			break
		}
		if err != nil {
			h.T.Fatal(err)
		}
		if item.Event != nil && match(*item.Event) {
			return *item.Event
		}
	}
	h.T.Fatalf("WaitEvent(%s): no %s within %v; its last event: %s", sid, what, h.timeout, h.lastEvent(sid))
	return messages.Event{}
}

// OfType matches events of a durable type, named in full
// ("session.text.ended.1", messages.TypeTextEnded) or as Types prints it,
// without the ".1" suffix ("session.text.ended").
func OfType(typ string) func(messages.Event) bool {
	return func(ev messages.Event) bool { return ev.Type == typ || trimVersion(ev.Type) == typ }
}

// Messages returns every message of the Session, oldest first, as the
// message route pages them.
func (h *Harness) Messages(sid messages.SessionID) []persistence.Message {
	h.T.Helper()
	var out []persistence.Message
	for after := int64(-1); ; {
		page, err := h.Store.Messages(h.Ctx(), sid, persistence.Query{After: after})
		if err != nil {
			h.T.Fatal(err)
		}
		out = append(out, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			return out
		}
		after = page.Data[len(page.Data)-1].Seq
	}
}

// Request waits for the n-th (1-based) model request.
func (h *Harness) Request(n int) llm.Request {
	h.T.Helper()
	r, err := h.Model.WaitRequest(h.Ctx(), n)
	if err != nil {
		h.T.Fatal(err)
	}
	return r
}

// CheckReplay replays every Session's log into an empty store and fails the
// test unless every bucket, projections included, is byte-for-byte equal.
// It then runs the store's own check (what sessiond check runs), which
// must find nothing wrong.
func (h *Harness) CheckReplay() {
	h.T.Helper()
	ctx := h.Ctx()
	dst, err := persistence.Open(filepath.Join(h.T.TempDir(), "replay.db"), persistence.Options{NoSync: true})
	if err != nil {
		h.T.Fatal(err)
	}
	defer dst.Close()
	sessions, err := h.Store.List(ctx)
	if err != nil {
		h.T.Fatal(err)
	}
	for _, s := range sessions {
		if err := dst.Restore(ctx, h.Events(s.ID)); err != nil {
			h.T.Fatalf("replay %s: %v", s.ID, err)
		}
	}
	a, err := h.Store.Dump()
	if err != nil {
		h.T.Fatal(err)
	}
	b, err := dst.Dump()
	if err != nil {
		h.T.Fatal(err)
	}
	for name, rows := range a {
		if name == "entries" || name == "approvals" {
			continue // not derived from the log
		}
		if len(rows) != len(b[name]) {
			h.T.Fatalf("replay: bucket %s has %d rows, %d after replay", name, len(rows), len(b[name]))
		}
		for k, v := range rows {
			if b[name][k] != v {
				h.T.Fatalf("replay: bucket %s key %q differs", name, k)
			}
		}
	}
	r, err := h.Store.Verify(ctx, h.T.TempDir())
	if err != nil || len(r.Problems) > 0 {
		h.T.Fatalf("check: %+v, %v", r, err)
	}
}
