package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/actors/httpapi"
	"github.com/sessiond/sessiond/messages"
)

// apiError is an error response of the HTTP API: {error: {type, message}}.
type apiError struct {
	Status  int
	Type    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Type, e.Message, e.Status)
}

// client talks to a running sessiond.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// newClient returns a client of the daemon at addr: host:port (an
// unspecified host such as 0.0.0.0 means this machine) or a URL.
func newClient(addr, token string) (*client, error) {
	u, err := baseURL(addr)
	if err != nil {
		return nil, err
	}
	return &client{base: u, token: token, http: &http.Client{}}, nil
}

// baseURL turns a listen address into the URL a client dials.
func baseURL(addr string) (*url.URL, error) {
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--addr %q: want host:port or an http(s) URL", addr)
		}
		u.Path = strings.TrimRight(u.Path, "/")
		return u, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: want host:port or an http(s) URL", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}, nil
}

// request builds a request for path (with query q) and a JSON body. path
// is escaped already: its segments went through url.PathEscape.
func (c *client) request(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	u := *c.base
	// Appended to the decoded Path, an escaped segment was escaped a
	// second time on the wire: instruction key "a b" reached the daemon
	// as "a%20b", and "a/b" as "a%2Fb". The raw path keeps the escaping
	// as it is, "/" within a segment included.
	raw := u.EscapedPath() + path
	decoded, err := url.PathUnescape(raw)
	if err != nil {
		return nil, fmt.Errorf("request path %q: %w", raw, err)
	}
	u.Path, u.RawPath = decoded, raw
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// call sends one request and returns the response body of a success (nil
// for 204); an error response becomes an *apiError.
func (c *client) call(ctx context.Context, method, path string, q url.Values, body any) ([]byte, error) {
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return nil, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		return nil, responseError(res.StatusCode, b)
	}
	return b, nil
}

// transportError explains a failure to reach the daemon.
func (c *client) transportError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("cannot reach sessiond at %s (is 'sessiond serve' running? set --addr or SESSIOND_ADDR): %w", c.base, err)
	}
	return err
}

// responseError decodes an error response.
func responseError(status int, body []byte) error {
	var env struct {
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Type != "" {
		return &apiError{Status: status, Type: env.Error.Type, Message: env.Error.Message}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut-- // not within a character
		}
		msg = msg[:cut] + "…"
	}
	if msg == "" {
		// A status without a standard text (596, say) would leave
		// nothing to say but the number, which Error adds itself.
		msg = cmp.Or(http.StatusText(status), "empty response")
	}
	return &apiError{Status: status, Type: "http", Message: msg}
}

// logOptions configure streamLog.
type logOptions struct {
	// After streams events with a greater seq; -1 streams from the start.
	After  int64
	Follow bool
	// Live, with Follow, also prints the Session's live-only events
	// (deltas, usage, permission asks) where they happen (the log's
	// live=true).
	Live bool
	// Retry is the first reconnect delay when a stream drops; it doubles
	// up to maxRetry. Zero means 200 ms.
	Retry time.Duration
	// Notify receives notes about reconnects; nil discards them.
	Notify func(string)
	// Idle is how long a followed stream may bring nothing, not even a
	// heartbeat, before it is taken for lost and replaced. Zero means
	// three of the daemon's heartbeat intervals.
	Idle time.Duration
	// after waits between reconnects; nil means time.After (tests record
	// the delays instead of waiting them out).
	after func(time.Duration) <-chan time.Time
}

// idle returns how long a stream of these options may stay silent: only
// a followed stream has heartbeats (the daemon sends one every
// httpapi.DefaultHeartbeat); a replay is never cut for being slow.
func (o logOptions) idle() time.Duration {
	switch {
	case !o.Follow:
		return 0
	case o.Idle > 0:
		return o.Idle
	}
	return 3 * httpapi.DefaultHeartbeat
}

// idleError ends a stream that brought nothing for a while: its connection
// died without a close (a dropped network, a gateway or NAT that forgot
// it), which no read would ever report.
type idleError struct{ d time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("nothing received for %v, not even a heartbeat", e.d)
}

// touchReader calls touch after every read that brought bytes.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (r touchReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.touch()
	}
	return n, err
}

// maxRetry caps the reconnect delay of a log stream.
const maxRetry = 5 * time.Second

