package tools

import (
	"context"
	"fmt"
	"sync"

	"github.com/sessiond/sessiond/messages"
)

// PendingConfig configures a Pending broker.
type PendingConfig struct {
	// NewID returns a fresh request ID. Nil means messages.IDs.Request
	// ("per_" followed by a ULID).
	NewID func() string
	// OnAsked, when set, is called after a question is registered and
	// before Ask waits, so a client that sees the event can already reply.
	OnAsked func(*messages.PermissionAsked)
	// OnReplied, when set, is called once per question when it leaves the
	// broker: on a reply, including the other questions of the Session a
	// reply settles with it (see Reply), and with reply "reject" and a
	// message starting with "cancelled" when the asking context ends or the
	// question is withdrawn.
	OnReplied func(*messages.PermissionReplied)
}

// Pending is an in-process Asker: every question waits under its request
// ID until Reply answers it (or a reply to another question of its Session
// settles it, see Reply), the asking context ends, or Cancel withdraws it.
// The actor layer plugs it in as the Asker of Permissions, lists it on GET
// /api/permission and routes replies to it.
//
// Hooks run synchronously on the goroutine that caused them, one at a time
// and in event order (an asked event precedes its replied event); they must
// not block and must not call Ask or Reply, but may call List.
type Pending struct {
	newID     func() string
	onAsked   func(*messages.PermissionAsked)
	onReplied func(*messages.PermissionReplied)

	// publish serializes hook calls so that events keep their order.
	publish sync.Mutex

	mu    sync.Mutex
	asks  map[string]*waiting
	order []string
}

// waiting is one question waiting for its answer.
type waiting struct {
	req Request
	// grant is set when Permissions asked: it saves an "always" reply and
	// re-evaluates the request against rules and saved approvals.
	grant *grant
	// answer receives exactly one outcome; its capacity of one means the
	// sender never blocks.
	answer chan outcome
}

// outcome is how a question left the broker.
type outcome struct {
	ans       Answer
	cancelled string // reason when withdrawn
}

var (
	_ Asker   = (*Pending)(nil)
	_ granter = (*Pending)(nil)
)

// NewPending returns an empty broker.
func NewPending(cfg PendingConfig) *Pending {
	p := &Pending{newID: cfg.NewID, onAsked: cfg.OnAsked, onReplied: cfg.OnReplied, asks: make(map[string]*waiting)}
	if p.newID == nil {
		p.newID = messages.NewIDs(nil, nil).Request
	}
	return p
}

// Ask implements Asker. It registers req under a new ID (req.ID when set
// and not in use), publishes it and waits.
func (p *Pending) Ask(ctx context.Context, req Request) (Answer, error) {
	return p.askGranted(ctx, req, nil)
}

// askGranted is Ask for a question of Permissions, whose grant lets Reply
// save an "always" reply and decide which other questions it covers.
func (p *Pending) askGranted(ctx context.Context, req Request, g *grant) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}
	w := &waiting{grant: g, answer: make(chan outcome, 1)}
	p.publish.Lock()
	p.mu.Lock()
	if _, taken := p.asks[req.ID]; req.ID == "" || taken {
		req.ID = p.newID()
	}
	w.req = req
	p.asks[req.ID] = w
	p.order = append(p.order, req.ID)
	p.mu.Unlock()
	if p.onAsked != nil {
		p.onAsked(req.Asked())
	}
	p.publish.Unlock()

	select {
	case o := <-w.answer:
		if o.cancelled != "" {
			return Answer{}, fmt.Errorf("%w: %s", ErrAskCancelled, o.cancelled)
		}
		return o.ans, nil
	case <-ctx.Done():
		// Withdraw unless a reply won the race; if it did, honour it.
		if p.withdraw(req.ID, "context ended") {
			return Answer{}, ctx.Err()
		}
		o := <-w.answer
		if o.cancelled != "" {
			return Answer{}, fmt.Errorf("%w: %s", ErrAskCancelled, o.cancelled)
		}
		return o.ans, nil
	}
}

