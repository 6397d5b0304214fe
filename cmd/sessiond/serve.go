package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/actors/httpapi"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

var serveCommand = &command{
	name:     "serve",
	synopsis: "[flags]",
	summary:  "run the daemon: the HTTP API over a durable store",
	help: `
Serve opens the store <data>/sessiond.db, starts the Session runtime and
serves the HTTP API on --addr until SIGINT, SIGTERM or SIGHUP (its
terminal closed); a signal ignored at start (nohup, a background job)
stays ignored. It prints "sessiond: listening on http://HOST:PORT (data
DIR)" to stderr once GET /api/health answers (port 0 picks a free port). One data directory serves one daemon: a second
one fails with "data dir is in use by another sessiond".

Settings come from the flags, then the environment (SESSIOND_ADDR,
SESSIOND_DATA, SESSIOND_TOKEN, OPENAI_*, ANTHROPIC_API_KEY), then the
configuration file. With no provider configured the built-in demo model
answers every Session.

Stopping is graceful and ordered: the HTTP server stops accepting and ends
its streams, running Sessions are interrupted with reason shutdown (their
session.execution.interrupted.1 is durable), then the store is closed. A
second signal quits at once, killing the commands tools are running.`,
	run: runServe,
}

// runServe is the serve command.
func runServe(ctx context.Context, a *app, c *command, args []string) int {
	fs := newFlags(c)
	var sf storeFlags
	sf.register(fs, "info")
	// Checked as it is parsed, so a malformed address is a usage error
	// (exit 2), as it is for the client commands.
	var addr string
	fs.Func("addr", "listen address `HOST:PORT`; port 0 picks a free one (default $SESSIOND_ADDR, else the configuration's, else 127.0.0.1:4096)", func(v string) error {
		// Empty is unset, as before: scripts pass --addr "$X".
		if err := checkListen("--addr", v); err != nil && v != "" {
			if strings.Contains(v, "://") {
				return errors.New("want host:port to listen on, not a URL")
			}
			return errors.New("want host:port, with a port from 0 to 65535")
		}
		addr = v
		return nil
	})
	token := fs.String("token", "", "bearer `TOKEN` every route but /api/health and /metrics requires (default $SESSIOND_TOKEN)")
	var roots stringList
	fs.Var(&roots, "root", "allow Session directories only under `DIR` (repeatable; adds to the configuration's roots)")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return a.usageError(c, "unexpected argument %q", pos[0])
	}
	log, err := sf.logger(a.stderr, a.stderrTTY)
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	// listen (true): the daemon listens on host:port; a URL names it for
	// clients only.
	cfg, err := sf.load(a, overrides{"SESSIOND_ADDR": addr, "SESSIOND_TOKEN": *token}, true)
	if err != nil {
		return a.fail(c, err)
	}
	fromFile := len(cfg.Roots)
	if len(roots) > 0 {
		for _, r := range roots {
			if r == "" {
				// filepath.Abs("") is the working directory: an unset
				// variable (--root "$DIR") would confine Sessions there.
				return a.usageError(c, "--root: empty path")
			}
			abs, err := filepath.Abs(r)
			if err != nil {
				return a.fail(c, fmt.Errorf("--root %q: %w", r, err))
			}
			cfg.Roots = append(cfg.Roots, abs)
		}
		if err := cfg.validate(); err != nil {
			return a.fail(c, err)
		}
	}
	// What can be refused without the store is refused first, so that a
	// mistyped --root or a port in use leaves no data directory behind:
	// each root must be a directory, and the address is bound before the
	// store opens (a client that connects meanwhile waits for its answer).
	for i, r := range cfg.Roots {
		what := "--root"
		if i < fromFile {
			what = fmt.Sprintf("roots[%d] of the configuration", i)
		}
		if err := checkDir(what, r); err != nil {
			return a.fail(c, err)
		}
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return a.fail(c, err)
	}
	if cfg.UsesDemo() {
		fmt.Fprintf(a.stderr, "sessiond: %s\n", demoNotice)
	}

	st, err := openStack(cfg, log, stackOptions{Metrics: true})
	if err != nil {
		return a.fail(c, errors.Join(err, l.Close()))
	}
	stopCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), stopTimeout)
	}
	closeStack := func() error {
		sctx, cancel := stopCtx()
		defer cancel()
		return st.close(sctx)
	}
	if st.defaultModel.ID == "" {
		log.Warn().Msg("no default model: Sessions must select one (" + noDefaultModel(cfg, st.catalog) + ")")
	}
	srv, err := httpapi.NewServer(httpapi.ServerConfig{API: httpapi.Config{
		Runtime:   st.runtime,
		Pending:   st.pending,
		Token:     cfg.Token,
		Roots:     cfg.Roots,
		CORS:      cfg.CORS,
		BodyBytes: int64(cfg.Limits.BodyBytes),
		Metrics:   st.metrics,
		Gatherer:  st.registry,
		Logger:    log,
	}})
	if err != nil {
		return a.fail(c, errors.Join(err, l.Close(), closeStack()))
	}

	if err := srv.Start(l); err != nil {
		_ = l.Close()
		return a.fail(c, errors.Join(err, closeStack()))
	}
	url := "http://" + l.Addr().String()
	fmt.Fprintf(a.stderr, "sessiond: listening on %s (data %s)\n", url, cfg.Data)
	log.Info().Str("addr", l.Addr().String()).Str("data", cfg.Data).Bool("demo", st.demo).Msg("serving")

	status := exitOK
	select {
	case <-ctx.Done():
		log.Info().Str("cause", context.Cause(ctx).Error()).Msg("shutting down")
	case err := <-srv.Failed():
		// Serve returns early only when accepting fails for good.
		fmt.Fprintf(a.stderr, "sessiond serve: %v\n", err)
		status = exitFailed
	}

	// DESIGN.md §3 shutdown order: HTTP first (no new commands, streams
	// end), then the runtime (interrupting Sessions with reason shutdown),
	// then the store.
	// Each phase has its own budget: a client that stalls its request (or
	// stops reading a stream) holds the HTTP phase only until
	// httpStopTimeout, when its connection is cut, and never eats the
	// time the runtime needs to interrupt Sessions durably.
	hctx, hcancel := context.WithTimeout(context.Background(), httpStopTimeout)
	if err := srv.Shutdown(hctx); err != nil {
		log.Warn().Err(err).Msg("http shutdown: cut the connections left")
	}
	hcancel()
	sctx, cancel := stopCtx()
	defer cancel()
	if err := st.close(sctx); err != nil {
		log.Error().Err(err).Msg("stop runtime")
		status = exitFailed
	}
	log.Info().Msg("stopped")
	return status
}

// noDefaultModel says why cfg has no default model: a provider whose
// models are listed has no credentials (what the catalog says of its
// first model), or no provider lists models.
func noDefaultModel(cfg Config, catalog *llm.Catalog) string {
	for _, id := range slices.Sorted(maps.Keys(cfg.Providers)) {
		p := cfg.Providers[id]
		if len(p.Models) == 0 {
			continue
		}
		ref := messages.ModelRef{ProviderID: id, ID: slices.Sorted(maps.Keys(p.Models))[0]}
		var me *messages.Error
		if _, err := catalog.Resolve(ref); errors.As(err, &me) {
			return me.Message
		}
	}
	return "set \"model\" in the configuration or list models for a provider"
}
