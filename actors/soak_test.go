package actors_test

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// The soak test's knobs. The defaults are what CI runs (a few seconds under
// -race); bug hunts raise the rounds and vary the seed:
//
//	go test ./actors -run 'TestSoak$' -soak.rounds 200 -soak.seed 7
var (
	soakRounds = flag.Int("soak.rounds", 4, "TestSoak: rounds to run, each a fresh runtime driving several Sessions")
	soakSeed   = flag.Uint64("soak.seed", 1, "TestSoak: base seed (round r uses seed+r); 0 picks one from the clock")
)

const (
	// soakSessions Sessions are driven at once, each by its own goroutine
	// (two in a round that drives Sessions concurrently) doing soakOps
	// operations one after another.
	soakSessions = 6
	soakOps      = 60
	// soakHold bounds how long an "interrupt while held" waits for a stream
	// to reach a gate or a tool to block, and how long a wait operation
	// waits. It only shapes the interleaving: the operation goes on
	// whether or not anything blocked.
	soakHold = 50 * time.Millisecond
	// soakContext is how many events before (and a few after) a violation
	// its report shows.
	soakContext = 14
)

// TestSoak drives several Sessions at once with a seeded random sequence of
// operations (prompts steered and queued, with and without IDs, exact and
// conflicting retries, resume=false, wakes, runs, waits, interrupts at
// random moments, manual compactions, agent, model and Location changes)
// against a model that answers each request with random behaviour (text,
// reasoning, tool calls that succeed, fail, panic or block, unknown and
// hosted tools, gates that hold the stream open, retryable and fatal
// provider errors, context overflow, content filter). Some rounds drive
// each Session from two goroutines at once; some shut the runtime down in
// the middle of it all and go on from the same store in a new one. Each
// round then releases everything, runs every Session until idle, resumes
// each once more, and checks every Session's whole log against the
// invariants of SEED.md (see checkSoakLog), its projections, the tools'
// own record, what the live bus and a log tail delivered, and that
// replaying the logs reproduces the store.
func TestSoak(t *testing.T) {
	base := *soakSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	for round := range *soakRounds {
		seed := base + uint64(round)
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSoak(t, seed) }) {
			t.Logf("reproduce the failing round's operations with: go test ./actors -run 'TestSoak$' -soak.seed %d -soak.rounds 1", seed)
			return
		}
	}
}

// soakRun is one round: a harness (two when the round restarts) and its
// Sessions.
type soakRun struct {
	t    *testing.T
	seed uint64
	opts actortest.Options
	h    *actortest.Harness // replaced at a restart, while nothing runs
	dirs [2]string
	// concurrent: two drivers per Session; restart: the runtime shuts
	// down after the drivers and a new one goes on from the store;
	// instructions: the Locations have instruction sources, API-managed
	// entries among them; small: the models' context window is small and
	// automatic compaction on, so histories compact now and then.
	concurrent, restart, instructions, small bool

	sessions []*soakSession
	bySID    map[messages.SessionID]*soakSession // written before the first prompt, read-only after

	mu sync.Mutex
	// calls counts the invocations of each local tool call by the Go tools.
	calls map[soakCall]*soakInvocation
	// early records tool invocations whose call was not durable yet.
	early []string

	// waits are the Wait calls the drivers made, each on its own goroutine.
	waits sync.WaitGroup
	// watches are what the bus and the log tails delivered, one per
	// harness.
	watches []*soakWatch
	ops     [soakOpCount]atomic.Int64
}

// soakCall identifies a tool call: callID is unique only within its
// assistant message.
type soakCall struct {
	sid  messages.SessionID
	asst messages.MessageID
	id   string
}

type soakInvocation struct {
	tool string
	n    int
}

// soakSession is one driven Session: its drivers' records, and the state
// the model and the blocking tool share with them, all under mu.
type soakSession struct {
	run *soakRun
	idx int
	sid messages.SessionID

	mu         sync.Mutex
	receipts   []*soakReceipt
	byID       map[messages.MessageID]*soakReceipt
	supplied   []*soakReceipt // admitted with a caller-supplied ID
	barriers   map[messages.MessageID]int64
	interrupts int
	moves      int
	restarts   int
	scanned    int64 // last seq busyOpen has seen
	busy       bool  // whether the log has an open busy period up to scanned
	model      *rand.Rand
	requests   int
	quiet      bool
	gates      []*script.Gate
	blocked    []*soakBlock
	changed    chan struct{} // closed and replaced when a gate opens or a tool blocks
}

// soakReceipt is one admitted prompt as a driver saw it.
type soakReceipt struct {
	req persistence.PromptRequest
	got persistence.Admitted
	// wokenAt is the Session's watermark before the last operation that
	// woke it with this prompt pending, or -1 when an interrupt cleared
	// that wake (or none came).
	wokenAt int64
}

// soakLog collects log lines from any goroutine, keeping the last
// soakLogKeep bytes.
type soakLog struct {
	mu sync.Mutex
	b  []byte
}

const soakLogKeep = 64 << 10

func (l *soakLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if over := len(l.b) - soakLogKeep; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...)
	}
	return len(p), nil
}

func (l *soakLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}

// soakBlock is a blocking tool invocation waiting for release.
type soakBlock struct{ release chan struct{} }

func soakNo() *bool { f := false; return &f }

// soakRand returns the random source of one stream of a seed: the round's
// setup, each driver and each Session's model draw from their own, so
// what one draws does not depend on how the others interleave.
func soakRand(seed, stream uint64) *rand.Rand {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	binary.LittleEndian.PutUint64(key[8:], stream)
	return rand.New(rand.NewChaCha8(key))
}

func runSoak(t *testing.T, seed uint64) {
	rng := soakRand(seed, 0)
	steps := []int{3, 6, 25}[rng.IntN(3)]
	steerBatch := []int{0, 0, 2}[rng.IntN(3)]
	passivate := rng.IntN(3) == 0
	r := &soakRun{t: t, seed: seed, bySID: map[messages.SessionID]*soakSession{}, calls: map[soakCall]*soakInvocation{},
		concurrent: seed&1 == 1, restart: seed&2 == 2, // four seeds in a row cover every mode
		instructions: rng.IntN(2) == 0, small: rng.IntN(3) == 0}
	// The runtime's warnings (a wake that failed after its admission, say,
	// which leaves the input pending) go with a failed round's report:
	// otherwise a violation they explain would show no cause.
	var warnings soakLog
	defer func() {
		if t.Failed() {
			t.Logf("seed %d: the runtime's warnings:\n%s", seed, warnings.String())
		}
	}()
	r.opts = actortest.Options{Steps: steps, StorePath: filepath.Join(t.TempDir(), "soak.db"), Config: func(c *actors.Config) {
		c.Logger = zerolog.New(&warnings).Level(zerolog.WarnLevel)
		c.SteerBatch = steerBatch
		c.AutoCompact = r.small
		if passivate {
			// Idle Session actors stop between operations: wakes and
			// commands race their passivation.
			c.IdleTimeout = time.Millisecond
		}
	}}
	if r.instructions {
		r.opts.Instructions = &locations.InstructionsConfig{Getenv: func(string) string { return "" }}
	}
	t.Logf("seed %d: %d Sessions x %d operations; %d steps per agent, steer batch %d, passivation %v, two drivers per Session %v, restart %v, instructions %v, small window %v",
		seed, soakSessions, soakOps, steps, steerBatch, passivate, r.concurrent, r.restart, r.instructions, r.small)
	r.start()
	r.dirs = [2]string{r.h.Dir, t.TempDir()}
	for i := range soakSessions {
		s := &soakSession{run: r, idx: i, sid: r.h.Session(), model: soakRand(seed, uint64(1000+i)),
			byID: map[messages.MessageID]*soakReceipt{}, barriers: map[messages.MessageID]int64{}, scanned: -1, changed: make(chan struct{})}
		r.sessions = append(r.sessions, s)
		r.bySID[s.sid] = s
	}
	r.watch()

	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range r.sessions {
		drivers := 1
		if r.concurrent {
			drivers = 2
		}
		for d := range drivers {
			dr := &soakDriver{s: s, id: d, rng: soakRand(seed, uint64(1+2*s.idx+d))}
			wg.Go(dr.drive)
		}
	}
	wg.Wait()
	driven := time.Since(start)

	if r.restart {
		// Shut down with the Sessions mid-flight (held streams, blocked
		// tools, retries waiting on the clock are all interrupted), and go
		// on from the same store in a new runtime.
		last := r.watches[len(r.watches)-1]
		last.stopTails()
		now := r.h.Clock.Now()
		r.h.Close()
		last.stopBus()
		for _, s := range r.sessions {
			s.mu.Lock()
			s.restarts++
			s.forget() // no wake survives the process
			s.scanned, s.busy = -1, false
			s.mu.Unlock()
		}
		r.start()
		r.h.Clock.Advance(now.Sub(r.h.Clock.Now()) + time.Second)
		r.watch()
	}

	// Quiesce: the model answers plain text from now on, every held stream
	// and blocked tool is released, and the fake clock moves whenever a
	// retry waits on it.
	h := r.h
	for _, s := range r.sessions {
		s.quiesce()
	}
	stopPump := r.pumpClock()
	defer stopPump()
	for _, s := range r.sessions {
		h.WaitIdle(s.sid)
	}
	r.waits.Wait() // answered, all of them, now that no Session is busy
	quiesced := time.Since(start) - driven
	// Liveness, before the final resume: a prompt whose wake no interrupt
	// cleared was promoted, unless a busy period failed after the wake.
	// Two drivers of one Session race each other's wakes and interrupts.
	if !r.concurrent {
		for _, s := range r.sessions {
			r.report(s, checkSoakWakes(s, h.Events(s.sid)))
		}
	}
	for _, s := range r.sessions {
		if _, err := h.Runtime.Resume(h.Ctx(), s.sid); err != nil {
			t.Fatalf("seed %d: final resume of %s: %v", seed, s.sid, err)
		}
	}
	for _, s := range r.sessions {
		h.WaitIdle(s.sid)
	}
	stopPump()
	if a := h.Runtime.Active(); len(a) != 0 {
		t.Errorf("seed %d: Sessions active after every one is idle: %v", seed, a)
	}
	last := r.watches[len(r.watches)-1]
	last.await(r)
	last.stopTails()
	last.stopBus()

	r.mu.Lock()
	early := r.early
	r.mu.Unlock()
	for _, e := range early {
		t.Errorf("seed %d: %s", seed, e)
	}
	ids := map[messages.EventID]messages.SessionID{}
	total, requests := 0, 0
	types := map[string]int{}
	for _, s := range r.sessions {
		evs := h.Events(s.sid)
		total += len(evs)
		s.mu.Lock()
		requests += s.requests
		s.mu.Unlock()
		for _, ev := range evs {
			typ := strings.TrimSuffix(strings.TrimPrefix(ev.Type, "session."), ".1")
			switch p := ev.Data.(type) {
			case *messages.ExecutionInterrupted:
				typ += "(" + p.Reason + ")"
			case *messages.CompactionStarted:
				typ += "(" + p.Reason + ")"
			}
			types[typ]++
		}
		vs := checkSoakLog(s, evs, ids)
		vs = append(vs, r.checkStore(s, evs)...)
		for i, w := range r.watches {
			upto := int64(len(evs) - 1)
			if i+1 < len(r.watches) {
				upto = r.watches[i+1].from[s.sid]
			}
			vs = append(vs, w.check(s.sid, evs, upto)...)
		}
		r.report(s, vs)
	}
	h.CheckReplay()
	var ops []string
	for op := range soakOpCount {
		ops = append(ops, fmt.Sprintf("%s %d", soakOpNames[op], r.ops[op].Load()))
	}
	var counts []string
	for _, typ := range slices.Sorted(maps.Keys(types)) {
		counts = append(counts, fmt.Sprintf("%s %d", typ, types[typ]))
	}
	t.Logf("seed %d: driven in %v, quiesced in %v; %d model requests; operations: %s; %d events: %s", seed, driven.Round(time.Millisecond),
		quiesced.Round(time.Millisecond), requests, strings.Join(ops, ", "), total, strings.Join(counts, ", "))
}

