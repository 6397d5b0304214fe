package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// Config wires a Runtime. Store and Locations are required.
type Config struct {
	// Store holds every Session's log and projections; required. The
	// Runtime does not close it: its owner does, after Shutdown.
	Store persistence.Store
	// Locations builds and caches each Location's services (model,
	// tools, agents, instructions); required.
	Locations *locations.Manager
	// Clock drives retry delays. Default SystemClock.
	Clock Clock
	// IDs generates message and event IDs. Default: a generator on Clock.
	IDs *messages.IDs
	// Logger receives runtime and protoactor logs. Default: disabled.
	Logger zerolog.Logger
	// Metrics may be nil.
	Metrics *Metrics
	// Bus carries live events. Default: a new Bus.
	Bus *Bus
	// IdleTimeout passivates idle Session actors. Default 2 minutes.
	IdleTimeout time.Duration
	// SteerBatch caps steers promoted at one boundary; 0 means no cap.
	SteerBatch int
	// AutoCompact enables automatic compaction; CompactionBuffer is the
	// reserved headroom in tokens (0: 20,000, at most a quarter of the
	// model's window) and KeepTokens the recent context kept (0: 8,000; at
	// most a quarter of the window either way).
	AutoCompact      bool
	CompactionBuffer int
	KeepTokens       int
	// CommandTimeout bounds waiting for an actor's reply to a command that
	// does not wait for execution (wake, run). Default 30 s.
	CommandTimeout time.Duration
	// LiveHold bounds how long a live event (a delta) waits for the durable
	// events queued before it, so a fast model's step shares one commit.
	// It adds at most this much latency to the first delta of a fragment.
	// Default 5 ms.
	LiveHold time.Duration
	// ToolGrace bounds how long a cancelled step (an interrupt, a
	// shutdown) waits for the tools that ignore cancellation, all of them
	// together, before settling them as interrupted. Default 10 s.
	ToolGrace time.Duration
	// ActorOptions are extra protoactor configuration options (tests pass
	// a short dead-letter throttle).
	ActorOptions []actor.ConfigOption
}

func (c *Config) validate() error {
	if c.Store == nil || c.Locations == nil {
		return errors.New("actors: Config needs Store and Locations")
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.IDs == nil {
		c.IDs = messages.NewIDs(c.Clock.Now, nil)
	}
	if c.Bus == nil {
		c.Bus = NewBus()
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = 30 * time.Second
	}
	if c.LiveHold <= 0 {
		c.LiveHold = DefaultLiveHold
	}
	if c.ToolGrace <= 0 {
		c.ToolGrace = defaultToolGrace
	}
	return nil
}

// Status is one entry of Active: always {type: "running"}.
type Status struct {
	Type string `json:"type"`
}

// Runtime is the actor system of one sessiond process: the execution
// router, Location supervisors, Session actors and their drains. Its
// methods are the Session API (SEED.md) for in-process callers; the HTTP
// adapter uses the same methods.
type Runtime struct {
	cfg    Config
	system *actor.ActorSystem
	exec   *actor.PID

	// goroutines started by actors (drains, tools) run in wg, so Shutdown
	// waits for every one of them.
	wg sync.WaitGroup

	active sync.Map // messages.SessionID -> struct{}
	// unended holds the terminal event of a Session's last busy period
	// that the store refused (messages.SessionID -> messages.Payload),
	// until the next busy period commits it (runner.unended).
	unended sync.Map
	live    atomic.Int64
	// order is striped per Session: writers hold a Session's stripe from a
	// commit until its events are published on the bus, since admissions
	// and selections commit outside the runner and the bus must still get
	// a Session's durable events in seq order. Stripes, not a mutex per
	// Session, so an idle or passivated Session costs nothing; with 4,096
	// of them two busy Sessions rarely share one (sharing only serializes
	// their commits).
	order     [4096]sync.Mutex
	orderSeed maphash.Seed
	// execStopped closes when the execution router (and so every actor
	// below it) has stopped.
	execStopped chan struct{}
	closing     atomic.Bool
	shutdown    sync.Once
}

// New starts a Runtime. It wakes no Session by itself: inputs a stopped
// process admitted but did not run stay pending until the Session is woken
// (Wake, Resume or another Prompt).
func New(cfg Config) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := append([]actor.ConfigOption{
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return NewSlogLogger(cfg.Logger) }),
	}, cfg.ActorOptions...)
	rt := &Runtime{cfg: cfg, system: actor.NewActorSystem(opts...), execStopped: make(chan struct{}), orderSeed: maphash.MakeSeed()}
	pid, err := rt.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newExecution(rt) }), "execution")
	if err != nil {
		return nil, fmt.Errorf("actors: spawn execution router: %w", err)
	}
	rt.exec = pid
	return rt, nil
}

