// The process ledger, and the check of what its sweep leaves, read /proc.

//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sessiond/sessiond/messages"
)

// crashFollows are the log followers of TestCrashLoop: the Session each
// follows (client c's Session j) and how it resumes after a drop:
//
//   - header: Last-Event-ID only;
//   - query: after= only;
//   - eventsource: as a browser's EventSource, the same URL (after=-1)
//     on every reconnect, with Last-Event-ID, which is the later cursor;
//   - streamLog: the CLI's own reader (`sessiond log --follow`), restarted
//     with --after when it gives up on a first connect.
//
// Two follow the same Session, one raw and one through the CLI, so that
// both views of one log are checked.
var crashFollows = []struct {
	c, j int
	how  string
}{
	{0, 0, "header"}, {1, 1, "query"}, {2, 0, "eventsource"}, {3, 1, "streamLog"}, {0, 0, "streamLog"},
}

// errFollowStop ends a follower that met something it cannot go on from
// (already reported).
var errFollowStop = errors.New("crashloop: follower stopped")

// crashDaemon is the address of the daemon of the current round, which
// the followers read at each (re)connect; empty while none runs.
type crashDaemon struct {
	mu    sync.Mutex
	addr  string
	round int
}

func (d *crashDaemon) set(addr string, round int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addr, d.round = addr, round
}

func (d *crashDaemon) get() (addr string, round int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr, d.round
}

// crashFollowers are the followers of one TestCrashLoop, running from
// before the first round until stop.
type crashFollowers struct {
	l      *crashLoop
	all    []*crashFollower
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// crashFollower follows one Session's log across every kill and restart,
// as a client would: it keeps the seq of the last event it received and
// resumes after it.
type crashFollower struct {
	l   *crashLoop
	n   int
	sid messages.SessionID
	how string
	hc  *http.Client

	mu   sync.Mutex
	got  []crashFollowed // every event received, duplicates included
	last int64           // the seq of the last event received; -1 before any
	// streams counts the streams a daemon accepted; refused the attempts
	// that found no daemon or the Session not yet created.
	streams, refused, markers int
	stopped                   bool // by errFollowStop
}

// crashFollowed is one event a follower received.
type crashFollowed struct {
	ev     messages.Event
	round  int // of the daemon that sent it
	stream int // the follower's stream it came on, from 1
}

// startFollowers starts the followers; they wait for the first daemon.
func (l *crashLoop) startFollowers() *crashFollowers {
	ctx, cancel := context.WithCancel(context.Background())
	fl := &crashFollowers{l: l, cancel: cancel}
	for n, spec := range crashFollows {
		f := &crashFollower{l: l, n: n, sid: crashSessionID(spec.c, spec.j), how: spec.how, last: -1}
		// No Timeout: a stream lasts a round. No keep-alive: a stream's
		// connection is never reused, and one to a killed daemon is dead.
		tr := &http.Transport{DisableKeepAlives: true}
		f.hc = &http.Client{Transport: tr}
		if f.how == "streamLog" {
			// The CLI's client has one base URL; its connections go to
			// whichever daemon runs now.
			tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				addr, _ := l.daemon.get()
				if addr == "" {
					return nil, errors.New("crashloop: no daemon runs")
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			f.hc.Transport = f.counting(tr)
		}
		fl.all = append(fl.all, f)
		fl.wg.Go(func() { f.run(ctx) })
	}
	return fl
}

// stop ends the followers and waits for them; it may be called again.
func (fl *crashFollowers) stop() {
	fl.cancel()
	fl.wg.Wait()
}

func (f *crashFollower) String() string { return fmt.Sprintf("follower %d (%s)", f.n, f.how) }

// stop marks f stopped by errFollowStop, after a reported failure.
func (f *crashFollower) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
}

// cursor returns the seq of the last event received.
func (f *crashFollower) cursor() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// created reports whether the follower's Session's creation was
// acknowledged; read before a request, so that a 404 to it is a bug.
func (f *crashFollower) created() bool {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	return f.l.created[f.sid]
}

// counting counts the streams the CLI's streamLog opens (every request it
// sends is one) and the attempts that found no daemon or no Session.
func (f *crashFollower) counting(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		res, err := rt.RoundTrip(req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if err == nil && res.StatusCode == http.StatusOK {
			f.streams++
		} else {
			f.refused++
		}
		return res, err
	})
}

