package actors

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/messages"
)

// session is the coordinator actor of one Session. Its mailbox serializes
// wake, run, interrupt and wait; it never blocks: the drain runs in a child
// actor's goroutine, and interrupt and wait callers are answered later.
type session struct {
	rt  *Runtime
	at  *place
	sid messages.SessionID

	c     coordinator
	drain *actor.PID
	// done is the drain actor's report of the busy period's end, held
	// until the drain actor has terminated.
	done *drainDone
	// cancel cancels the running drain with a reason as its cause.
	cancel context.CancelCauseFunc

	interruptWaiters waiters
	waitWaiters      waiters
	received         uint64

	// The idle timer, armed while no busy period runs. protoactor's
	// receive timeout is not used: its timer goroutine writes the actor
	// context's fields while the actor runs (a data race,
	// asynkron/protoactor-go#1139). This one only sends idleTick, which
	// counts only when its generation is still current.
	idle    *time.Timer
	idleGen uint64
	// stopping: see execution.stopping. A stopping Session starts no
	// drain: its context would not be cancelled.
	stopping bool
	// closing: stopAll has arrived; stopped records that this actor has
	// asked to stop (see execution).
	closing, stopped bool
	// move is a move waiting for the busy period it superseded to end.
	move *pendingMove
}

// pendingMove is a Move waiting for its Session's busy period to end. The
// router holds the Session's other commands meanwhile (execution.moving).
type pendingMove struct {
	msg    *messages.Move
	sender *actor.PID
	// wake and run are sent to the router after the move: pending inputs
	// of the superseded busy period, and its work, go on at the new
	// Location.
	wake, run bool
	// forced: a run (resume) was coalesced into the superseded busy
	// period, which the move carries as asked.
	forced bool
	// waits are the Wait callers of the superseded busy period, routed
	// after wake and run.
	waits []*actor.PID
}

// idleTick reports that the idle timer of generation gen fired.
type idleTick struct{ gen uint64 }

// A timer that fires as its actor stops (a passivated or moved Session
// actor, gone before Stopped stops its timer) sends its tick to no one:
// not logged as a dead letter.
func (*idleTick) IgnoreDeadLetterLogging() {}

// idleArmed, when a test sets it, is given each idle timer's tick in place
// of a timer, and the test decides when the timer fires.
var idleArmed atomic.Pointer[func(tick func())]

// armIdle (re)starts the idle timer.
func (s *session) armIdle(ctx actor.Context) {
	s.stopIdle()
	gen, self, root := s.idleGen, ctx.Self(), s.rt.system.Root
	tick := func() { root.Send(self, &idleTick{gen: gen}) }
	if f := idleArmed.Load(); f != nil {
		(*f)(tick)
		return
	}
	s.idle = time.AfterFunc(s.rt.cfg.IdleTimeout, tick)
}

// stopIdle stops the idle timer; a tick already sent is stale.
func (s *session) stopIdle() {
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	s.idleGen++
}

// Internal messages between a Session actor and its drain.
type (
	// drainNext asks whether to run a coalesced follow-up drain; failed:
	// the drain failed, and the busy period closes (answered false).
	drainNext struct {
		reply  chan bool
		failed bool
	}
	// drainDone reports that the busy period's terminal event is committed.
	drainDone struct {
		pid *actor.PID
		// owed: the busy period ended owing a step (runner.owed): one was
		// running, continuation was required, or a forced run had not yet
		// taken its step.
		owed bool
	}
)

// A Session actor that stops mid-busy-period is gone before its drain
// reports; those reports are not logged as dead letters.
func (*drainNext) IgnoreDeadLetterLogging() {}
func (*drainDone) IgnoreDeadLetterLogging() {}

// interruptReason is the cancellation cause carrying the reason.
type interruptReason struct{ reason string }

func (r interruptReason) Error() string { return "interrupted: " + r.reason }

func newSession(rt *Runtime, at *place, sid messages.SessionID) *session {
	return &session{rt: rt, at: at, sid: sid}
}

// sessionFault, when a test sets it, sees each message a Session actor
// receives before it is handled, and may panic to stand in for a bug.
var sessionFault atomic.Pointer[func(any)]

