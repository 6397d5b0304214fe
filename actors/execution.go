package actors

import (
	"context"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/messages"
)

// execution is the process-global router (SEED.md: SessionExecution):
// sessionID -> store.Get -> Location -> Location actor -> Session actor. It
// holds no Session state of its own, except the commands of a Session
// being moved.
type execution struct {
	rt        *Runtime
	locations map[string]*actor.PID
	next      int
	// stopping: Shutdown is stopping the actors. A stopping actor still
	// receives commands, but a child spawned now would never be stopped.
	stopping bool
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
}

// heldQuery asks the router how many commands it holds for a Session
// (introspection for tests).
type heldQuery struct{ sid messages.SessionID }

func newExecution(rt *Runtime) *execution {
	return &execution{rt: rt, locations: map[string]*actor.PID{}, moving: map[messages.SessionID][]stashed{}}
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
	case *actor.Terminated:
		for k, pid := range e.locations {
			if pid.Equal(msg.Who) {
				delete(e.locations, k)
			}
		}
		return
	case *heldQuery:
		ctx.Respond(len(e.moving[msg.sid]))
		return
	case *moveDone:
		held := e.moving[msg.sid]
		delete(e.moving, msg.sid)
		if msg.to != nil {
			ctx.Send(msg.to, msg.reply)
		}
		switch {
		case msg.run:
			e.route(ctx, msg.sid, &messages.Run{SessionID: msg.sid}, nil)
		case msg.wake:
			e.route(ctx, msg.sid, &messages.Wake{SessionID: msg.sid}, nil)
		}
		for _, c := range held {
			e.route(ctx, msg.sid, c.msg, c.sender) // a second Move starts holding again
		}
		return
	}
	if sid, ok := sessionOf(ctx.Message()); ok {
		e.route(ctx, sid, ctx.Message(), ctx.Sender())
	}
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
	pid, ok := e.locations[key]
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
		if sender != nil {
			ctx.Send(sender, moveReply(e.rt.commitMove(m)))
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
		pid, err = ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newLocation(e.rt, svc, key) }),
			"location-"+strconv.Itoa(e.next))
		if err != nil {
			if sender != nil {
				ctx.Send(sender, &messages.ErrorReply{Error: messages.Error{Type: messages.ErrInternal, Message: err.Error()}})
			}
			return
		}
		e.locations[key] = pid
	}
	if isMove {
		e.moving[sid] = nil // hold what follows until the move settles
	}
	ctx.RequestWithCustomSender(pid, msg, sender)
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
