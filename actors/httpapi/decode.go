package httpapi

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// Page bounds of history and message listings (SEED.md).
const (
	defaultLimit = 50
	maxLimit     = 100
)

// readBody reads the request body, capped at BodyBytes. A larger body is an
// *http.MaxBytesError, which fail maps to 413. A body the client cut off
// (it went away, or sent less than its Content-Length) is the client's
// failure: invalid, not an internal error logged as one.
func (a *api) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.BodyBytes))
	var tooLarge *http.MaxBytesError
	if err != nil && !errors.As(err, &tooLarge) {
		return b, invalid("body: %v", err)
	}
	return b, err
}

// sessionID returns the route's {id} as a validated Session ID.
func sessionID(r *http.Request) (messages.SessionID, error) {
	sid := messages.SessionID(r.PathValue("id"))
	return sid, sid.Validate()
}

// decodePrompt decodes a prompt body for the Session of the route. A
// sessionID in the body must name the same Session.
func decodePrompt(body []byte, sid messages.SessionID) (persistence.PromptRequest, error) {
	req, err := persistence.DecodePromptRequest(body)
	if err != nil {
		return req, err
	}
	if req.SessionID != "" && req.SessionID != sid {
		return req, invalid("sessionID: %q does not match the route's %q", req.SessionID, sid)
	}
	req.SessionID = sid
	return req, nil
}

// agentBody is POST /api/session/{id}/agent.
type agentBody struct {
	Agent string `json:"agent"`
}

// moveBody is POST /api/session/{id}/move.
type moveBody struct {
	Location messages.Location `json:"location"`
}

// decodeMove decodes a move's destination.
func decodeMove(body []byte) (messages.Location, error) {
	var b moveBody
	if err := decodeStrict(body, &b); err != nil {
		return b.Location, err
	}
	return b.Location, persistence.ValidateLocation(b.Location)
}

// replyBody is POST /api/permission/{requestID}/reply.
type replyBody struct {
	Reply   tools.Reply `json:"reply"`
	Message string      `json:"message,omitempty"`
}

// instructionBody is PUT /api/session/{id}/instruction/{key}.
type instructionBody struct {
	Text *string `json:"text"`
}

// decodeAgent decodes an agent selection.
func decodeAgent(body []byte) (string, error) {
	var b agentBody
	if err := decodeStrict(body, &b); err != nil {
		return "", err
	}
	if b.Agent == "" {
		return "", invalid("agent: required")
	}
	return b.Agent, nil
}

// decodeModel decodes a model selection.
func decodeModel(body []byte) (messages.ModelRef, error) {
	var m messages.ModelRef
	if err := decodeStrict(body, &m); err != nil {
		return m, err
	}
	return m, checkModel("", m)
}

// decodeCreate decodes a sessions.create body. A model given there must be
// well-formed: the runtime resolves any model it is given, and would answer
// a partial one as a model that does not exist (model.not-found) rather
// than as the malformed value it is.
func decodeCreate(body []byte) (persistence.CreateSession, error) {
	req, err := persistence.DecodeCreateSession(body)
	if err != nil {
		return req, err
	}
	if req.Model != (messages.ModelRef{}) {
		if err := checkModel("model.", req.Model); err != nil {
			return req, err
		}
	}
	return req, nil
}

// checkModel checks that m is a well-formed model reference: both parts
// present and without white space around them, as the "provider/model"
// form of the configuration and the CLI requires. Whether it names a
// configured model is the runtime's to say (model.not-found). prefix is
// the path of the reference in the body ("" or "model.").
func checkModel(prefix string, m messages.ModelRef) error {
	for _, f := range []struct{ name, value string }{{"providerID", m.ProviderID}, {"id", m.ID}} {
		switch {
		case f.value == "":
			return invalid("%s%s: required", prefix, f.name)
		case strings.TrimSpace(f.value) != f.value:
			return invalid("%s%s: %q has white space around it", prefix, f.name, clip(f.value))
		}
	}
	return nil
}

// decodeReply decodes a permission reply.
func decodeReply(body []byte) (replyBody, error) {
	var b replyBody
	if err := decodeStrict(body, &b); err != nil {
		return b, err
	}
	if !b.Reply.Valid() {
		return b, invalid("reply: want %q, %q or %q, got %q", tools.Once, tools.Always, tools.Reject, b.Reply)
	}
	return b, nil
}

// decodeInstruction decodes an instruction entry.
func decodeInstruction(body []byte) (string, error) {
	var b instructionBody
	if err := decodeStrict(body, &b); err != nil {
		return "", err
	}
	if b.Text == nil {
		return "", invalid("text: required")
	}
	return *b.Text, nil
}

