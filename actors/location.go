package actors

import (
	"strconv"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/messages"
)

// location supervises the Session actors of one Location and holds its
// service set. It restarts a crashed Session actor (protoactor's default
// one-for-one strategy) and passivates idle ones.
type location struct {
	rt *Runtime
	at *place
	// sessions maps a Session to its live actor and the number of protocol
	// messages forwarded to it, so passivation never drops one in flight.
	sessions map[messages.SessionID]*child
	gen      int
	// stopping: see execution.stopping.
	stopping bool
	// closing and stopped: see execution.
	closing, stopped bool
	// received counts the commands the router forwarded here; reported is
	// received when this actor last told the router it had no Session
	// actor (locationIdle), so it tells it once per idle spell.
	received, reported uint64
}

// place is a Location as its actors know it: its service set and the key
// of the Location it was built for. The Location actor's Sessions share
// it; the runner fences each step against the key (a Session moved
// elsewhere must not take another step here).
type place struct {
	svc *locations.Services
	key string
}

type child struct {
	pid  *actor.PID
	sent uint64
}

// sessionMoved is sent by a Session actor whose Session moved away.
type sessionMoved struct {
	sid messages.SessionID
	pid *actor.PID
}

// sessionIdle is sent by a Session actor whose receive timeout fired while
// idle; received is how many protocol messages it has handled.
type sessionIdle struct {
	sid      messages.SessionID
	pid      *actor.PID
	received uint64
}

func newLocation(rt *Runtime, svc *locations.Services, key string) *location {
	return &location{rt: rt, at: &place{svc: svc, key: key}, sessions: map[messages.SessionID]*child{}}
}

// locationIdle is sent by a Location actor that has no Session actor
// left; received is how many commands it has handled. The router stops it
// and drops its service set unless a command is on its way to it, so
// neither lives on for a Location no Session uses (a long-running daemon
// sees many directories), and the next command builds the set from the
// directory as it is then.
type locationIdle struct {
	key      string
	pid      *actor.PID
	at       *place
	received uint64
}

// Receive implements actor.Actor.
func (l *location) Receive(ctx actor.Context) {
	// A panic here (a Locations factory or a Store bug) must not restart
	// this actor: a restart stops every Session actor beneath it while
	// their drains run on. The command fails instead.
	defer l.rt.recoverCommand(ctx)
	defer l.reportIdle(ctx)
	switch msg := ctx.Message().(type) {
	case *actor.Stopping:
		l.stopping = true
		return
	case *sessionIdle:
		c, ok := l.sessions[msg.sid]
		if ok && c.pid.Equal(msg.pid) && c.sent == msg.received {
			// Nothing is in flight to it: stop it. Its state is durable; the
			// next message spawns a fresh actor under a new name.
			delete(l.sessions, msg.sid)
			ctx.Stop(c.pid)
		}
		return
	case *sessionMoved:
		// The Session is elsewhere now: a later command for it here (it
		// may move back) gets a fresh actor, and the moved one stops. The
		// router held the Session's commands until the move settled, so
		// none is on its way to it.
		if c, ok := l.sessions[msg.sid]; ok && c.pid.Equal(msg.pid) {
			delete(l.sessions, msg.sid)
		}
		if !l.stopping {
			ctx.Stop(msg.pid)
		}
		return
	case *stopAll:
		l.stopping, l.closing = true, true
		for sid, c := range l.sessions {
			delete(l.sessions, sid)
			ctx.Send(c.pid, msg) // it stops once its busy period has ended
		}
		stopOnceEmpty(ctx, &l.stopped)
		return
	case *actor.Terminated:
		for sid, c := range l.sessions {
			if c.pid.Equal(msg.Who) {
				delete(l.sessions, sid)
			}
		}
		if l.closing {
			stopOnceEmpty(ctx, &l.stopped)
		}
		return
	}
	sid, ok := sessionOf(ctx.Message())
	if !ok {
		return
	}
	l.received++
	c, ok := l.sessions[sid]
	m, isMove := ctx.Message().(*messages.Move)
	if !ok && l.stopping {
		if isMove {
			l.rt.settleMove(ctx, m, ctx.Sender(), errStoppingActors)
			return
		}
		refuse(ctx, errStoppingActors)
		return
	}
	if isMove && !ok {
		// No Session actor: nothing of it runs here.
		l.rt.settleMove(ctx, m, ctx.Sender(), l.rt.commitMoveSafely(m))
		return
	}
	if !ok {
		l.gen++
		// The lock-free mailbox is cheaper to allocate; Session actors see
		// little traffic, so its lower peak throughput does not matter and
		// thousands of idle actors stay small.
		pid, err := ctx.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newSession(l.rt, l.at, sid) },
			actor.WithMailbox(actor.UnboundedLockfree())), string(sid)+"-"+strconv.Itoa(l.gen))
		if err != nil {
			ctx.Respond(&messages.ErrorReply{Error: messages.Error{Type: messages.ErrInternal, Message: err.Error()}})
			return
		}
		c = &child{pid: pid}
		l.sessions[sid] = c
	}
	c.sent++
	ctx.Forward(c.pid)
}

// beforeIdleReport, when set (by a test), runs before a Location actor
// reports itself idle: a test holds it there to route a command past the
// report.
var beforeIdleReport atomic.Pointer[func()]

// reportIdle tells the router, once per idle spell, that no Session actor
// is left here (see locationIdle): none listed, and none still stopping.
// A Session actor stopping (passivated, or moved away) is still this
// actor's child until its Terminated is handled, and stopped before that,
// this actor would stop it again, logged as a dead letter.
func (l *location) reportIdle(ctx actor.Context) {
	if len(l.sessions) > 0 || l.stopping || l.received == l.reported || len(ctx.Children()) > 0 {
		return
	}
	l.reported = l.received
	if hold := beforeIdleReport.Load(); hold != nil {
		(*hold)()
	}
	ctx.Send(ctx.Parent(), &locationIdle{key: l.at.key, pid: ctx.Self(), at: l.at, received: l.received})
}