// start starts a harness on the round's store with the soak model and
// tools; every Location, the second directory's too, is built after this.
func (r *soakRun) start() {
	r.h = actortest.New(r.t, r.opts)
	r.h.Services.Provider = func(string) (llm.Provider, error) { return soakModel{r}, nil }
	if r.small {
		small := llm.ModelSpec{Context: 300, Output: 50}
		catalog, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "script", Type: llm.ProviderScript,
			Models: map[string]llm.ModelSpec{"demo": small, "other": small}}})
		if err != nil {
			r.t.Fatal(err)
		}
		r.h.Services.Catalog = catalog
	}
	for _, name := range []string{"ok", "fail", "panic", "block"} {
		r.h.Tools.Add(name, r.tool(name))
	}
}

// report fails the test with a Session's violations, each with the seed and
// the events around it.
func (r *soakRun) report(s *soakSession, vs []soakViolation) {
	if len(vs) == 0 {
		return
	}
	r.t.Helper()
	var evs []messages.Event
	if slices.ContainsFunc(vs, func(v soakViolation) bool { return v.at >= 0 }) {
		evs = r.h.Events(s.sid)
	}
	for i, v := range vs {
		if i == 5 {
			r.t.Errorf("seed %d, Session %s: %d more violations", r.seed, s.sid, len(vs)-i)
			break
		}
		msg := fmt.Sprintf("seed %d, Session %s (#%d): %s", r.seed, s.sid, s.idx, v.msg)
		if v.at >= 0 {
			msg += "\n  events: " + soakSlice(evs, v.at)
		}
		r.t.Error(msg)
	}
}

// soakSlice renders the event types around index at, marking at.
func soakSlice(evs []messages.Event, at int) string {
	lo, hi := max(at-soakContext, 0), min(at+4, len(evs))
	var b strings.Builder
	if lo > 0 {
		b.WriteString("... ")
	}
	for i := lo; i < hi; i++ {
		mark := ""
		if i == at {
			mark = ">>"
		}
		typ := strings.TrimSuffix(strings.TrimPrefix(evs[i].Type, "session."), ".1")
		fmt.Fprintf(&b, "%s%d:%s%s ", mark, i, typ, soakDetail(evs[i].Data))
	}
	if hi < len(evs) {
		b.WriteString("...")
	}
	return b.String()
}

// soakDetail is the part of a payload that tells events apart in a report.
func soakDetail(p messages.Payload) string {
	switch p := p.(type) {
	case *messages.StepStarted:
		return fmt.Sprintf("(%s#%d)", p.AssistantMessageID, p.Attempt)
	case *messages.StepFailed:
		return fmt.Sprintf("(%s %s)", p.AssistantMessageID, p.Error.Type)
	case *messages.ToolCalled:
		return fmt.Sprintf("(%s %s)", p.CallID, p.Name)
	case *messages.ToolSucceeded:
		return "(" + p.CallID + ")"
	case *messages.ToolFailed:
		return fmt.Sprintf("(%s %s)", p.CallID, p.Error.Type)
	case *messages.PromptAdmitted:
		return fmt.Sprintf("(%s %s)", p.InputID, p.Delivery)
	case *messages.PromptPromoted:
		return "(" + string(p.InputID) + ")"
	case *messages.ExecutionInterrupted:
		return "(" + p.Reason + ")"
	case *messages.ExecutionFailed:
		return "(" + string(p.Error.Type) + ")"
	case *messages.CompactionStarted:
		return fmt.Sprintf("(%s %s)", p.Reason, p.InputID)
	case *messages.CompactionFailed:
		return fmt.Sprintf("(%s %s)", p.InputID, p.Error.Type)
	}
	return ""
}

// pumpClock advances the fake clock whenever a retry waits on it, until
// the returned stop is called (more than once is harmless).
func (r *soakRun) pumpClock() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r.h.Clock.BlockUntil(ctx, 1) == nil {
			r.h.Clock.Advance(time.Minute) // past any backoff this test asks for
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// quiesce makes the model answer plain text and the blocking tool return at
// once from now on, and releases every held stream and blocked tool.
func (s *soakSession) quiesce() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quiet = true
	for _, g := range s.gates {
		g.Release()
	}
	for _, b := range s.blocked {
		close(b.release)
	}
	s.gates, s.blocked = nil, nil
}

// notify wakes a driver waiting for something to block; s.mu is held.
func (s *soakSession) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// --- The model ---

// soakModel answers every request with a random behaviour drawn from the
// requesting Session's own seeded source, played by a one-off scripted
// provider with that behaviour as its default: it never runs out.
type soakModel struct{ r *soakRun }