// decodeStrict decodes exactly one JSON object with no unknown fields into
// v, returning typed invalid errors that name the field. It is the store's
// decoder of request bodies, so that every body of the API (those the store
// decodes itself too) is refused with the same words, which describe JSON
// and never a Go type.
func decodeStrict(body []byte, v any) error {
	return persistence.DecodeStrict(body, v)
}

// pageQuery is the paging of history and message listings.
type pageQuery struct {
	After int64
	Limit int
}

// parsePage parses ?after&limit: after an integer >= -1 (exclusive cursor,
// default -1), limit 1..100 (default 50). Errors are invalid and name the
// parameter.
func parsePage(q url.Values) (pageQuery, error) {
	p := pageQuery{After: -1, Limit: defaultLimit}
	after, ok, err := single(q, "after")
	if err != nil {
		return p, err
	}
	if ok {
		if p.After, err = parseAfter("after", after); err != nil {
			return p, err
		}
	}
	limit, ok, err := single(q, "limit")
	if err != nil {
		return p, err
	}
	if ok {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > maxLimit {
			return p, invalid("limit: want an integer from 1 to %d, got %q", maxLimit, clip(limit))
		}
		p.Limit = n
	}
	return p, nil
}

// logQuery is the query of a log stream.
type logQuery struct {
	After  int64
	Follow bool
	// Live interleaves the Session's live-only events once the stream
	// is synced (see logStream); it needs Follow.
	Live bool
}

// parseLog parses ?after&follow&live and the Last-Event-ID header, given as
// every value the request carries for it. The cursor is the query's after
// or the header, and the later of the two when both are present: an
// EventSource reconnecting repeats its URL (and so its after) with the id
// it received last, which is always the later one.
func parseLog(q url.Values, lastEventIDs []string) (logQuery, error) {
	l := logQuery{After: -1}
	after, ok, err := single(q, "after")
	if err != nil {
		return l, err
	}
	if ok {
		if l.After, err = parseAfter("after", after); err != nil {
			return l, err
		}
	}
	lastEventID, err := singleHeader(lastEventIDs, "Last-Event-ID")
	if err != nil {
		return l, err
	}
	if lastEventID != "" {
		id, err := parseAfter("Last-Event-ID", lastEventID)
		if err != nil {
			return l, err
		}
		l.After = max(l.After, id)
	}
	if l.Follow, err = flag(q, "follow"); err != nil {
		return l, err
	}
	if l.Live, err = flag(q, "live"); err != nil {
		return l, err
	}
	if l.Live && !l.Follow {
		return l, invalid("live: needs follow=true (live events exist only while a stream follows the log)")
	}
	return l, nil
}

// flag parses an optional boolean query parameter: the four values the
// API documents, not all strconv.ParseBool takes ("T", "False", ...).
func flag(q url.Values, name string) (bool, error) {
	v, ok, err := single(q, name)
	if err != nil || !ok {
		return false, err
	}
	switch v {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, invalid("%s: want true, false, 1 or 0, got %q", name, clip(v))
}

// parseAfter parses an exclusive sequence cursor: an integer >= -1.
func parseAfter(name, s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, invalid("%s: %q is out of range (seqs fit in 64 bits)", name, clip(s))
	}
	if err != nil || n < -1 {
		return 0, invalid("%s: want an integer >= -1, got %q", name, clip(s))
	}
	return n, nil
}

// query parses the request's query string. A malformed one (a bad percent
// escape, a ";" separator) is invalid: r.URL.Query drops what it cannot
// parse, so "after=5;follow=true" would read as no cursor at all.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalid("query: %s", clip(err.Error()))
	}
	return q, nil
}

// single returns the one value of a query parameter; a repeated parameter
// is ambiguous and therefore invalid.
func single(q url.Values, name string) (string, bool, error) {
	vs, ok := q[name]
	switch {
	case !ok:
		return "", false, nil
	case len(vs) != 1:
		return "", false, invalid("%s: given %d times, want at most once", name, len(vs))
	}
	return vs[0], true, nil
}

// singleHeader returns the value of a header that may be sent once. A
// header repeated with one value throughout (a proxy that copied it) is
// that value; repeated with different values it is ambiguous, as a
// repeated query parameter is, and invalid: taking the first would resume
// a stream from a cursor the client may not have meant.
func singleHeader(vs []string, name string) (string, error) {
	if len(vs) == 0 {
		return "", nil
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			return "", invalid("%s: given %d times with different values, want at most once", name, len(vs))
		}
	}
	return vs[0], nil
}

// clip bounds a client-supplied value echoed in an error message.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
