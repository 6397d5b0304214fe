package script

import (
	"context"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/locations/llm"
)

// Requests returns deep copies of every request recorded so far, in arrival
// order (none while recording is off; see SetRecord).
func (p *Provider) Requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]llm.Request, len(p.requests))
	for i, r := range p.requests {
		out[i] = cloneRequest(r)
	}
	return out
}

// Count returns the number of requests received so far.
func (p *Provider) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// WaitRequest blocks until the n-th request (one-based) has arrived and
// returns a deep copy of it. It returns an error wrapping the context's
// error if ctx ends first.
func (p *Provider) WaitRequest(ctx context.Context, n int) (llm.Request, error) {
	if n < 1 {
		return llm.Request{}, fmt.Errorf("script: wait for request %d: requests are numbered from 1", n)
	}
	for {
		p.mu.Lock()
		have, arrived := p.count, p.arrived
		if have >= n {
			i, ok := slices.BinarySearch(p.numbers, n)
			if !ok {
				p.mu.Unlock()
				return llm.Request{}, fmt.Errorf("script: request %d arrived but was not recorded (recording was off)", n)
			}
			r := cloneRequest(p.requests[i])
			p.mu.Unlock()
			return r, nil
		}
		p.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return llm.Request{}, fmt.Errorf("script: wait for request %d (have %d): %w", n, have, context.Cause(ctx))
		}
	}
}

// cloneRequest returns a deep copy of r, so a recorded request never
// aliases memory its sender may reuse.
func cloneRequest(r llm.Request) llm.Request {
	if r.System != nil {
		r.System = append([]string{}, r.System...)
	}
	if r.Messages != nil {
		msgs := make([]llm.Message, len(r.Messages))
		for i, m := range r.Messages {
			if m.Parts != nil {
				parts := make([]llm.Part, len(m.Parts))
				for j, pt := range m.Parts {
					if pt.File != nil {
						f := *pt.File
						pt.File = &f
					}
					pt.Input = cloneRaw(pt.Input)
					pt.ProviderMetadata = cloneRaw(pt.ProviderMetadata)
					parts[j] = pt
				}
				m.Parts = parts
			}
			msgs[i] = m
		}
		r.Messages = msgs
	}
	if r.Tools != nil {
		tools := make([]llm.ToolDefinition, len(r.Tools))
		for i, t := range r.Tools {
			t.InputSchema = cloneRaw(t.InputSchema)
			tools[i] = t
		}
		r.Tools = tools
	}
	return r
}
