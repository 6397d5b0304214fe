package actors

import (
	"context"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/messages"
)

// execution is the process-global router (SEED.md: SessionExecution):
// sessionID -> store.Get -> Location -> Location actor -> Session actor. It
// holds no Session state of its own, except the commands of a Session
// being moved.
type execution struct {
	rt *Runtime
	// locations maps a Location key to its actor and the number of
	// commands forwarded to it, so that stopping an idle one never drops
	// one in flight (locationIdle).
	locations map[string]*child
	next      int
	// stopping: Shutdown is stopping the actors. A stopping actor still
	// receives commands, but a child spawned now would never be stopped.
	stopping bool
	// closing: stopAll has arrived; stopped records that this actor has
	// asked to stop.
	closing, stopped bool
	// moving holds the commands for each Session whose Move was forwarded
	// to its Location and has not settled (moveDone): routed by a store
	// read taken before the move commits, they would reach the Location
	// the Session is leaving. They are routed once it settles, in order.
	moving map[messages.SessionID][]stashed
}

// stashed is a command held with its sender.
type stashed struct {
	msg    any
	sender *actor.PID
}

// moveDone settles a forwarded Move: the actor that committed (or
// refused) it tells the router, which answers the mover and routes what
// it held. wake and run carry a follow-up the superseding interrupt
// cleared.
type moveDone struct {
	sid       messages.SessionID
	to        *actor.PID
	reply     any
	wake, run bool
	// waits are Wait callers of the superseded busy period, routed after
	// wake and run.
	waits []*actor.PID
}

// heldQuery asks the router how many commands it holds for a Session
// (introspection for tests).
type heldQuery struct{ sid messages.SessionID }

// stopAll, sent by Shutdown to the router, by the router to each
// Location actor and by a Location actor to each Session actor, stops the
// actors from the bottom up: each passes it on to the children it lists
// (a Session actor cancels its busy period), and stops itself once every
// child has terminated. Stopping
// the router would have protoactor stop every child each actor still
// lists, and one already stopping (passivated just before, its Terminated
// not yet handled) would get a second Stop, logged as a dead letter.
type stopAll struct{}

// stopOnceEmpty stops the actor of ctx, once, when it has no child left.
func stopOnceEmpty(ctx actor.Context, stopped *bool) {
	if !*stopped && len(ctx.Children()) == 0 {
		*stopped = true
		ctx.Stop(ctx.Self())
	}
}

// locationsQuery asks the router how many Location actors it has and how
// many commands it forwarded to them (introspection for tests).
type locationsQuery struct{}

func newExecution(rt *Runtime) *execution {
	return &execution{rt: rt, locations: map[string]*child{}, moving: map[messages.SessionID][]stashed{}}
}

// sessionOf returns the Session a protocol command addresses.
func sessionOf(msg any) (messages.SessionID, bool) {
	switch m := msg.(type) {
	case *messages.Wake:
		return m.SessionID, true
	case *messages.Run:
		return m.SessionID, true
	case *messages.Interrupt:
		return m.SessionID, true
	case *messages.Wait:
		return m.SessionID, true
	case *messages.Move:
		return m.SessionID, true
	}
	return "", false
}

// Receive implements actor.Actor.
func (e *execution) Receive(ctx actor.Context) {
	// A panic here (a Locations factory or a Store bug) must not restart
	// this actor: a restart stops every Session actor beneath it while
	// their drains run on. The command fails instead.
	defer e.rt.recoverCommand(ctx)
	switch msg := ctx.Message().(type) {
	case *actor.Stopping:
		e.stopping = true
		return
	case *actor.Stopped:
		close(e.rt.execStopped)
		return
	case *stopAll:
		e.stopping, e.closing = true, true
		for _, c := range e.locations {
			ctx.Send(c.pid, msg)
		}
		stopOnceEmpty(ctx, &e.stopped)
		return
	case *actor.Terminated:
		for k, c := range e.locations {
			if c.pid.Equal(msg.Who) {
				delete(e.locations, k)
			}
		}
		if e.closing {
			stopOnceEmpty(ctx, &e.stopped)
		}
		return
	case *locationIdle:
		if c, ok := e.locations[msg.key]; ok && c.pid.Equal(msg.pid) && c.sent == msg.received && !e.stopping {
			delete(e.locations, msg.key)
			ctx.Stop(c.pid)
			e.rt.cfg.Locations.Forget(msg.key, msg.at.svc)
		}
		return
	case *locationsQuery:
		var sent uint64
		for _, c := range e.locations {
			sent += c.sent
		}
		ctx.Respond([2]uint64{uint64(len(e.locations)), sent})
		return
	case *heldQuery:
		ctx.Respond(len(e.moving[msg.sid]))
		return
	case *moveDone:
		e.settled(ctx, msg)
		return
	}
	if sid, ok := sessionOf(ctx.Message()); ok {
		e.route(ctx, sid, ctx.Message(), ctx.Sender())
	}
}

