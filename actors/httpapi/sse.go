package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// Stream labels of the Subscribers gauge.
const (
	streamLog   = "log"
	streamEvent = "event"
)

// sseWriter writes server-sent events. Frames are buffered by the
// ResponseWriter until flush, so a burst of events costs one flush.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	// timeout is Config.StreamWriteTimeout (see arm).
	timeout time.Duration
}

// startSSE writes the stream's headers and status. Server.ReadTimeout does
// not cut the stream: net/http clears the read deadline once the request
// is read (TestReadTimeoutDoesNotCutStreams pins that). A HEAD request gets
// the headers and nothing more (ok is false): net/http drops the body of a
// HEAD response, so its stream would never notice the client leave, and
// would hold the client's connection forever.
//
// A following stream (follow is true) caps its connection's send buffer
// and closes the connection when it ends; see followBuffer.
func (a *api) startSSE(w http.ResponseWriter, r *http.Request, follow bool) (sse *sseWriter, ok bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if c, capped := r.Context().Value(connKey{}).(interface{ SetWriteBuffer(int) error }); follow && capped && r.Method != http.MethodHead {
		if c.SetWriteBuffer(followBuffer) == nil {
			// Not reused for a later request (a backup) that would be
			// held to the small buffer.
			h.Set("Connection", "close")
		}
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil, false
	}
	sse = &sseWriter{w: w, rc: rc, timeout: a.cfg.StreamWriteTimeout}
	sse.arm()
	return sse, true
}

// followBuffer is the send buffer of a following stream's connection
// (Linux doubles it: 256 KiB). The kernel's own grows to megabytes, and a
// client that reads, but slower than its stream runs, is cut off by the
// Bus while the stream's write still waits for that buffer to drain: at a
// few tens of KB/s the write timeout ended the connection first, without
// the ": dropped" notice the client is promised. With this buffer a client
// reading 9 KB/s or faster gets it.
const followBuffer = 128 << 10

// connKey is the request context key of the connection it came on
// (Server's ConnContext), for followBuffer.
type connKey struct{}

// arm gives the next write (and the flush after it) the stream's write
// timeout: a client that takes nothing of it in time ends the stream, whose
// blocked write then fails. Each frame arms it anew, so a slow client that
// keeps reading is never cut, however long a replay burst runs.
func (s *sseWriter) arm() {
	// Not every ResponseWriter supports deadlines (test recorders); the
	// stream then runs without one, as before.
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
}

// event writes one message; id < 0 writes no id line.
func (s *sseWriter) event(id int64, data []byte) error {
	s.arm()
	s.buf = s.buf[:0]
	if id >= 0 {
		s.buf = append(s.buf, "id: "...)
		s.buf = strconv.AppendInt(s.buf, id, 10)
		s.buf = append(s.buf, '\n')
	}
	// data is compact JSON: it never contains a newline, so one data line
	// carries it.
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, '\n', '\n')
	_, err := s.w.Write(s.buf)
	return err
}

// named writes one message of event type name, which an EventSource
// delivers only to listeners of that name (not to onmessage).
func (s *sseWriter) named(name string, data []byte) error {
	s.arm()
	_, err := s.w.Write([]byte("event: " + name + "\ndata: " + string(data) + "\n\n"))
	return err
}

// comment writes a comment line, which clients ignore (heartbeats).
func (s *sseWriter) comment(text string) error {
	s.arm()
	_, err := s.w.Write([]byte(": " + text + "\n\n"))
	return err
}

func (s *sseWriter) flush() error { return s.rc.Flush() }

// subscribed counts one SSE subscriber of a stream until the returned func
// is called.
func (a *api) subscribed(stream string) func() {
	m := a.cfg.Metrics
	if m == nil || m.Subscribers == nil {
		return func() {}
	}
	g := m.Subscribers.WithLabelValues(stream)
	g.Inc()
	return g.Dec
}

// heartbeat returns a ticker channel for following streams (nil, which
// never fires, otherwise) and its stop function.
func (a *api) heartbeat(follow bool) (<-chan time.Time, func()) {
	if !follow {
		return nil, func() {}
	}
	t := time.NewTicker(a.cfg.Heartbeat)
	return t.C, t.Stop
}

// tailHook, when set by a test, runs on a log stream's tail goroutine
// before the store's Log subscribes and captures its watermark: holding it
// there lets events commit after a live stream's bus subscription and
// before its replay's watermark.
var tailHook func()

// logFrame is one item of a Log stream handed from its reader goroutine.
type logFrame struct {
	item persistence.LogItem
	err  error
}