// Stream implements llm.Provider.
func (m soakModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		s := m.r.bySID[messages.SessionID(req.CacheKey)]
		if s == nil {
			yield(llm.Event{}, llm.Errorf(messages.ErrProviderInvalidRequest, "soak: request for unknown Session %q", req.CacheKey))
			return
		}
		steps, gate := s.respond(req)
		if gate != nil {
			defer s.dropGate(gate)
		}
		for ev, err := range script.New().SetRecord(false).Default(steps...).Stream(ctx, req) {
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (s *soakSession) dropGate(g *script.Gate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gates = slices.DeleteFunc(s.gates, func(x *script.Gate) bool { return x == g })
}

// soakTools are the tools the model calls: the four Go tools, one nobody
// offers, and a hosted call (the provider runs it; a Go tool has its name).
var soakTools = []string{"ok", "ok", "fail", "panic", "block", "block", "nope", "hosted"}

// respond draws the steps answering one request, and the gate they hold at
// (nil for none).
func (s *soakSession) respond(req llm.Request) ([]script.Step, *script.Gate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	n, r := s.requests, s.model
	if s.quiet {
		if soakCompaction(req) {
			return []script.Step{script.Text("## Objective\nquiet summary")}, nil
		}
		return []script.Step{script.Text(fmt.Sprintf("quiet %d", n))}, nil
	}
	var gate *script.Gate
	hold := func() script.Step {
		if gate == nil {
			gate = script.NewGate()
			s.gates = append(s.gates, gate)
			s.notify()
		}
		return script.Hold(gate)
	}
	if soakCompaction(req) {
		switch p := r.IntN(20); {
		case p < 2:
			return []script.Step{script.Fail(&llm.Error{Type: messages.ErrProviderInternal, Message: "soak: summary failed"})}, nil
		case p < 3:
			return []script.Step{script.Text("## Objective\nfilt"), script.Finish(llm.FinishContentFilter, messages.Tokens{})}, nil
		case p < 6:
			steps := []script.Step{script.Text("## Objective\nheld"), hold(), script.Text("## Next Move\ngo")}
			return steps, gate // hold set gate
		}
		return []script.Step{script.Text(fmt.Sprintf("## Objective\nsummary %d", n))}, nil
	}
	var steps []script.Step
	switch p := r.IntN(100); {
	case p < 20:
		if r.IntN(3) == 0 {
			steps = append(steps, script.Reasoning("thinking"))
		}
		steps = append(steps, script.Text(fmt.Sprintf("answer %d", n)))
	case p < 30:
		steps = append(steps, script.Text("before"), hold(), script.Text("after"))
	case p < 60:
		if r.IntN(3) == 0 {
			steps = append(steps, script.Text("calling"))
		}
		if r.IntN(6) == 0 {
			steps = append(steps, hold())
		}
		for i := range 1 + r.IntN(3) {
			id := fmt.Sprintf("call_%d_%d", n, i)
			switch name := soakTools[r.IntN(len(soakTools))]; name {
			case "hosted":
				steps = append(steps, script.ToolCall(id, "ok", `{}`).ProviderExecuted())
				if r.IntN(2) == 0 {
					steps = append(steps, script.HostedResult(id, "ok", "hosted:"+id))
				}
			default:
				steps = append(steps, script.ToolCall(id, name, `{"n":1}`))
			}
			if r.IntN(8) == 0 {
				steps = append(steps, hold())
			}
		}
	case p < 73:
		typ := []messages.ErrorType{messages.ErrProviderRateLimit, messages.ErrProviderInternal, messages.ErrProviderTransport}[r.IntN(3)]
		var after time.Duration
		if r.IntN(3) == 0 {
			after = time.Duration(1+r.IntN(20)) * time.Second
		}
		if r.IntN(5) == 0 {
			steps = append(steps, hold())
		}
		steps = append(steps, script.Fail(&llm.Error{Type: typ, Message: "soak: try again", RetryAfter: after}))
	case p < 78:
		if r.IntN(2) == 0 {
			steps = append(steps, script.Text("half an an"))
		}
		steps = append(steps, script.Finish(llm.FinishContentFilter, messages.Tokens{}))
	case p < 82:
		// Output, then a retryable error: no retry after durable output.
		steps = append(steps, script.PartialText("cut o"), script.Fail(&llm.Error{Type: messages.ErrProviderTransport, Message: "soak: reset"}))
	case p < 85:
		// A tool input cut off: settled without a call.
		id := fmt.Sprintf("call_%d_cut", n)
		steps = append(steps, script.Event(llm.Event{Kind: llm.ToolInputStart, ID: "t", CallID: id, Name: "ok"}),
			script.Event(llm.Event{Kind: llm.ToolInputDelta, ID: "t", CallID: id, Text: `{"n"`}),
			script.Fail(&llm.Error{Type: messages.ErrProviderTransport, Message: "soak: reset"}))
	case p < 88:
		steps = append(steps, script.Fail(&llm.Error{Type: messages.ErrProviderContextOverflow, Message: "soak: too long"}))
	case p < 90:
		steps = append(steps, script.Fail(&llm.Error{Type: messages.ErrProviderInvalidRequest, Message: "soak: bad request"}))
	default:
		steps = append(steps, script.Reasoning("hmm").WithMetadata(`{"sig":"x"}`), script.Text("a"), script.Reasoning("more"), script.Text("b"))
	}
	return steps, gate
}

// soakCompaction reports whether req asks for a compaction summary.
func soakCompaction(req llm.Request) bool {
	return strings.Contains(script.LastUserText(req), "Write the checkpoint summary now.")
}

// --- The tools ---

// tool returns the Go tool name: it counts its invocations, checks that
// its call was durable before it ran, and then succeeds, fails, panics or
// blocks until released or cancelled.
func (r *soakRun) tool(name string) actortest.ToolFunc {
	return func(ctx context.Context, c locations.ToolCall) (string, error) {
		key := soakCall{c.SessionID, c.AssistantMessageID, c.CallID}
		r.mu.Lock()
		inv := r.calls[key]
		if inv == nil {
			inv = &soakInvocation{tool: name}
			r.calls[key] = inv
		}
		inv.n++
		r.mu.Unlock()
		if m, err := r.h.Store.Message(context.WithoutCancel(ctx), c.SessionID, c.AssistantMessageID); err != nil ||
			!slices.ContainsFunc(m.Parts, func(p persistence.Part) bool { return p.Tool != nil && p.Tool.CallID == c.CallID }) {
			r.mu.Lock()
			r.early = append(r.early, fmt.Sprintf("Session %s: tool %s ran for call %s of %s before the call was durable (%v)",
				c.SessionID, name, c.CallID, c.AssistantMessageID, err))
			r.mu.Unlock()
		}
		switch name {
		case "ok":
			return "ok:" + c.CallID, nil
		case "fail":
			return "", errors.New("fail:" + c.CallID)
		case "panic":
			panic("panic:" + c.CallID)
		}
		s := r.bySID[c.SessionID]
		s.mu.Lock()
		if s.quiet {
			s.mu.Unlock()
			return "released:" + c.CallID, nil
		}
		b := &soakBlock{release: make(chan struct{})}
		s.blocked = append(s.blocked, b)
		s.notify()
		s.mu.Unlock()
		select {
		case <-b.release:
			return "released:" + c.CallID, nil
		case <-ctx.Done():
			s.mu.Lock()
			s.blocked = slices.DeleteFunc(s.blocked, func(x *soakBlock) bool { return x == b })
			s.mu.Unlock()
			return "", ctx.Err()
		}
	}
}

// --- The drivers ---

type soakOp int

const (
	soakOpSteer soakOp = iota
	soakOpQueue
	soakOpRetry
	soakOpConflict
	soakOpWake
	soakOpResume
	soakOpWait
	soakOpInterrupt
	soakOpInterruptHeld
	soakOpRelease
	soakOpAdvance
	soakOpCompact
	soakOpAgent
	soakOpModel
	soakOpMove
	soakOpEntry
	soakOpCount
)

var soakOpNames = [soakOpCount]string{"steer", "queue", "retry", "conflict", "wake", "resume", "wait", "interrupt",
	"interrupt-held", "release", "advance", "compact", "agent", "model", "move", "entry"}

// soakWeights are the operations' relative frequencies.
var soakWeights = [soakOpCount]int{14, 10, 6, 2, 4, 6, 2, 4, 7, 14, 10, 3, 2, 2, 2, 3}

// soakDriver runs operations on one Session, one after another.
type soakDriver struct {
	s   *soakSession
	id  int
	rng *rand.Rand
	n   int // prompts admitted so far
}

func (d *soakDriver) pick() soakOp {
	total := 0
	for _, w := range soakWeights {
		total += w
	}
	n := d.rng.IntN(total)
	for op, w := range soakWeights {
		if n < w {
			return soakOp(op)
		}
		n -= w
	}
	panic("unreachable")
}

// drive runs the driver's operations; the drivers run concurrently.
func (d *soakDriver) drive() {
	s := d.s
	for i := range soakOps {
		op := d.pick()
		s.run.ops[op].Add(1)
		if err := d.do(op); err != nil {
			s.run.t.Errorf("seed %d, Session %s (#%d), driver %d: operation %d (%s): %v", s.run.seed, s.sid, s.idx, d.id, i, soakOpNames[op], err)
			return
		}
	}
}

func soakCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), actortest.Timeout)
}

// do runs one operation and checks what it returned. With one driver per
// Session it also checks what the Session looks like after an interrupt
// or a wait: nothing else of this test acts on the Session meanwhile.
func (d *soakDriver) do(op soakOp) error {
	s, h := d.s, d.s.run.h
	alone := !s.run.concurrent
	ctx, cancel := soakCtx()
	defer cancel()
	switch op {
	case soakOpSteer, soakOpQueue:
		d.n++
		req := persistence.PromptRequest{SessionID: s.sid, Prompt: messages.Prompt{Text: fmt.Sprintf("prompt %d.%d.%d", s.idx, d.id, d.n)}}
		switch {
		case op == soakOpQueue:
			req.Delivery = messages.Queue
		case d.rng.IntN(3) > 0:
			req.Delivery = messages.Steer // else the default, steer
		}
		if d.rng.IntN(2) == 0 {
			req.ID = messages.MessageID(fmt.Sprintf("msg_soak%d_%d_%d", s.idx, d.id, d.n))
		}
		if d.rng.IntN(4) == 0 {
			req.Resume = soakNo()
		}
		mark, err := s.watermark(ctx, req.Resume == nil)
		if err != nil {
			return err
		}
		got, err := h.Runtime.Prompt(ctx, req)
		if err != nil {
			return fmt.Errorf("prompt %+v: %w", req, err)
		}
		if req.ID != "" && got.ID != req.ID {
			return fmt.Errorf("prompt with ID %s admitted as %s", req.ID, got.ID)
		}
		s.mu.Lock()
		rc := &soakReceipt{req: req, got: got, wokenAt: -1}
		s.receipts = append(s.receipts, rc)
		s.byID[got.ID] = rc
		if req.ID != "" {
			s.supplied = append(s.supplied, rc)
		}
		if req.Resume == nil {
			s.woke(mark)
		}
		s.mu.Unlock()
	case soakOpRetry:
		s.mu.Lock()
		var rc *soakReceipt
		if len(s.supplied) > 0 {
			rc = s.supplied[d.rng.IntN(len(s.supplied))]
		}
		s.mu.Unlock()
		if rc == nil {
			return nil
		}
		req := rc.req
		req.Resume = nil
		if d.rng.IntN(3) == 0 {
			req.Resume = soakNo()
		}
		mark, err := s.watermark(ctx, req.Resume == nil)
		if err != nil {
			return err
		}
		got, err := h.Runtime.Prompt(ctx, req)
		if err != nil {
			return fmt.Errorf("exact retry of %s: %w", req.ID, err)
		}
		if !reflect.DeepEqual(got, rc.got) {
			return fmt.Errorf("exact retry of %s returned %+v, first %+v", req.ID, got, rc.got)
		}
		if req.Resume == nil {
			s.mu.Lock()
			s.woke(mark)
			s.mu.Unlock()
		}
	case soakOpConflict:
		s.mu.Lock()
		var req persistence.PromptRequest
		if len(s.supplied) > 0 {
			req = s.supplied[d.rng.IntN(len(s.supplied))].req
		}
		s.mu.Unlock()
		if req.ID == "" {
			return nil
		}
		req.Resume = soakNo()
		switch d.rng.IntN(3) {
		case 0:
			req.Prompt.Text += " (changed)"
		case 1:
			if req.Delivery == messages.Queue {
				req.Delivery = messages.Steer
			} else {
				req.Delivery = messages.Queue
			}
		default:
			req.SessionID = s.run.sessions[(s.idx+1)%len(s.run.sessions)].sid
		}
		if _, err := h.Runtime.Prompt(ctx, req); messages.TypeOf(err) != messages.ErrPromptConflict {
			return fmt.Errorf("reuse of %s for another Session, prompt or delivery: %v, want %s", req.ID, err, messages.ErrPromptConflict)
		}
	case soakOpWake:
		mark, err := s.watermark(ctx, true)
		if err != nil {
			return err
		}
		if err := h.Runtime.Wake(ctx, s.sid); err != nil {
			return fmt.Errorf("wake: %w", err)
		}
		s.mu.Lock()
		s.woke(mark)
		s.mu.Unlock()
	case soakOpResume:
		mark, err := s.watermark(ctx, true)
		if err != nil {
			return err
		}
		joined, err := h.Runtime.Resume(ctx, s.sid)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if !joined {
			// A forced drain starts (now, or after the busy period closing)
			// and promotes what is pending. A joined run promises nothing
			// about input its busy period has already looked past.
			s.mu.Lock()
			s.woke(mark)
			s.mu.Unlock()
		}
	case soakOpWait:
		// Waits are not given up (TestWaitDeadlineIsTheContexts covers
		// that): each must be answered by the time the Session is idle,
		// whatever happens to it meanwhile.
		s.run.waits.Go(func() {
			ctx, cancel := soakCtx()
			defer cancel()
			err := h.Runtime.Wait(ctx, s.sid)
			if err != nil && !(s.run.restart && messages.TypeOf(err) == messages.ErrShuttingDown) {
				s.run.t.Errorf("seed %d, Session %s (#%d), driver %d: a wait: %v", s.run.seed, s.sid, s.idx, d.id, err)
			}
		})
	case soakOpInterruptHeld:
		s.awaitHold()
		fallthrough
	case soakOpInterrupt:
		if err := h.Runtime.Interrupt(ctx, s.sid); err != nil {
			return fmt.Errorf("interrupt: %w", err)
		}
		s.mu.Lock()
		s.interrupts++
		s.forget() // it cleared every coalesced wake; the inbox waits for the next
		s.mu.Unlock()
		if alone {
			// It answers after the busy period's terminal event.
			return s.idle(ctx, "interrupt")
		}
	case soakOpRelease:
		s.release(d.rng)
	case soakOpAdvance:
		h.Clock.Advance(time.Duration(1+d.rng.IntN(20)) * time.Second)
	case soakOpCompact:
		mark, err := s.watermark(ctx, true)
		if err != nil {
			return err
		}
		in, err := h.Runtime.Compact(ctx, s.sid)
		if err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		s.mu.Lock()
		s.barriers[in.ID] = -1
		s.woke(mark)
		s.mu.Unlock()
	case soakOpAgent:
		agent := []string{"build", "plan"}[d.rng.IntN(2)]
		if err := h.Runtime.SelectAgent(ctx, s.sid, agent); err != nil {
			return fmt.Errorf("select agent %s: %w", agent, err)
		}
	case soakOpModel:
		model := messages.ModelRef{ProviderID: "script", ID: []string{"demo", "other"}[d.rng.IntN(2)]}
		if err := h.Runtime.SelectModel(ctx, s.sid, model); err != nil {
			return fmt.Errorf("select model %s: %w", model, err)
		}
	case soakOpMove:
		// Two drivers may move the Session at once: each moves it to the
		// directory it is not at by the store's latest read.
		cur, err := h.Store.Get(ctx, s.sid)
		if err != nil {
			return err
		}
		loc := messages.Location{Directory: s.run.dirs[0]}
		if cur.Location.Directory == s.run.dirs[0] {
			loc.Directory = s.run.dirs[1]
		}
		moved, err := h.Runtime.Move(ctx, s.sid, loc)
		if err != nil {
			return fmt.Errorf("move to %s: %w", loc.Directory, err)
		}
		if alone && moved.Location.Key() != loc.Clean().Key() {
			return fmt.Errorf("moved to %+v, want %+v", moved.Location, loc)
		}
		s.mu.Lock()
		s.moves++
		s.mu.Unlock()
	case soakOpEntry:
		// An API-managed instruction entry changes (as PUT and DELETE
		// /instruction/{key} do): the next boundary publishes an update.
		key := []string{"style", "tone"}[d.rng.IntN(2)]
		if d.rng.IntN(3) == 0 {
			if err := h.Store.DeleteEntry(ctx, s.sid, key); err != nil && messages.TypeOf(err) != messages.ErrNotFound {
				return fmt.Errorf("delete entry %s: %w", key, err)
			}
		} else if err := h.Store.PutEntry(ctx, s.sid, key, fmt.Sprintf("Entry %d.%d.%d.", s.idx, d.id, d.rng.IntN(1000))); err != nil {
			return fmt.Errorf("put entry %s: %w", key, err)
		}
	}
	return nil
}