// Spawn starts an adapter actor (the HTTP adapter of DESIGN.md §3) as a
// named child of the actor system's root, beside the execution router.
// Stop it before Shutdown: adapters go first in the shutdown order.
func (rt *Runtime) Spawn(name string, props *actor.Props) (*actor.PID, error) {
	if rt.closing.Load() {
		return nil, messages.Errorf(messages.ErrShuttingDown, "sessiond is shutting down")
	}
	pid, err := rt.system.Root.SpawnNamed(props, name)
	if err != nil {
		return nil, fmt.Errorf("actors: spawn %s: %w", name, err)
	}
	return pid, nil
}

// StopActor stops the actor pid (one Spawn started) and waits until it
// has terminated, so its name is free again, or ctx ends.
func (rt *Runtime) StopActor(ctx context.Context, pid *actor.PID) error {
	f := rt.system.Root.StopFuture(pid)
	done := make(chan error, 1)
	go func() { done <- f.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Send delivers msg to pid from outside the actor system.
func (rt *Runtime) Send(pid *actor.PID, msg any) { rt.system.Root.Send(pid, msg) }

// Live returns the number of live Session actors; idle ones passivate.
func (rt *Runtime) Live() int { return int(rt.live.Load()) }

// Store returns the runtime's store (the read side).
func (rt *Runtime) Store() persistence.Store { return rt.cfg.Store }

// Bus returns the live event bus.
func (rt *Runtime) Bus() *Bus { return rt.cfg.Bus }

// Published returns once every event committed for Session sid before
// the call is on the bus: a commit holds a lock of the Session's from
// before it commits until its events are published, so taking that lock
// waits out any commit still publishing.
func (rt *Runtime) Published(sid messages.SessionID) {
	mu := rt.orderLock(sid)
	lockOrder(mu)
	mu.Unlock()
}

// Create is sessions.create: it creates a Session, or returns the one
// req.ID names with created false. Unlike Store.CreateSession, which it
// calls, it refuses a Location whose directory does not exist or that the
// Locations manager cannot build, and an agent or model that Location
// cannot run; and it publishes session.created.1 on the Bus. Sessions of a
// Runtime are created through it.
func (rt *Runtime) Create(ctx context.Context, req persistence.CreateSession) (persistence.Session, bool, error) {
	req.Location = req.Location.Clean() // as the store keeps it: one service set per directory
	if req.ID != "" {
		if err := req.ID.Validate(); err != nil {
			return persistence.Session{}, false, err
		}
		// Reuse returns the existing Session as it is, even if its
		// directory has gone since.
		if s, err := rt.cfg.Store.Get(ctx, req.ID); err == nil {
			return s, false, nil
		}
	}
	if err := persistence.ValidateLocation(req.Location); err != nil {
		return persistence.Session{}, false, err
	}
	// A Location that cannot be built (a missing directory, a file, one
	// outside the allowed roots), or an agent or model it cannot run, is
	// refused now, rather than failing (or running without rules) at the
	// first execution, after a prompt was admitted.
	svc, err := rt.placeable(req.Location)
	if err != nil {
		return persistence.Session{}, false, err
	}
	if req.Agent != "" || req.Model != (messages.ModelRef{}) {
		if err := checkAgent(svc, req.Agent); err != nil {
			return persistence.Session{}, false, err
		}
		if req.Model != (messages.ModelRef{}) {
			if _, err := svc.Catalog.Resolve(req.Model); err != nil {
				return persistence.Session{}, false, err
			}
		}
	}
	// The Session's order lock covers the commit and the publication of
	// session.created.1, as it does for every other durable event, so an
	// admission racing the creation (its ID supplied, or read from a
	// listing) cannot reach the bus before seq 0. An omitted ID is
	// generated here, not by the store, to know the lock beforehand.
	if req.ID == "" {
		req.ID = rt.cfg.IDs.Session()
	}
	mu := rt.orderLock(req.ID)
	mu.Lock()
	s, created, err := rt.cfg.Store.CreateSession(ctx, req)
	if err == nil && created {
		rt.publishEvent(ctx, s.ID, 0)
	}
	mu.Unlock()
	return s, created, err
}

// placeable returns the services of a Location a Session is created at or
// moved to. Services are kept once built, so the directory is checked
// again here: one removed since it was first used is refused, as it was
// before it was ever built.
func (rt *Runtime) placeable(loc messages.Location) (*locations.Services, error) {
	// First, so that a Builder of the embedder's own (which need not check
	// the directory before it uses it) is not the one to fail on it.
	if err := locations.CheckDirectory(loc.Directory); err != nil {
		return nil, locations.DirectoryError(loc.Directory, err)
	}
	return rt.cfg.Locations.Check(loc)
}

// orderLock returns the Session's order stripe (see Runtime.order).
func (rt *Runtime) orderLock(sid messages.SessionID) *sync.Mutex {
	return &rt.order[maphash.String(rt.orderSeed, string(sid))%uint64(len(rt.order))]
}

// publishEvent forwards one durable event written outside a drain
// (creation, admission) to the live bus so /api/event sees it. The caller
// holds the Session's order lock.
func (rt *Runtime) publishEvent(ctx context.Context, sid messages.SessionID, seq int64) {
	p, err := rt.cfg.Store.History(ctx, sid, persistence.Query{After: seq - 1, Limit: 1})
	if err == nil && len(p.Data) == 1 {
		rt.cfg.Bus.Publish(p.Data[0])
	}
}

// Prompt is sessions.prompt: durable admission, then a wake unless resume
// is false (also on an exact retry). Once the admission is durable Prompt
// returns its receipt even if the wake fails (the runtime is shutting
// down, the Location cannot be built any more): the input stays pending
// until the Session's next Wake, Resume or Prompt.
func (rt *Runtime) Prompt(ctx context.Context, req persistence.PromptRequest) (persistence.Admitted, error) {
	mu := rt.orderLock(req.SessionID)
	mu.Lock()
	res, err := persistence.Prompt(ctx, rt.cfg.Store, req)
	if err == nil && res.Created {
		// Only a new admission is news: retries publish nothing.
		rt.cfg.Metrics.Admitted()
		rt.publishEvent(ctx, req.SessionID, res.Admitted.AdmittedSeq)
	}
	mu.Unlock()
	if err != nil {
		return persistence.Admitted{}, err
	}
	if res.Wake {
		rt.wakeAdmitted(ctx, req.SessionID)
	}
	return res.Admitted, nil
}

// wakeAdmitted wakes a Session after an admission. The input is durable
// whatever the wake does, so a failed wake (the Location cannot be built
// any more, the runtime is stopping) is logged, not returned: an error
// would tell the client that nothing was admitted, and a client retrying
// without an ID would admit it again. The input waits for the next wake,
// and sessions.run reports why one fails.
func (rt *Runtime) wakeAdmitted(ctx context.Context, sid messages.SessionID) {
	if err := rt.Wake(ctx, sid); err != nil {
		rt.cfg.Logger.Warn().Err(err).Str("session", string(sid)).Msg("wake after admission failed; the input stays pending")
	}
}

// Compact admits one coalesced manual compaction barrier and wakes the
// Session.
func (rt *Runtime) Compact(ctx context.Context, sid messages.SessionID) (persistence.Input, error) {
	mu := rt.orderLock(sid)
	mu.Lock()
	in, created, err := rt.cfg.Store.AdmitCompaction(ctx, sid)
	if err == nil && created {
		rt.publishEvent(ctx, sid, in.AdmittedSeq)
	}
	mu.Unlock()
	if err != nil {
		return in, err
	}
	rt.wakeAdmitted(ctx, sid)
	return in, nil
}

// SelectAgent selects the agent for the Session's next step.
func (rt *Runtime) SelectAgent(ctx context.Context, sid messages.SessionID, agent string) error {
	if agent == "" {
		return messages.Errorf(messages.ErrInvalid, "agent: required")
	}
	// Refuse an agent the Session's Location does not configure, rather
	// than run it with no rules of its own.
	svc, err := rt.services(ctx, sid)
	if err != nil {
		return err
	}
	if err := checkAgent(svc, agent); err != nil {
		return err
	}
	return rt.appendOutside(ctx, sid, &messages.AgentSelected{SessionID: sid, Agent: agent},
		func(s persistence.Session) bool { return s.Agent == agent })
}

// checkAgent refuses an agent the Location does not configure; the
// default agent is always there.
func checkAgent(svc *locations.Services, agent string) error {
	if agent == "" || agent == locations.DefaultAgent {
		return nil
	}
	if _, ok := svc.Agents[agent]; ok {
		return nil
	}
	names := slices.Sorted(maps.Keys(svc.Agents))
	if !slices.Contains(names, locations.DefaultAgent) {
		names = append([]string{locations.DefaultAgent}, names...)
	}
	return messages.Errorf(messages.ErrInvalid, "agent: %q is not configured here (configured: %s)", agent, strings.Join(names, ", "))
}

// SelectModel selects the model for the Session's next step.
func (rt *Runtime) SelectModel(ctx context.Context, sid messages.SessionID, model messages.ModelRef) error {
	if model.ProviderID == "" || model.ID == "" {
		return messages.Errorf(messages.ErrInvalid, "model: providerID and id are required")
	}
	// Refuse a model the Session's Location cannot resolve now, rather than
	// failing its next execution.
	svc, err := rt.services(ctx, sid)
	if err != nil {
		return err
	}
	if _, err := svc.Catalog.Resolve(model); err != nil {
		return err
	}
	return rt.appendOutside(ctx, sid, &messages.ModelSelected{SessionID: sid, Model: model},
		func(s persistence.Session) bool { return s.Model == model })
}

// services returns the services of the Session's Location.
func (rt *Runtime) services(ctx context.Context, sid messages.SessionID) (*locations.Services, error) {
	sess, err := rt.cfg.Store.Get(ctx, sid)
	if err != nil {
		return nil, err
	}
	return rt.cfg.Locations.Check(sess.Location)
}

// appendOutside commits p for a Session from outside its runner, in the
// Session's commit order. When already holds for the Session as it is
// then, nothing is written: selecting the agent or model the Session has
// is a no-op, as a move to its own Location is.
func (rt *Runtime) appendOutside(ctx context.Context, sid messages.SessionID, p messages.Payload, already func(persistence.Session) bool) error {
	mu := rt.orderLock(sid)
	mu.Lock()
	defer mu.Unlock()
	if already != nil {
		sess, err := rt.cfg.Store.Get(ctx, sid)
		if err != nil {
			return err
		}
		if already(sess) {
			return nil
		}
	}
	evs, err := rt.cfg.Store.Append(ctx, sid, p)
	for _, ev := range evs {
		rt.cfg.Bus.Publish(ev)
	}
	return err
}

// Move is sessions.move: it moves the Session to loc and returns the moved
// Session. A busy period running at the old Location is interrupted with
// reason superseded first (its tools settle as for any interrupt), and the
// move resets the instruction checkpoint, so the next run starts from a
// complete baseline at loc. The destination must be a Location this
// process can build, and must configure the Session's agent and resolve its
// model (checked again when the move commits). A busy period it superseded
// goes on at loc. Moving to the Session's own Location is a no-op.
func (rt *Runtime) Move(ctx context.Context, sid messages.SessionID, loc messages.Location) (persistence.Session, error) {
	if err := persistence.ValidateLocation(loc); err != nil {
		return persistence.Session{}, err
	}
	loc = loc.Clean()
	sess, err := rt.cfg.Store.Get(ctx, sid)
	if err != nil {
		return persistence.Session{}, err
	}
	if sess.Location.Key() == loc.Key() {
		return sess, nil
	}
	svc, err := rt.placeable(loc)
	if err != nil {
		return persistence.Session{}, err
	}
	if err := checkAgent(svc, sess.Agent); err != nil {
		return persistence.Session{}, err
	}
	if sess.Model != (messages.ModelRef{}) {
		if _, err := svc.Catalog.Resolve(sess.Model); err != nil {
			return persistence.Session{}, err
		}
	}
	if _, err := rt.request(ctx, &messages.Move{SessionID: sid, Location: loc}, 0); err != nil {
		return persistence.Session{}, err
	}
	return rt.cfg.Store.Get(ctx, sid)
}

// settleMove reports the outcome of a Move the router forwarded (err from
// its commit, or why it was refused) to the router, which answers the
// mover, to, and routes the commands it held meanwhile.
func (rt *Runtime) settleMove(ctx actor.Context, m *messages.Move, to *actor.PID, err error) {
	ctx.Send(rt.exec, &moveDone{sid: m.SessionID, to: to, reply: moveReply(err)})
}

// commitMoveSafely is commitMove with a panic (a Store bug) returned as an
// error, for callers outside a Move's own Receive, which recoverCommand
// does not cover: the move must settle, or the router holds the Session's
// commands for good.
func (rt *Runtime) commitMoveSafely(m *messages.Move) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = messages.Errorf(messages.ErrInternal, "actors: commit move: panic: %v", p)
			rt.cfg.Logger.Error().Err(err).Str("stack", string(debug.Stack())).Msg("move panicked")
		}
	}()
	return rt.commitMove(m)
}