// logStream is GET /api/session/{id}/log?after&follow&live: every durable
// event after the cursor as "id: <seq>" + "data: <event>", one log.synced
// marker (no id), then with follow=true every later commit. The cursor
// also comes from Last-Event-ID (see parseLog), so an EventSource resumes
// where it stopped. With live=true the Session's live-only events follow
// the marker too, in the order they happened (see followLive). The
// store's tail is released when the client leaves or the Server shuts
// down.
func (a *api) logStream(w http.ResponseWriter, r *http.Request) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	qv, err := query(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	q, err := parseLog(qv, r.Header.Values("Last-Event-ID"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// Unknown Sessions are answered before the stream starts, with a status.
	if _, err := a.store.Get(r.Context(), sid); err != nil {
		a.fail(w, r, err)
		return
	}
	ctx, cancel := a.withStop(r)
	defer cancel()
	var sub *actors.Subscription
	if q.Live {
		// Before the tail captures its watermark: every commit after it
		// is then on the subscription.
		sub = a.cfg.Runtime.Bus().Subscribe(eventBuffer, actors.SessionFilter(sid))
		defer sub.Close()
	}
	tailCtx, stopTail := context.WithCancel(ctx)
	frames := make(chan logFrame, 64)
	var wg sync.WaitGroup
	defer func() {
		stopTail()
		wg.Wait()
	}()
	// Log blocks between commits, so it runs on its own goroutine and the
	// handler selects over its frames, heartbeats and the context.
	wg.Go(func() {
		defer close(frames)
		if tailHook != nil {
			tailHook()
		}
		for item, err := range a.store.Log(tailCtx, sid, q.After, q.Follow) {
			select {
			case frames <- logFrame{item: item, err: err}:
			case <-tailCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	defer a.subscribed(streamLog)()
	sse, ok := a.startSSE(w, r, q.Follow)
	if !ok {
		return
	}
	if err := sse.flush(); err != nil {
		return
	}
	tick, stopTick := a.heartbeat(q.Follow)
	defer stopTick()
	written := q.After // the client has every event up to here
	for {
		select {
		case f, ok := <-frames:
			// Write every frame already waiting, then flush once.
			for more := ok; more; {
				if !a.writeLogFrame(r, sse, f) {
					_ = sse.flush()
					return
				}
				if f.item.Event != nil {
					written = f.item.Event.Seq()
				}
				if syn := f.item.Synced; syn != nil && q.Live {
					if syn.Seq != nil {
						written = max(written, *syn.Seq)
					}
					stopTail()
					if sse.flush() != nil {
						return
					}
					a.followLive(r, sse, sid, sub, written, tick, ctx.Done())
					return
				}
				select {
				case f, ok = <-frames:
					more = ok
				default:
					more = false
				}
			}
			if err := sse.flush(); err != nil || !ok {
				return
			}
		case <-tick:
			if sse.comment("ping") != nil || sse.flush() != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// followLive goes on with a live log stream once its replay is synced at
// seq written: from there the Session's bus subscription, which carries
// its durable events in seq order and its live-only events between them
// as they happened, is the stream. Durable events keep their id lines;
// live ones are messages of event type "live" without one: they never
// move the client's cursor, and a client that reads only unnamed
// messages (EventSource's onmessage) gets the durable stream it would
// without live=true.
//
// The subscription began before the replay's watermark, so it may repeat
// durable events the replay sent; a live event published before one of
// those came before something the client already has, and is dropped.
// A durable event beyond written+1 means the bus missed a commit (one
// made outside the runtime): the stream ends, and the client's resume
// from Last-Event-ID reads it from the log. So does falling behind the
// bus, announced as on /api/event.
func (a *api) followLive(r *http.Request, sse *sseWriter, sid messages.SessionID, sub *actors.Subscription, written int64, tick <-chan time.Time, done <-chan struct{}) {
	// Commits the replay saw may still be publishing; after this, their
	// events are on the subscription, so no live event that came before
	// one of them passes for a new one.
	a.cfg.Runtime.Published(sid)
	var held []messages.Event // live events read since the last durable one
	release := func() bool {
		for _, ev := range held {
			if !a.writeLive(r, sse, ev, "live") {
				return false
			}
		}
		held = held[:0]
		return true
	}
	// After each burst, what is held came after every durable event
	// published before it: release settles the burst.
	a.pump(sse, sub, tick, done, func(ev messages.Event) bool {
		switch seq := ev.Seq(); {
		case ev.Durable == nil:
			held = append(held, ev)
		case seq <= written:
			held = held[:0] // they preceded an event the client has
		case seq == written+1:
			if !release() || !a.writeLogFrame(r, sse, logFrame{item: persistence.LogItem{Event: &ev}}) {
				return false
			}
			written = seq
		default:
			return false
		}
		return true
	}, release)
}

// pump writes a bus subscription to sse until either ends: every event
// through handle, then after each burst (what was waiting) settle and one
// flush. A subscriber the bus cut off gets the dropped notice; false from
// handle or settle ends the stream.
func (a *api) pump(sse *sseWriter, sub *actors.Subscription, tick <-chan time.Time, done <-chan struct{}, handle func(messages.Event) bool, settle func() bool) {
	for {
		select {
		case ev, ok := <-sub.C:
			for more := ok; more; {
				if !handle(ev) {
					_ = sse.flush()
					return
				}
				select {
				case ev, ok = <-sub.C:
					more = ok
				default:
					more = false
				}
			}
			if settle != nil && !settle() {
				return
			}
			if !ok && sub.Dropped() {
				a.droppedNotice(sse)
			}
			if err := sse.flush(); err != nil || !ok {
				return
			}
		case <-tick:
			if sse.comment("ping") != nil || sse.flush() != nil {
				return
			}
		case <-done:
			return
		}
	}
}

// writeLogFrame writes one frame of a log stream; false ends the stream.
func (a *api) writeLogFrame(r *http.Request, sse *sseWriter, f logFrame) bool {
	switch {
	case f.err != nil:
		// Headers are sent: the stream just ends and the client resumes
		// with Last-Event-ID.
		if r.Context().Err() == nil {
			a.log.Warn().Err(f.err).Str("path", r.URL.Path).Msg("log stream failed")
		}
		return false
	case f.item.Event != nil:
		b, err := json.Marshal(f.item.Event)
		if err != nil {
			a.log.Error().Err(err).Str("path", r.URL.Path).Msg("encode event")
			return false
		}
		return sse.event(f.item.Event.Seq(), b) == nil
	case f.item.Synced != nil:
		b, err := json.Marshal(f.item.Synced)
		if err != nil {
			a.log.Error().Err(err).Str("path", r.URL.Path).Msg("encode log.synced")
			return false
		}
		return sse.event(-1, b) == nil
	}
	return true
}

// eventStream is GET /api/event[?sessionID=]: live events from the Bus
// (deltas, permission asks and replies, durable lifecycle) as "data:"
// messages without ids. A sessionID must name an existing Session. A
// subscriber that falls behind is cut off by the Bus, never slowing the
// runner; its stream then ends with a ": dropped" comment and an
// "event: dropped" message, and the client should resynchronize from the
// durable log.
func (a *api) eventStream(w http.ResponseWriter, r *http.Request) {
	var filter func(messages.Event) bool
	qv, err := query(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if sid, ok, err := a.sessionFilter(r, qv); err != nil {
		a.fail(w, r, err)
		return
	} else if ok {
		filter = actors.SessionFilter(sid)
	}
	ctx, cancel := a.withStop(r)
	defer cancel()
	// Subscribe before the headers go out: a client that has the response
	// misses nothing published afterwards.
	sub := a.cfg.Runtime.Bus().Subscribe(eventBuffer, filter)
	defer sub.Close()
	defer a.subscribed(streamEvent)()
	sse, ok := a.startSSE(w, r, true)
	if !ok {
		return
	}
	if err := sse.flush(); err != nil {
		return
	}
	tick, stopTick := a.heartbeat(true)
	defer stopTick()
	a.pump(sse, sub, tick, ctx.Done(), func(ev messages.Event) bool { return a.writeLive(r, sse, ev, "") }, nil)
}

// droppedNotice ends a stream whose subscriber fell behind the bus: a
// comment for eyes and curl, and a named event for EventSource, which
// never delivers comments.
func (a *api) droppedNotice(sse *sseWriter) {
	_ = sse.comment("dropped: subscriber fell behind; resynchronize from the log")
	_ = sse.named("dropped", []byte(`{"type":"dropped","message":"subscriber fell behind; resynchronize from the log"}`))
}

// writeLive writes one live event, as a message of event type name when
// name is not empty; false ends the stream.
func (a *api) writeLive(r *http.Request, sse *sseWriter, ev messages.Event, name string) bool {
	b, err := json.Marshal(ev)
	if err != nil {
		a.log.Error().Err(err).Str("path", r.URL.Path).Str("type", ev.Type).Msg("encode live event")
		return false
	}
	if name != "" {
		return sse.named(name, b) == nil
	}
	return sse.event(-1, b) == nil
}

// sessionFilter reads the sessionID filter of the event stream and the
// permission list: a well-formed ID of a Session that exists. As on the
// log stream, an unknown Session is answered with a status (before a
// stream starts), rather than with a stream or list that would never hold
// anything of it.
func (a *api) sessionFilter(r *http.Request, qv url.Values) (messages.SessionID, bool, error) {
	v, ok, err := single(qv, "sessionID")
	if err != nil || !ok {
		return "", false, err
	}
	sid := messages.SessionID(v)
	if err := sid.Validate(); err != nil {
		return "", false, err
	}
	if _, err := a.store.Get(r.Context(), sid); err != nil {
		return "", false, err
	}
	return sid, true, nil
}
