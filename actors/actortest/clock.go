package actortest

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Clock is a fake clock: time moves only when Advance is called. After
// registers a waiter that fires once the clock passes its deadline, so
// retry delays run without sleeping.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	changed chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a fake clock set to start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives once the clock reaches now+d.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	c.signal()
	return ch
}

// signal wakes BlockUntil callers; c.mu must be held.
func (c *Clock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves the clock forward and fires every waiter now due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
	c.signal()
}

// Forget drops the pending After call that returned ch: the runtime calls
// it when it gives up waiting (an interrupt during a retry delay), so
// Waiters and BlockUntil count only the waits someone is still blocked on.
func (c *Clock) Forget(ch <-chan time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if (<-chan time.Time)(w.ch) != ch {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// Waiters returns the number of pending After calls.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// BlockUntil waits until at least n After calls are pending. When ctx
// ends first, its error says how many were.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have := len(c.waiters)
		if have >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fake clock: waited for %d pending timers, %d are: %w", n, have, ctx.Err())
		}
	}
}
