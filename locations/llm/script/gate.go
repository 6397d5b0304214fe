package script

import (
	"context"
	"fmt"
	"sync"
)

// Gate holds scripted streams open until a test releases it. A stream that
// plays a Gate step marks the gate reached and blocks until Release or until
// its context is cancelled. Once released, a gate lets every stream pass,
// including streams that reach it later. The zero value is ready to use; a
// Gate is safe for concurrent use.
type Gate struct {
	mu       sync.Mutex
	reached  chan struct{}
	released chan struct{}
	arrivals int
}

// NewGate returns an unreleased gate.
func NewGate() *Gate { return new(Gate) }

// chans returns the gate's channels, creating them on first use.
func (g *Gate) chans() (reached, released chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reached == nil {
		g.reached = make(chan struct{})
		g.released = make(chan struct{})
	}
	return g.reached, g.released
}

// arrive records a stream reaching the gate and returns the channel that
// closes on release.
func (g *Gate) arrive() <-chan struct{} {
	reached, released := g.chans()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.arrivals++
	if g.arrivals == 1 {
		close(reached)
	}
	return released
}

// Release opens the gate for every stream blocked on it and every stream
// that reaches it later. Releasing twice is harmless.
func (g *Gate) Release() {
	_, released := g.chans()
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-released:
	default:
		close(released)
	}
}

// Reached blocks until a stream has reached the gate, and returns an error
// wrapping the context's error if ctx ends first.
func (g *Gate) Reached(ctx context.Context) error {
	reached, _ := g.chans()
	select {
	case <-reached:
		return nil
	default:
	}
	select {
	case <-reached:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("script: wait for gate: %w", context.Cause(ctx))
	}
}

// Arrivals returns how many streams have reached the gate so far.
func (g *Gate) Arrivals() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.arrivals
}
