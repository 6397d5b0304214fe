package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// Retry policy (SEED.md): the initial call plus at most four retries, with
// two-second exponential backoff raised to the provider's retryAfter.
const (
	maxAttempts = 5
	retryBase   = 2 * time.Second
	// maxRetryAfter caps what a provider's retry-after can ask for: a
	// header of 1e300 seconds (a proxy's mistake) would otherwise park the
	// Session, busy, until someone interrupts it.
	maxRetryAfter = 10 * time.Minute
)

// retryDelay returns the delay before attempt+1 after attempt failed.
func retryDelay(attempt int, retryAfter time.Duration) time.Duration {
	d := retryBase << (attempt - 1)
	return max(d, min(retryAfter, maxRetryAfter))
}

// errInterrupted marks a drain that stopped because its context was
// cancelled.
var errInterrupted = errors.New("actors: interrupted")

// errSuperseded ends a drain whose Session moved to another Location: its
// busy period ends as interrupted with reason superseded.
var errSuperseded error = interruptReason{messages.ReasonSuperseded}

// runner executes drains of one Session. It is created per busy period by
// the drain goroutine; its methods run on that goroutine, except the hold
// timer's flush of the outbox, which mu serializes.
type runner struct {
	sid messages.SessionID
	// locKey is the key of the Location this runner runs at (see place).
	locKey string
	// order is the Session's order lock (Runtime.order), held from each
	// commit until its events are published.
	order *sync.Mutex
	store persistence.Store
	svc   *locations.Services
	bus   *Bus
	clock Clock
	ids   *messages.IDs
	log   zerolog.Logger
	// warnedUnavailable: the busy period logged that instruction sources
	// are unavailable (prepareInstructions).
	warnedUnavailable bool
	// startTool starts a tool actor for a local call; the channel receives
	// its one result.
	startTool  func(ctx context.Context, call locations.ToolCall) <-chan locations.ToolResult
	steerBatch int
	// compactionBuffer and keepTokens tune automatic compaction.
	autoCompact      bool
	compactionBuffer int
	keepTokens       int
	metrics          *Metrics
	liveHold         time.Duration
	toolGrace        time.Duration

	// mu guards the outbox below: the hold timer flushes it from its own
	// goroutine.
	mu sync.Mutex
	// started is true once this busy period wrote execution.started.1.
	started bool
	// unended is the terminal of this Session's previous busy period in
	// this process when the store refused it (a full disk, say): the
	// first commit of this one writes it before execution.started.1, so
	// that every busy period the process ran has its one terminal once
	// the store takes writes again. paid tells the Runtime it is written.
	unended messages.Payload
	paid    func()
	// buf holds durable events not yet committed. Events are batched
	// between durability points (a tool call, a terminal, or a live event
	// held for liveHold) so a step costs a couple of commits rather than
	// one per event.
	buf []messages.Payload
	// held are live events waiting for the durable events queued before
	// them: a subscriber never sees a delta before its fragment's start.
	held []heldLive
	// hold flushes buf and held when no durability point came in time.
	hold *time.Timer
	// flushErr is a commit failure found while flushing for live events.
	flushErr error
	// hist caches projected history between steps (see history), and
	// lowered its provider-neutral form (see lowerWith).
	hist    []persistence.Message
	lowered lowered
	// commits counts this runner's commits. bnd is the last step-boundary
	// read, taken when commits was bndAt (-1: none yet), and bndMsgs says
	// history has not taken its messages yet (see boundary).
	commits int
	bnd     persistence.Boundary
	bndAt   int
	bndMsgs bool
	// mirror is what a boundary read would return, kept up to date from
	// this runner's own commits (see boundary); its messages are those
	// with seq > mirrorAfter. mirrorOK says it reflects the Session up to
	// mirror.Seq. Guarded by mu.
	mirror      persistence.Boundary
	mirrorAfter int64
	mirrorOK    bool
	// owed says whether the drain, were it to stop now, would leave a step
	// owed: one is running, continuation is required, or a forced run has
	// not taken its step. A move carries such work to the new Location as
	// a run, and anything else as a wake. Only the drain's goroutine uses
	// it.
	owed bool
}

// DefaultLiveHold is the default of Config.LiveHold: how long a live event
// waits for the durable events queued before it. Within it, a fast model's
// whole step (start, deltas, tool call) shares one commit; a slow stream
// flushes when it runs out. It is a latency bound, not a semantic delay,
// so it runs on real time rather than the injected clock.
const DefaultLiveHold = 5 * time.Millisecond

// heldLive is a live event published once the first `after` events of the
// buffer are committed.
type heldLive struct {
	after int
	ev    messages.Event
}

// queue adds durable events to the buffer; the next append commits them.
func (r *runner) queue(ps ...messages.Payload) {
	r.mu.Lock()
	r.buf = append(r.buf, ps...)
	r.mu.Unlock()
}

// append commits the buffer and ps, opening the busy period lazily so a
// wake with nothing to do leaves no trace in the log, then publishes the
// committed events with the held live events in their original order.
func (r *runner) append(ctx context.Context, ps ...messages.Payload) ([]messages.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitLocked(ctx, ps...)
}