// Reply answers the question requestID, and settles the other questions of
// its Session that the answer decides, as opencode does:
//
//   - always, to a question Permissions asked, first saves its approval;
//     then every other question of the same Session and project that
//     Permissions asked and that its rules and saved approvals now allow
//     entirely (evaluated as the ask was) is answered always too, without
//     saving anything of its own.
//   - reject rejects every other question of the same Session as well,
//     without the message, so that a step that asked twice ends.
//   - once answers requestID only.
//
// Every question answered gets its permission.replied event, requestID's
// first and the others in the order they were asked; all are settled
// before Reply returns. Questions without a Session have no siblings.
//
// A failing save does not fail Reply: the reply was taken, the asking call
// fails with the store's error, and no other question is approved.
//
// It returns a *RequestNotFoundError when no such question is waiting (it
// was answered, withdrawn or never asked) and a *messages.Error of type
// invalid for an unknown reply.
func (p *Pending) Reply(requestID string, reply Reply, message string) error {
	if !reply.Valid() {
		return messages.Errorf(messages.ErrInvalid, "reply: want once, always or reject, got %q", reply)
	}
	p.publish.Lock()
	defer p.publish.Unlock()
	w, ok := p.take(requestID)
	if !ok {
		return &RequestNotFoundError{RequestID: requestID}
	}
	saved := false
	if reply == Always && w.grant != nil {
		// Save before anyone learns of the reply: the siblings are judged
		// against this approval, and a client that sees the event may
		// already rely on it.
		saved = w.grant.apply() == nil
	}
	p.answer(w, Answer{Reply: reply, Message: message})
	session := w.req.SessionID
	if session == "" {
		return nil
	}
	switch {
	case reply == Reject:
		for _, sib := range p.waitingOf(session) {
			if _, ok := p.take(sib.req.ID); ok {
				p.answer(sib, Answer{Reply: Reject})
			}
		}
	case reply == Always && saved:
		for _, sib := range p.waitingOf(session) {
			if sib.grant == nil || sib.grant.project != w.grant.project || !sib.grant.covered() {
				continue
			}
			if _, ok := p.take(sib.req.ID); ok {
				sib.grant.coveredAlready()
				p.answer(sib, Answer{Reply: Always})
			}
		}
	}
	return nil
}

// answer delivers ans to w, which has left the broker, and publishes it.
// The caller holds p.publish.
func (p *Pending) answer(w *waiting, ans Answer) {
	w.answer <- outcome{ans: ans}
	if p.onReplied != nil {
		p.onReplied(&messages.PermissionReplied{SessionID: w.req.SessionID, RequestID: w.req.ID, Reply: string(ans.Reply), Message: ans.Message})
	}
}

// waitingOf returns the questions of session still waiting, in the order
// they were asked.
func (p *Pending) waitingOf(session messages.SessionID) []*waiting {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*waiting
	for _, id := range p.order {
		if w := p.asks[id]; w.req.SessionID == session {
			out = append(out, w)
		}
	}
	return out
}

// List returns the waiting questions in the order they were asked.
func (p *Pending) List() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Request, 0, len(p.order))
	for _, id := range p.order {
		out = append(out, p.asks[id].req)
	}
	return out
}

// Cancel withdraws every question of session, as an interrupt does; their
// Ask calls return an error matching ErrAskCancelled. It returns how many
// questions it withdrew.
func (p *Pending) Cancel(session messages.SessionID) int {
	return p.cancel(func(r Request) bool { return r.SessionID == session }, "interrupted")
}

// CancelAll withdraws every waiting question, as shutdown does. It returns
// how many questions it withdrew.
func (p *Pending) CancelAll() int {
	return p.cancel(func(Request) bool { return true }, "shutting down")
}

func (p *Pending) cancel(match func(Request) bool, reason string) int {
	p.mu.Lock()
	var ids []string
	for _, id := range p.order {
		if match(p.asks[id].req) {
			ids = append(ids, id)
		}
	}
	p.mu.Unlock()
	n := 0
	for _, id := range ids {
		if p.withdraw(id, reason) {
			n++
		}
	}
	return n
}

// withdraw removes question id, answers its waiter with a cancellation and
// publishes it. It reports false when the question was already gone.
func (p *Pending) withdraw(id, reason string) bool {
	p.publish.Lock()
	defer p.publish.Unlock()
	w, ok := p.take(id)
	if !ok {
		return false
	}
	w.answer <- outcome{cancelled: reason}
	if p.onReplied != nil {
		p.onReplied(&messages.PermissionReplied{SessionID: w.req.SessionID, RequestID: id, Reply: string(Reject), Message: "cancelled: " + reason})
	}
	return true
}

// take removes and returns question id.
func (p *Pending) take(id string) (*waiting, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.asks[id]
	if !ok {
		return nil, false
	}
	delete(p.asks, id)
	for i, o := range p.order {
		if o == id {
			p.order = append(p.order[:i], p.order[i+1:]...)
			break
		}
	}
	return w, true
}