// roundTripFunc is a function as an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (fn roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return fn(req) }

// run follows until ctx ends or something unrecoverable was reported.
func (f *crashFollower) run(ctx context.Context) {
	if f.how == "streamLog" {
		f.runCLI(ctx)
		return
	}
	delay := time.Millisecond
	for ctx.Err() == nil {
		if addr, round := f.l.daemon.get(); addr != "" {
			n, err := f.stream(ctx, addr, round)
			if errors.Is(err, errFollowStop) {
				return
			}
			if n > 0 {
				delay = time.Millisecond
			}
		}
		if !followPause(ctx, delay) {
			return
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// followPause waits d or until ctx ends, and reports whether ctx is still
// live.
func followPause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stream reads one log stream of the daemon of round at addr, resuming
// after the last event received, until it drops. It returns how many
// messages arrived, and errFollowStop when the follower must stop.
func (f *crashFollower) stream(ctx context.Context, addr string, round int) (int, error) {
	created := f.created()
	last := f.cursor()
	q := url.Values{"follow": {"true"}}
	switch f.how {
	case "query":
		q.Set("after", strconv.FormatInt(last, 10))
	case "eventsource":
		q.Set("after", "-1")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/session/"+string(f.sid)+"/log?"+q.Encode(), nil)
	if err != nil {
		f.l.fail("%s: %v", f, err)
		f.stop()
		return 0, errFollowStop
	}
	req.Header.Set("Accept", "text/event-stream")
	if f.how != "query" && last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	res, err := f.hc.Do(req)
	if err != nil {
		f.mu.Lock()
		f.refused++ // the daemon is gone
		f.mu.Unlock()
		return 0, nil
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound && !created {
		f.mu.Lock()
		f.refused++ // not created yet
		f.mu.Unlock()
		return 0, nil
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		f.l.fail("round %d: Session %s, %s: GET %s (Last-Event-ID %q): HTTP %d %s (its creation acknowledged: %v)",
			round, f.sid, f, req.URL.RequestURI(), req.Header.Get("Last-Event-ID"), res.StatusCode, b, created)
		f.stop()
		return 0, errFollowStop
	}
	f.mu.Lock()
	f.streams++
	stream := f.streams
	f.mu.Unlock()
	n, synced := 0, false
	err = readSSE(res.Body, func(m sseEvent) error {
		n++
		switch {
		case m.Event != "":
			f.l.fail("round %d: Session %s, %s, stream %d: a message of event type %q on the log stream: %+v", round, f.sid, f, stream, m.Event, m)
			return errFollowStop
		case m.ID == "":
			f.marker(round, stream, m.Data, &synced)
			return nil
		}
		seq, err := strconv.ParseInt(m.ID, 10, 64)
		if err != nil {
			f.l.fail("round %d: Session %s, %s, stream %d: id %q is no seq: %+v", round, f.sid, f, stream, m.ID, m)
			return errFollowStop
		}
		return f.event(round, stream, seq, m.Data)
	})
	if errors.Is(err, errFollowStop) {
		f.stop()
		return n, err
	}
	return n, nil // the stream dropped: the daemon was killed
}

// event records an event received with id seq (-1 when the CLI printed
// it, which shows no ids); a malformed one stops the follower.
func (f *crashFollower) event(round, stream int, seq int64, data string) error {
	var ev messages.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		f.l.fail("round %d: Session %s, %s, stream %d: event after seq %d: %v in %s", round, f.sid, f, stream, f.cursor(), err, data)
		return errFollowStop
	}
	if seq == -1 && ev.Durable != nil {
		seq = ev.Durable.Seq
	}
	if ev.Durable == nil || ev.Durable.Seq != seq || ev.Durable.AggregateID != f.sid || ev.Type == messages.TypeLogSynced {
		f.l.fail("round %d: Session %s, %s, stream %d: event after seq %d with id %d is not an event of the Session at that seq: %s",
			round, f.sid, f, stream, f.cursor(), seq, data)
		return errFollowStop
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, crashFollowed{ev: ev, round: round, stream: stream})
	f.last = seq // what a client resumes after, as an EventSource's lastEventId
	return nil
}

// marker checks a log.synced marker (docs/api.md): no id line, exactly
// {type, aggregateID, seq?}, once per stream, and its seq is the watermark
// the replay stopped at, which is the last event received before it
// (logs are contiguous; TestCrashLoop checks that too). It has no seq only
// when the log is empty, which a Session that answered never is: its
// creation commits seq 0. *synced tells whether the stream had one.
func (f *crashFollower) marker(round, stream int, data string, synced *bool) {
	f.mu.Lock()
	f.markers++
	last := f.last
	f.mu.Unlock()
	var keys map[string]json.RawMessage
	var m messages.Synced
	err := json.Unmarshal([]byte(data), &keys)
	if err == nil {
		err = json.Unmarshal([]byte(data), &m)
	}
	extra := false
	for k := range keys {
		extra = extra || (k != "type" && k != "aggregateID" && k != "seq")
	}
	_, hasSeq := keys["seq"]
	where := fmt.Sprintf("round %d: Session %s, %s, stream %d: marker after seq %d", round, f.sid, f, stream, last)
	switch {
	case err != nil || m.Type != messages.TypeLogSynced:
		f.l.fail("%s: a message without id that is no log.synced marker (%v): %s", where, err, data)
	case *synced:
		f.l.fail("%s: a second log.synced in one stream: %s", where, data)
	case m.AggregateID != f.sid || extra || hasSeq != (m.Seq != nil):
		f.l.fail("%s: a malformed log.synced (want {type, aggregateID: %s, seq?}): %s", where, f.sid, data)
	case m.Seq == nil && last >= 0:
		f.l.fail("%s: log.synced without seq (an empty log), but events up to seq %d were received: %s", where, last, data)
	case m.Seq == nil:
		f.l.fail("%s: log.synced without seq (an empty log), but the Session exists, so its creation (seq 0) is committed: %s", where, data)
	case *m.Seq != last:
		f.l.fail("%s: log.synced at seq %d, but the replay before it ended at seq %d: %s", where, *m.Seq, last, data)
	}
	*synced = true
}

// runCLI follows with the CLI's streamLog, which reconnects by itself
// with Last-Event-ID once it reached a daemon; it returns only when its
// first connect fails (no daemon, or the Session not created yet), and is
// then started again after the last event it printed.
func (f *crashFollower) runCLI(ctx context.Context) {
	// An IP address: without a token the daemon refuses other names. The
	// transport dials the running daemon whatever the port says.
	c := &client{base: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, http: f.hc}
	delay := time.Millisecond
	for ctx.Err() == nil {
		created := f.created()
		out := &crashLines{f: f}
		opts := logOptions{After: f.cursor(), Follow: true, Retry: 10 * time.Millisecond}
		err := c.streamLog(ctx, string(f.sid), opts, out)
		if ctx.Err() != nil {
			return
		}
		var ae *apiError
		var we *writeError
		_, round := f.l.daemon.get()
		switch {
		case errors.As(err, &we):
			f.stop() // out reported why
			return
		case errors.As(err, &ae) && (ae.Status != http.StatusNotFound || created):
			f.l.fail("round %d: Session %s, %s: streamLog after seq %d: %v (its creation acknowledged: %v)", round, f.sid, f, opts.After, err, created)
			f.stop()
			return
		case err == nil:
			f.l.fail("round %d: Session %s, %s: streamLog with Follow returned before the test stopped it", round, f.sid, f)
			f.stop()
			return
		}
		if !followPause(ctx, delay) {
			return
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// crashLines is the output of the CLI's streamLog: a JSON document per
// line, an event or the log.synced marker.
type crashLines struct {
	f      *crashFollower
	buf    []byte
	synced bool
}

func (w *crashLines) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		// The daemon that sent it: the previous one is dead.
		_, round := w.f.l.daemon.get()
		w.f.mu.Lock()
		stream := w.f.streams
		w.f.mu.Unlock()
		if isSynced(line) {
			// streamLog prints the marker of its first stream only.
			w.f.marker(round, stream, line, &w.synced)
			continue
		}
		if err := w.f.event(round, stream, -1, line); err != nil {
			return 0, err
		}
	}
}

// crashFollowCounts sums what the followers did.
type crashFollowCounts struct {
	events, streams, refused, markers int
	catchUp                           time.Duration // from idle until every follower had its Session's last event
}

// check waits until every follower received its Session's last event,
// once everything is idle, stops them, and compares what each received
// with the final history: every event once, in seq order, identical.
func (fl *crashFollowers) check(base string, srv *proc) crashFollowCounts {
	l := fl.l
	l.t.Helper()
	final := len(l.starts) - 1
	exists := map[messages.SessionID]bool{}
	for _, s := range l.listSessions(base) {
		exists[s.ID] = true
	}
	want := map[messages.SessionID][]messages.Event{}
	for _, f := range fl.all {
		if _, ok := want[f.sid]; ok || !exists[f.sid] {
			continue
		}
		want[f.sid] = l.history(base, f.sid)
	}
	began := time.Now()
	for _, f := range fl.all {
		last := int64(len(want[f.sid]) - 1)
		eventually(l.t, fmt.Sprintf("%s to receive Session %s up to seq %d", f, f.sid, last), func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.last >= last || f.stopped
		}, func() string {
			f.mu.Lock()
			defer f.mu.Unlock()
			return fmt.Sprintf("it received %d events, the last at seq %d, in %d streams; stderr of the final daemon:\n%s",
				len(f.got), f.last, f.streams, srv.stderr.String())
		})
	}
	c := crashFollowCounts{catchUp: time.Since(began)}
	fl.stop()
	for _, f := range fl.all {
		f.compare(final, want[f.sid])
		c.events += len(f.got)
		c.streams += f.streams
		c.refused += f.refused
		c.markers += f.markers
		l.t.Logf("%s of Session %s: %d events in %d streams (%d reconnects), %d log.synced markers, %d connects refused",
			f, f.sid, len(f.got), f.streams, max(f.streams-1, 0), f.markers, f.refused)
	}
	return c
}

// compare checks what f received against the final history of its
// Session and reports the first difference. Call it once f stopped.
func (f *crashFollower) compare(final int, want []messages.Event) {
	l := f.l
	if f.stopped {
		return // reported where it stopped
	}
	got := f.got
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			from := "from the start"
			if i > 0 {
				from = fmt.Sprintf("after seq %d (round %d, stream %d)", got[i-1].ev.Seq(), got[i-1].round, got[i-1].stream)
			}
			l.fail("final round %d: Session %s, %s: first differing seq %d: nothing received %s; the log goes on to seq %d:%s",
				final, f.sid, f, want[i].Seq(), from, want[len(want)-1].Seq(), l.describe(want[i:min(i+3, len(want))]...))
		case i >= len(want):
			l.fail("final round %d: Session %s, %s: %d events received, the log has %d; the first extra, at seq %d, came in round %d, stream %d:%s",
				final, f.sid, f, len(got), len(want), got[i].ev.Seq(), got[i].round, got[i].stream, l.describe(got[i].ev))
		case got[i].ev.Seq() != want[i].Seq():
			kind := "a duplicate"
			if got[i].ev.Seq() > want[i].Seq() {
				kind = "a gap"
			}
			var around []messages.Event // what it received around it
			for _, g := range got[max(i-1, 0):min(i+2, len(got))] {
				around = append(around, g.ev)
			}
			l.fail("final round %d: Session %s, %s: first differing seq %d: %s: received seq %d instead, in round %d, stream %d:%s",
				final, f.sid, f, want[i].Seq(), kind, got[i].ev.Seq(), got[i].round, got[i].stream, l.describe(around...))
		default:
			g, _ := json.Marshal(got[i].ev)
			w, _ := json.Marshal(want[i])
			if bytes.Equal(g, w) {
				continue
			}
			l.fail("final round %d: Session %s, %s: first differing seq %d, received in round %d, stream %d, is not the history's:\n\treceived %s\n\thistory  %s",
				final, f.sid, f, want[i].Seq(), got[i].round, got[i].stream, g, w)
		}
		return
	}
}