// begin commits the busy period's session.execution.started.1 when
// nothing has yet, for a drain that stops with an error before its first
// other commit: its terminal then says why.
func (r *runner) begin(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return nil
	}
	_, err := r.commitLocked(ctx, &messages.ExecutionStarted{SessionID: r.sid})
	return err
}

func (r *runner) commitLocked(ctx context.Context, ps ...messages.Payload) ([]messages.Event, error) {
	if len(r.buf) > 0 {
		ps = append(r.buf, ps...)
		r.buf = nil
	}
	held := r.held
	r.held = nil
	if r.hold != nil {
		r.hold.Stop()
		r.hold = nil
	}
	if len(ps) == 0 {
		r.publishHeld(held, 0, len(held))
		return nil, nil
	}
	shift := 0
	if !r.started {
		if _, begins := ps[0].(*messages.ExecutionStarted); !begins {
			ps = append([]messages.Payload{&messages.ExecutionStarted{SessionID: r.sid}}, ps...)
			shift = 1
		}
		if r.unended != nil {
			ps = append([]messages.Payload{r.unended}, ps...)
			shift++
		}
	}
	if r.order != nil {
		lockOrder(r.order)
		defer r.order.Unlock()
	}
	// Commits must land even while the drain is being cancelled: settlement
	// and terminal events are exactly what interruption writes.
	c, err := r.store.Commit(context.WithoutCancel(ctx), r.sid, ps...)
	if err != nil {
		// Nothing was committed; the held live events describe fragments
		// that never became durable, so they are dropped with them.
		return nil, err
	}
	evs := c.Events
	r.observe(c)
	if !r.started && r.unended != nil {
		r.unended = nil
		r.paid()
	}
	r.started = true
	r.commits++
	j := 0
	for i, ev := range evs {
		for ; j < len(held) && held[j].after+shift <= i; j++ {
			r.bus.Publish(held[j].ev)
		}
		r.bus.Publish(ev)
	}
	r.publishHeld(held, j, len(held))
	return evs, nil
}

// lockOrder takes a Session's order stripe (Runtime.order) for a runner's
// commit. It is a variable only so that a test can see a commit wait for
// the stripe (WatchOrderWaits in export_test.go) rather than guess with a
// timer that it would have committed by now.
var lockOrder = (*sync.Mutex).Lock

func (r *runner) publishHeld(held []heldLive, from, to int) {
	for _, h := range held[from:to] {
		r.bus.Publish(h.ev)
	}
}

// live publishes a live-only event: at once when nothing durable is
// queued, else after the queued events commit, at the next durability
// point or when liveHold runs out.
func (r *runner) live(p messages.Payload) {
	ev := messages.Event{ID: r.ids.Event(), Created: r.clock.Now().UnixMilli(), Type: p.Type(), Data: p}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) == 0 && len(r.held) == 0 {
		r.bus.Publish(ev)
		return
	}
	r.held = append(r.held, heldLive{after: len(r.buf), ev: ev})
	if r.hold == nil {
		r.hold = time.AfterFunc(r.liveHold, r.flushHeld)
	}
}

// flushHeld commits the buffer for the live events waiting on it.
func (r *runner) flushHeld() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.held) == 0 {
		return
	}
	// The timer's goroutine is not the drain's, whose recover would catch
	// a Store that panics: here the panic would end the process. It fails
	// the busy period as a refused commit does (commitLocked has dropped
	// the buffer and the held events by then, as on an error).
	defer func() {
		if p := recover(); p != nil && r.flushErr == nil {
			r.flushErr = messages.Errorf(messages.ErrInternal, "store panicked publishing held events: %v", p)
		}
	}()
	if _, err := r.commitLocked(context.Background()); err != nil && r.flushErr == nil {
		r.flushErr = err
	}
}

// flushError returns the first commit failure of a flush for live events.
func (r *runner) flushError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushErr
}

// dropUncommitted discards the queued durable events and the live events
// held for them, after a panic: none of them became durable.
func (r *runner) dropUncommitted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf, r.held = nil, nil
	if r.hold != nil {
		r.hold.Stop()
		r.hold = nil
	}
}

// settleLive publishes what is still held and stops the hold timer, at the
// end of a busy period; it reports whether the busy period wrote anything.
func (r *runner) settleLive() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.held) > 0 {
		if _, err := r.commitLocked(context.Background()); err != nil && r.flushErr == nil {
			r.flushErr = err
		}
	}
	if r.hold != nil {
		r.hold.Stop()
		r.hold = nil
	}
	return r.started
}

