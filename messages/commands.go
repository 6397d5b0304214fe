package messages

// The actor protocol: commands sent to the execution router and forwarded
// to a Session actor, and their replies. Commands are imperative, replies
// end in Reply.

// Wake reports newly recorded durable inbox work for a Session. Repeated
// wakes coalesce; a wake calls the provider only when it can promote
// eligible input.
type Wake struct {
	SessionID SessionID
}

// WakeReply acknowledges a Wake once the Session actor has registered it.
type WakeReply struct{}

// Run is an explicit resume: it joins an active execution or starts a
// forced drain while idle.
type Run struct {
	SessionID SessionID
}

// RunReply answers Run once the drain has started or been joined.
type RunReply struct {
	Joined bool
}

// Interrupt stops the Session's execution in this process and replies
// after tool settlement and the terminal lifecycle event. An idle or
// missing Session is a no-op.
type Interrupt struct {
	SessionID SessionID
	// Reason is user, shutdown or superseded; empty means user.
	Reason string
}

// InterruptReply answers Interrupt.
type InterruptReply struct{}

// Wait replies when the Session has no active execution and no wake in
// flight.
type Wait struct {
	SessionID SessionID
}

// WaitReply answers Wait.
type WaitReply struct{}

// Move moves a Session to another Location. A busy period running at the
// old Location is interrupted with reason superseded, session.moved.1 is
// committed once it has ended, and its work goes on at the new Location;
// commands that arrive meanwhile are handled there afterwards. A move to
// the Location the Session has is a no-op.
type Move struct {
	SessionID SessionID
	Location  Location
}

// MoveReply answers Move once the move is committed (or was a no-op).
type MoveReply struct{}

// ErrorReply answers a command that failed.
type ErrorReply struct {
	Error Error
}

// A reply can reach no one: a caller that has stopped waiting (its context
// ended, its HTTP client went away), or a command sent without a reply
// address (the wake or run a move carries). That is expected, so protoactor
// does not log these as dead letters (its IgnoreDeadLetterLogging marker).

func (*WakeReply) IgnoreDeadLetterLogging()      {}
func (*RunReply) IgnoreDeadLetterLogging()       {}
func (*InterruptReply) IgnoreDeadLetterLogging() {}
func (*WaitReply) IgnoreDeadLetterLogging()      {}
func (*MoveReply) IgnoreDeadLetterLogging()      {}
func (*ErrorReply) IgnoreDeadLetterLogging()     {}
