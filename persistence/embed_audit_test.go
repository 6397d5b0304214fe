package persistence

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// TestAppendRefusesTypedNilPayload: a nil *AgentSelected (a payload pointer
// a caller forgot to fill) is as much a nil payload as a nil interface, and
// is refused with the same invalid error. It panicked in the caller,
// reading the Session ID through the nil pointer.
func TestAppendRefusesTypedNilPayload(t *testing.T) {
	st := openTemp(t, Options{NoSync: true})
	sid := newSession(t, st)
	var p *messages.AgentSelected
	for name, commit := range map[string]func() error{
		"Append of a nil *AgentSelected": func() error { _, err := st.Append(context.Background(), sid, p); return err },
		"Commit of a nil *AgentSelected": func() error { _, err := st.Commit(context.Background(), sid, p); return err },
		"Append of nil":                  func() error { _, err := st.Append(context.Background(), sid, nil); return err },
	} {
		err := commit()
		if e := messages.AsError(err, messages.ErrUnknown); err == nil || e.Type != messages.ErrInvalid {
			t.Errorf("%s: %v, want an invalid error", name, err)
		}
	}
	if w, err := st.Watermark(context.Background(), sid); err != nil || w != 0 {
		t.Fatalf("watermark %d, %v: want 0, nothing appended", w, err)
	}
}

// valuePayload is a payload of a caller's own that is not a pointer.
type valuePayload struct{ sid messages.SessionID }

func (valuePayload) Type() string                  { return "x.value.1" }
func (p valuePayload) Session() messages.SessionID { return p.sid }

// TestAppendRefusesForeignValuePayload: a payload that is not a pointer
// (a type of the caller's own) is not taken for a nil one, nor does the
// nil check panic on it: it is refused as a type that is not durable.
func TestAppendRefusesForeignValuePayload(t *testing.T) {
	st := openTemp(t, Options{NoSync: true})
	sid := newSession(t, st)
	_, err := st.Append(context.Background(), sid, valuePayload{sid: sid})
	if e := messages.AsError(err, messages.ErrUnknown); err == nil || e.Type != messages.ErrInvalid || !strings.Contains(err.Error(), "not a durable event type") {
		t.Fatalf("Append of a value payload: %v, want invalid: not a durable event type", err)
	}
}