// drain runs one drain: orphan recovery, then promote-and-step until
// nothing is eligible. force bypasses the no-eligible-input guard once.
func (r *runner) drain(ctx context.Context, force bool) error {
	r.owed = force
	if err := r.failInterruptedTools(ctx); err != nil {
		return err
	}
	allowance, continuation := 0, false
	agentName := ""
	for first := true; ; first = false {
		r.owed = continuation || force
		if ctx.Err() != nil {
			return errInterrupted
		}
		// Agent and model selection are step-scoped: reread at each
		// boundary, with the inbox, in one read (see boundary).
		b, err := r.boundary(ctx)
		if err != nil {
			return err
		}
		sess, pending := b.Session, b.Pending
		// The fence (SEED.md): a Session moved to another Location takes
		// no further step here. Moves through the actors end the busy
		// period first; this catches one committed around them.
		if sess.Location.Key() != r.locKey {
			return errSuperseded
		}
		agent := r.svc.Agent(sess.Agent)
		switch {
		case first:
			allowance = agent.Steps
		case agent.Name != agentName:
			// An agent selected during the run takes over with no more
			// steps than it allows (nor more than the run had left).
			allowance = min(allowance, agent.Steps)
		}
		agentName = agent.Name
		// Nothing to do (no input to promote or compact, no continuation,
		// no forced run): stop before instructions are observed, so a wake
		// with nothing eligible leaves no trace in the log even when they
		// changed. Any pending input is eligible here: steers and queued
		// prompts promote, a compaction barrier runs. A forced run
		// continues from the projected history; of a Session that has
		// none it would send the model a request without messages, which
		// providers refuse, failing a step for want of anything to do. It
		// has nothing to do either, and ends the same way, owing no step
		// (a move carries a wake, not a run that would end here again).
		if len(pending) == 0 && !continuation && (!force || r.noHistory(b)) {
			r.owed = false
			return nil
		}
		if first {
			if err := r.failInterruptedCompactions(ctx); err != nil {
				return err
			}
		}
		if err := r.prepareInstructions(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			// Interrupted while observing the instructions (an unavailable
			// source keeps what was applied): nothing is promoted or
			// compacted after it, and the inbox keeps the input for a
			// later wake or resume.
			return errInterrupted
		}
		var barrier *persistence.Input
		for i := range pending {
			if pending[i].Kind == persistence.InputCompaction {
				barrier = &pending[i]
				break
			}
		}
		// A pending compaction runs before the Session would otherwise
		// become idle, and blocks every unpromoted prompt until settled.
		if barrier != nil && !continuation {
			if _, err := r.compact(ctx, sess, agent, messages.CompactionManual, barrier.ID); err != nil {
				return err
			}
			continue
		}
		promoted := 0
		if barrier == nil {
			var batch []messages.Payload
			for _, in := range pending {
				if in.Delivery == messages.Steer && (r.steerBatch <= 0 || len(batch) < r.steerBatch) {
					batch = append(batch, &messages.PromptPromoted{SessionID: r.sid, InputID: in.ID})
				}
			}
			if len(batch) == 0 && !continuation {
				for _, in := range pending {
					if in.Kind == persistence.InputPrompt && in.Delivery == messages.Queue {
						batch = append(batch, &messages.PromptPromoted{SessionID: r.sid, InputID: in.ID})
						break
					}
				}
			}
			if len(batch) > 0 {
				if _, err := r.append(ctx, batch...); err != nil {
					return err
				}
				promoted = len(batch)
				r.metrics.promoted(promoted)
			}
		}
		if promoted > 0 {
			// New user input resets the allowance once per boundary.
			allowance = agent.Steps
		}
		if promoted == 0 && !continuation && !force {
			return nil
		}
		force = false
		if allowance <= 0 {
			return nil
		}
		r.owed = true
		cont, err := r.step(ctx, sess, agent, &allowance)
		if err != nil {
			// A step that failed for good (a refused request, a content
			// filter, retries used up) owes nothing more; an interrupted
			// one still owes its work.
			r.owed = errors.Is(err, errInterrupted) || errors.Is(err, errSuperseded)
			return err
		}
		continuation = cont && allowance > 0
	}
}

// failInterruptedTools is the orphan sweep: tools still pending or running
// from a process that died are failed as aborted, attributed to their
// original assistant message, and never re-run; the orphaned step is then
// closed, keeping settlement-first ordering.
func (r *runner) failInterruptedTools(ctx context.Context) error {
	return r.failOpenSteps(ctx, "", func(name string) messages.Error {
		return messages.Error{Type: messages.ErrAborted, Message: "Tool execution interrupted: " + name}
	}, messages.Error{Type: messages.ErrAborted, Message: "Step interrupted: the process running it stopped"})
}

