package persistence

import (
	"context"
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
		"Append": func() error { _, err := st.Append(context.Background(), sid, p); return err },
		"Commit": func() error { _, err := st.Commit(context.Background(), sid, p); return err },
	} {
		err := commit()
		if e := messages.AsError(err, messages.ErrUnknown); err == nil || e.Type != messages.ErrInvalid {
			t.Errorf("%s of a nil *AgentSelected: %v, want an invalid error", name, err)
		}
	}
	if w, err := st.Watermark(context.Background(), sid); err != nil || w != 0 {
		t.Fatalf("watermark %d, %v: want 0, nothing appended", w, err)
	}
}
