package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// overrides maps environment variable names SESSIOND_X to the values of
// the flags --x (in lower case) that take their place: flags override the
// environment, which overrides the file.
type overrides map[string]string

// source names, for errors, where the value a.env(o) returns for variable
// name came from when a flag set it: the flag (--token for
// SESSIOND_TOKEN). It returns "" for the environment's own values.
func (o overrides) source(name string) string {
	if o[name] == "" {
		return ""
	}
	return "--" + strings.ToLower(strings.TrimPrefix(name, "SESSIOND_"))
}

// env returns an environment lookup in which the non-empty overrides win.
func (a *app) env(o overrides) func(string) string {
	return func(name string) string {
		if v := o[name]; v != "" {
			return v
		}
		return a.getenv(name)
	}
}

// storeFlags are the flags of the commands that open the store: serve and
// run.
type storeFlags struct {
	data, config, logLevel string
}

// register adds --data, --config and --log-level to fs.
func (f *storeFlags) register(fs *flag.FlagSet, defaultLevel string) {
	fs.StringVar(&f.data, "data", "", "data `DIR` holding sessiond.db and the default sessiond.json\n(default $SESSIOND_DATA, else the --config file's \"data\", else $XDG_DATA_HOME/sessiond,\nelse ~/.local/share/sessiond)")
	fs.StringVar(&f.config, "config", "", "configuration `FILE` (JSON with comments; default <data>/sessiond.json when it exists)")
	fs.StringVar(&f.logLevel, "log-level", defaultLevel, "log `LEVEL`: debug, info, warn, error or disabled")
}

// load reads the configuration with these flags and o overriding the
// environment, and makes the data directory absolute. listen says that the
// address is one to listen on (serve's), not a URL to dial.
func (f *storeFlags) load(a *app, o overrides, listen bool) (Config, error) {
	if o == nil {
		o = overrides{}
	}
	o["SESSIOND_DATA"] = f.data
	cfg, err := loadConfig(f.config, a.env(o), loadOptions{source: o.source, listen: listen})
	if err != nil {
		return Config{}, err
	}
	if cfg.Data, err = filepath.Abs(cfg.Data); err != nil {
		return Config{}, fmt.Errorf("data dir: %w", err)
	}
	return cfg, nil
}

// logLevels are the levels --log-level takes, as documented. zerolog's
// ParseLevel takes more (trace, fatal, panic, any number from -128 to 127),
// which would pass a typo such as "5" as a level that logs nothing.
var logLevels = map[string]zerolog.Level{
	"debug":    zerolog.DebugLevel,
	"info":     zerolog.InfoLevel,
	"warn":     zerolog.WarnLevel,
	"error":    zerolog.ErrorLevel,
	"disabled": zerolog.Disabled,
}

// logger returns a zerolog logger on w at the flag's level: human-readable
// lines on a terminal, JSON otherwise.
func (f *storeFlags) logger(w io.Writer, tty bool) (zerolog.Logger, error) {
	level, ok := logLevels[strings.ToLower(f.logLevel)]
	if !ok {
		return zerolog.Nop(), fmt.Errorf("--log-level %q: want debug, info, warn, error or disabled", f.logLevel)
	}
	if tty {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}