// settled answers a settled move's mover and routes, in order, the work it
// carries (unless a held interrupt or shutdown stops it anyway: it would
// start and be cancelled at once), the waits of the busy period it
// superseded, and the commands held meanwhile.
func (e *execution) settled(ctx actor.Context, msg *moveDone) {
	held := e.moving[msg.sid]
	delete(e.moving, msg.sid)
	if msg.to != nil {
		ctx.Send(msg.to, msg.reply)
	}
	next := make([]stashed, 0, 1+len(msg.waits)+len(held))
	interrupted := e.stopping || slices.ContainsFunc(held, func(c stashed) bool {
		_, ok := c.msg.(*messages.Interrupt)
		return ok
	})
	switch {
	case interrupted:
	case msg.run:
		next = append(next, stashed{msg: &messages.Run{SessionID: msg.sid}})
	case msg.wake:
		next = append(next, stashed{msg: &messages.Wake{SessionID: msg.sid}})
	}
	for _, w := range msg.waits {
		next = append(next, stashed{msg: &messages.Wait{SessionID: msg.sid}, sender: w})
	}
	for _, c := range append(next, held...) {
		e.routeSafely(ctx, msg.sid, c) // a second Move starts holding again
	}
}

// routeSafely routes one of several commands: a panic (a Store or
// Locations bug) fails that command alone instead of dropping the rest.
func (e *execution) routeSafely(ctx actor.Context, sid messages.SessionID, c stashed) {
	defer func() {
		if p := recover(); p != nil {
			err := messages.Errorf(messages.ErrInternal, "actors: %T: panic: %v", c.msg, p)
			e.rt.cfg.Logger.Error().Err(err).Str("stack", string(debug.Stack())).Msg("command panicked")
			if c.sender != nil {
				ctx.Send(c.sender, &messages.ErrorReply{Error: *err})
			}
		}
	}()
	e.route(ctx, sid, c.msg, c.sender)
}

// route sends msg, from sender, to the Session's Location actor.
func (e *execution) route(ctx actor.Context, sid messages.SessionID, msg any, sender *actor.PID) {
	if held, ok := e.moving[sid]; ok {
		e.moving[sid] = append(held, stashed{msg: msg, sender: sender})
		return
	}
	sess, err := e.rt.cfg.Store.Get(context.Background(), sid)
	if err != nil {
		if messages.TypeOf(err) == messages.ErrSessionNotFound {
			refuseTo(ctx, msg, sender, err)
		} else if sender != nil {
			// A Session the store cannot read now may be running: an
			// interrupt or wait must not pretend it is idle.
			ctx.Send(sender, &messages.ErrorReply{Error: *messages.AsError(err, messages.ErrInternal)})
		}
		return
	}
	key := sess.Location.Key()
	c, ok := e.locations[key]
	if !ok && e.stopping {
		refuseTo(ctx, msg, sender, errStoppingActors)
		return
	}
	m, isMove := msg.(*messages.Move)
	if isMove && (!ok || m.Location.Key() == key) {
		// No Location actor means no Session actor, so nothing of this
		// Session runs here: the move commits at once (the old Location
		// need not be buildable: its directory may be gone). A move to
		// where the Session is commits nothing.
		// It blocks routing for one commit; moves are rare.
		reply := moveReply(e.rt.commitMoveSafely(m))
		if sender != nil {
			ctx.Send(sender, reply)
		}
		return
	}
	if !ok {
		svc, err := e.rt.cfg.Locations.Get(sess.Location)
		if err != nil {
			// No Location actor means no Session actor: nothing of this
			// Session runs here (its directory may have been removed).
			refuseTo(ctx, msg, sender, err)
			return
		}
		e.next++
		pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newLocation(e.rt, svc, key) }),
			"location-"+strconv.Itoa(e.next))
		if err != nil {
			if sender != nil {
				ctx.Send(sender, &messages.ErrorReply{Error: messages.Error{Type: messages.ErrInternal, Message: err.Error()}})
			}
			return
		}
		c = &child{pid: pid}
		e.locations[key] = c
	}
	if isMove {
		e.moving[sid] = nil // hold what follows until the move settles
	}
	c.sent++
	ctx.RequestWithCustomSender(c.pid, msg, sender)
}

// moveReply is the answer to a Move whose commit returned err.
func moveReply(err error) any {
	if err != nil {
		return &messages.ErrorReply{Error: *messages.AsError(err, messages.ErrInternal)}
	}
	return &messages.MoveReply{}
}

// errStoppingActors answers commands that reach actors Shutdown is
// stopping.
var errStoppingActors = messages.Errorf(messages.ErrShuttingDown, "sessiond is shutting down")

// refuse answers a command whose Session has no actor and cannot get one
// (it is missing, its Location cannot be built, or its parent is
// stopping). Interrupt and wait are no-ops then, as for an idle Session;
// the rest fail with err.
func refuse(ctx actor.Context, err error) {
	refuseTo(ctx, ctx.Message(), ctx.Sender(), err)
}

// refuseTo answers msg, received from sender, as refuse does.
func refuseTo(ctx actor.Context, msg any, sender *actor.PID, err error) {
	if sender == nil {
		return // sent without a reply address (a wake after a move)
	}
	switch msg.(type) {
	case *messages.Interrupt:
		ctx.Send(sender, &messages.InterruptReply{})
	case *messages.Wait:
		ctx.Send(sender, &messages.WaitReply{})
	default:
		ctx.Send(sender, &messages.ErrorReply{Error: *messages.AsError(err, messages.ErrInternal)})
	}
}