// idle checks that the Session is idle after an interrupt or wait
// returned: not active, and its log has no open busy period.
func (s *soakSession) idle(ctx context.Context, after string) error {
	if _, active := s.run.h.Runtime.Active()[s.sid]; active {
		return fmt.Errorf("active after its %s returned", after)
	}
	open, err := s.busyOpen(ctx)
	if err != nil {
		return err
	}
	if open {
		return fmt.Errorf("%s returned with the busy period open (log up to seq %d)", after, s.scanned)
	}
	return nil
}

// watermark returns the Session's last seq when the operation about to run
// wakes it (else 0, unused).
func (s *soakSession) watermark(ctx context.Context, wakes bool) (int64, error) {
	if !wakes {
		return 0, nil
	}
	return s.run.h.Store.Watermark(ctx, s.sid)
}

// woke records a wake (of a prompt, compaction, wake or forced run) that
// found every input then pending: each must be promoted (or, for a
// barrier, settled) unless an interrupt clears the wake or a busy period
// fails after it. s.mu is held.
func (s *soakSession) woke(mark int64) {
	for _, rc := range s.receipts {
		rc.wokenAt = mark
	}
	for id := range s.barriers {
		s.barriers[id] = mark
	}
}

// forget records that no wake is pending any more (an interrupt, a
// restart). s.mu is held.
func (s *soakSession) forget() {
	for _, rc := range s.receipts {
		rc.wokenAt = -1
	}
	for id := range s.barriers {
		s.barriers[id] = -1
	}
}

// awaitHold waits, at most soakHold, for a stream of the Session to be held
// at a gate or one of its tools to block.
func (s *soakSession) awaitHold() {
	deadline := time.NewTimer(soakHold)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		blocked, gates, changed := len(s.blocked) > 0, slices.Clone(s.gates), s.changed
		s.mu.Unlock()
		if _, busy := s.run.h.Runtime.Active()[s.sid]; blocked || !busy {
			return // nothing will block in an idle Session
		}
		for _, g := range gates {
			if g.Arrivals() > 0 {
				return
			}
		}
		if len(gates) > 0 {
			// A stream is on its way to a gate.
			ctx, cancel := context.WithTimeout(context.Background(), soakHold)
			err := gates[len(gates)-1].Reached(ctx)
			cancel()
			if err == nil {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			return
		}
	}
}

// release lets one held stream or blocked tool of the Session go on.
func (s *soakSession) release(rng *rand.Rand) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.gates) + len(s.blocked)
	if n == 0 {
		return
	}
	if i := rng.IntN(n); i < len(s.gates) {
		s.gates[i].Release()
		s.gates = slices.Delete(s.gates, i, i+1)
	} else {
		i -= len(s.gates)
		close(s.blocked[i].release)
		s.blocked = slices.Delete(s.blocked, i, i+1)
	}
}

// busyOpen reads the log from where it last stopped and reports whether
// a busy period is open at its end. Only a lone driver calls it.
func (s *soakSession) busyOpen(ctx context.Context) (bool, error) {
	for item, err := range s.run.h.Store.Log(ctx, s.sid, s.scanned, false) {
		if err != nil {
			return false, err
		}
		if ev := item.Event; ev != nil {
			s.scanned = ev.Durable.Seq
			switch ev.Type {
			case messages.TypeExecutionStarted:
				s.busy = true
			case messages.TypeExecutionSucceeded, messages.TypeExecutionFailed, messages.TypeExecutionInterrupted:
				s.busy = false
			}
		}
	}
	return s.busy, nil
}

// --- What subscribers saw ---

// soakWatch records what one harness's subscribers saw: every event the
// live bus carried, and each Session's durable log tail.
type soakWatch struct {
	// from is each Session's last seq before the watch began (-1 for a
	// Session created after).
	from    map[messages.SessionID]int64
	sub     *actors.Subscription
	busDone chan struct{}
	bus     []messages.Event // the bus goroutine's until busDone
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	tails   map[messages.SessionID]*soakTail
	stopped sync.Once // the bus
}

// soakTail is one Session's log tail.
type soakTail struct {
	mu      sync.Mutex
	evs     []messages.Event
	err     error
	changed chan struct{} // closed and replaced on every event
}

