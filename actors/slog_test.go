package actors_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
// as text with their type (a proto message marshals to {}, and one
// without fields prints as nothing), durations as zerolog writes them,
// groups flattened.
// silent prints as nothing, as a proto message without fields does.
type silent struct{}

func (silent) String() string { return "" }

func TestSlogBridge(t *testing.T) {
	var buf bytes.Buffer
	l := actors.NewSlogLogger(zerolog.New(&buf).With().Timestamp().Logger()).With("pid", "p1")
	l.WithGroup("g").Info("[DeadLetter]", "message", struct{ X int }{1}, "level", "attr-level", "time", "attr-time",
		"err", errors.New("boom"), "stop", silent{}, "n", 3, "d", 1500*time.Microsecond, slog.Group("sub", "ok", true))
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
		"message": `"[DeadLetter]"`, "level": `"info"`, "pid": `"p1"`, "g.message": `"struct { X int } {X:1}"`, "g.stop": `"actors_test.silent"`, "g.level": `"attr-level"`,
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

// shown is a value that is neither a basic kind nor an error.
type shown struct{}

func (shown) String() string { return "shown" }

// TestSlogBridgeValues: attributes outside a group that use zerolog's own
// field names are renamed rather than written twice; unsigned, float,
// time and Stringer values keep their value; loggers derived from one
// parent keep their own attributes; groups apply to attributes added in
// them and nest.
func TestSlogBridgeValues(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	parent := actors.NewSlogLogger(zerolog.New(&buf)).With("a", 1, "b", 2, "c", 3) // room for one more
	first, second := parent.With("d", "first"), parent.With("d", "second")
	first.Info("m", "message", "attr", "u", uint64(7), "f", 2.5, "t", at, "s", shown{})
	second.Info("m")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log: %s", buf.String())
	}
	var got struct {
		Message string  `json:"message"`
		Renamed string  `json:"slog.message"`
		U       uint64  `json:"u"`
		F       float64 `json:"f"`
		T       string  `json:"t"`
		S       string  `json:"s"`
		D       string  `json:"d"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Message != "m" || got.Renamed != "attr" || got.U != 7 || got.F != 2.5 || got.T != at.Format(time.RFC3339) ||
		got.S != "shown" || got.D != "first" {
		t.Errorf("first logger's line %s", lines[0])
	}
	if !strings.Contains(lines[1], `"d":"second"`) {
		t.Errorf("second logger's line %s", lines[1])
	}
	// Attributes added in a group keep it; groups nest.
	buf.Reset()
	actors.NewSlogLogger(zerolog.New(&buf)).WithGroup("a").With("k", 1).WithGroup("b").Info("m", "x", 2)
	if line := buf.String(); !strings.Contains(line, `"a.k":1`) || !strings.Contains(line, `"a.b.x":2`) {
		t.Errorf("grouped line %s", line)
	}
}

// TestSlogLevels: each slog level becomes zerolog's of the same name from
// its own value up, and a record at the logger's level is enabled.
func TestSlogLevels(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug, "debug"}, {slog.LevelInfo - 1, "debug"}, {slog.LevelInfo, "info"},
		{slog.LevelWarn, "warn"}, {slog.LevelError - 1, "warn"}, {slog.LevelError, "error"}, {slog.LevelError + 4, "error"},
	} {
		var buf bytes.Buffer
		actors.NewSlogLogger(zerolog.New(&buf)).Log(context.Background(), tc.level, "m")
		if want := `"level":"` + tc.want + `"`; !strings.Contains(buf.String(), want) {
			t.Errorf("slog level %v: %s, want %s", tc.level, buf.String(), want)
		}
	}
	l := actors.NewSlogLogger(zerolog.New(io.Discard).Level(zerolog.WarnLevel))
	if !l.Enabled(context.Background(), slog.LevelWarn) || l.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("a zerolog logger at warn: slog's warn must be enabled, its info not")
	}
}