// Receive implements actor.Actor.
func (s *session) Receive(ctx actor.Context) {
	// A restart would build a new coordinator beside a drain still running
	// for the old one: nothing could interrupt it, and its end would leave
	// the new coordinator closing for good.
	defer s.rt.recoverCommand(ctx)
	if f := sessionFault.Load(); f != nil {
		(*f)(ctx.Message())
	}
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.rt.live.Add(1)
		s.armIdle(ctx)
	case *actor.Stopped:
		s.stopIdle()
		s.rt.live.Add(-1)
		// Callers still waiting would wait for a reply no one sends.
		for _, w := range append(s.interruptWaiters.take(), s.waitWaiters.take()...) {
			ctx.Send(w, &messages.ErrorReply{Error: *errStoppingActors})
		}
		if mv := s.move; mv != nil {
			s.move = nil
			for _, w := range mv.waits {
				ctx.Send(w, &messages.ErrorReply{Error: *errStoppingActors})
			}
			s.rt.settleMove(ctx, mv.msg, mv.sender, errStoppingActors)
		}
	case *idleTick:
		if msg.gen != s.idleGen {
			return // re-armed or stopped since
		}
		if !s.c.busy() {
			ctx.Send(ctx.Parent(), &sessionIdle{sid: s.sid, pid: ctx.Self(), received: s.received})
		}
		// The Location may refuse the stop (a message to this actor is in
		// flight), and if that message starts no drain nothing else would
		// arm the timer again: the actor would never passivate.
		s.armIdle(ctx)
	case *actor.Stopping:
		s.stopping = true
		if s.cancel != nil {
			s.cancel(interruptReason{messages.ReasonShutdown})
		}
	case *stopAll:
		// Shutdown: the busy period, if any, is cancelled and ends as any
		// does (its drain actor stops once childless, see drainDone); this
		// actor stops once it has no child. Stopped mid-busy-period,
		// protoactor would stop the drain actor at once, and with it every
		// tool actor it still lists, one already stopping among them (a
		// second Stop, a dead letter).
		s.stopping, s.closing = true, true
		if s.cancel != nil {
			s.cancel(interruptReason{messages.ReasonShutdown})
		}
		stopOnceEmpty(ctx, &s.stopped)
	case *messages.Wake:
		s.received++
		if s.stopping {
			refuse(ctx, errStoppingActors)
			return
		}
		s.apply(ctx, s.c.wake())
		ctx.Respond(&messages.WakeReply{})
	case *messages.Run:
		s.received++
		if s.stopping {
			refuse(ctx, errStoppingActors)
			return
		}
		e := s.c.run()
		s.apply(ctx, e)
		ctx.Respond(&messages.RunReply{Joined: e.joined})
	case *messages.Interrupt:
		s.received++
		reason := msg.Reason
		if reason == "" {
			reason = messages.ReasonUser
		}
		e := s.c.interrupt(reason)
		if e.replyNow {
			ctx.Respond(&messages.InterruptReply{})
		} else {
			s.interruptWaiters.add(s.rt.system.ProcessRegistry, ctx.Sender())
		}
		s.apply(ctx, e)
	case *messages.Move:
		s.received++
		if s.stopping {
			s.rt.settleMove(ctx, msg, ctx.Sender(), errStoppingActors)
			return
		}
		s.move = &pendingMove{msg: msg, sender: ctx.Sender()}
		if !s.c.busy() {
			s.finishMove(ctx)
			return
		}
		// Supersede the busy period; the move commits once it has ended
		// (drainDone).
		// Its work goes on at the new Location: a busy period still
		// running resumes there with a run when it owed a step, else
		// with a wake (see drainDone), and a wake or run coalesced into
		// it is carried over. A user's interrupt in progress has
		// cleared those, and the move does not undo it.
		running := s.c.phase == phaseRunning && s.c.interrupting == ""
		s.move.wake = s.c.followUp || s.c.restart
		s.move.run = running || s.c.restartForce
		s.move.forced = s.c.restartForce
		s.apply(ctx, s.c.interrupt(messages.ReasonSuperseded))
	case *messages.Wait:
		s.received++
		if s.c.wait().replyNow {
			ctx.Respond(&messages.WaitReply{})
		} else {
			s.waitWaiters.add(s.rt.system.ProcessRegistry, ctx.Sender())
		}
	case *waitersQuery:
		ctx.Respond([2]int{int(s.received), len(s.interruptWaiters.pids) + len(s.waitWaiters.pids)})
	case *drainNext:
		if msg.failed {
			s.c.fail()
			msg.reply <- false
			return
		}
		msg.reply <- s.c.next()
	case *drainDone:
		if s.drain == nil || !s.drain.Equal(msg.pid) || s.done != nil {
			return
		}
		// The busy period ends once the drain actor has terminated (see
		// drain): a Session stopped before would stop it a second time.
		s.done = msg
		ctx.Stop(s.drain)
	case *actor.Terminated:
		if s.done != nil && s.drain.Equal(msg.Who) {
			s.endBusy(ctx)
		}
		if s.closing {
			stopOnceEmpty(ctx, &s.stopped)
		}
	}
}