// commitMove commits session.moved.1 unless the Session is at m's Location
// already (a move that another one overtook).
func (rt *Runtime) commitMove(m *messages.Move) error {
	ctx := context.Background()
	sess, err := rt.cfg.Store.Get(ctx, m.SessionID)
	if err != nil {
		return err
	}
	if sess.Location.Key() == m.Location.Key() {
		return nil
	}
	// Checked again: an agent or model selected while the move waited for
	// its superseded busy period was checked against the old Location.
	svc, err := rt.cfg.Locations.Check(m.Location)
	if err != nil {
		return err
	}
	if err := checkAgent(svc, sess.Agent); err != nil {
		return err
	}
	if sess.Model != (messages.ModelRef{}) {
		if _, err := svc.Catalog.Resolve(sess.Model); err != nil {
			return err
		}
	}
	return rt.appendOutside(ctx, m.SessionID, &messages.SessionMoved{SessionID: m.SessionID, Location: m.Location}, nil)
}

// Wake reports durable inbox work to the Session's actor.
func (rt *Runtime) Wake(ctx context.Context, sid messages.SessionID) error {
	_, err := rt.request(ctx, &messages.Wake{SessionID: sid}, rt.cfg.CommandTimeout)
	return err
}

// Resume is SessionExecution.resume: it joins an active execution or
// starts a forced drain, and returns once started or joined.
func (rt *Runtime) Resume(ctx context.Context, sid messages.SessionID) (joined bool, err error) {
	rep, err := rt.request(ctx, &messages.Run{SessionID: sid}, rt.cfg.CommandTimeout)
	if err != nil {
		return false, err
	}
	r, _ := rep.(*messages.RunReply)
	return r != nil && r.Joined, nil
}

