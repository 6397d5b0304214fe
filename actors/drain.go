package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/messages"
)

// drain is the child actor that owns one busy period's goroutine: it runs
// the runner loop (one drain, then coalesced follow-ups) and spawns one tool
// actor per local tool call.
//
// It reports the busy period's end (drainDone) only once each of its tool
// actors has terminated, and the Session actor ends the busy period only
// once the drain actor has: protoactor stops every child an actor still
// lists when it stops, and a child whose termination is on its way (its
// Terminated not yet handled) gets that Stop as a dead letter, logged.
// Nothing else stops a drain actor: Shutdown's stopAll has a busy Session
// let its busy period end first.
type drain struct {
	rt      *Runtime
	svc     *locations.Services
	locKey  string // see place
	sid     messages.SessionID
	session *actor.PID
	ctx     context.Context
	force   bool

	// tools are the tool actors not yet told to stop.
	tools map[string]*actor.PID
	// finished is the goroutine's report, once it has ended.
	finished *runFinished
}

// Messages between a drain actor, its goroutine and its tool actors. The
// reports may reach a drain actor that has stopped (a tool past its grace
// finishes after its drain; a Session stopping mid-busy-period stops its
// drain actor before the goroutine ends), which is expected: they are not
// logged as dead letters.
type (
	// startTool asks the drain actor to spawn a tool actor.
	startTool struct {
		ctx   context.Context
		call  locations.ToolCall
		reply chan locations.ToolResult
	}
	// toolFinished: a tool actor's goroutine has returned; the drain
	// actor stops it.
	toolFinished struct{ pid *actor.PID }
	// runFinished: the busy period's goroutine has ended, its terminal
	// event committed.
	runFinished struct{ owed bool }
)

func (*toolFinished) IgnoreDeadLetterLogging() {}
func (*runFinished) IgnoreDeadLetterLogging()  {}

// Receive implements actor.Actor.
func (d *drain) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		self := ctx.Self()
		d.rt.wg.Go(func() { d.run(self) })
	case *startTool:
		pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &tool{rt: d.rt, svc: d.svc, req: msg} }))
		if d.tools == nil {
			d.tools = map[string]*actor.PID{}
		}
		d.tools[pid.Id] = pid
	case *toolFinished:
		if _, ok := d.tools[msg.pid.Id]; ok {
			delete(d.tools, msg.pid.Id)
			ctx.Stop(msg.pid)
		}
	case *runFinished:
		d.finished = msg
		// A tool the runner stopped waiting for (it ignored cancellation
		// past toolGrace) has an actor still: it stops now, and its
		// goroutine's report later reaches no one.
		for id, pid := range d.tools {
			delete(d.tools, id)
			ctx.Stop(pid)
		}
		d.reportDone(ctx)
	case *actor.Terminated:
		d.reportDone(ctx)
	}
}

// reportDone tells the Session actor that the busy period has ended once
// the goroutine has and no tool actor is left.
func (d *drain) reportDone(ctx actor.Context) {
	if d.finished != nil && len(ctx.Children()) == 0 {
		ctx.Send(d.session, &drainDone{pid: ctx.Self(), owed: d.finished.owed})
		d.finished = nil
	}
}

// run is the busy period's goroutine.
func (d *drain) run(self *actor.PID) {
	root := d.rt.system.Root
	r := &runner{sid: d.sid, locKey: d.locKey, order: d.rt.orderLock(d.sid), store: d.rt.cfg.Store, svc: d.svc, bus: d.rt.cfg.Bus, clock: d.rt.cfg.Clock,
		ids: d.rt.cfg.IDs, log: d.rt.cfg.Logger, steerBatch: d.rt.cfg.SteerBatch, metrics: d.rt.cfg.Metrics,
		autoCompact: d.rt.cfg.AutoCompact, compactionBuffer: d.rt.cfg.CompactionBuffer, keepTokens: d.rt.cfg.KeepTokens,
		liveHold: d.rt.cfg.LiveHold, toolGrace: d.rt.cfg.ToolGrace, bndAt: -1}
	if t, ok := d.rt.unended.Load(d.sid); ok {
		r.unended = t.(messages.Payload)
		r.paid = func() { d.rt.unended.CompareAndDelete(d.sid, t) }
	}
	r.startTool = func(ctx context.Context, call locations.ToolCall) <-chan locations.ToolResult {
		ch := make(chan locations.ToolResult, 1)
		root.Send(self, &startTool{ctx: ctx, call: call, reply: ch})
		return ch
	}
	err := d.loop(r, self)
	if err != nil && d.ctx.Err() == nil {
		// The busy period is closing: a run from now on must not join it.
		d.ask(&drainNext{failed: true})
	}
	ctx := context.WithoutCancel(d.ctx)
	var wrote bool
	if perr := recovered(func() error { wrote = r.settleLive(); return nil }); perr != nil {
		err, wrote = errors.Join(err, perr), true
	}
	if wrote {
		var terminal messages.Payload = &messages.ExecutionSucceeded{SessionID: d.sid}
		outcome := "succeeded"
		switch {
		case errors.Is(err, errSuperseded) && d.ctx.Err() == nil:
			terminal, outcome = &messages.ExecutionInterrupted{SessionID: d.sid, Reason: messages.ReasonSuperseded}, "interrupted"
		case errors.Is(err, errInterrupted) || (err != nil && d.ctx.Err() != nil):
			terminal, outcome = &messages.ExecutionInterrupted{SessionID: d.sid, Reason: reasonOf(d.ctx)}, "interrupted"
		case err != nil:
			e := messages.AsError(err, messages.ErrUnknown)
			terminal, outcome = &messages.ExecutionFailed{SessionID: d.sid, Error: *e}, "failed"
			// An operator sees a wrong key or a provider outage here, not
			// only in the Session's log.
			d.rt.cfg.Logger.Warn().Str("session", string(d.sid)).Str("type", string(e.Type)).Str("error", e.Message).Msg("busy period failed")
		}
		// Counted as decided: one that cannot be committed now is owed,
		// and written first by the next busy period.
		d.rt.cfg.Metrics.busyPeriod(outcome)
		if aerr := recovered(func() error { _, err := r.append(ctx, terminal); return err }); aerr != nil {
			// Owed: the next busy period writes it first (runner.unended).
			d.rt.unended.Store(d.sid, terminal)
			d.rt.cfg.Logger.Error().Err(aerr).Str("session", string(d.sid)).Msg("commit busy-period terminal")
		}
	} else if err != nil && !errors.Is(err, errInterrupted) && !errors.Is(err, errSuperseded) {
		d.rt.cfg.Logger.Warn().Err(err).Str("session", string(d.sid)).Msg("drain failed before writing anything")
	}
	root.Send(self, &runFinished{owed: r.owed})
}

