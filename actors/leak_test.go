package actors_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// TestAbandonedWaitsDoNotAccumulate: a client that retries a wait on a
// timeout through a busy period that lasts (here a model that holds; in a
// daemon, a permission question no one answers) leaves one listed caller
// per abandoned wait unless the Session actor drops the callers that gave
// up. However many gave up, the list stays bounded, and a caller still
// waiting is answered when the busy period ends.
func TestAbandonedWaitsDoNotAccumulate(t *testing.T) {
	h := actortest.New(t)
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "long")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	base, _, ok := h.Runtime.SessionWaiters(sid)
	if !ok {
		t.Fatal("no live Session actor")
	}
	const abandoned = 300
	for range abandoned {
		ctx, cancel := context.WithCancel(h.Ctx())
		errc := make(chan error, 1)
		go func() { errc <- h.Runtime.Wait(ctx, sid) }()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("abandoned wait returned %v", err)
		}
	}
	var listed int
	eventually(t, "the abandoned waits to reach the Session actor", func() bool {
		var received int
		received, listed, _ = h.Runtime.SessionWaiters(sid)
		return received >= base+abandoned
	})
	// Every caller listed gave up: a pruning leaves none, and the list is
	// pruned whenever it reaches 16.
	if listed > 16 {
		t.Fatalf("%d abandoned waits left %d listed callers", abandoned, listed)
	}
	live := make(chan error, 1)
	go func() { live <- h.Runtime.Wait(h.Ctx(), sid) }()
	eventually(t, "the live wait to reach the Session actor", func() bool {
		received, _, _ := h.Runtime.SessionWaiters(sid)
		return received >= base+abandoned+1
	})
	g.Release()
	if err := <-live; err != nil {
		t.Fatalf("live wait: %v", err)
	}
}

// TestCheckedLocationsAreNotKept: creating a Session, moving an idle one
// and selecting its agent or model build the service set of a Location to
// check it, but no Location actor holds that set and none would forget it:
// a daemon that sees many directories it never runs a Session in must not
// keep a set for each. The set a Location actor runs with is still built
// and kept while the actor lives.
func TestCheckedLocationsAreNotKept(t *testing.T) {
	var mgr *locations.Manager
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { mgr = c.Locations }})
	h.Model.Default(script.Text("ok"))
	const dirs = 100
	moved := h.Session()
	for range dirs {
		dir := messages.Location{Directory: t.TempDir()}
		s, _, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{Location: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Runtime.SelectAgent(h.Ctx(), s.ID, "plan"); err != nil {
			t.Fatal(err)
		}
		if err := h.Runtime.SelectModel(h.Ctx(), s.ID, messages.ModelRef{ProviderID: "script", ID: "other"}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Runtime.Move(h.Ctx(), moved, dir); err != nil {
			t.Fatal(err)
		}
	}
	if n := mgr.Cached(); n != 0 {
		t.Fatalf("%d Locations checked and never run left %d service sets cached", dirs, n)
	}
	h.Prompt(moved, "hi")
	h.WaitIdle(moved)
	if n, _ := h.Runtime.LocationActors(); n != 1 || mgr.Cached() != 1 {
		t.Fatalf("a running Location: %d Location actors, %d sets cached", n, mgr.Cached())
	}
}

// openFDs returns how many file descriptors the process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestInterruptCyclesLeaveNothing interrupts, again and again, busy
// periods stuck where a daemon's are: on a permission question no one
// answers, and in a bash command that would run for a minute. Every cycle
// releases its question, its process and pipes, its goroutines and its
// Session actor's waiters, so nothing grows with the number of cycles.
func TestInterruptCyclesLeaveNothing(t *testing.T) {
	h := actortest.New(t)
	pending := tools.NewPending(tools.PendingConfig{})
	rules := tools.Ruleset{{Permission: "bash", Pattern: "sleep *", Action: tools.Allow}}
	build := locations.NewBuilder(locations.BuildConfig{Catalog: h.Services.Catalog, DefaultModel: h.Services.DefaultModel,
		Providers: map[string]llm.Provider{"script": h.Model}, Agents: h.Agents,
		Rules: map[string]tools.Ruleset{"build": rules}, Approvals: locations.NewApprovals(h.Store), Asker: pending,
		Builtins: tools.BuiltinConfig{Read: tools.DefaultReadConfig(), Bash: tools.DefaultBashConfig(), ApplyPatch: tools.DefaultApplyPatchConfig()}})
	svc, err := build(messages.Location{Directory: h.Dir})
	if err != nil {
		t.Fatal(err)
	}
	h.Services.Tools = svc.Tools
	sid := h.Session()
	cycle := func(i int) {
		asks := i%2 == 0
		cmd := `{"command":"sleep 60"}`
		if asks {
			cmd = `{"command":"touch never"}`
		}
		h.Model.Reply(script.ToolCall("c"+strconv.Itoa(i), "bash", cmd))
		h.Prompt(sid, "go")
		if asks {
			eventually(t, "the permission question", func() bool { return len(pending.List()) == 1 })
		} else {
			h.WaitEvent(sid, func(ev messages.Event) bool {
				c, ok := ev.Data.(*messages.ToolCalled)
				return ok && c.CallID == "c"+strconv.Itoa(i)
			})
		}
		if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
			t.Fatal(err)
		}
		h.WaitIdle(sid)
		if n := len(pending.List()); n != 0 {
			t.Fatalf("cycle %d: %d questions left waiting", i, n)
		}
	}
	// A first round warms up what lives for the whole runtime.
	cycle(0)
	cycle(1)
	before, fds := goleak.IgnoreCurrent(), openFDs(t)
	const cycles = 30
	for i := range cycles {
		cycle(2 + i)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("%d interrupted busy periods left goroutines: %v", cycles, err)
	}
	eventually(t, "the tools' descriptors to close", func() bool { return openFDs(t) <= fds })
	if _, waiters, ok := h.Runtime.SessionWaiters(sid); ok && waiters != 0 {
		t.Fatalf("%d callers left listed", waiters)
	}
	if n := count(h, sid, messages.TypeExecutionInterrupted); n != cycles+2 {
		t.Fatalf("%d of %d busy periods interrupted", n, cycles+2)
	}
}