// Interrupt is sessions.interrupt: it returns after the interrupted drain
// settled its tools and committed its terminal lifecycle event. An idle or
// missing Session is a no-op.
func (rt *Runtime) Interrupt(ctx context.Context, sid messages.SessionID) error {
	return rt.interrupt(ctx, sid, messages.ReasonUser)
}

func (rt *Runtime) interrupt(ctx context.Context, sid messages.SessionID, reason string) error {
	_, err := rt.request(ctx, &messages.Interrupt{SessionID: sid, Reason: reason}, 0)
	return err
}

// Wait returns when the Session has no active execution and no wake in
// flight. Like Interrupt, it takes a Session this process does not know
// (a missing one included) as idle, and returns nil at once.
func (rt *Runtime) Wait(ctx context.Context, sid messages.SessionID) error {
	_, err := rt.request(ctx, &messages.Wait{SessionID: sid}, 0)
	return err
}

// Active is sessions.active: the Sessions with a foreground busy period in
// this process. It is runtime state, empty after a restart.
func (rt *Runtime) Active() map[messages.SessionID]Status {
	out := map[messages.SessionID]Status{}
	rt.active.Range(func(k, _ any) bool {
		out[k.(messages.SessionID)] = Status{Type: "running"}
		return true
	})
	return out
}