// maxStalled is how many streams in a row may end before log.synced
// without a new event before a log without Follow gives up. Unlike
// Follow's reconnects these are bounded, because such a log is expected to
// end: a server that keeps failing at the same event (a store error) or
// does not come back must not keep it waiting. With nothing arriving, the
// delays between them add up to 6.2 s at the default Retry, time for a
// daemon restart; 11.2 s when a stream that brought events came first, as
// the delay before the first of them counts too.
const maxStalled = 6

// streamLog prints the data of every event of Session sid's log to out,
// one JSON document per line. It reconnects with Last-Event-ID when the
// connection drops, so that no event is lost or repeated. Without Follow
// it returns once the log.synced marker arrived; the server also ends a
// stream without it (a store error mid-replay, a shutdown), and then the
// replay resumes until maxStalled streams in a row brought nothing new,
// and then fails rather than pass a partial log for a whole one. With Follow it
// keeps going until ctx ends.
func (c *client) streamLog(ctx context.Context, sid string, opts logOptions, out io.Writer) error {
	if opts.Retry <= 0 {
		opts.Retry = 200 * time.Millisecond
	}
	notify := opts.Notify
	if notify == nil {
		notify = func(string) {}
	}
	after := opts.after
	if after == nil {
		after = time.After
	}
	last := opts.After
	delay := opts.Retry
	connected, outage := false, false
	printedSynced := false // the marker is printed once, after the replay
	stalled := 0           // streams in a row that brought no new event
	onOpen := func() {
		if outage {
			notify(fmt.Sprintf("reconnected; resuming after seq %d", last))
			outage = false
		}
	}
	for {
		q := url.Values{}
		// -1, the start, is the server's default and is left out. Any
		// other cursor goes as given, one below -1 included: the server
		// refuses it (invalid) as it refuses history's, where leaving it
		// out would silently replay the whole log instead.
		if last != -1 {
			q.Set("after", strconv.FormatInt(last, 10))
		}
		if opts.Follow {
			q.Set("follow", "true")
		}
		if opts.Live {
			q.Set("live", "true")
		}
		before := last
		onSynced := func(data string) {
			// The log ends before the cursor: restored from an older
			// backup, or repaired. Its seqs after the end will be given
			// to new events, which the cursor would skip.
			var m struct {
				Seq *int64 `json:"seq"`
			}
			if json.Unmarshal([]byte(data), &m) == nil && m.Seq != nil && *m.Seq < last {
				notify(fmt.Sprintf("the log ends at seq %d, before the cursor %d: the store was restored or repaired to an earlier point, "+
					"and new events will take seqs the cursor skips; follow again with --after %d or lower", *m.Seq, last, *m.Seq))
			}
		}
		opened, n, synced, err := c.streamOnce(ctx, "/api/session/"+url.PathEscape(sid)+"/log", q, opts.idle(), connected, printedSynced, &last, onOpen, onSynced, out)
		printedSynced = printedSynced || synced
		if ctx.Err() != nil {
			return nil
		}
		if last > before {
			stalled = 0
		} else {
			stalled++
		}
		var ae *apiError
		var we *writeError
		switch {
		case errors.As(err, &ae) && (!connected || ae.Status < http.StatusInternalServerError):
			// The server answered: retrying will not change it. A
			// server error once a stream was open is a restart seen
			// through a gateway (502, 503, 504 while the daemon is
			// down) or a store failure: it passes like a dropped
			// connection, and reconnects as one does.
			return err
		case errors.As(err, &we):
			return err // nobody reads the output any more
		case !opts.Follow && synced:
			return nil // the replay is complete, whatever came after
		case !connected && !opened:
			return err // never reached the server
		case !opts.Follow && stalled >= maxStalled:
			return incompleteLog(last, stalled, err)
		}
		connected = true
		if n > 0 {
			delay = opts.Retry
		}
		if !outage {
			why := "the server ended the stream"
			if err != nil {
				why = err.Error()
			}
			notify(fmt.Sprintf("connection lost (%s); reconnecting", why))
			outage = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-after(delay):
		}
		delay = min(2*delay, maxRetry)
	}
}

// incompleteLog is the error of a log without Follow that gave up after
// streams in a row ended before log.synced without a new event; err is the
// last one's failure, nil for a clean end.
func incompleteLog(last int64, streams int, err error) error {
	why := "the server ended the stream"
	if err != nil {
		why = err.Error()
	}
	resume := ""
	if last >= 0 {
		resume = fmt.Sprintf("; printed up to seq %d, resume with --after %d", last, last)
	}
	return fmt.Errorf("log incomplete: %d streams in a row ended before log.synced without a new event (last: %s)%s", streams, why, resume)
}