// failOpenSteps closes the steps the store holds open (only the one of
// assistant message only, when set): it fails their pending and running
// tools with toolErr, ends their unfinished fragments, then fails each
// step with stepErr, settlement first. Each counts as a failed step (an
// orphan's too: the process that started it could not count it).
func (r *runner) failOpenSteps(ctx context.Context, only messages.MessageID, toolErr func(name string) messages.Error, stepErr messages.Error) error {
	open, err := r.store.OpenSteps(ctx, r.sid)
	if err != nil {
		return err
	}
	for _, m := range open {
		if only != "" && m.ID != only {
			continue
		}
		var ps []messages.Payload
		for _, p := range m.Parts {
			if t := p.Tool; t != nil && (t.State == persistence.ToolPending || t.State == persistence.ToolRunning) {
				ps = append(ps, &messages.ToolFailed{SessionID: r.sid, AssistantMessageID: m.ID, CallID: t.CallID, Error: toolErr(t.Name)})
			}
		}
		for _, p := range m.Parts {
			if (p.Kind == persistence.PartText || p.Kind == persistence.PartReasoning) && !p.Ended {
				ps = append(ps, fragmentEnd(r.sid, m.ID, p.Kind, p.Ordinal, p.Text, nil))
			}
		}
		ps = append(ps, &messages.StepFailed{SessionID: r.sid, AssistantMessageID: m.ID, Error: stepErr})
		if _, err := r.append(ctx, ps...); err != nil {
			return err
		}
		r.metrics.step("failed")
	}
	return nil
}

func fragmentEnd(sid messages.SessionID, asst messages.MessageID, kind string, ordinal int, text string, meta json.RawMessage) messages.Payload {
	if kind == persistence.PartReasoning {
		return &messages.ReasoningEnded{SessionID: sid, AssistantMessageID: asst, Ordinal: ordinal, Text: text, ProviderMetadata: meta}
	}
	return &messages.TextEnded{SessionID: sid, AssistantMessageID: asst, Ordinal: ordinal, Text: text, ProviderMetadata: meta}
}

// step runs one logical step: one or more physical attempts sharing an
// assistant message ID. It returns whether continuation is required.
func (r *runner) step(ctx context.Context, sess persistence.Session, agent locations.Agent, allowance *int) (bool, error) {
	asst := r.ids.Message()
	overflowCompacted := false
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			// A retry is a step too: it is fenced like the first attempt
			// (its boundary read did that), and runs on the model selected
			// by now (selection is step-scoped): a user leaving a
			// rate-limited provider does not wait out its retries.
			cur, err := r.fence(ctx)
			if err != nil {
				return false, err
			}
			sess.Model = cur.Model
		}
		*allowance--
		final := *allowance == 0
		// An agent the configuration no longer has would run with no rules
		// of its own; it fails the busy period, as a removed model does.
		if err := checkAgent(r.svc, sess.Agent); err != nil {
			return false, err
		}
		model, provider, err := r.svc.Model(sess.Model, agent)
		if err != nil {
			return false, err
		}
		if attempt == 1 && r.autoCompact {
			if err := r.autoCompaction(ctx, sess, agent, model, final); err != nil {
				return false, err
			}
		}
		r.queue(&messages.StepStarted{SessionID: r.sid, AssistantMessageID: asst, Agent: agent.Name, Model: model.Ref, Attempt: attempt})
		req, err := r.request(ctx, agent, model, final)
		if err != nil {
			// The step fails, and the busy period with it: it must not go
			// on (to a queued prompt) as if the step had ended.
			if ferr := r.failStep(ctx, asst, messages.AsError(err, messages.ErrUnknown)); ferr != nil {
				return false, errors.Join(err, ferr)
			}
			return false, err
		}
		out, err := r.attempt(ctx, asst, sess.Agent, provider, model, req)
		if err != nil {
			// A commit failed during the attempt: still close the step, so it
			// has its terminal. First with the settlements its closeout
			// queued; if the store refuses those too (they may name calls
			// the refused commit held, and a failed commit drops what it
			// held), from what the store itself holds.
			e := *messages.AsError(err, messages.ErrUnknown)
			if ferr := r.failStep(ctx, asst, &e); ferr == nil {
				r.metrics.step("failed")
			} else {
				lost := func(string) messages.Error { return e }
				if ferr := r.failOpenSteps(context.WithoutCancel(ctx), asst, lost, e); ferr != nil {
					err = errors.Join(err, ferr)
				}
			}
			return false, err
		}
		switch {
		case ctx.Err() != nil:
			if err := r.failStep(ctx, asst, &messages.Error{Type: messages.ErrAborted, Message: "Interrupted"}); err != nil {
				return false, err
			}
			r.metrics.step("interrupted")
			return false, errInterrupted
		case out.err != nil:
			e := out.err
			if err := r.failStep(ctx, asst, &messages.Error{Type: e.Type, Message: e.Message}); err != nil {
				return false, err
			}
			r.metrics.step("failed")
			if e.Type == messages.ErrProviderContextOverflow && !out.durableOutput && !overflowCompacted {
				// One overflow-triggered compaction, then the same logical
				// step with one remaining physical attempt. It compacts on
				// the allowance's last step too: the attempt cannot run,
				// but without the checkpoint the next turn would overflow
				// again (every turn, for an agent of one step).
				overflowCompacted = true
				if ok, err := r.compact(ctx, sess, agent, messages.CompactionOverflow, r.ids.Message()); err != nil || !ok || *allowance <= 0 {
					return false, firstErr(err, e.Typed())
				}
				// The retried attempt answers after the compaction boundary, so it
				// writes a new assistant message: the failed one's row sits
				// before the boundary, where its content would be hidden from
				// every later request.
				attempt, asst = maxAttempts-1, r.ids.Message()
				continue
			}
			if e.Retryable() && !out.durableOutput && attempt < maxAttempts && *allowance > 0 {
				delay := retryDelay(attempt, e.RetryAfter)
				at := r.clock.Now().Add(delay)
				if _, err := r.append(ctx, &messages.RetryScheduled{SessionID: r.sid, AssistantMessageID: asst,
					Attempt: attempt + 1, At: at.UnixMilli(), Error: e.Typed()}); err != nil {
					return false, err
				}
				r.metrics.retry()
				wait := r.clock.After(delay)
				select {
				case <-wait:
				case <-ctx.Done():
					if f, ok := r.clock.(forgetter); ok {
						f.Forget(wait)
					}
					return false, errInterrupted
				}
				continue
			}
			t := e.Typed()
			return false, &t
		case out.finish == llm.FinishContentFilter:
			// Partial content stays visible; the step fails, never ends.
			e := messages.Error{Type: messages.ErrProviderContentFilter, Message: "The provider's content filter stopped the response"}
			if err := r.failStep(ctx, asst, &e); err != nil {
				return false, err
			}
			r.metrics.step("content-filter")
			return false, &e
		}
		if _, err := r.append(ctx, &messages.StepEnded{SessionID: r.sid, AssistantMessageID: asst, Finish: out.finish,
			Tokens: out.usage, Cost: out.cost}); err != nil {
			return false, err
		}
		r.metrics.step("ended")
		// Local calls need their results sent back; a paused turn of
		// hosted tool use needs its response sent back to go on.
		return (out.localTools > 0 || out.finish == llm.FinishPause) && !out.rejected, nil
	}
}

