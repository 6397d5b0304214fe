package httpapi

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// wantInvalid fails unless err is a typed invalid error whose message
// starts with one of the fields.
// quoted matches a Go-quoted string in a message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

func wantInvalid(t *testing.T, err error, fields ...string) {
	t.Helper()
	var e *messages.Error
	if !errors.As(err, &e) || e.Type != messages.ErrInvalid {
		t.Fatalf("error %v (%T) is not of type invalid", err, err)
	}
	// What the message quotes is the client's own input (%q), which may
	// look like anything; the rest is the server's words.
	if goTerms.MatchString(quoted.ReplaceAllString(e.Message, `""`)) {
		t.Fatalf("message %q names a Go type", e.Message)
	}
	for _, f := range fields {
		if strings.HasPrefix(e.Message, f+":") {
			return
		}
	}
	if len(fields) > 0 {
		t.Fatalf("message %q names none of %v", e.Message, fields)
	}
}

// FuzzPromptBody fuzzes the prompt route's body decoder: it never panics,
// fails only with typed invalid errors, and what it accepts is a valid
// request for the route's Session that survives a JSON round trip.
func FuzzPromptBody(f *testing.F) {
	for _, s := range []string{
		`{"prompt":{"text":"hi"}}`,
		`{"id":"msg_1","prompt":{"text":"hi","files":[{"mime":"image/png","url":"data:,"}]},"delivery":"queue","resume":false}`,
		`{"sessionID":"ses_fuzz","prompt":{"text":"x"}}`,
		`{"sessionID":"ses_other","prompt":{"text":"x"}}`,
		`{"prompt":{"text":""}}`, `{"prompt":{"text":5}}`, `{"prompt":null}`, `{`, ``, `[]`, `null`,
		`{"prompt":{"text":"a"}} {}`, `{"prompt":{"text":"\ud800"}}`, `{"prompt":{"text":"a"},"x":1}`,
	} {
		f.Add([]byte(s))
	}
	const sid = messages.SessionID("ses_fuzz")
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodePrompt(body, sid)
		if err != nil {
			wantInvalid(t, err)
			return
		}
		if req.SessionID != sid {
			t.Fatalf("session %q", req.SessionID)
		}
		d := req.Delivery
		if d == "" {
			d = messages.DefaultDelivery
		}
		if err := persistence.ValidatePrompt(req.Prompt, d, len(body)); err != nil {
			t.Fatalf("accepted an invalid prompt: %v", err)
		}
		if req.ID != "" && req.ID.Validate() != nil {
			t.Fatalf("accepted id %q", req.ID)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodePrompt(b, sid)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		if len(req.Prompt.Files) == 0 {
			req.Prompt.Files = nil // omitempty drops an empty list
		}
		if !reflect.DeepEqual(req, again) {
			t.Fatalf("round trip:\n%+v\n%+v", req, again)
		}
	})
}

// FuzzPageQuery fuzzes ?after&limit parsing: accepted values are in range
// and equal to the parameters given; rejections are invalid and name the
// parameter.
func FuzzPageQuery(f *testing.F) {
	for _, s := range []string{"", "after=3", "limit=100", "limit=0", "after=-1&limit=1", "after=-2", "limit=1&limit=2",
		"after=9223372036854775807", "after=9223372036854775808", "limit=+5", "after=%00", "limit=1e2", "after= 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := parsePage(q)
		if err != nil {
			wantInvalid(t, err, "after", "limit")
			return
		}
		if p.Limit < 1 || p.Limit > maxLimit || p.After < -1 {
			t.Fatalf("accepted %+v", p)
		}
		if v, ok := q["limit"]; ok {
			if n, _ := strconv.Atoi(v[0]); n != p.Limit {
				t.Fatalf("limit %q parsed as %d", v[0], p.Limit)
			}
		} else if p.Limit != defaultLimit {
			t.Fatalf("default limit %d", p.Limit)
		}
		if v, ok := q["after"]; ok {
			if n, _ := strconv.ParseInt(v[0], 10, 64); n != p.After {
				t.Fatalf("after %q parsed as %d", v[0], p.After)
			}
		} else if p.After != -1 {
			t.Fatalf("default after %d", p.After)
		}
	})
}

// FuzzLogQuery fuzzes ?after&follow with a Last-Event-ID header. The
// header repeated with the same value parses as it does once; repeated
// with another value it is invalid.
func FuzzLogQuery(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"follow=true", "7"}, {"after=3&follow=1", "9"}, {"follow=yes", ""}, {"", "x"}, {"", "-2"}, {"after=", "1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, lastEventID string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		l, err := parseLog(q, []string{lastEventID})
		l2, err2 := parseLog(q, []string{lastEventID, lastEventID})
		if l2 != l || (err2 == nil) != (err == nil) {
			t.Fatalf("Last-Event-ID %q twice parsed as %+v, %v; once as %+v, %v", lastEventID, l2, err2, l, err)
		}
		if _, err := parseLog(q, []string{lastEventID, lastEventID + "0"}); err == nil {
			t.Fatalf("Last-Event-ID %q and %q accepted", lastEventID, lastEventID+"0")
		} else {
			wantInvalid(t, err, "after", "follow", "Last-Event-ID")
		}
		if err != nil {
			wantInvalid(t, err, "after", "follow", "Last-Event-ID")
			return
		}
		if l.After < -1 {
			t.Fatalf("accepted %+v", l)
		}
		if v, ok := q["follow"]; ok && !slices.Contains([]string{"true", "false", "1", "0"}, v[0]) {
			t.Fatalf("accepted follow=%q", v[0])
		}
		want := int64(-1)
		if v, ok := q["after"]; ok {
			want, _ = strconv.ParseInt(v[0], 10, 64)
		}
		if lastEventID != "" {
			n, _ := strconv.ParseInt(lastEventID, 10, 64)
			want = max(want, n)
		}
		if l.After != want {
			t.Fatalf("after %q with Last-Event-ID %q parsed as %d, want %d", q["after"], lastEventID, l.After, want)
		}
	})
}

// FuzzSmallBodies fuzzes the agent, model, permission reply and
// instruction decoders.
func FuzzSmallBodies(f *testing.F) {
	for i, s := range []string{`{"agent":"plan"}`, `{"providerID":"p","id":"m"}`, `{"reply":"once","message":"ok"}`, `{"text":""}`,
		`{"agent":""}`, `{"providerID":1}`, `{"reply":"never"}`, `{"text":null}`, `{}`, `{"a":1}`, `nul`, `[]`, `[]`, `[]`, `[]`,
		`{"providerID":"","id":"m"}`, `{"providerID":"p","id":" m"}`} {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		var err error
		switch kind % 4 {
		case 0:
			var a string
			if a, err = decodeAgent(body); err == nil && a == "" {
				t.Fatal("accepted an empty agent")
			}
		case 1:
			var m messages.ModelRef
			if m, err = decodeModel(body); err == nil && (m.ProviderID == "" || m.ID == "" ||
				strings.TrimSpace(m.ProviderID) != m.ProviderID || strings.TrimSpace(m.ID) != m.ID) {
				t.Fatalf("accepted %+v", m)
			}
		case 2:
			var r replyBody
			if r, err = decodeReply(body); err == nil && !r.Reply.Valid() {
				t.Fatalf("accepted %+v", r)
			}
		case 3:
			_, err = decodeInstruction(body)
		}
		if err != nil {
			wantInvalid(t, err)
		}
	})
}