// streamOnce reads one SSE response, printing each event's data and
// advancing *last past every event with an id. It calls onOpen once the
// server accepted the stream, and reports whether it did, how many events
// it read and whether one was the log.synced marker, which it prints only
// when hideSynced is false (a resumed stream has its own marker; the reader
// has seen one). With idle > 0 a stream that brings nothing for that long,
// from the request on, ends with an *idleError.
func (c *client) streamOnce(ctx context.Context, path string, q url.Values, idle time.Duration, resume, hideSynced bool, last *int64, onOpen func(), onSynced func(data string), out io.Writer) (opened bool, n int, synced bool, err error) {
	touch := func() {}
	if idle > 0 {
		sctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		watchdog := time.AfterFunc(idle, func() { cancel(&idleError{idle}) })
		defer watchdog.Stop()
		touch = func() { watchdog.Reset(idle) }
		ctx = sctx
		defer func() {
			// The read or the request failed because the watchdog
			// cancelled it: say why.
			var ie *idleError
			if err != nil && errors.As(context.Cause(sctx), &ie) {
				err = ie
			}
		}()
	}
	req, err := c.request(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return false, 0, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if resume && *last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	res, err := c.http.Do(req)
	if err != nil {
		return false, 0, false, c.transportError(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return false, 0, false, responseError(res.StatusCode, b)
	}
	onOpen()
	live := q.Get("live") == "true"
	err = readSSE(touchReader{res.Body, touch}, func(ev sseEvent) error {
		n++
		switch {
		case ev.Event == "live" && live:
			// A live event (no id): printed as it comes, never a cursor.
			if _, err := fmt.Fprintln(out, ev.Data); err != nil {
				return &writeError{err}
			}
			return nil
		case ev.Event != "":
			// A notice about the stream (a live stream's "dropped",
			// before it ends and is resumed), not one of the log's.
			return nil
		}
		if ev.ID != "" {
			seq, err := strconv.ParseInt(ev.ID, 10, 64)
			if err != nil {
				return fmt.Errorf("event id %q is not a seq", ev.ID)
			}
			if seq <= *last {
				return nil // delivered before the reconnect
			}
			*last = seq
		}
		if ev.Data == "" {
			return nil
		}
		if ev.ID == "" && isSynced(ev.Data) {
			synced = true
			onSynced(ev.Data)
			if hideSynced {
				return nil
			}
		}
		if _, err := fmt.Fprintln(out, ev.Data); err != nil {
			return &writeError{err}
		}
		return nil
	})
	return true, n, synced, err
}

// isSynced reports whether data is the log.synced marker.
func isSynced(data string) bool {
	var m struct {
		Type string `json:"type"`
	}
	return json.Unmarshal([]byte(data), &m) == nil && m.Type == messages.TypeLogSynced
}

// writeError is a failure to write the output, which ends a stream for
// good.
type writeError struct{ err error }

func (e *writeError) Error() string { return "write output: " + e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// sseEvent is one server-sent event.
type sseEvent struct {
	ID, Event, Data string
}

// sseLines returns a split function for the lines of an event stream,
// which may end in CRLF, LF or a lone CR. A CR ends its line at once (a
// live stream may pause after it); an LF right after it is skipped.
func sseLines() bufio.SplitFunc {
	skipLF := false
	return func(data []byte, atEOF bool) (int, []byte, error) {
		skip := 0
		if skipLF && len(data) > 0 {
			skipLF = false
			if data[0] == '\n' {
				skip = 1
			}
		}
		rest := data[skip:]
		if i := bytes.IndexAny(rest, "\r\n"); i >= 0 {
			skipLF = rest[i] == '\r'
			return skip + i + 1, rest[:i], nil
		}
		if atEOF && len(rest) > 0 {
			return len(data), rest, nil
		}
		return skip, nil, nil
	}
}

// readSSE parses a text/event-stream body and calls fn for each event. It
// returns nil at a clean end of the stream.
func readSSE(r io.Reader, fn func(sseEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	sc.Split(sseLines())
	var ev sseEvent
	var data []string
	have, first := false, true
	for sc.Scan() {
		line := sc.Text()
		if first {
			line, first = strings.TrimPrefix(line, "\uFEFF"), false // a byte order mark may open the stream
		}
		if line == "" {
			if have {
				ev.Data = strings.Join(data, "\n")
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data, have = sseEvent{}, nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment, such as a heartbeat
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID, have = value, true
		case "event":
			ev.Event, have = value, true
		case "data":
			data, have = append(data, value), true
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return nil
}
