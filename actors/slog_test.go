package actors_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
)

// TestSlogBridge: protoactor's slog output becomes one zerolog JSON line
// per record with every key once (protoactor names a dead letter's
// content "message", which zerolog writes too), values of no basic kind
// as text (a proto message marshals to {}), durations as zerolog writes
// them, groups flattened.
func TestSlogBridge(t *testing.T) {
	var buf bytes.Buffer
	l := actors.NewSlogLogger(zerolog.New(&buf).With().Timestamp().Logger()).With("pid", "p1")
	l.WithGroup("g").Info("[DeadLetter]", "message", struct{ X int }{1}, "level", "attr-level", "time", "attr-time",
		"err", errors.New("boom"), "n", 3, "d", 1500*time.Microsecond, slog.Group("sub", "ok", true))
	line := strings.TrimSpace(buf.String())
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	got := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[tok.(string)]; dup {
			t.Fatalf("key %q twice in %s", tok, line)
		}
		got[tok.(string)] = v
	}
	for k, want := range map[string]string{
		"message": `"[DeadLetter]"`, "level": `"info"`, "pid": `"p1"`, "g.message": `"{X:1}"`, "g.level": `"attr-level"`,
		"g.time": `"attr-time"`, "g.err": `"boom"`, "g.n": `3`, "g.sub.ok": `true`,
		// A duration is zerolog's own: a number of milliseconds (its
		// DurationFieldUnit), fractions kept, not slog's text "1.5ms".
		"g.d": `1.5`,
	} {
		if string(got[k]) != want {
			t.Errorf("%s = %s, want %s (line %s)", k, got[k], want, line)
		}
	}
}
