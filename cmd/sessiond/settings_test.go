package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreFlagsLoad: --data wins over SESSIOND_DATA, and the data
// directory comes out absolute, relative to the working directory.
func TestStoreFlagsLoad(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	a := &app{getenv: envOf("SESSIOND_DATA", "from-env")}
	for _, tt := range []struct{ flag, want string }{{"", "from-env"}, {"from-flag", "from-flag"}} {
		cfg, err := (&storeFlags{data: tt.flag}).load(a, nil, false)
		if want := filepath.Join(wd, tt.want); err != nil || cfg.Data != want {
			t.Errorf("--data %q: data %q, %v; want %q", tt.flag, cfg.Data, err, want)
		}
	}
}

// TestStoreFlagsLogger: --log-level filters, in any case; the log is JSON
// lines unless it goes to a terminal; an empty level is an error.
func TestStoreFlagsLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := (&storeFlags{logLevel: "WARN"}).logger(&buf, false)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("quiet")
	log.Warn().Msg("loud")
	var line struct{ Level, Message string }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Level != "warn" || line.Message != "loud" {
		t.Fatalf("log %q: %+v, %v", buf.String(), line, err)
	}

	buf.Reset()
	if log, err = (&storeFlags{logLevel: "info"}).logger(&buf, true); err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("hello")
	if out := buf.String(); json.Valid(buf.Bytes()) || !strings.Contains(out, "hello") {
		t.Fatalf("terminal log %q", out)
	}

	if _, err := (&storeFlags{}).logger(&buf, false); err == nil || err.Error() != `--log-level "": want debug, info, warn, error or disabled` {
		t.Fatalf("empty level: %v", err)
	}
}

// TestStoreFlagsLoggerTakesOnlyDocumentedLevels: --log-level takes the five
// levels docs/cli.md and the error name, in any case, and nothing else:
// zerolog's own parser also took trace, fatal, panic and numbers ("5" was a
// level that logged nothing).
func TestStoreFlagsLoggerTakesOnlyDocumentedLevels(t *testing.T) {
	for _, l := range []string{"debug", "info", "warn", "error", "disabled", "Debug", "DISABLED"} {
		if _, err := (&storeFlags{logLevel: l}).logger(io.Discard, false); err != nil {
			t.Errorf("%q: %v", l, err)
		}
	}
	for _, l := range []string{"trace", "fatal", "panic", "5", "-1", "0", "warning", " info"} {
		_, err := (&storeFlags{logLevel: l}).logger(io.Discard, false)
		if want := fmt.Sprintf("--log-level %q: want debug, info, warn, error or disabled", l); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", l, err, want)
		}
	}
	// As a usage mistake of the commands that take it.
	for _, args := range [][]string{{"serve", "--log-level", "trace"}, {"check", "--log-level", "panic"}} {
		if code, _, errOut := runApp(t, nil, args...); code != exitUsage || !strings.Contains(errOut, `--log-level "`) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2", args, code, errOut)
		}
	}
}