// watch subscribes to the bus and tails every Session's log; nothing runs
// yet.
func (r *soakRun) watch() {
	w := &soakWatch{from: map[messages.SessionID]int64{}, busDone: make(chan struct{}), tails: map[messages.SessionID]*soakTail{}}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for _, s := range r.sessions {
		mark, err := r.h.Store.Watermark(ctx, s.sid)
		if err != nil {
			r.t.Fatal(err)
		}
		w.from[s.sid] = mark
	}
	w.sub = r.h.Runtime.Bus().Subscribe(1<<16, nil)
	go func() {
		defer close(w.busDone)
		for ev := range w.sub.C {
			w.bus = append(w.bus, ev)
		}
	}()
	for _, s := range r.sessions {
		tl := &soakTail{changed: make(chan struct{})}
		w.tails[s.sid] = tl
		w.wg.Go(func() {
			for item, err := range r.h.Store.Log(ctx, s.sid, w.from[s.sid], true) {
				tl.mu.Lock()
				if err != nil {
					tl.err = err
				} else if item.Event != nil {
					tl.evs = append(tl.evs, *item.Event)
				}
				close(tl.changed)
				tl.changed = make(chan struct{})
				tl.mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	r.watches = append(r.watches, w)
	r.t.Cleanup(func() { w.stopTails(); w.stopBus() }) // after a failure; else a no-op
}

// await waits until every tail has delivered its Session's last event.
func (w *soakWatch) await(r *soakRun) {
	deadline := time.NewTimer(actortest.Timeout)
	defer deadline.Stop()
	for sid, tl := range w.tails {
		want, err := r.h.Store.Watermark(context.Background(), sid)
		if err != nil {
			r.t.Fatal(err)
		}
		for {
			tl.mu.Lock()
			done := tl.err != nil || (len(tl.evs) > 0 && tl.evs[len(tl.evs)-1].Durable.Seq >= want) || want <= w.from[sid]
			changed := tl.changed
			tl.mu.Unlock()
			if done {
				break
			}
			select {
			case <-changed:
			case <-deadline.C:
				r.t.Errorf("seed %d: the log tail of %s did not reach seq %d within %v", r.seed, sid, want, actortest.Timeout)
				return
			}
		}
	}
}

func (w *soakWatch) stopTails() {
	w.cancel()
	w.wg.Wait()
}

func (w *soakWatch) stopBus() {
	w.stopped.Do(func() {
		w.sub.Close()
		<-w.busDone
	})
}

// check checks what the watch saw of a Session against its log: the bus
// carried its durable events after from, up to upto, each once and in seq
// order, with every live delta inside its fragment; the tail delivered the
// same events in order (all of them in the last watch, which is awaited).
func (w *soakWatch) check(sid messages.SessionID, evs []messages.Event, upto int64) []soakViolation {
	var v soakViolations
	if w.sub.Dropped() {
		v.add(-1, "the bus cut the test's subscriber off (a buffer of %d events)", 1<<16)
		return v
	}
	type fragment struct {
		kind string
		asst messages.MessageID
		key  string
	}
	open := map[fragment]bool{}
	next := w.from[sid] + 1
	for _, ev := range w.bus {
		if ev.Data == nil || ev.Data.Session() != sid {
			continue
		}
		if ev.Durable != nil {
			if ev.Durable.Seq != next || next >= int64(len(evs)) || evs[next].ID != ev.ID || evs[next].Type != ev.Type {
				v.add(int(min(next, int64(len(evs)-1))), "the bus carried %s seq %d (%s) where the log has seq %d next", ev.Type, ev.Durable.Seq, ev.ID, next)
				return v
			}
			next++
		}
		switch p := ev.Data.(type) {
		case *messages.TextStarted:
			open[fragment{"text", p.AssistantMessageID, fmt.Sprint(p.Ordinal)}] = true
		case *messages.TextEnded:
			delete(open, fragment{"text", p.AssistantMessageID, fmt.Sprint(p.Ordinal)})
		case *messages.ReasoningStarted:
			open[fragment{"reasoning", p.AssistantMessageID, fmt.Sprint(p.Ordinal)}] = true
		case *messages.ReasoningEnded:
			delete(open, fragment{"reasoning", p.AssistantMessageID, fmt.Sprint(p.Ordinal)})
		case *messages.ToolInputStarted:
			open[fragment{"tool", p.AssistantMessageID, p.CallID}] = true
		case *messages.ToolInputEnded:
			delete(open, fragment{"tool", p.AssistantMessageID, p.CallID})
		case *messages.ToolFailed:
			delete(open, fragment{"tool", p.AssistantMessageID, p.CallID})
		case *messages.CompactionStarted:
			open[fragment{"compaction", "", string(p.InputID)}] = true
		case *messages.CompactionEnded:
			delete(open, fragment{"compaction", "", string(p.InputID)})
		case *messages.CompactionFailed:
			delete(open, fragment{"compaction", "", string(p.InputID)})
		case *messages.TextDelta:
			if !open[fragment{"text", p.AssistantMessageID, fmt.Sprint(p.Ordinal)}] {
				v.add(int(next-1), "the bus carried a text delta of %s #%d outside its fragment", p.AssistantMessageID, p.Ordinal)
			}
		case *messages.ReasoningDelta:
			if !open[fragment{"reasoning", p.AssistantMessageID, fmt.Sprint(p.Ordinal)}] {
				v.add(int(next-1), "the bus carried a reasoning delta of %s #%d outside its fragment", p.AssistantMessageID, p.Ordinal)
			}
		case *messages.ToolInputDelta:
			if !open[fragment{"tool", p.AssistantMessageID, p.CallID}] {
				v.add(int(next-1), "the bus carried a tool input delta of %s %s outside its input", p.AssistantMessageID, p.CallID)
			}
		case *messages.CompactionDelta:
			if !open[fragment{"compaction", "", string(p.InputID)}] {
				v.add(int(next-1), "the bus carried a compaction delta of %s outside its compaction", p.InputID)
			}
		}
	}
	if next-1 != upto {
		v.add(int(min(next, upto)), "the bus carried the log up to seq %d, not %d", next-1, upto)
	}
	tl := w.tails[sid]
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.err != nil {
		v.add(-1, "log tail: %v", tl.err)
	}
	for i, ev := range tl.evs {
		want := w.from[sid] + 1 + int64(i)
		if ev.Durable == nil || ev.Durable.Seq != want || want >= int64(len(evs)) || evs[want].ID != ev.ID {
			v.add(int(min(want, int64(len(evs)-1))), "the log tail delivered %s %+v where seq %d comes next", ev.Type, ev.Durable, want)
			break
		}
	}
	return v
}

// --- The invariants ---

// soakViolation is a broken invariant at event index at (-1: none).
type soakViolation struct {
	at  int
	msg string
}

type soakViolations []soakViolation

func (v *soakViolations) add(at int, format string, args ...any) {
	*v = append(*v, soakViolation{at: at, msg: fmt.Sprintf(format, args...)})
}

// soakBusyOnly are the event types only a drain writes: they belong inside a
// busy period.
var soakBusyOnly = map[string]bool{
	messages.TypePromptPromoted: true, messages.TypeCompactionStarted: true, messages.TypeCompactionEnded: true,
	messages.TypeCompactionFailed: true, messages.TypeInstructionsBaselined: true, messages.TypeInstructionsUpdated: true,
	messages.TypeStepStarted: true, messages.TypeStepEnded: true, messages.TypeStepFailed: true,
	messages.TypeTextStarted: true, messages.TypeTextEnded: true, messages.TypeReasoningStarted: true,
	messages.TypeReasoningEnded: true, messages.TypeToolInputStarted: true, messages.TypeToolInputEnded: true,
	messages.TypeToolCalled: true, messages.TypeToolSucceeded: true, messages.TypeToolFailed: true,
	messages.TypeRetryScheduled: true,
}

// soakStep is the open step while checking a log.
type soakStep struct {
	at    int
	asst  messages.MessageID
	calls map[string]*soakCallState
	open  [2]int // index of the open text, reasoning fragment's start; -1 none
}

// soakCallState is one call (or cut-off tool input) of a step.
type soakCallState struct {
	at       int // its tool.called (or tool.input.started)
	called   *messages.ToolCalled
	settled  int // index of its settlement, -1 none
	success  *messages.ToolSucceeded
	failure  *messages.ToolFailed
	stepDone bool
}

// soakInput is an inbox row as the log shows it.
type soakInput struct {
	admitted int // index of its admission
	delivery messages.Delivery
	promoted int // index of its promotion (prompt) or settlement (barrier); -1 none
	barrier  bool
}

// checkSoakLog checks one Session's whole log against the invariants of
// SEED.md, and against what the driver and the tools recorded. ids collects
// event IDs across Sessions.
func checkSoakLog(s *soakSession, evs []messages.Event, ids map[messages.EventID]messages.SessionID) []soakViolation {
	var v soakViolations
	// 1. seqs 0..n, no duplicates; event IDs unique.
	for i, ev := range evs {
		if ev.Durable == nil || ev.Durable.Seq != int64(i) || ev.Durable.AggregateID != s.sid {
			v.add(i, "event %d has durable %+v, want seq %d of %s", i, ev.Durable, i, s.sid)
		}
		if other, dup := ids[ev.ID]; dup {
			v.add(i, "event ID %s used twice (also in %s)", ev.ID, other)
		}
		ids[ev.ID] = s.sid
		if ev.Data == nil || ev.Data.Type() != ev.Type || ev.Data.Session() != s.sid {
			v.add(i, "event %d: payload %T does not match type %s and Session %s", i, ev.Data, ev.Type, s.sid)
		}
	}
	if len(v) > 0 {
		return v
	}

	busy := -1         // index of the open busy period's start
	var step *soakStep // the open step
	attempts := map[messages.MessageID]int{}
	ordinals := map[messages.MessageID]*[2]int{}
	lastStep := map[messages.MessageID]string{} // type of each assistant message's last step terminal
	calls := map[soakCall]*soakCallState{}
	var retry *messages.RetryScheduled // scheduled, its step not started yet
	retryAt := -1
	compacting, compactingAt := (*messages.CompactionStarted)(nil), -1
	overflowed := false // an overflow compaction ended since the last step started
	inputs := map[messages.MessageID]*soakInput{}
	var order []messages.MessageID // admissions in log order
	reasons := map[string]int{}
	// The instruction checkpoint: initialized before any input becomes
	// model-visible, reset by a move, rebaselined by a completed
	// compaction in its commit, and advanced only by a change.
	baselined, instructions := false, s.run.instructions
	var applied map[string]string

	for i, ev := range evs {
		if soakBusyOnly[ev.Type] && busy < 0 {
			v.add(i, "%s outside a busy period", ev.Type)
		}
		switch p := ev.Data.(type) {
		case *messages.SessionMoved:
			baselined, applied = false, nil
		case *messages.InstructionsBaselined:
			baselined, applied = true, p.Applied
		case *messages.InstructionsUpdated:
			if !baselined {
				v.add(i, "instructions updated without a baseline since the Session was created or moved")
			} else if maps.Equal(applied, p.Applied) {
				v.add(i, "an instruction update that changes nothing: %v", p.Applied)
			}
			applied = p.Applied
		case *messages.StepStarted, *messages.PromptPromoted:
			if instructions && !baselined {
				v.add(i, "%s before the instruction baseline (since the Session was created or moved)", ev.Type)
			}
		case *messages.CompactionEnded:
			if instructions && (i+1 == len(evs) || evs[i+1].Type != messages.TypeInstructionsBaselined) {
				v.add(i, "a completed compaction without a fresh instruction baseline in its commit")
			}
		}
		switch p := ev.Data.(type) {
		case *messages.ExecutionStarted:
			if busy >= 0 {
				v.add(i, "execution.started while the busy period started at %d has no terminal", busy)
			}
			busy = i
		case *messages.ExecutionSucceeded, *messages.ExecutionFailed, *messages.ExecutionInterrupted:
			if busy < 0 {
				v.add(i, "%s without execution.started", ev.Type)
			}
			if step != nil {
				v.add(i, "busy period ends with the step of %s (started at %d) open", step.asst, step.at)
				step = nil
			}
			if compacting != nil {
				v.add(i, "busy period ends with the compaction started at %d unsettled", compactingAt)
				compacting = nil
			}
			if in, ok := p.(*messages.ExecutionInterrupted); ok {
				reasons[in.Reason]++
			}
			busy, retry = -1, nil
		case *messages.StepStarted:
			if step != nil {
				v.add(i, "step of %s starts while the step of %s (started at %d) is open", p.AssistantMessageID, step.asst, step.at)
			}
			if compacting != nil {
				v.add(i, "step starts inside the compaction started at %d", compactingAt)
			}
			prev, seen := attempts[p.AssistantMessageID]
			switch {
			case retry != nil && (retry.AssistantMessageID != p.AssistantMessageID || retry.Attempt != p.Attempt):
				v.add(i, "step %s attempt %d starts where the retry scheduled at %d was for %s attempt %d",
					p.AssistantMessageID, p.Attempt, retryAt, retry.AssistantMessageID, retry.Attempt)
			case retry == nil && seen:
				v.add(i, "step %s attempt %d starts again without a retry scheduled (attempt %d before)", p.AssistantMessageID, p.Attempt, prev)
			case !seen && p.Attempt != 1 && !(p.Attempt == 5 && overflowed):
				v.add(i, "new step %s starts at attempt %d", p.AssistantMessageID, p.Attempt)
			}
			if seen && lastStep[p.AssistantMessageID] != messages.TypeStepFailed {
				v.add(i, "step %s attempt %d retries a step that did not fail", p.AssistantMessageID, p.Attempt)
			}
			attempts[p.AssistantMessageID] = p.Attempt
			retry, overflowed = nil, false
			step = &soakStep{at: i, asst: p.AssistantMessageID, calls: map[string]*soakCallState{}, open: [2]int{-1, -1}}
			if ordinals[p.AssistantMessageID] == nil {
				ordinals[p.AssistantMessageID] = new([2]int)
			}
		case *messages.StepEnded, *messages.StepFailed:
			asst := soakAsst(p)
			if step == nil || step.asst != asst {
				v.add(i, "%s for %s, which has no open step", ev.Type, asst)
				break
			}
			for id, c := range step.calls {
				if c.settled < 0 {
					v.add(i, "step %s closes with call %s (at %d) unsettled", asst, id, c.at)
				}
				c.stepDone = true
			}
			for k, at := range step.open {
				if at >= 0 {
					v.add(i, "step %s closes with the %s fragment started at %d open", asst, []string{"text", "reasoning"}[k], at)
				}
			}
			lastStep[asst] = ev.Type
			step = nil
		case *messages.TextStarted, *messages.ReasoningStarted, *messages.TextEnded, *messages.ReasoningEnded:
			asst, kind, ordinal, start := soakFragment(p)
			if step == nil || step.asst != asst {
				v.add(i, "%s for %s outside its step", ev.Type, asst)
				break
			}
			next := &ordinals[asst][kind]
			switch {
			case start && step.open[kind] >= 0:
				v.add(i, "a second %s starts while the one started at %d is open", ev.Type, step.open[kind])
			case start && ordinal != *next:
				v.add(i, "%s with ordinal %d, want %d", ev.Type, ordinal, *next)
			case start:
				step.open[kind] = i
			case step.open[kind] < 0 || ordinal != *next:
				v.add(i, "%s with ordinal %d does not close an open fragment (next ordinal %d)", ev.Type, ordinal, *next)
			default:
				step.open[kind] = -1
				*next++
			}
		case *messages.ToolInputStarted:
			if step == nil || step.asst != p.AssistantMessageID {
				v.add(i, "tool input %s outside its step", p.CallID)
				break
			}
			if step.calls[p.CallID] != nil {
				v.add(i, "tool input %s started twice in a step", p.CallID)
				break
			}
			c := &soakCallState{at: i, settled: -1}
			step.calls[p.CallID] = c
			calls[soakCall{s.sid, p.AssistantMessageID, p.CallID}] = c
		case *messages.ToolInputEnded:
			if step == nil || step.asst != p.AssistantMessageID || step.calls[p.CallID] == nil {
				v.add(i, "tool input %s ends outside its step or without starting", p.CallID)
			}
		case *messages.ToolCalled:
			if step == nil || step.asst != p.AssistantMessageID {
				v.add(i, "tool call %s outside its step", p.CallID)
				break
			}
			c := step.calls[p.CallID]
			switch {
			case c == nil:
				c = &soakCallState{at: i, settled: -1}
				step.calls[p.CallID] = c
			case c.called != nil:
				v.add(i, "tool call %s called twice in a step", p.CallID)
			case c.settled >= 0:
				v.add(i, "tool call %s called after its input was settled at %d", p.CallID, c.settled)
			}
			c.called = p
			key := soakCall{s.sid, p.AssistantMessageID, p.CallID}
			if old := calls[key]; old != nil && old != c {
				v.add(i, "call ID %s reused within assistant message %s", p.CallID, p.AssistantMessageID)
			}
			calls[key] = c
		case *messages.ToolSucceeded, *messages.ToolFailed:
			asst, id := soakSettled(p)
			if step == nil || step.asst != asst {
				v.add(i, "%s for %s outside its step", ev.Type, id)
				break
			}
			c := step.calls[id]
			if c == nil {
				v.add(i, "%s for %s, which was never called in this step", ev.Type, id)
				break
			}
			if c.settled >= 0 {
				v.add(i, "call %s settled again (first at %d)", id, c.settled)
				break
			}
			c.settled = i
			if ok, isOK := p.(*messages.ToolSucceeded); isOK {
				c.success = ok
			} else {
				c.failure = p.(*messages.ToolFailed)
			}
		case *messages.RetryScheduled:
			if step != nil {
				v.add(i, "retry scheduled inside the open step of %s", step.asst)
			}
			if lastStep[p.AssistantMessageID] != messages.TypeStepFailed || attempts[p.AssistantMessageID] != p.Attempt-1 {
				v.add(i, "retry of %s for attempt %d after attempt %d ended with %s", p.AssistantMessageID, p.Attempt,
					attempts[p.AssistantMessageID], lastStep[p.AssistantMessageID])
			}
			if p.Attempt > 5 {
				v.add(i, "retry for attempt %d: the policy allows five", p.Attempt)
			}
			retry, retryAt = p, i
		case *messages.PromptAdmitted:
			if inputs[p.InputID] != nil {
				v.add(i, "input %s admitted again (first at %d)", p.InputID, inputs[p.InputID].admitted)
				break
			}
			inputs[p.InputID] = &soakInput{admitted: i, delivery: p.Delivery, promoted: -1}
			order = append(order, p.InputID)
		case *messages.CompactionAdmitted:
			if inputs[p.InputID] != nil {
				v.add(i, "barrier %s admitted again", p.InputID)
				break
			}
			for _, id := range order {
				if in := inputs[id]; in.barrier && in.promoted < 0 {
					v.add(i, "barrier %s admitted while barrier %s is pending: they coalesce", p.InputID, id)
				}
			}
			inputs[p.InputID] = &soakInput{admitted: i, promoted: -1, barrier: true}
			order = append(order, p.InputID)
		case *messages.PromptPromoted:
			in := inputs[p.InputID]
			if in == nil || in.barrier {
				v.add(i, "promotion of %s, which was not admitted as a prompt", p.InputID)
				break
			}
			if in.promoted >= 0 {
				v.add(i, "input %s promoted again (first at %d)", p.InputID, in.promoted)
				break
			}
			in.promoted = i
			for _, id := range order {
				o := inputs[id]
				switch {
				case o.admitted >= in.admitted:
				case o.barrier && o.promoted < 0:
					// A boundary that saw this prompt saw the barrier too.
					v.add(i, "%s promoted while the barrier %s admitted before it (at %d) is pending", p.InputID, id, o.admitted)
				case o.barrier || o.promoted >= 0:
				case o.delivery == in.delivery:
					v.add(i, "%s (%s) promoted before %s, admitted earlier with the same delivery", p.InputID, in.delivery, id)
				case in.delivery == messages.Queue:
					v.add(i, "queued %s promoted while the steer %s admitted before it is pending", p.InputID, id)
				}
			}
			if in.delivery == messages.Queue && i > 0 {
				if prev, ok := evs[i-1].Data.(*messages.PromptPromoted); ok && inputs[prev.InputID].delivery == messages.Queue {
					v.add(i, "two queued prompts promoted at one boundary")
				}
			}
		case *messages.CompactionStarted:
			if step != nil {
				v.add(i, "compaction starts inside the step of %s", step.asst)
			}
			if compacting != nil {
				v.add(i, "compaction starts while the one started at %d runs", compactingAt)
			}
			if p.Reason == messages.CompactionManual {
				if in := inputs[p.InputID]; in == nil || !in.barrier || in.promoted >= 0 {
					v.add(i, "manual compaction %s runs without a pending barrier", p.InputID)
				}
			}
			compacting, compactingAt = p, i
		case *messages.CompactionEnded, *messages.CompactionFailed:
			reason, id := soakCompactionEnd(p)
			if compacting == nil || compacting.InputID != id || compacting.Reason != reason {
				v.add(i, "%s for %s %s, which is not the running compaction", ev.Type, reason, id)
			}
			compacting = nil
			overflowed = reason == messages.CompactionOverflow && ev.Type == messages.TypeCompactionEnded
			if reason == messages.CompactionManual {
				if in := inputs[id]; in == nil || !in.barrier || in.promoted >= 0 {
					v.add(i, "barrier %s settled without being pending", id)
				} else {
					in.promoted = i
				}
			}
		}
	}
	end := len(evs) - 1
	if busy >= 0 {
		v.add(busy, "the busy period started here never ended")
	}

	// 4. Inbox: every receipt is the log's admission, and every admission
	// a receipt; after the final resume every input is settled.
	for id, rc := range s.byID {
		in := inputs[id]
		switch {
		case in == nil || in.barrier:
			v.add(-1, "receipt %+v has no admission in the log", rc.got)
		case int64(in.admitted) != rc.got.AdmittedSeq || in.delivery != rc.got.Delivery ||
			evs[in.admitted].Data.(*messages.PromptAdmitted).Prompt.Text != rc.got.Prompt.Text:
			v.add(in.admitted, "receipt %+v differs from its admission", rc.got)
		}
	}
	for _, id := range order {
		in := inputs[id]
		if !in.barrier && s.byID[id] == nil {
			v.add(in.admitted, "admission of %s, which no caller was given a receipt for", id)
		}
		if in.promoted < 0 {
			v.add(in.admitted, "input %s is still pending after the final resume", id)
		}
	}
	for id := range s.barriers {
		if in := inputs[id]; in == nil || !in.barrier {
			v.add(-1, "compaction %s returned by Compact has no admission", id)
		}
	}

	// 5. Tools: each Go tool ran at most once per call, only for a
	// recorded local call, and its settlement says what it did.
	s.run.mu.Lock()
	invoked := map[soakCall]soakInvocation{}
	for k, inv := range s.run.calls {
		if k.sid == s.sid {
			invoked[k] = *inv
		}
	}
	s.run.mu.Unlock()
	for k, inv := range invoked {
		c := calls[k]
		switch {
		case inv.n > 1:
			v.add(-1, "tool %s ran %d times for call %s of %s", inv.tool, inv.n, k.id, k.asst)
		case c == nil || c.called == nil:
			v.add(-1, "tool %s ran for call %s of %s, which the log does not have", inv.tool, k.id, k.asst)
		case c.called.Executed:
			v.add(c.at, "tool %s ran for the hosted call %s", inv.tool, k.id)
		case c.called.Name != inv.tool:
			v.add(c.at, "tool %s ran for call %s of tool %s", inv.tool, k.id, c.called.Name)
		case c.settled < 0:
			v.add(c.at, "call %s ran but was never settled", k.id)
		}
	}
	for k, c := range calls {
		if c.settled < 0 {
			if !c.stepDone {
				v.add(c.at, "call %s of %s never settled", k.id, k.asst)
			}
			continue
		}
		_, ran := invoked[k]
		if msg := soakOutcome(c, ran, k.id); msg != "" {
			v.add(c.settled, "call %s: %s", k.id, msg)
		}
	}

	// 6. Interrupt reasons: user for Interrupt calls, superseded for moves,
	// shutdown for a restart.
	for reason, n := range reasons {
		switch {
		case reason == messages.ReasonUser && n <= s.interrupts:
		case reason == messages.ReasonSuperseded && n <= s.moves:
		case reason == messages.ReasonShutdown && n <= s.restarts:
		default:
			v.add(end, "%d busy periods interrupted with reason %q (%d interrupts, %d moves, %d restarts)", n, reason, s.interrupts, s.moves, s.restarts)
		}
	}
	return v
}

// soakOutcome checks a call's settlement against what its tool did (ran
// is whether a Go tool ran for it), and returns what is wrong ("" if
// nothing).
func soakOutcome(c *soakCallState, ran bool, id string) string {
	switch {
	case c.called == nil:
		// A tool input cut off before its call.
		if c.failure == nil || c.failure.Error.Type != messages.ErrToolResultMissing {
			return fmt.Sprintf("cut-off input settled as %+v %+v", c.success, c.failure)
		}
	case c.called.Executed:
		if c.success != nil && c.success.Output != "hosted:"+id {
			return fmt.Sprintf("hosted call succeeded with %q", c.success.Output)
		}
		if c.failure != nil && c.failure.Error.Type != messages.ErrToolResultMissing {
			return fmt.Sprintf("hosted call failed as %+v", c.failure.Error)
		}
	case !ran:
		if c.success != nil {
			return fmt.Sprintf("succeeded with %q although no tool ran", c.success.Output)
		}
		if t := c.failure.Error.Type; t != messages.ErrAborted && t != messages.ErrToolExecution {
			return fmt.Sprintf("not run, settled as %+v", c.failure.Error)
		}
	default:
		want := map[string]string{"ok": "ok:" + id, "block": "released:" + id}[c.called.Name]
		switch name := c.called.Name; {
		case c.success != nil && (want == "" || c.success.Output != want):
			return fmt.Sprintf("%s succeeded with %q", name, c.success.Output)
		case c.failure == nil:
		case name == "fail" && c.failure.Error == (messages.Error{Type: messages.ErrToolExecution, Message: "fail:" + id}):
		case name == "panic" && c.failure.Error.Type == messages.ErrUnknown && strings.Contains(c.failure.Error.Message, "panic:"+id):
		case name == "block" && c.failure.Error.Type == messages.ErrAborted:
		default:
			return fmt.Sprintf("%s ran and failed as %+v", name, c.failure.Error)
		}
	}
	return ""
}

// checkSoakWakes checks, before the final resume, that no wake was lost
// (SEED.md: wakes coalesce, and only an interrupt clears them): an input
// pending with the Session idle, woken by an operation no interrupt
// followed, was seen by a busy period that started after the wake and
// failed (a failure may leave queued input behind, for a later wake);
// any other busy period that started after it would have gone on until
// nothing was eligible. A wake that finds a busy period running joins it
// as a follow-up: when the drain running then ends with nothing eligible
// (it looked before the admission), the follow-up drain sees the input,
// and it too may fail with queued input left, ending that busy period with
// no new one after the wake. So a busy period that started before the
// wake and failed after it excuses the input as well. (A follow-up still
// registered when a drain fails starts a fresh busy period instead; the
// log cannot tell the two apart, and the coordinator's table tests cover
// it.)
func checkSoakWakes(s *soakSession, evs []messages.Event) []soakViolation {
	var v soakViolations
	settled := map[messages.MessageID]bool{}
	type period struct {
		start, end int64 // end is the terminal's seq, -1 while none
		terminal   string
	}
	var periods []period
	for _, ev := range evs {
		switch p := ev.Data.(type) {
		case *messages.PromptPromoted:
			settled[p.InputID] = true
		case *messages.CompactionEnded:
			settled[p.InputID] = p.Reason == messages.CompactionManual
		case *messages.CompactionFailed:
			settled[p.InputID] = p.Reason == messages.CompactionManual
		case *messages.ExecutionStarted:
			periods = append(periods, period{start: ev.Durable.Seq, end: -1})
		case *messages.ExecutionSucceeded, *messages.ExecutionFailed, *messages.ExecutionInterrupted:
			if len(periods) > 0 {
				periods[len(periods)-1].terminal = strings.TrimSuffix(strings.TrimPrefix(ev.Type, "session."), ".1") + soakDetail(p)
				periods[len(periods)-1].end = ev.Durable.Seq
			}
		}
	}
	check := func(id messages.MessageID, at int, wokenAt int64) {
		if wokenAt < 0 || settled[id] {
			return
		}
		i := len(periods) - 1
		failed := i >= 0 && (periods[i].terminal == "execution.failed" || strings.HasPrefix(periods[i].terminal, "execution.failed("))
		switch {
		case i >= 0 && periods[i].start <= wokenAt && periods[i].end > wokenAt && failed:
			// Running when woken, and failed after: a follow-up drain may
			// have failed.
		case i < 0 || periods[i].start <= wokenAt:
			v.add(at, "%s is pending with the Session idle, and no busy period started after the wake at seq %d: the wake was lost", id, wokenAt)
		case !failed:
			v.add(int(periods[i].start), "%s is pending with the Session idle, although the busy period that started after its wake (at seq %d) ended with %s",
				id, wokenAt, periods[i].terminal)
		}
	}
	for _, rc := range s.receipts {
		check(rc.got.ID, int(rc.got.AdmittedSeq), rc.wokenAt)
	}
	for id, at := range s.barriers {
		check(id, -1, at)
	}
	return v
}

// checkStore checks the store's reads of a Session after the final resume:
// nothing pending, every row's receipt as first returned and its promotion
// where the log has it, no open step, every projected message settled.
func (r *soakRun) checkStore(s *soakSession, evs []messages.Event) []soakViolation {
	var v soakViolations
	ctx, cancel := soakCtx()
	defer cancel()
	if rows, err := r.h.Store.Pending(ctx, s.sid); err != nil || len(rows) != 0 {
		v.add(-1, "pending after the final resume: %+v %v", rows, err)
	}
	promoted := map[messages.MessageID]int64{}
	for _, ev := range evs {
		if p, ok := ev.Data.(*messages.PromptPromoted); ok {
			promoted[p.InputID] = ev.Durable.Seq
		}
	}
	for id, rc := range s.byID {
		in, err := r.h.Store.Input(ctx, id)
		switch {
		case err != nil:
			v.add(-1, "input %s: %v", id, err)
		case !reflect.DeepEqual(in.Receipt(), rc.got):
			v.add(-1, "input %s reads as %+v, its receipt was %+v", id, in.Receipt(), rc.got)
		case in.PromotedSeq == nil || *in.PromotedSeq != promoted[id]:
			v.add(int(rc.got.AdmittedSeq), "input %s has promotedSeq %v, its promotion is at %d", id, in.PromotedSeq, promoted[id])
		}
	}
	if open, err := r.h.Store.OpenSteps(ctx, s.sid); err != nil || len(open) != 0 {
		v.add(-1, "open steps after the final resume: %d %v", len(open), err)
	}
	after := int64(-1)
	for {
		page, err := r.h.Store.Messages(ctx, s.sid, persistence.Query{After: after, Limit: 100})
		if err != nil {
			v.add(-1, "messages: %v", err)
			break
		}
		for _, m := range page.Data {
			after = m.Seq
			if m.Open || m.Retry != nil {
				v.add(int(m.Seq), "message %s is open (%v) or has a retry scheduled (%+v)", m.ID, m.Open, m.Retry)
			}
			if c := m.Compaction; c != nil && c.State != persistence.CompactionCompleted && c.State != persistence.CompactionFailed {
				v.add(int(m.Seq), "compaction row %s is %s", m.ID, c.State)
			}
			var next [2]int
			for _, p := range m.Parts {
				switch {
				case p.Tool != nil && p.Tool.State != persistence.ToolCompleted && p.Tool.State != persistence.ToolError:
					v.add(int(m.Seq), "message %s has tool %s %s", m.ID, p.Tool.CallID, p.Tool.State)
				case p.Kind == persistence.PartText || p.Kind == persistence.PartReasoning:
					k := 0
					if p.Kind == persistence.PartReasoning {
						k = 1
					}
					if !p.Ended || p.Ordinal != next[k] {
						v.add(int(m.Seq), "message %s has %s part ordinal %d (ended %v), want %d", m.ID, p.Kind, p.Ordinal, p.Ended, next[k])
					}
					next[k]++
				}
			}
		}
		if !page.HasMore {
			break
		}
	}
	return v
}

func soakAsst(p messages.Payload) messages.MessageID {
	switch p := p.(type) {
	case *messages.StepEnded:
		return p.AssistantMessageID
	case *messages.StepFailed:
		return p.AssistantMessageID
	}
	return ""
}

// soakFragment returns a fragment event's assistant message, kind (0 text,
// 1 reasoning), ordinal and whether it starts the fragment.
func soakFragment(p messages.Payload) (messages.MessageID, int, int, bool) {
	switch p := p.(type) {
	case *messages.TextStarted:
		return p.AssistantMessageID, 0, p.Ordinal, true
	case *messages.TextEnded:
		return p.AssistantMessageID, 0, p.Ordinal, false
	case *messages.ReasoningStarted:
		return p.AssistantMessageID, 1, p.Ordinal, true
	case *messages.ReasoningEnded:
		return p.AssistantMessageID, 1, p.Ordinal, false
	}
	return "", 0, 0, false
}

func soakSettled(p messages.Payload) (messages.MessageID, string) {
	switch p := p.(type) {
	case *messages.ToolSucceeded:
		return p.AssistantMessageID, p.CallID
	case *messages.ToolFailed:
		return p.AssistantMessageID, p.CallID
	}
	return "", ""
}

func soakCompactionEnd(p messages.Payload) (reason string, id messages.MessageID) {
	switch p := p.(type) {
	case *messages.CompactionEnded:
		return p.Reason, p.InputID
	case *messages.CompactionFailed:
		return p.Reason, p.InputID
	}
	return "", ""
}

// TestSoakCheckerCatches feeds the soak test's checkers logs (and what a
// bus carried) that break one invariant each, so a checker that passes
// everything cannot go unnoticed.
func TestSoakCheckerCatches(t *testing.T) {
	const sid = messages.SessionID("ses_check")
	a := messages.MessageID("msg_a")
	started := &messages.ExecutionStarted{SessionID: sid}
	ended := &messages.ExecutionSucceeded{SessionID: sid}
	failed := &messages.ExecutionFailed{SessionID: sid}
	step := &messages.StepStarted{SessionID: sid, AssistantMessageID: a, Attempt: 1}
	stepEnd := &messages.StepEnded{SessionID: sid, AssistantMessageID: a}
	call := &messages.ToolCalled{SessionID: sid, AssistantMessageID: a, CallID: "c1", Name: "ok"}
	okd := &messages.ToolSucceeded{SessionID: sid, AssistantMessageID: a, CallID: "c1", Output: "ok:c1"}
	text := &messages.TextStarted{SessionID: sid, AssistantMessageID: a}
	textEnd := &messages.TextEnded{SessionID: sid, AssistantMessageID: a}
	delta := &messages.TextDelta{SessionID: sid, AssistantMessageID: a}
	adm := func(id string, d messages.Delivery) messages.Payload {
		return &messages.PromptAdmitted{SessionID: sid, InputID: messages.MessageID(id), Prompt: messages.Prompt{Text: id}, Delivery: d}
	}
	prom := func(id string) messages.Payload {
		return &messages.PromptPromoted{SessionID: sid, InputID: messages.MessageID(id)}
	}
	created := &messages.SessionCreated{SessionID: sid}
	for _, tc := range []struct {
		name string
		log  []messages.Payload
		// woken is the seq before the wake of every admitted prompt (for
		// checkSoakWakes); bus is what the bus carried, as log indexes
		// (-1: delta), for soakWatch.check. Without either, checkSoakLog.
		woken *int64
		bus   []int
		want  string
	}{
		{"well formed", []messages.Payload{created, started, step, call, okd, stepEnd, ended}, nil, nil, ""},
		{"no terminal", []messages.Payload{created, started, step, stepEnd}, nil, nil, "never ended"},
		{"two starts", []messages.Payload{created, started, started, ended}, nil, nil, "has no terminal"},
		{"step outside", []messages.Payload{created, step, stepEnd}, nil, nil, "outside a busy period"},
		{"settled after the step", []messages.Payload{created, started, step, call, stepEnd, okd, ended}, nil, nil, "unsettled"},
		{"settled twice", []messages.Payload{created, started, step, call, okd, okd, stepEnd, ended}, nil, nil, "settled again"},
		{"fragment ordinal", []messages.Payload{created, started, step, &messages.TextStarted{SessionID: sid, AssistantMessageID: a, Ordinal: 1},
			&messages.TextEnded{SessionID: sid, AssistantMessageID: a, Ordinal: 1}, stepEnd, ended}, nil, nil, "ordinal 1, want 0"},
		{"promotion without admission", []messages.Payload{created, started, prom("msg_x"), ended}, nil, nil, "not admitted"},
		{"queue out of order", []messages.Payload{created, adm("msg_1", messages.Queue), adm("msg_2", messages.Queue), started,
			prom("msg_2"), step, stepEnd, prom("msg_1"), ended}, nil, nil, "admitted earlier with the same delivery"},
		{"queued before a steer", []messages.Payload{created, adm("msg_1", messages.Steer), adm("msg_2", messages.Queue), started,
			prom("msg_2"), step, stepEnd, prom("msg_1"), ended}, nil, nil, "steer msg_1 admitted before it is pending"},
		{"user interrupt without a call", []messages.Payload{created, started, &messages.ExecutionInterrupted{SessionID: sid, Reason: "user"}},
			nil, nil, `reason "user" (0 interrupts`},
		{"lost wake", []messages.Payload{created, started, step, stepEnd, adm("msg_1", messages.Steer), ended}, new(int64(1)), nil, "the wake was lost"},
		{"pending after a success", []messages.Payload{created, adm("msg_1", messages.Queue), started, ended}, new(int64(0)), nil, "ended with execution.succeeded"},
		{"pending after a failure", []messages.Payload{created, adm("msg_1", messages.Queue), started, failed}, new(int64(0)), nil, ""},
		{"pending after a failed follow-up", []messages.Payload{created, started, step, stepEnd, adm("msg_1", messages.Queue), failed}, new(int64(3)), nil, ""},
		{"pending after a busy period that was running", []messages.Payload{created, started, step, stepEnd, adm("msg_1", messages.Queue), ended},
			new(int64(3)), nil, "the wake was lost"},
		{"pending after a failure before the wake", []messages.Payload{created, started, failed, adm("msg_1", messages.Queue)}, new(int64(2)), nil, "the wake was lost"},
		{"bus in order", []messages.Payload{created, started, step, text, textEnd, stepEnd, ended}, nil, []int{0, 1, 2, 3, -1, 4, 5, 6}, ""},
		{"bus skips", []messages.Payload{created, started, ended}, nil, []int{0, 2}, "where the log has seq 1 next"},
		{"bus repeats", []messages.Payload{created, started, ended}, nil, []int{0, 1, 1, 2}, "where the log has seq 2 next"},
		{"bus stops short", []messages.Payload{created, started, ended}, nil, []int{0, 1}, "up to seq 1, not 2"},
		{"delta before its fragment", []messages.Payload{created, started, step, text, textEnd, stepEnd, ended}, nil, []int{0, 1, 2, -1, 3, 4, 5, 6},
			"text delta of msg_a #0 outside its fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &soakSession{run: &soakRun{calls: map[soakCall]*soakInvocation{}}, sid: sid, byID: map[messages.MessageID]*soakReceipt{}}
			var evs []messages.Event
			for i, p := range tc.log {
				evs = append(evs, messages.Event{ID: messages.EventID(fmt.Sprintf("evt_%d", i)), Type: p.Type(),
					Durable: &messages.Durable{AggregateID: sid, Seq: int64(i), Version: 1}, Data: p})
				if ad, ok := p.(*messages.PromptAdmitted); ok {
					rc := &soakReceipt{got: persistence.Admitted{ID: ad.InputID, SessionID: sid, Prompt: ad.Prompt,
						Delivery: ad.Delivery, AdmittedSeq: int64(i)}, wokenAt: -1}
					if tc.woken != nil {
						rc.wokenAt = *tc.woken
					}
					s.byID[ad.InputID], s.receipts = rc, append(s.receipts, rc)
				}
			}
			s.run.calls[soakCall{sid, a, "c1"}] = &soakInvocation{tool: "ok", n: 1}
			var vs []soakViolation
			switch {
			case tc.woken != nil:
				vs = checkSoakWakes(s, evs)
			case tc.bus != nil:
				w := &soakWatch{from: map[messages.SessionID]int64{sid: -1}, sub: actors.NewBus().Subscribe(1, nil),
					tails: map[messages.SessionID]*soakTail{sid: {}}}
				for _, i := range tc.bus {
					if i < 0 {
						w.bus = append(w.bus, messages.Event{Type: delta.Type(), Data: delta})
					} else {
						w.bus = append(w.bus, evs[i])
					}
				}
				vs = w.check(sid, evs, int64(len(evs)-1))
			default:
				vs = checkSoakLog(s, evs, map[messages.EventID]messages.SessionID{})
			}
			var msgs []string
			for _, v := range vs {
				msgs = append(msgs, v.msg)
			}
			got := strings.Join(msgs, "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("violations %q, want one containing %q", got, tc.want)
			}
		})
	}
}

// heldBoundary holds the first Watermark or Boundary read after armed is
// set, having read, until release: the drain's look at the inbox, with
// what it saw, waits there.
type heldBoundary struct {
	persistence.Store
	armed            atomic.Bool
	entered, release chan struct{}
}

func (s *heldBoundary) hold() {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.release
	}
}

func (s *heldBoundary) Watermark(ctx context.Context, id messages.SessionID) (int64, error) {
	w, err := s.Store.Watermark(ctx, id)
	s.hold()
	return w, err
}

func (s *heldBoundary) Boundary(ctx context.Context, id messages.SessionID, after int64) (persistence.Boundary, error) {
	b, err := s.Store.Boundary(ctx, id, after)
	s.hold()
	return b, err
}

// TestFailedFollowUpLeavesQueuedInput: a wake that finds a busy period
// running joins it as a follow-up. When the drain running then stops with
// nothing eligible (it looked at the inbox before the admission), the
// follow-up drain runs in the same busy period; when it fails, a queued
// prompt it did not reach stays pending, and no busy period starts after
// the wake. checkSoakWakes excuses that case: TestSoak (seed 90460) took it
// for a lost wake.
func TestFailedFollowUpLeavesQueuedInput(t *testing.T) {
	hb := &heldBoundary{entered: make(chan struct{}), release: make(chan struct{})}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { hb.Store = c.Store; c.Store = hb }})
	gate := script.NewGate()
	h.Model.Reply(script.Text("first"), script.Hold(gate))
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderInvalidRequest, "bad request")))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := gate.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	hb.armed.Store(true) // the drain's next look at the inbox, after this step
	gate.Release()
	<-hb.entered
	// The drain found the inbox empty. A queued prompt without a wake, then
	// a steer whose wake joins the running busy period.
	queued := h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: "queued"}, Delivery: messages.Queue, Resume: soakNo()})
	steer := h.Prompt(sid, "steer")
	close(hb.release)
	h.WaitIdle(sid)

	evs := h.Events(sid)
	s := &soakSession{sid: sid}
	var tail []string
	for _, ev := range evs[steer.AdmittedSeq+1:] {
		tail = append(tail, strings.TrimSuffix(strings.TrimPrefix(ev.Type, "session."), ".1")+soakDetail(ev.Data))
	}
	want := []string{"prompt.promoted(" + string(steer.ID) + ")", "step.started", "step.failed", "execution.failed"}
	if len(tail) != len(want) || tail[0] != want[0] || !strings.HasPrefix(tail[1], want[1]) || !strings.HasPrefix(tail[2], want[2]) || !strings.HasPrefix(tail[3], want[3]) {
		t.Fatalf("after the steer's admission: %v, want %v", tail, want)
	}
	pending, err := h.Store.Pending(h.Ctx(), sid)
	if err != nil || len(pending) != 1 || pending[0].ID != queued.ID {
		t.Fatalf("pending %+v %v, want only %s", pending, err, queued.ID)
	}
	// Both prompts were admitted after the watermark the steer's wake was
	// taken at: the checker accepts the queued prompt left behind.
	mark := steer.AdmittedSeq - 1
	s.receipts = []*soakReceipt{{got: queued, wokenAt: mark}, {got: steer, wokenAt: mark}}
	if vs := checkSoakWakes(s, evs); len(vs) != 0 {
		t.Fatalf("checkSoakWakes: %+v", vs)
	}
}
