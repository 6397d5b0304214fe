package actors

import "time"

// Clock is the runner's source of time. Retry delays wait on After, so a
// fake clock makes retry tests run without sleeping.
//
// A Clock may also have a method Forget(ch <-chan time.Time): the runner
// calls it with a channel After returned when it stops waiting on that
// channel before it fires (an interrupt during a retry delay), so a fake
// clock stops counting the abandoned wait as pending.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// forgetter is a Clock with Forget (see Clock).
type forgetter interface {
	Forget(ch <-chan time.Time)
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