// replyProcess receives the one reply of a request (see request).
type replyProcess struct{ ch chan any }

func (p *replyProcess) SendUserMessage(_ *actor.PID, message any) {
	_, msg, _ := actor.UnwrapEnvelope(message)
	select {
	case p.ch <- msg:
	default: // one reply is all a request takes
	}
}

func (p *replyProcess) SendSystemMessage(*actor.PID, any) {}
func (p *replyProcess) Stop(*actor.PID)                   {}

// request sends a command to the execution router and waits for its reply.
// timeout 0 waits as long as ctx allows (interrupt and wait depend on
// execution, not on the actor's responsiveness).
func (rt *Runtime) request(ctx context.Context, cmd any, timeout time.Duration) (any, error) {
	if rt.closing.Load() {
		if _, ok := cmd.(*messages.Interrupt); !ok {
			return nil, messages.Errorf(messages.ErrShuttingDown, "sessiond is shutting down")
		}
	}
	if timeout == 0 {
		timeout = 24 * time.Hour
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	// A reply process of our own, not a protoactor future: a future
	// writes the reply it receives to its result without a lock, so a
	// reply arriving as the caller gives up raced with the caller. This
	// one hands the reply over a channel and, once removed, is not found.
	reply := &replyProcess{ch: make(chan any, 1)}
	pid, _ := rt.system.ProcessRegistry.Add(reply, "request$"+rt.system.ProcessRegistry.NextId())
	defer rt.system.ProcessRegistry.Remove(pid)
	rt.system.Root.RequestWithCustomSender(rt.exec, cmd, pid)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var res any
	var err error
	select {
	case res = <-reply.ch:
	case <-timer.C:
		err = actor.ErrTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-rt.execStopped:
		// Shutdown stopped the router with this command still on its way:
		// protoactor drops messages to stopped actors without a reply.
		select {
		case res = <-reply.ch:
		default:
			return stoppedReply(cmd)
		}
	}
	if _, ok := res.(*actor.DeadLetterResponse); ok {
		if rt.closing.Load() {
			// A stopping actor forwarded the command to one that had just
			// stopped (out of the registry, its parent not yet told): the
			// shutdown it raced, as when a stopped actor drops it.
			return stoppedReply(cmd)
		}
		err = actor.ErrDeadLetter
	}
	if err != nil {
		if dl, ok := ctx.Deadline(); ok && errors.Is(err, actor.ErrTimeout) && !time.Now().Before(dl) {
			// The timeout was ctx's deadline and its timer fired first:
			// the caller's context ended, as the select reports.
			return nil, cmp.Or(ctx.Err(), context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("actors: %T: %w", cmd, err)
	}
	if e, ok := res.(*messages.ErrorReply); ok {
		return nil, &e.Error
	}
	return res, nil
}

// stoppedReply answers a command that Shutdown's stopping actors dropped:
// an interrupt is done (every Session was interrupted), the rest fail
// shutting down.
func stoppedReply(cmd any) (any, error) {
	if _, ok := cmd.(*messages.Interrupt); ok {
		return &messages.InterruptReply{}, nil
	}
	return nil, messages.Errorf(messages.ErrShuttingDown, "sessiond is shutting down")
}

// Shutdown stops accepting commands, interrupts every active Session with
// reason shutdown (waiting for their terminal events), stops the actors and
// waits for every goroutine they started, up to ctx's deadline: a tool
// that ignores cancellation may outlive it. The store stays open; the
// caller closes it afterwards. Until then Prompt still admits (the store
// takes it, durably, and it stays pending; its wake fails as shutting
// down). Subscriptions to the Bus stay open: their owners Close them.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	var err error
	rt.shutdown.Do(func() {
		rt.closing.Store(true)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for sid := range rt.Active() {
			wg.Go(func() {
				if e := rt.interrupt(ctx, sid, messages.ReasonShutdown); e != nil {
					mu.Lock()
					err = errors.Join(err, e)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		rt.system.Root.Send(rt.exec, &stopAll{})
		select {
		case <-rt.execStopped:
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("actors: stop actors: %w", ctx.Err()))
		}
		// A tool that ignores cancellation keeps its goroutine; past ctx,
		// Shutdown stops waiting for it (its step was settled as
		// interrupted after toolGrace) rather than hold the process.
		waited := make(chan struct{})
		go func() {
			rt.wg.Wait()
			close(waited)
		}()
		select {
		case <-waited:
			rt.writeUnended(ctx)
		case <-ctx.Done():
			err = errors.Join(err, fmt.Errorf("actors: wait for drains and tools (a tool that ignores its context's cancellation runs on): %w", ctx.Err()))
		}
		rt.system.Shutdown()
	})
	return err
}

// writeUnended commits, once every drain has stopped, the terminals the
// store refused (a full disk) for busy periods no later one has closed in
// this process: this process ended them, and after it no one knows to.
// One that still does not fit stays unmatched, as after a crash.
func (rt *Runtime) writeUnended(ctx context.Context) {
	rt.unended.Range(func(k, v any) bool {
		sid, terminal := k.(messages.SessionID), v.(messages.Payload)
		mu := rt.orderLock(sid)
		lockOrder(mu)
		var c persistence.Committed
		// A Store that panics here must not end the process either.
		err := recovered(func() (err error) {
			c, err = rt.cfg.Store.Commit(context.WithoutCancel(ctx), sid, terminal)
			return err
		})
		if err == nil {
			for _, ev := range c.Events {
				rt.cfg.Bus.Publish(ev)
			}
			rt.unended.Delete(sid)
		} else {
			rt.cfg.Logger.Error().Err(err).Str("session", string(sid)).Msg("commit busy-period terminal at shutdown")
		}
		mu.Unlock()
		return true
	})
}

// recoverCommand, deferred by the Receive of the router, Location and
// Session actors, turns a panic into a failed command (logged, and
// answered with an internal error when the sender waits) instead of a
// supervisor restart: a restart stops or rebuilds actors whose drains
// run on, out of reach of interrupts.
func (rt *Runtime) recoverCommand(ctx actor.Context) {
	if p := recover(); p != nil {
		err := messages.Errorf(messages.ErrInternal, "actors: %T: panic: %v", ctx.Message(), p)
		rt.cfg.Logger.Error().Err(err).Str("stack", string(debug.Stack())).Msg("command panicked")
		if m, ok := ctx.Message().(*messages.Move); ok {
			// The router holds the Session's commands until a move
			// settles; it answers the mover.
			rt.settleMove(ctx, m, ctx.Sender(), err)
			return
		}
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ErrorReply{Error: *err})
		}
	}
}
