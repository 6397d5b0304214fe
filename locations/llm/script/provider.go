package script

import (
	"context"
	"iter"
	"sync"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// DefaultChunkSize is the number of runes per text, reasoning and tool-input
// delta when SetChunkSize was not called.
const DefaultChunkSize = 8

// Response is one scripted answer: the steps a single Stream call plays.
type Response struct {
	// Name labels the response in documentation and scripts; optional.
	Name string
	// Match selects the requests the response answers; nil matches all.
	Match Matcher
	// Times is how many requests the response answers before it is used
	// up; 0 means it never is.
	Times int
	// Steps are played in order. A response whose steps end without Finish
	// or Fail finishes with tool-calls if it scripted a local tool call,
	// else with stop, and zero usage.
	Steps []Step
}

// entry is a Response and how often it has answered.
type entry struct {
	Response
	used int
}

// exhausted reports whether e has answered as often as it may.
func (e *entry) exhausted() bool { return e.Times > 0 && e.used >= e.Times }

// Provider is a deterministic scripted model. It answers each Stream call
// with the first scripted response that fits and records every request
// (unless SetRecord turns that off). It is safe for concurrent use by many
// Sessions; configure it before or while streams run.
type Provider struct {
	mu        sync.Mutex
	requests  []llm.Request
	numbers   []int         // one-based number of each recorded request
	count     int           // requests received, recorded or not
	noRecord  bool          // see SetRecord
	arrived   chan struct{} // closed and replaced on every request
	responses []*entry
	fallback  []Step
	hasDef    bool
	loop      bool
	chunk     int
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider with an empty script: until responses are added,
// every stream fails with provider.invalid-request.
func New() *Provider {
	return &Provider{arrived: make(chan struct{}), chunk: DefaultChunkSize}
}

// Reply appends a response that answers the next request it is the first fit
// for, once. Replies without a matcher form a FIFO queue.
func (p *Provider) Reply(steps ...Step) *Provider {
	return p.Add(Response{Times: 1, Steps: steps})
}

// ReplyFor appends a response that answers, once, the first request for
// which match reports true; earlier responses that also fit take precedence.
func (p *Provider) ReplyFor(match Matcher, steps ...Step) *Provider {
	return p.Add(Response{Match: match, Times: 1, Steps: steps})
}

// Add appends r to the script.
func (p *Provider) Add(r Response) *Provider {
	r.Steps = append([]Step(nil), r.Steps...)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.responses = append(p.responses, &entry{Response: r})
	return p
}

// Default sets the response played for requests no scripted response fits.
// It is never used up.
func (p *Provider) Default(steps ...Step) *Provider {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fallback = append([]Step(nil), steps...)
	p.hasDef = true
	return p
}

// SetLoop makes the script start over, with every response's use count
// reset, when no response fits a request and some response has been used.
func (p *Provider) SetLoop(loop bool) *Provider {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loop = loop
	return p
}

// SetRecord turns keeping a copy of every request on or off; it is on by
// default, for tests. A long-running daemon turns it off: a recorded request
// holds its Session's whole history, so the record would grow without
// bound. Count counts either way.
func (p *Provider) SetRecord(on bool) *Provider {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noRecord = !on
	return p
}

// SetChunkSize sets the number of runes per delta for streams that start
// afterwards; n <= 0 restores DefaultChunkSize.
func (p *Provider) SetChunkSize(n int) *Provider {
	if n <= 0 {
		n = DefaultChunkSize
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.chunk = n
	return p
}

// Remaining returns how many more requests the script's limited responses
// (Times > 0) can answer. A test that scripted an exact conversation checks
// it is 0 at the end.
func (p *Provider) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.responses {
		if e.Times > 0 {
			n += e.Times - e.used
		}
	}
	return n
}

// Stream implements llm.Provider. Each iteration of the returned sequence is
// one request: it is recorded, answered by the first fitting response and
// played step by step. A context cancelled before the first event ends the
// stream with an aborted *llm.Error without recording the request; one
// cancelled later ends it at the next event, gate or delay the same way.
func (p *Provider) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if ctx.Err() != nil {
			yield(llm.Event{}, aborted(ctx, 0))
			return
		}
		n, steps, chunk, ok := p.begin(req)
		if !ok {
			yield(llm.Event{}, llm.Errorf(messages.ErrProviderInvalidRequest,
				"script: no scripted response left for request %d", n))
			return
		}
		pl := player{ctx: ctx, n: n, chunk: chunk, yield: yield}
		pl.play(steps)
	}
}

// begin records req and selects its response. It returns the request's
// one-based number, the steps to play, the chunk size, and false when
// nothing answers the request.
func (p *Provider) begin(req llm.Request) (int, []Step, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	if !p.noRecord {
		p.requests = append(p.requests, cloneRequest(req))
		p.numbers = append(p.numbers, p.count)
	}
	n := p.count
	close(p.arrived)
	p.arrived = make(chan struct{})

	if steps, ok := p.pick(req); ok {
		return n, steps, p.chunk, true
	}
	if p.loop && p.rewind() {
		if steps, ok := p.pick(req); ok {
			return n, steps, p.chunk, true
		}
	}
	if p.hasDef {
		return n, p.fallback, p.chunk, true
	}
	return n, nil, p.chunk, false
}

// pick takes the first response that is not used up and fits req.
func (p *Provider) pick(req llm.Request) ([]Step, bool) {
	for _, e := range p.responses {
		if e.exhausted() || (e.Match != nil && !e.Match(req)) {
			continue
		}
		e.used++
		return e.Steps, true
	}
	return nil, false
}

// rewind resets every use count and reports whether any was set.
func (p *Provider) rewind() bool {
	did := false
	for _, e := range p.responses {
		if e.used > 0 {
			did = true
			e.used = 0
		}
	}
	return did
}
