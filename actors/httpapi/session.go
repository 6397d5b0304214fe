package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// health answers GET /api/health once the handler serves requests: 200,
// or 503 once the store has failed and refuses every write, so that a
// supervisor restarts the daemon (a restart recovers from the log). The
// failure's details go to the log, not to this public route.
func (a *api) health(w http.ResponseWriter, r *http.Request) {
	if f, ok := a.store.(interface{ Failed() error }); ok {
		if err := f.Failed(); err != nil {
			a.healthOnce.Do(func() { a.log.Error().Err(err).Msg("health: the store has failed; restart sessiond") })
			a.writeJSON(w, r, http.StatusServiceUnavailable, map[string]any{"status": "failed",
				"error": messages.Errorf(messages.ErrInternal, "the store stopped writing; restart sessiond to recover from its write-ahead log")})
			return
		}
	}
	a.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// serveMetrics serves the Prometheus text exposition of Config.Gatherer.
func (a *api) serveMetrics(w http.ResponseWriter, r *http.Request) {
	a.metricsHandler.ServeHTTP(w, r)
}

// createSession is POST /api/session: sessions.create. Reusing a supplied
// ID returns the existing Session, also with 200.
func (a *api) createSession(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	req, err := decodeCreate(body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if req.ID != "" {
		// A reused ID returns the existing Session unchanged (SEED.md),
		// whatever Location the request names: the roots bound new
		// Sessions, and an exact retry must not fail because the
		// directory has gone since (the runtime's Create, which the roots
		// check below precedes, answers a reuse the same way).
		if s, err := a.store.Get(r.Context(), req.ID); err == nil {
			a.data(w, r, s)
			return
		}
	}
	if req.Location.Directory, err = a.checkRoots(req.Location.Directory); err != nil {
		a.fail(w, r, err)
		return
	}
	s, _, err := a.cfg.Runtime.Create(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.data(w, r, s)
}

// checkRoots returns the canonical form of a Location directory that lies
// within a configured root: a directory outside every root is forbidden
// and one that does not exist is invalid. Storing the canonical path means
// a symbolic link changed later cannot move the Session out of its root.
// Without roots the directory is returned unchanged.
func (a *api) checkRoots(dir string) (string, error) {
	if len(a.roots) == 0 {
		return dir, nil
	}
	canon, err := tools.CanonicalDir(dir)
	if err != nil {
		return "", locations.DirectoryError(clip(dir), err)
	}
	for _, root := range a.roots {
		if within(root, canon) {
			return canon, nil
		}
	}
	return "", messages.Errorf(messages.ErrForbidden, "location.directory: %q is outside every allowed root", clip(dir))
}

// within reports whether the canonical path p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// listSessions is GET /api/session.
func (a *api) listSessions(w http.ResponseWriter, r *http.Request) {
	list, err := a.store.List(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if list == nil {
		list = []persistence.Session{}
	}
	a.data(w, r, list)
}

// activeSessions is GET /api/session/active: sessions.active, process
// memory, never the log.
func (a *api) activeSessions(w http.ResponseWriter, r *http.Request) {
	active := a.cfg.Runtime.Active()
	if active == nil {
		active = map[messages.SessionID]actors.Status{}
	}
	a.data(w, r, active)
}

// getSession is GET /api/session/{id}.
func (a *api) getSession(w http.ResponseWriter, r *http.Request) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.store.Get(r.Context(), sid)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.data(w, r, s)
}

// prompt is POST /api/session/{id}/prompt: durable admission, then a wake
// unless resume is false. An exact retry returns an equal receipt.
func (a *api) prompt(w http.ResponseWriter, r *http.Request) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	req, err := decodePrompt(body, sid)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	adm, err := a.cfg.Runtime.Prompt(r.Context(), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.data(w, r, adm)
}

// resume is POST /api/session/{id}/resume: 204 once a drain started or was
// joined; it does not wait for the work. It takes no body, but one sent
// anyway is read (and ignored) under the cap every route applies, before
// anything runs: a request over the limit is 413 as it is for wait and
// interrupt, not a 204 whatever it carried, and a refused one has started
// no drain.
func (a *api) resume(w http.ResponseWriter, r *http.Request) {
	a.command(w, r, func(r *http.Request, sid messages.SessionID) error {
		if _, err := a.readBody(w, r); err != nil {
			return err
		}
		_, err := a.cfg.Runtime.Resume(r.Context(), sid)
		return err
	})
}

// compact is POST /api/session/{id}/compact: 204 once the barrier is
// admitted (and the Session woken). A body is capped, and refused before
// the barrier is admitted, as for resume.
func (a *api) compact(w http.ResponseWriter, r *http.Request) {
	a.command(w, r, func(r *http.Request, sid messages.SessionID) error {
		if _, err := a.readBody(w, r); err != nil {
			return err
		}
		_, err := a.cfg.Runtime.Compact(r.Context(), sid)
		return err
	})
}

// wait is POST /api/session/{id}/wait: 204 when no execution is active and
// no wake is in flight. An unknown Session is 404.
func (a *api) wait(w http.ResponseWriter, r *http.Request) {
	a.longCommand(w, r, a.cfg.Runtime.Wait)
}

// interrupt is POST /api/session/{id}/interrupt: 204 after the terminal
// lifecycle event, or at once when idle. An unknown Session is 404 (the
// runtime treats it as a no-op, so the store is asked first).
func (a *api) interrupt(w http.ResponseWriter, r *http.Request) {
	a.longCommand(w, r, a.cfg.Runtime.Interrupt)
}

// selectAgent is POST /api/session/{id}/agent {agent}.
func (a *api) selectAgent(w http.ResponseWriter, r *http.Request) {
	a.command(w, r, func(r *http.Request, sid messages.SessionID) error {
		body, err := a.readBody(w, r)
		if err != nil {
			return err
		}
		agent, err := decodeAgent(body)
		if err != nil {
			return err
		}
		return a.cfg.Runtime.SelectAgent(r.Context(), sid, agent)
	})
}

// selectModel is POST /api/session/{id}/model {providerID, id}.
func (a *api) selectModel(w http.ResponseWriter, r *http.Request) {
	a.command(w, r, func(r *http.Request, sid messages.SessionID) error {
		body, err := a.readBody(w, r)
		if err != nil {
			return err
		}
		m, err := decodeModel(body)
		if err != nil {
			return err
		}
		return a.cfg.Runtime.SelectModel(r.Context(), sid, m)
	})
}

// move is POST /api/session/{id}/move {location}: sessions.move. It answers
// the moved Session once a busy period it superseded (reason superseded)
// has ended and the move is committed; 503 when the Server shuts down
// first.
func (a *api) move(w http.ResponseWriter, r *http.Request) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	loc, err := decodeMove(body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if loc.Directory, err = a.checkRoots(loc.Directory); err != nil {
		a.fail(w, r, err)
		return
	}
	ctx, cancel := a.withStop(r)
	defer cancel()
	s, err := a.cfg.Runtime.Move(ctx, sid, loc)
	if err != nil {
		a.fail(w, r, cause(ctx, err))
		return
	}
	a.data(w, r, s)
}

// command runs a Session command and answers 204.
func (a *api) command(w http.ResponseWriter, r *http.Request, run func(*http.Request, messages.SessionID) error) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := run(r, sid); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// longCommand runs a command that waits on execution (wait, interrupt) for
// an existing Session. It ends with 503 when the Server shuts down first.
func (a *api) longCommand(w http.ResponseWriter, r *http.Request, run func(ctx context.Context, sid messages.SessionID) error) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if _, err := a.store.Get(r.Context(), sid); err != nil {
		a.fail(w, r, err)
		return
	}
	// net/http notices a client leaving only once the request's body has
	// been read: a body sent anyway is read (and ignored) first, or an
	// abandoned wait would run until the Session went idle.
	if _, err := a.readBody(w, r); err != nil {
		a.fail(w, r, err)
		return
	}
	ctx, cancel := a.withStop(r)
	defer cancel()
	if err := run(ctx, sid); err != nil {
		a.fail(w, r, cause(ctx, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// history is GET /api/session/{id}/history?after&limit.
func (a *api) history(w http.ResponseWriter, r *http.Request) {
	servePage(a, w, r, a.store.History)
}

// listMessages is GET /api/session/{id}/message?after&limit.
func (a *api) listMessages(w http.ResponseWriter, r *http.Request) {
	servePage(a, w, r, a.store.Messages)
}

// servePage answers a paged read of one Session: {data, hasMore}, with
// data never null.
func servePage[T any](a *api, w http.ResponseWriter, r *http.Request,
	read func(context.Context, messages.SessionID, persistence.Query) (persistence.Page[T], error)) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	qv, err := query(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	q, err := parsePage(qv)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := read(r.Context(), sid, persistence.Query{After: q.After, Limit: q.Limit})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if page.Data == nil {
		page.Data = []T{}
	}
	a.writeJSON(w, r, http.StatusOK, page)
}

// listInstructions is GET /api/session/{id}/instruction: the Session's
// API-managed instruction entries as {key: text}.
func (a *api) listInstructions(w http.ResponseWriter, r *http.Request) {
	sid, err := sessionID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	entries, err := a.store.Entries(r.Context(), sid)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.data(w, r, entries)
}

// putInstruction is PUT /api/session/{id}/instruction/{key} {text}. The
// entry is observed at the Session's next step boundary.
func (a *api) putInstruction(w http.ResponseWriter, r *http.Request) {
	a.command(w, r, func(r *http.Request, sid messages.SessionID) error {
		body, err := a.readBody(w, r)
		if err != nil {
			return err
		}
		text, err := decodeInstruction(body)
		if err != nil {
			return err
		}
		// The path is unescaped as bytes ("%FF"), and JSON cannot carry a
		// key that is not UTF-8: the listing would show it as U+FFFD, a
		// key that no DELETE names.
		key := r.PathValue("key")
		if !utf8.ValidString(key) {
			return invalid("key: not valid UTF-8")
		}
		return a.store.PutEntry(r.Context(), sid, key, text)
	})
}

// deleteInstruction is DELETE /api/session/{id}/instruction/{key}: 404 for
// an unknown Session (session.not-found) or entry (not-found).
func (a *api) deleteInstruction(w http.ResponseWriter, r *http.Request) {
	a.command(w, r, func(r *http.Request, sid messages.SessionID) error {
		return a.store.DeleteEntry(r.Context(), sid, r.PathValue("key"))
	})
}

// backupStore is the store method GET /api/backup serves
// (persistence.Bolt's).
type backupStore interface {
	Backup(ctx context.Context) (io.ReadCloser, int64, error)
}

// backup streams a copy of the store as one bbolt file (see
// persistence.Bolt.Backup), with its length, so that a client can tell a
// whole copy from one cut short.
func (a *api) backup(w http.ResponseWriter, r *http.Request) {
	b, ok := a.store.(backupStore)
	if !ok {
		a.fail(w, r, errors.New("this store cannot make backups"))
		return
	}
	if r.Method == http.MethodHead {
		// A copy's length is known only once it is made: HEAD would
		// make one to throw it away.
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		return
	}
	f, size, err := b.Backup(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("Content-Disposition", `attachment; filename="sessiond-`+time.Now().UTC().Format("20060102T150405Z")+`.db"`)
	w.WriteHeader(http.StatusOK)
	// The server has no write timeout (it would cut streams), so a client
	// that stops reading without closing would hold this goroutine and the
	// copy, a file the size of the store, for as long as its connection
	// lives. Each chunk gets the streams' write timeout instead, as each
	// frame of a stream does: a slow client that keeps reading is not cut.
	// io.CopyN keeps the response's sendfile path.
	rc := http.NewResponseController(w)
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.StreamWriteTimeout))
		_, err := io.CopyN(w, f, backupChunk)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if r.Context().Err() == nil {
				a.log.Warn().Err(err).Msg("backup: the copy was cut short")
			}
			return
		}
	}
	// The last deadline also covers the final flush after this returns;
	// net/http lifts it before the connection serves another request.
}

// backupChunk is how much of a backup one write deadline covers: a client
// slower than backupChunk per StreamWriteTimeout (8 KB/s by default) is
// taken for one that stopped reading.
const backupChunk = 256 << 10