// loop runs drains until the coordinator has no follow-up. A panic in the
// runner becomes a failed busy period instead of a crashed process.
func (d *drain) loop(r *runner, self *actor.PID) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("actors: runner panicked: %v\n%s", p, debug.Stack())
			// What the runner queued but had not committed never became
			// durable: it goes, as in a crash, so that no later commit
			// carries it (a step.started among it would open a step
			// nothing closes).
			r.dropUncommitted()
			// Close the step the panic left open, settlement first, as the
			// orphan sweep would; its calls are not re-run. A compaction it
			// left running fails, settling its barrier. Both use the store,
			// which may be what panicked: a second panic here would end
			// the process.
			ctx := context.WithoutCancel(d.ctx)
			e := messages.Error{Type: messages.ErrUnknown, Message: fmt.Sprintf("The runner failed: %v", p)}
			if ferr := recovered(func() error {
				return r.failOpenSteps(ctx, "", func(string) messages.Error { return e }, e)
			}); ferr != nil {
				err = errors.Join(err, ferr)
			}
			ce := messages.Error{Type: messages.ErrCompactionFailed, Message: e.Message}
			if ferr := recovered(func() error { return r.failRunningCompactions(ctx, true, ce) }); ferr != nil {
				err = errors.Join(err, ferr)
			}
		}
	}()
	force := d.force
	for {
		d.rt.cfg.Metrics.drain()
		if err := r.drain(d.ctx, force); err != nil {
			return err
		}
		cont, ok := d.ask(&drainNext{})
		if !ok {
			return errInterrupted
		}
		if !cont {
			return nil
		}
		force = false
	}
}

// ask sends q to the Session actor and waits for its answer; ok is false
// when the busy period was cancelled first (a Session actor stopping does
// not answer).
func (d *drain) ask(q *drainNext) (cont, ok bool) {
	q.reply = make(chan bool, 1)
	d.rt.system.Root.Send(d.session, q)
	select {
	case cont := <-q.reply:
		return cont, true
	case <-d.ctx.Done():
		return false, false
	}
}

// recovered runs f, turning a panic into an error: the cleanup of a
// busy period runs outside (or inside) the drain's recover, and its store
// calls may panic again.
func recovered(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = messages.Errorf(messages.ErrInternal, "panicked while closing the busy period: %v", p)
		}
	}()
	return f()
}

// tool is the child actor of one local tool call. Its goroutine recovers a
// panicking tool into a tool.failed result of type unknown.
type tool struct {
	rt  *Runtime
	svc *locations.Services
	req *startTool
}

// Receive implements actor.Actor.
func (t *tool) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Started); ok {
		self, drain := ctx.Self(), ctx.Parent()
		t.rt.wg.Go(func() {
			t.req.reply <- t.execute()
			t.rt.system.Root.Send(drain, &toolFinished{pid: self})
		})
	}
}

func (t *tool) execute() (res locations.ToolResult) {
	defer func() {
		if p := recover(); p != nil {
			res = locations.ToolResult{Err: &messages.Error{Type: messages.ErrUnknown,
				Message: fmt.Sprintf("tool %s panicked: %v", t.req.call.Name, p)}}
		}
	}()
	if t.svc.Tools == nil {
		return locations.ToolResult{Err: &messages.Error{Type: messages.ErrToolExecution, Message: "no tools are available in this Location"}}
	}
	if err := t.req.ctx.Err(); err != nil {
		return locations.ToolResult{Err: &messages.Error{Type: messages.ErrAborted, Message: "Tool execution interrupted: " + t.req.call.Name}}
	}
	return t.svc.Tools.Execute(t.req.ctx, t.req.call)
}