// TestMoveAndPassivationCyclesLeaveNothing moves a Session through a new
// directory each cycle, running it at each and letting its actors
// passivate: once idle, no Session or Location actor, service set, held
// command or goroutine is left of any directory it ran in.
func TestMoveAndPassivationCyclesLeaveNothing(t *testing.T) {
	var mgr *locations.Manager
	var logs lockedBuffer
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) {
		c.IdleTimeout = time.Millisecond
		mgr = c.Locations
		c.Logger = zerolog.New(&logs)
	}})
	h.Model.SetRecord(false)
	h.Model.Default(script.Text("ok"))
	sid := h.Session()
	cycle := func() {
		if _, err := h.Runtime.Move(h.Ctx(), sid, messages.Location{Directory: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		h.Prompt(sid, "p")
		h.WaitIdle(sid)
		eventually(t, "every actor to passivate", func() bool {
			n, _ := h.Runtime.LocationActors()
			return h.Runtime.Live() == 0 && n == 0 && mgr.Cached() == 0
		})
	}
	cycle()
	before := goleak.IgnoreCurrent()
	const cycles = 40
	for range cycles {
		cycle()
	}
	if n := h.Runtime.Held(sid); n != 0 {
		t.Fatalf("%d commands held", n)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("%d moves and passivations left goroutines: %v", cycles, err)
	}
	// No actor was stopped twice: each Location stopped only once its
	// Session actors had.
	noDeadLetters(t, h, &logs)
}

// TestAnsweredWaitsAreNotListed: the wait and interrupt callers a busy
// period's end answers leave the Session actor's lists; kept, each later
// busy period would answer them again and the lists would grow with every
// wait a client makes.
func TestAnsweredWaitsAreNotListed(t *testing.T) {
	h := actortest.New(t)
	sid := h.Session()
	for i := range 3 {
		g := script.NewGate()
		h.Model.Reply(script.Hold(g), script.Text("done"))
		h.Prompt(sid, "p"+strconv.Itoa(i))
		if err := g.Reached(h.Ctx()); err != nil {
			t.Fatal(err)
		}
		base, _, _ := h.Runtime.SessionWaiters(sid)
		waited := make(chan error, 2)
		go func() { waited <- h.Runtime.Wait(h.Ctx(), sid) }()
		go func() { waited <- h.Runtime.Wait(h.Ctx(), sid) }()
		eventually(t, "the waits to reach the Session actor", func() bool {
			received, listed, _ := h.Runtime.SessionWaiters(sid)
			return received >= base+2 && listed == 2
		})
		g.Release()
		for range 2 {
			if err := <-waited; err != nil {
				t.Fatalf("wait: %v", err)
			}
		}
		if _, listed, ok := h.Runtime.SessionWaiters(sid); ok && listed != 0 {
			t.Fatalf("busy period %d: %d answered callers still listed", i, listed)
		}
	}
}
