package actors

// coordinator is the pure state machine of one Session's execution in this
// process (SEED.md: SessionRunCoordinator). The Session actor feeds it
// inputs and performs the effects it returns; it has no goroutines, clock or
// I/O, so it is table-tested directly.
//
// A busy period starts when an idle Session gets a wake or run, spans every
// coalesced follow-up drain, and ends when the drain goroutine reports done.
type coordinator struct {
	phase phase
	// followUp is a coalesced wake registered while draining.
	followUp bool
	// restart is a wake or run that arrived while the busy period was
	// closing (or being interrupted): it starts a fresh busy period after.
	restart      bool
	restartForce bool
	// interrupting is the reason of an interrupt in progress.
	interrupting string
}

type phase uint8

const (
	phaseIdle phase = iota
	// phaseRunning: a drain goroutine is executing.
	phaseRunning
	// phaseClosing: the drain goroutine is writing the busy period's
	// terminal event, or its actor is stopping.
	phaseClosing
)

// effect is what the Session actor must do after an input.
type effect struct {
	// start a busy period (force: bypass the no-eligible-input guard).
	start bool
	force bool
	// cancel the running drain with this reason.
	cancel string
	// reply to interrupt and wait callers that were waiting.
	releaseInterrupts bool
	releaseWaits      bool
	// replyNow answers the current caller immediately.
	replyNow bool
	// joined: a run joined the running busy period (rather than starting
	// one, now or after the one closing).
	joined bool
}

// wake reports newly recorded durable inbox work.
func (c *coordinator) wake() effect {
	switch {
	case c.phase == phaseIdle:
		c.phase = phaseRunning
		return effect{start: true}
	case c.phase == phaseClosing || c.interrupting != "":
		c.restart = true
	default:
		c.followUp = true
	}
	return effect{}
}

// run is an explicit resume: it joins an active execution or starts a
// forced drain.
func (c *coordinator) run() effect {
	switch {
	case c.phase == phaseIdle:
		c.phase = phaseRunning
		return effect{start: true, force: true, replyNow: true}
	case c.phase == phaseClosing || c.interrupting != "":
		c.restart, c.restartForce = true, true
		return effect{replyNow: true}
	}
	return effect{replyNow: true, joined: true}
}

// interrupt cancels the running drain and clears coalesced follow-ups. The
// caller is answered when the busy period's terminal event is committed; an
// idle Session answers at once.
func (c *coordinator) interrupt(reason string) effect {
	c.followUp, c.restart, c.restartForce = false, false, false
	switch c.phase {
	case phaseIdle:
		return effect{replyNow: true}
	case phaseRunning:
		if c.interrupting == "" {
			c.interrupting = reason
			return effect{cancel: reason}
		}
	}
	return effect{}
}

// next is asked by the drain goroutine after each drain: whether to run a
// coalesced follow-up drain in the same busy period.
func (c *coordinator) next() bool {
	if c.phase == phaseRunning && c.followUp && c.interrupting == "" {
		c.followUp = false
		return true
	}
	c.phase = phaseClosing
	return false
}

// fail is told by the drain goroutine when a drain failed, before it
// commits the busy period's failure: the busy period is closing. A run
// from then on starts a fresh busy period after it instead of joining one
// that has ended, as it does once next has said no.
func (c *coordinator) fail() {
	if c.phase == phaseRunning {
		c.phase = phaseClosing
	}
}

// done records that the busy period's terminal event is committed. A
// follow-up still registered then came during a drain that failed (a
// failed drain closes its busy period without asking next): it starts a
// fresh busy period, as a wake during closing does.
func (c *coordinator) done() effect {
	e := effect{releaseInterrupts: true}
	followUp := c.followUp && c.interrupting == ""
	c.phase, c.interrupting, c.followUp = phaseIdle, "", false
	if c.restart || followUp {
		c.phase = phaseRunning
		e.start, e.force = true, c.restartForce
		c.restart, c.restartForce = false, false
		return e
	}
	e.releaseWaits = true
	return e
}

// wait answers when no execution is active and no wake is in flight.
func (c *coordinator) wait() effect {
	return effect{replyNow: c.phase == phaseIdle}
}

// busy reports whether a busy period is active.
func (c *coordinator) busy() bool { return c.phase != phaseIdle }