// fence returns the Session, or errSuperseded when it has moved away from
// the Location this runner runs at (SEED.md: each new step is fenced
// against the Location execution entered).
func (r *runner) fence(ctx context.Context) (persistence.Session, error) {
	sess, err := r.store.Get(ctx, r.sid)
	if err != nil {
		return sess, err
	}
	if sess.Location.Key() != r.locKey {
		return sess, errSuperseded
	}
	return sess, nil
}

// defaultToolGrace bounds how long a cancelled step waits for the tools
// that ignore cancellation (or whose actors never started because the
// system is stopping), all of them together (Config.ToolGrace). It is
// wall-clock on purpose: it guards against misbehaving tools, not a
// protocol delay; tests replace startGrace (CountToolGraces) rather than
// wait for it.
const defaultToolGrace = 10 * time.Second

// startGrace starts one step's grace of d. Tests replace it
// (CountToolGraces) to count the graces a step starts without waiting for
// them.
var startGrace = func(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// toolGraceWait is the grace of one cancelled step: it starts when the
// first of its calls outlives the cancellation and runs out for all of
// them at once, so that several stuck tools do not wait one grace after
// another.
type toolGraceWait struct {
	limit  time.Duration
	ctx    context.Context
	cancel context.CancelFunc
}

// done returns a channel closed once the grace has run out, starting it.
func (g *toolGraceWait) done() <-chan struct{} {
	if g.ctx == nil {
		g.ctx, g.cancel = startGrace(g.limit)
	}
	return g.ctx.Done()
}

// stop releases the grace's timer.
func (g *toolGraceWait) stop() {
	if g.cancel != nil {
		g.cancel()
	}
}

// awaitTool waits for a tool's result; after cancellation it waits until
// the step's grace runs out and then settles the call as interrupted.
func awaitTool(ctx context.Context, ch <-chan locations.ToolResult, name string, grace *toolGraceWait) locations.ToolResult {
	select {
	case res := <-ch:
		return res
	case <-ctx.Done():
	}
	select {
	case res := <-ch:
		return res
	case <-grace.done():
		return locations.ToolResult{Err: &messages.Error{Type: messages.ErrAborted, Message: "Tool execution interrupted: " + name}}
	}
}

func firstErr(err error, e messages.Error) error {
	if err != nil {
		return err
	}
	return &e
}

func (r *runner) failStep(ctx context.Context, asst messages.MessageID, e *messages.Error) error {
	_, err := r.append(ctx, &messages.StepFailed{SessionID: r.sid, AssistantMessageID: asst, Error: *e})
	return err
}

// attemptOut is what one physical attempt produced.
type attemptOut struct {
	finish        string
	usage         messages.Tokens
	cost          float64
	err           *llm.Error
	durableOutput bool
	localTools    int
	rejected      bool
}

// fragment tracks an open text or reasoning fragment. A fragment the
// provider started becomes durable (its started event queued, the attempt
// holding output) only with its first text, or at its end when it carries
// provider metadata: a block opened empty and cut off by a failure (as
// Anthropic's stream opens every text block) is no output, and leaves the
// attempt retryable.
type fragment struct {
	open    bool // started by the provider, not yet ended
	durable bool // its started event is queued
	ordinal int  // next ordinal when closed, current when durable
	text    strings.Builder
	meta    json.RawMessage
}

// attemptState is one attempt's stream: its fragments, the calls it made
// and the tool inputs still streaming. One value instead of closures over
// many variables: each captured variable a closure changes is an
// allocation of its own, about ten per step.
type attemptState struct {
	r         *runner
	ctx       context.Context
	asst      messages.MessageID
	agentName string
	// noTools marks an attempt sent without tools (the final step of the
	// allowance): a local call the model makes anyway is not run.
	noTools   bool
	out       attemptOut
	frags     [2]fragment // text, reasoning (frag)
	calls     []attemptCall
	inputs    map[string]string // callID -> name, tool inputs started but not yet called
	inputText map[string]*strings.Builder
	finished  bool
	storeErr  error // a commit that failed mid-stream
	// declared and hostedTools are the tools the request offered, the
	// only names a metric label takes (toolLabel).
	declared    []llm.ToolDefinition
	hostedTools []string
	// prices are the model's, for a step whose provider reports no cost.
	prices llm.Prices
}

// toolLabel is the tool label of a call's metrics: its name when the
// request offered that tool, else "unknown". The model chooses the names
// it calls, so they would otherwise make series without bound.
func (a *attemptState) toolLabel(name string) string {
	if slices.Contains(a.hostedTools, name) || slices.ContainsFunc(a.declared, func(d llm.ToolDefinition) bool { return d.Name == name }) {
		return name
	}
	return "unknown"
}

// attemptCall is a tool call of an attempt, awaiting its settlement.
type attemptCall struct {
	id     string
	name   string
	result <-chan locations.ToolResult
	hosted bool
	// settled marks a hosted call whose result the provider streamed.
	settled bool
}

// frag returns the fragment of kind (text or reasoning).
func (a *attemptState) frag(kind string) *fragment {
	if kind == persistence.PartReasoning {
		return &a.frags[1]
	}
	return &a.frags[0]
}

func (a *attemptState) open(kind string, meta json.RawMessage) error {
	f := a.frag(kind)
	if f.open {
		return llm.Errorf(messages.ErrProviderUnknown, "provider opened a second %s fragment before ending the first", kind)
	}
	f.open, f.durable = true, false
	f.text.Reset()
	f.meta = meta
	return nil
}

// durable queues the started event of an open fragment that has none yet.
func (a *attemptState) durable(kind string) {
	f := a.frag(kind)
	if f.durable {
		return
	}
	f.durable = true
	var p messages.Payload = &messages.TextStarted{SessionID: a.r.sid, AssistantMessageID: a.asst, Ordinal: f.ordinal}
	if kind == persistence.PartReasoning {
		p = &messages.ReasoningStarted{SessionID: a.r.sid, AssistantMessageID: a.asst, Ordinal: f.ordinal}
	}
	a.out.durableOutput = true
	a.r.queue(p)
}

func (a *attemptState) closeFrag(kind string, meta json.RawMessage) {
	f := a.frag(kind)
	if !f.open {
		return
	}
	if meta == nil {
		meta = f.meta
	}
	f.open = false
	if !f.durable && f.text.Len() == 0 && len(meta) == 0 {
		return // nothing to keep: no fragment at all
	}
	a.durable(kind)
	a.r.queue(fragmentEnd(a.r.sid, a.asst, kind, f.ordinal, f.text.String(), meta))
	f.ordinal++
}

// called reports whether the attempt already has a call with this ID
// (callID is unique within its step).
func (a *attemptState) called(id string) bool {
	for _, c := range a.calls {
		if c.id == id {
			return true
		}
	}
	return false
}

func (a *attemptState) handle(ev llm.Event) error {
	r, asst := a.r, a.asst
	if len(ev.ProviderMetadata) > 0 && !json.Valid(ev.ProviderMetadata) {
		// An adapter's bug, refused before it is stored: an event whose
		// raw JSON member is not JSON cannot be served, so every history
		// page and log replay holding it would fail from then on.
		return llm.Errorf(messages.ErrProviderUnknown, "provider metadata of a %v event is not valid JSON", ev.Kind)
	}
	switch ev.Kind {
	case llm.TextStart, llm.ReasoningStart:
		kind := persistence.PartText
		if ev.Kind == llm.ReasoningStart {
			kind = persistence.PartReasoning
		}
		if err := a.open(kind, ev.ProviderMetadata); err != nil {
			return err
		}
	case llm.TextDelta, llm.ReasoningDelta:
		kind := persistence.PartText
		if ev.Kind == llm.ReasoningDelta {
			kind = persistence.PartReasoning
		}
		f := a.frag(kind)
		if !f.open {
			if err := a.open(kind, nil); err != nil {
				return err
			}
		}
		if ev.Text == "" {
			break // an empty delta is no output (and no live event)
		}
		a.durable(kind)
		f.text.WriteString(ev.Text)
		if kind == persistence.PartText {
			r.live(&messages.TextDelta{SessionID: r.sid, AssistantMessageID: asst, Ordinal: f.ordinal, Delta: ev.Text})
		} else {
			r.live(&messages.ReasoningDelta{SessionID: r.sid, AssistantMessageID: asst, Ordinal: f.ordinal, Delta: ev.Text})
		}
	case llm.TextEnd:
		a.closeFrag(persistence.PartText, ev.ProviderMetadata)
	case llm.ReasoningEnd:
		a.closeFrag(persistence.PartReasoning, ev.ProviderMetadata)
	case llm.ToolInputStart:
		if ev.CallID == "" {
			return noCallID(ev)
		}
		if _, dup := a.inputs[ev.CallID]; dup || a.called(ev.CallID) {
			return llm.Errorf(messages.ErrProviderUnknown, "provider reused tool call id %q", ev.CallID)
		}
		if a.inputs == nil {
			a.inputs, a.inputText = map[string]string{}, map[string]*strings.Builder{}
		}
		a.inputs[ev.CallID] = ev.Name
		a.inputText[ev.CallID] = &strings.Builder{}
		a.out.durableOutput = true
		r.queue(&messages.ToolInputStarted{SessionID: r.sid, AssistantMessageID: asst, CallID: ev.CallID, Name: ev.Name})
	case llm.ToolInputDelta:
		if b := a.inputText[ev.CallID]; b != nil {
			b.WriteString(ev.Text)
		}
		r.live(&messages.ToolInputDelta{SessionID: r.sid, AssistantMessageID: asst, CallID: ev.CallID, Delta: ev.Text})
	case llm.ToolInputEnd:
		if b := a.inputText[ev.CallID]; b != nil {
			r.queue(&messages.ToolInputEnded{SessionID: r.sid, AssistantMessageID: asst, CallID: ev.CallID,
				Name: a.inputs[ev.CallID], Text: b.String()})
			delete(a.inputText, ev.CallID)
		}
	case llm.ToolCall:
		// A reused ID is the provider's error: committed, the store would
		// refuse it and the commit with it.
		if ev.CallID == "" {
			return noCallID(ev)
		}
		if a.called(ev.CallID) {
			return llm.Errorf(messages.ErrProviderUnknown, "provider reused tool call id %q", ev.CallID)
		}
		// The call is stored and run with the same input: a provider's
		// malformed arguments as a JSON string of their text, which the
		// tool's validation then reports to the model.
		input := llm.ToolInput(ev.Input)
		a.out.durableOutput = true
		if _, err := r.append(a.ctx, &messages.ToolCalled{SessionID: r.sid, AssistantMessageID: asst, CallID: ev.CallID,
			Name: ev.Name, Input: input, Executed: ev.Executed, ProviderMetadata: ev.ProviderMetadata}); err != nil {
			return err
		}
		delete(a.inputs, ev.CallID)
		delete(a.inputText, ev.CallID)
		c := attemptCall{id: ev.CallID, name: ev.Name, hosted: ev.Executed}
		switch {
		case !ev.Executed && a.noTools:
			done := make(chan locations.ToolResult, 1)
			done <- locations.ToolResult{Err: &messages.Error{Type: messages.ErrToolExecution,
				Message: "No tools are available on this step: it is the last one the agent's step allowance leaves, so " + ev.Name + " was not run"}}
			c.result = done
			a.out.localTools++
		case !ev.Executed:
			// The call is durable; start it now, before the stream ends.
			c.result = r.startTool(a.ctx, locations.ToolCall{SessionID: r.sid, Agent: a.agentName, AssistantMessageID: asst,
				CallID: ev.CallID, Name: ev.Name, Input: input})
			a.out.localTools++
		}
		a.calls = append(a.calls, c)
	case llm.ToolResult:
		// The provider ran a hosted call of this attempt: its settlement
		// commits in stream order, with the result-side metadata apart
		// from the call's.
		i := slices.IndexFunc(a.calls, func(c attemptCall) bool { return c.id == ev.CallID && c.hosted && !c.settled })
		if i < 0 {
			return llm.Errorf(messages.ErrProviderUnknown, "provider returned a result for %q, which is not an unsettled hosted call of this step", ev.CallID)
		}
		c := &a.calls[i]
		c.settled = true
		if ev.IsError {
			msg := ev.Output
			if msg == "" {
				msg = "The provider reported a failure of " + c.name
			}
			r.queue(&messages.ToolFailed{SessionID: r.sid, AssistantMessageID: asst, CallID: c.id,
				Error: messages.Error{Type: messages.ErrToolExecution, Message: msg}, ProviderMetadata: ev.ProviderMetadata})
			r.metrics.tool(a.toolLabel(c.name), "failed")
		} else {
			r.queue(&messages.ToolSucceeded{SessionID: r.sid, AssistantMessageID: asst, CallID: c.id,
				Output: ev.Output, ProviderMetadata: ev.ProviderMetadata})
			r.metrics.tool(a.toolLabel(c.name), "success")
		}
	case llm.StepFinish:
		a.finished = true
		cost := ev.Cost
		if cost == 0 {
			cost = a.prices.Cost(ev.Usage)
		}
		// The live usage and the step's durable end carry the same cost.
		a.out.finish, a.out.usage, a.out.cost = ev.Finish, ev.Usage, cost
		r.live(&messages.UsageUpdated{SessionID: r.sid, AssistantMessageID: asst, Tokens: ev.Usage, Cost: cost})
	}
	return nil
}

// noCallID refuses a tool event without a call ID, an adapter's bug: its
// result could not be paired with it, and the empty ID would go back to
// the provider in every later request of the Session.
func noCallID(ev llm.Event) error {
	return llm.Errorf(messages.ErrProviderUnknown, "provider sent a %v event of tool %q without a call id", ev.Kind, ev.Name)
}

// stream plays the provider's stream of req into a. A panic of the
// provider's own (an adapter's bug) is a thrown provider failure: it ends
// the stream as one, so that the closeout still awaits and settles every
// call the attempt started before its step fails (SEED.md). A panic in the
// runner's handling of an event is left to the drain's recovery.
func (a *attemptState) stream(provider llm.Provider, req llm.Request) {
	inBody := false
	defer func() {
		if inBody {
			return
		}
		if p := recover(); p != nil {
			a.r.log.Error().Str("session", string(a.r.sid)).Str("stack", string(debug.Stack())).Msgf("provider stream panicked: %v", p)
			a.out.err = llm.Errorf(messages.ErrProviderUnknown, "The provider's stream failed: %v", p)
		}
	}()
	for ev, err := range provider.Stream(a.ctx, req) {
		inBody = true
		stop := a.consume(ev, err)
		inBody = false
		if stop {
			break
		}
	}
}

// consume takes one item of the provider's stream and reports whether the
// stream ends there.
func (a *attemptState) consume(ev llm.Event, err error) bool {
	if err != nil {
		a.out.err = llm.AsError(err)
		return true
	}
	if herr := a.handle(ev); herr != nil {
		var le *llm.Error
		if errors.As(herr, &le) {
			a.out.err = le
		} else {
			a.storeErr = herr
		}
		return true
	}
	return a.finished
}

// attempt streams one provider call, committing fragments and tool calls as
// they complete, starting each local tool eagerly, and settling every call
// before it returns (settlement first, on every path).
func (r *runner) attempt(ctx context.Context, asst messages.MessageID, agentName string, provider llm.Provider, model llm.Model, req llm.Request) (attemptOut, error) {
	a := &attemptState{r: r, ctx: ctx, asst: asst, agentName: agentName, noTools: req.ToolChoice == llm.ToolChoiceNone,
		declared: req.Tools, hostedTools: req.HostedTools, prices: model.Prices}
	out := &a.out
	r.metrics.request()
	a.stream(provider, req)
	if out.err == nil && a.storeErr == nil && !a.finished && ctx.Err() == nil {
		out.err = llm.Errorf(messages.ErrProviderTransport, "stream ended without a finish event")
	}
	// Closeout: keep partial content, settle every call, then report.
	a.closeFrag(persistence.PartReasoning, nil)
	a.closeFrag(persistence.PartText, nil)
	var settle []messages.Payload
	grace := toolGraceWait{limit: r.toolGrace} // shared by the calls awaited below
	defer grace.stop()
	for id, name := range a.inputs {
		settle = append(settle, &messages.ToolFailed{SessionID: r.sid, AssistantMessageID: asst, CallID: id,
			Error: messages.Error{Type: messages.ErrToolResultMissing, Message: "The tool call " + name + " was cut off before its input was complete"}})
		r.metrics.tool(a.toolLabel(name), "failed")
	}
	for _, c := range a.calls {
		if c.hosted {
			if c.settled {
				continue
			}
			msg := "The provider did not return a result for " + c.name
			if out.err == nil && ctx.Err() == nil && (out.finish == llm.FinishPause || out.localTools > 0) {
				// A paused turn, or one that also called a local tool: the
				// provider runs the call once the response goes back, and
				// its result comes in the next step (as a call of its own).
				msg = "The provider runs " + c.name + " in its next turn, when this step's response is sent back"
			}
			settle = append(settle, &messages.ToolFailed{SessionID: r.sid, AssistantMessageID: asst, CallID: c.id,
				Error: messages.Error{Type: messages.ErrToolResultMissing, Message: msg}})
			r.metrics.tool(a.toolLabel(c.name), "failed")
			continue
		}
		res := awaitTool(ctx, c.result, c.name, &grace)
		if res.Err != nil {
			if res.Halt {
				out.rejected = true
			}
			settle = append(settle, &messages.ToolFailed{SessionID: r.sid, AssistantMessageID: asst, CallID: c.id, Error: *res.Err})
			r.metrics.tool(a.toolLabel(c.name), "failed")
		} else {
			settle = append(settle, &messages.ToolSucceeded{SessionID: r.sid, AssistantMessageID: asst, CallID: c.id,
				Output: res.Output, Metadata: res.Metadata})
			r.metrics.tool(a.toolLabel(c.name), "success")
		}
	}
	// Settlements commit with the step's terminal (the caller's next
	// append), keeping settlement-first order inside one transaction.
	r.queue(settle...)
	if err := errors.Join(a.storeErr, r.flushError()); err != nil {
		return *out, fmt.Errorf("actors: step %s closeout: %w", asst, err)
	}
	return *out, nil
}