// endBusy ends the busy period whose drain actor has reported and
// terminated.
func (s *session) endBusy(ctx actor.Context) {
	msg := s.done
	s.done = nil
	s.cancel(context.Canceled) // release the finished busy period's context
	s.drain, s.cancel = nil, nil
	s.rt.active.Delete(s.sid)
	s.rt.cfg.Metrics.active(-1)
	if s.move != nil && !s.stopping {
		// The waits are answered where the Session goes on, after the
		// work the move carries there: not as idle here, now.
		s.move.waits = s.waitWaiters.take()
		if s.move.run && !s.move.forced && !msg.owed {
			// The busy period owed no step (it was between steps with
			// nothing to continue, or in a manual compaction, which it
			// admitted again): a wake runs what is pending there. A
			// forced run would take a step with no input.
			s.move.run, s.move.wake = false, true
		}
	}
	s.apply(ctx, s.c.done())
	if s.move != nil && !s.c.busy() && !s.stopping {
		s.finishMove(ctx)
	}
	if !s.c.busy() {
		s.armIdle(ctx)
	}
}

// waitersQuery asks a Session actor how many protocol messages it has
// handled and how many callers it lists to answer when its busy period
// ends (introspection for tests).
type waitersQuery struct{}

// waiters are the callers of a command answered when the busy period
// ends. A caller that gave up (an HTTP client that went away, a context
// that ended) has removed its reply process by then, but the busy period
// may last for days (a permission question no one answers), and a client
// that retries a wait on a timeout would grow the list by one each time:
// so whenever the list reaches twice what its last pruning left (and at
// least minPrune), the callers whose process is gone are dropped. A
// pruning looks up every caller listed, at most twice the appends since
// the last (the survivors of that one are looked up again): a constant
// cost per append.
type waiters struct {
	pids    []*actor.PID
	pruneAt int
}

// minPrune is the length below which a waiter list is never pruned.
const minPrune = 16

// add lists pid, first pruning the callers that gave up when it is time.
func (w *waiters) add(reg *actor.ProcessRegistryValue, pid *actor.PID) {
	if len(w.pids) >= max(w.pruneAt, minPrune) {
		w.pids = slices.DeleteFunc(w.pids, func(p *actor.PID) bool {
			if p == nil {
				return true // sent without a reply address: no one to answer
			}
			_, ok := reg.Get(p)
			return !ok
		})
		w.pruneAt = 2 * len(w.pids)
	}
	w.pids = append(w.pids, pid)
}

// take empties the list and returns what it held.
func (w *waiters) take() []*actor.PID {
	pids := w.pids
	*w = waiters{}
	return pids
}

// apply performs a coordinator effect.
func (s *session) apply(ctx actor.Context, e effect) {
	if e.start && s.stopping {
		// A restart after the busy period that Stopping cancelled: nothing
		// starts, and everyone waiting is answered.
		s.c = coordinator{}
		e = effect{releaseInterrupts: true, releaseWaits: true}
	}
	if e.cancel != "" && s.cancel != nil {
		s.cancel(interruptReason{e.cancel})
	}
	if e.releaseInterrupts {
		for _, w := range s.interruptWaiters.take() {
			ctx.Send(w, &messages.InterruptReply{})
		}
	}
	if e.releaseWaits {
		for _, w := range s.waitWaiters.take() {
			ctx.Send(w, &messages.WaitReply{})
		}
	}
	if e.start {
		s.start(ctx, e.force)
	}
}

// start begins a busy period: it registers the Session as active and spawns
// the drain child.
func (s *session) start(ctx actor.Context, force bool) {
	s.stopIdle()
	dctx, cancel := context.WithCancelCause(context.Background())
	s.cancel = cancel
	s.rt.active.Store(s.sid, struct{}{})
	s.rt.cfg.Metrics.active(1)
	self := ctx.Self()
	props := actor.PropsFromProducer(func() actor.Actor {
		return &drain{rt: s.rt, svc: s.at.svc, locKey: s.at.key, sid: s.sid, session: self, ctx: dctx, force: force}
	})
	// A generated name ("drain$N") is always free, so the spawn cannot
	// fail.
	s.drain = ctx.SpawnPrefix(props, "drain")
}

// reasonOf returns the interruption reason carried by a cancelled context.
func reasonOf(ctx context.Context) string {
	var r interruptReason
	if errors.As(context.Cause(ctx), &r) {
		return r.reason
	}
	return messages.ReasonUser
}

// finishMove commits the waiting move of an idle Session and settles it
// with the router. A moved actor leaves its Location's map at once, so a
// command for the Session there (after it moves back) gets a fresh actor.
func (s *session) finishMove(ctx actor.Context) {
	mv := s.move
	s.move = nil
	err := s.rt.commitMoveSafely(mv.msg)
	if err == nil {
		// Its Location stops this actor.
		ctx.Send(ctx.Parent(), &sessionMoved{sid: s.sid, pid: ctx.Self()})
	}
	ctx.Send(s.rt.exec, &moveDone{sid: mv.msg.SessionID, to: mv.sender, reply: moveReply(err), wake: mv.wake, run: mv.run, waits: mv.waits})
}
