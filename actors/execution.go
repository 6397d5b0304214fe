package actors

import (
	"context"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/messages"
)

// execution is the process-global router (SEED.md: SessionExecution):
// sessionID -> store.Get -> Location -> Location actor -> Session actor. It
// holds no Session state of its own.
type execution struct {
	rt        *Runtime
	locations map[string]*actor.PID
	next      int
	// stopping: Shutdown is stopping the actors. A stopping actor still
	// receives commands, but a child spawned now would never be stopped.
	stopping bool
}

func newExecution(rt *Runtime) *execution {
	return &execution{rt: rt, locations: map[string]*actor.PID{}}
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
	}
	sid, ok := sessionOf(ctx.Message())
	if !ok {
		return
	}
	sess, err := e.rt.cfg.Store.Get(context.Background(), sid)
	if err != nil {
		if messages.TypeOf(err) == messages.ErrSessionNotFound {
			refuse(ctx, err)
		} else {
			// A Session the store cannot read now may be running: an
			// interrupt or wait must not pretend it is idle.
			ctx.Respond(&messages.ErrorReply{Error: *messages.AsError(err, messages.ErrInternal)})
		}
		return
	}
	key := sess.Location.Key()
	pid, ok := e.locations[key]
	if !ok && e.stopping {
		refuse(ctx, errStoppingActors)
		return
	}
	if m, isMove := ctx.Message().(*messages.Move); isMove && (!ok || m.Location.Key() == key) {
		// No Location actor means no Session actor, so nothing of this
		// Session runs here: the move commits at once (the old Location
		// need not be buildable: its directory may be gone).
		e.rt.move(ctx, m)
		return
	}
	if !ok {
		svc, err := e.rt.cfg.Locations.Get(sess.Location)
		if err != nil {
			// No Location actor means no Session actor: nothing of this
			// Session runs here (its directory may have been removed).
			refuse(ctx, err)
			return
		}
		e.next++
		pid, err = ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newLocation(e.rt, svc, key) }),
			"location-"+strconv.Itoa(e.next))
		if err != nil {
			ctx.Respond(&messages.ErrorReply{Error: messages.Error{Type: messages.ErrInternal, Message: err.Error()}})
			return
		}
		e.locations[key] = pid
	}
	ctx.Forward(pid)
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
