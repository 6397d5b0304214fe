package persistence

import (
	"context"
	"iter"
	"sync"

	"github.com/sessiond/sessiond/messages"
)

// tails holds the dirty signals of active Log tails: per Session, one
// capacity-1 channel per tail. Signals are advisory and edge-triggered; a
// woken tail re-queries the log, so coalesced signals lose nothing. A
// Session with no tail holds no state here.
type tails struct {
	mu     sync.Mutex
	subs   map[messages.SessionID]map[chan struct{}]struct{}
	closed chan struct{}
}

func (t *tails) init() {
	t.subs = make(map[messages.SessionID]map[chan struct{}]struct{})
	t.closed = make(chan struct{})
}

func (t *tails) subscribe(sid messages.SessionID) chan struct{} {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.subs[sid]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		t.subs[sid] = set
	}
	set[ch] = struct{}{}
	return ch
}

func (t *tails) unsubscribe(sid messages.SessionID, ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	set := t.subs[sid]
	delete(set, ch)
	if len(set) == 0 {
		delete(t.subs, sid)
	}
}

func (t *tails) notify(sid messages.SessionID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ch := range t.subs[sid] {
		select {
		case ch <- struct{}{}:
		default: // already dirty
		}
	}
}

func (t *tails) closeAll() { close(t.closed) }

// done reports whether Close has stopped the writer (closeAll): from then
// on reads, like writes and tails, end with ErrClosed.
func (t *tails) done() bool {
	select {
	case <-t.closed:
		return true
	default:
		return false
	}
}

// Tails returns the number of Sessions with an active tail (for tests and
// metrics).
func (s *Bolt) Tails() int {
	s.tails.mu.Lock()
	defer s.tails.mu.Unlock()
	return len(s.tails.subs)
}

// logPage bounds how many events one read transaction decodes, so a long
// replay never holds a read transaction (and its pages) for long.
const logPage = 512

// Log implements Store. It subscribes the dirty signal before capturing the
// watermark, so a commit racing the replay is either at or below the
// watermark (replayed) or above it (delivered by the tail).
func (s *Bolt) Log(ctx context.Context, id messages.SessionID, after int64, follow bool) iter.Seq2[LogItem, error] {
	return func(yield func(LogItem, error) bool) {
		var dirty chan struct{}
		if follow {
			dirty = s.tails.subscribe(id)
			defer s.tails.unsubscribe(id, dirty)
		}
		if after < -1 {
			after = -1
		}
		watermark, err := s.Watermark(ctx, id)
		if err != nil {
			yield(LogItem{}, err)
			return
		}
		cursor := after
		// read reads the next n events after cursor. A store closed
		// meanwhile ends the log with ErrClosed, whatever the read failed
		// with, as for a tail that was idle.
		read := func(n int) ([]messages.Event, error) {
			evs, err := s.readLog(id, cursor, n)
			select {
			case <-s.tails.closed:
				return nil, ErrClosed
			default:
			}
			return evs, err
		}
		// Replay up to the watermark.
		for cursor < watermark {
			evs, err := read(min(logPage, int(watermark-cursor)))
			if err != nil {
				yield(LogItem{}, err)
				return
			}
			if len(evs) == 0 {
				break
			}
			for i := range evs {
				if !yield(LogItem{Event: &evs[i]}, nil) {
					return
				}
				cursor = evs[i].Durable.Seq
			}
		}
		synced := &messages.Synced{Type: messages.TypeLogSynced, AggregateID: id}
		if watermark >= 0 {
			w := watermark
			synced.Seq = &w
		}
		if !yield(LogItem{Synced: synced}, nil) || !follow {
			return
		}
		cursor = max(cursor, watermark)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.tails.closed:
				yield(LogItem{}, ErrClosed)
				return
			case <-dirty:
			}
			for {
				evs, err := read(logPage)
				if err != nil {
					yield(LogItem{}, err)
					return
				}
				for i := range evs {
					if !yield(LogItem{Event: &evs[i]}, nil) {
						return
					}
					cursor = evs[i].Durable.Seq
				}
				if len(evs) < logPage {
					break
				}
			}
		}
	}
}

// readLog decodes up to limit events with seq > after.
func (s *Bolt) readLog(id messages.SessionID, after int64, limit int) ([]messages.Event, error) {
	var evs []messages.Event
	err := s.view(func(v *view) error {
		_, err := scanLog(v, id, after, limit, func(v []byte) error {
			ev, err := messages.UnmarshalEvent(v)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
			return nil
		})
		return err
	})
	return evs, err
}
