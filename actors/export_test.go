package actors

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/sessiond/sessiond/messages"
)

// Every boundary the package's tests serve from a runner's mirror is
// checked against a read of the store (see checkMirror).
func init() { checkMirror.Store(true) }

// CheckMirror turns the check on or off (benchmarks measure without it)
// and returns what it was.
func CheckMirror(on bool) bool { return checkMirror.Swap(on) }

// MirrorChecks returns how many boundaries were served from a mirror and
// checked, and the first that differed from a read ("" when none).
func MirrorChecks() (int64, string) {
	if p := mirrorMismatch.Load(); p != nil {
		return mirrorChecks.Load(), *p
	}
	return mirrorChecks.Load(), ""
}

// Closing reports whether Shutdown has begun.
func (rt *Runtime) Closing() bool { return rt.closing.Load() }

// SetSessionFault makes every Session actor call f with each message it
// receives (nil: none), so a test can make the actor panic.
func SetSessionFault(f func(msg any)) {
	if f == nil {
		sessionFault.Store(nil)
		return
	}
	sessionFault.Store(&f)
}

// Held returns how many commands the router holds for sid while its move
// settles.
func (rt *Runtime) Held(sid messages.SessionID) int {
	r, err := rt.system.Root.RequestFuture(rt.exec, &heldQuery{sid: sid}, 10*time.Second).Result()
	if err != nil {
		panic(err)
	}
	return r.(int)
}

// LocationActors returns how many Location actors the router has and how
// many commands it has forwarded to them.
func (rt *Runtime) LocationActors() (actors int, commands uint64) {
	r, err := rt.system.Root.RequestFuture(rt.exec, &locationsQuery{}, 10*time.Second).Result()
	if err != nil {
		panic(err)
	}
	n := r.([2]uint64)
	return int(n[0]), n[1]
}

// HoldIdleReports makes the next Location actor that reports itself idle
// call hold first (in the actor), and returns a function restoring the
// default.
func HoldIdleReports(hold func()) (restore func()) {
	var once sync.Once
	f := func() { once.Do(hold) }
	beforeIdleReport.Store(&f)
	return func() { beforeIdleReport.Store(nil) }
}

// CountToolGraces makes every grace a cancelled step starts for the tools
// that ignore cancellation run out at once, and records them: started
// returns the length each was started with (Config.ToolGrace), restore
// puts the wall-clock grace back.
func CountToolGraces() (started func() []time.Duration, restore func()) {
	var mu sync.Mutex
	var limits []time.Duration
	old := startGrace
	startGrace = func(d time.Duration) (context.Context, context.CancelFunc) {
		mu.Lock()
		limits = append(limits, d)
		mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx, cancel
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(limits)
	}, func() { startGrace = old }
}

// OrderLocked reports whether the order stripe of sid (Runtime.order) is
// held at this moment.
func (rt *Runtime) OrderLocked(sid messages.SessionID) bool {
	mu := rt.orderLock(sid)
	if mu.TryLock() {
		mu.Unlock()
		return false
	}
	return true
}

// OrderStripe returns Session sid's order stripe, for a test that holds
// it as a commit still publishing would.
func OrderStripe(rt *Runtime, sid messages.SessionID) *sync.Mutex { return rt.orderLock(sid) }

// WatchOrderWaits makes each runner commit (and Runtime.Published) that
// finds its Session's order stripe held send on waited (when it has room) before it waits for the
// stripe; restore puts the plain lock back. Set it before the runtime
// starts and restore it after the runtime stopped: runners read it
// unsynchronized.
func WatchOrderWaits(waited chan<- struct{}) (restore func()) {
	old := lockOrder
	lockOrder = func(mu *sync.Mutex) {
		if mu.TryLock() {
			return
		}
		select {
		case waited <- struct{}{}:
		default:
		}
		mu.Lock()
	}
	return func() { lockOrder = old }
}

// HoldIdleTimers replaces every Session actor's idle timer with one the
// test fires: fire sends the tick of the timer armed last (stale, and
// ignored, when its actor has re-armed or stopped it since). restore puts
// wall-clock timers back for the actors that arm one next.
func HoldIdleTimers() (fire func(), restore func()) {
	var mu sync.Mutex
	var last func()
	idleArms.Store(0)
	f := func(tick func()) {
		idleArms.Add(1)
		mu.Lock()
		last = tick
		mu.Unlock()
	}
	idleArmed.Store(&f)
	fire = func() {
		mu.Lock()
		tick := last
		mu.Unlock()
		if tick != nil {
			tick()
		}
	}
	return fire, func() { idleArmed.Store(nil) }
}

// IsIdleTick reports whether msg is a Session actor's idle timer firing.
func IsIdleTick(msg any) bool {
	_, ok := msg.(*idleTick)
	return ok
}

// idleArms counts the idle timers armed while HoldIdleTimers holds them.
var idleArms atomic.Int64

// IdleTimersArmed returns how many idle timers Session actors armed since
// HoldIdleTimers was last called: an actor arms one as it starts, as each
// busy period ends, and as it handles each tick of its timer.
func IdleTimersArmed() int64 { return idleArms.Load() }

// SessionWaiters returns how many protocol messages the live actor of sid
// has handled and how many callers it lists to answer when its busy period
// ends; ok is false when sid has no live actor.
func (rt *Runtime) SessionWaiters(sid messages.SessionID) (received, waiters int, ok bool) {
	var pid *actor.PID
	for _, bucket := range rt.system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			// execution/location-N/<sid>-G, not its drain or tools
			parts := strings.Split(id, "/")
			if len(parts) == 3 && parts[0] == "execution" && strings.HasPrefix(parts[2], string(sid)+"-") {
				pid = actor.NewPID(rt.system.Address(), id)
			}
		}
	}
	if pid == nil {
		return 0, 0, false
	}
	r, err := rt.system.Root.RequestFuture(pid, &waitersQuery{}, 10*time.Second).Result()
	if err != nil {
		return 0, 0, false
	}
	n := r.([2]int)
	return n[0], n[1], true
}
