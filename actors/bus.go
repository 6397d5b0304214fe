package actors

import (
	"sync"

	"github.com/sessiond/sessiond/messages"
)

// Bus fans what a Runtime publishes as it happens out to subscribers:
// live-only events (deltas, usage, permission asks and replies) and
// durable events as they commit. Publish never blocks: each subscriber has
// a bounded buffer, and a subscriber that falls behind is cut off (its
// channel closed and Dropped set) rather than slowing the runner. Nothing
// is replayed: a subscriber sees what is published after Subscribe, and
// reads what came before from the store (Store.Log). A subscription lasts
// until its owner Closes it (or falls behind): a Runtime's Shutdown does
// not end it. The zero Bus is ready to use, as is NewBus's.
type Bus struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewBus returns an empty bus.
func NewBus() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscription is one subscriber. C is closed when the subscription ends:
// by Close, or because the subscriber fell behind (Dropped reports true).
type Subscription struct {
	C       <-chan messages.Event
	ch      chan messages.Event
	filter  func(messages.Event) bool
	bus     *Bus
	dropped bool
	closed  bool
}

// Subscribe registers a subscriber with the given buffer size (256 when
// buffer <= 0). A nil filter accepts every event.
func (b *Bus) Subscribe(buffer int, filter func(messages.Event) bool) *Subscription {
	if buffer <= 0 {
		buffer = 256
	}
	ch := make(chan messages.Event, buffer)
	s := &Subscription{C: ch, ch: ch, filter: filter, bus: b}
	b.mu.Lock()
	if b.subs == nil { // the zero Bus is usable too
		b.subs = map[*Subscription]struct{}{}
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish delivers ev to every matching subscriber without blocking.
func (b *Bus) Publish(ev messages.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.filter != nil && !s.filter(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			s.dropped, s.closed = true, true
			close(s.ch)
			delete(b.subs, s)
		}
	}
}

// Subscribers returns the number of active subscriptions.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
		delete(s.bus.subs, s)
	}
}

// Dropped reports whether the subscriber was cut off for falling behind.
func (s *Subscription) Dropped() bool {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.dropped
}

// SessionFilter accepts the events of one Session.
func SessionFilter(sid messages.SessionID) func(messages.Event) bool {
	return func(ev messages.Event) bool { return ev.Data != nil && ev.Data.Session() == sid }
}
