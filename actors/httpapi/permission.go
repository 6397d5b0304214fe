package httpapi

import (
	"errors"
	"net/http"
	"slices"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// listPermissions is GET /api/permission?sessionID: the questions waiting
// for a reply, in the order they were asked; with sessionID, that
// Session's only.
func (a *api) listPermissions(w http.ResponseWriter, r *http.Request) {
	qv, err := query(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	sid, filtered, err := a.sessionFilter(r, qv)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	list := []tools.Request{}
	if a.cfg.Pending != nil {
		list = a.cfg.Pending.List()
	}
	if filtered {
		list = slices.DeleteFunc(list, func(q tools.Request) bool { return q.SessionID != sid })
	}
	a.data(w, r, list)
}

// replyPermission is POST /api/permission/{requestID}/reply {reply,
// message?}: 204 once the asking tool call has its answer, 404 when no such
// question waits (answered, withdrawn or never asked), 400 for a bad reply
// or a malformed request ID.
func (a *api) replyPermission(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("requestID")
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	b, err := decodeReply(body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	err = &tools.RequestNotFoundError{RequestID: id}
	if a.cfg.Pending != nil {
		err = a.cfg.Pending.Reply(id, b.Reply, b.Message)
	}
	if errors.Is(err, tools.ErrRequestNotFound) {
		// The broker's IDs are "per_" IDs, but Ask keeps an ID its caller
		// chose, so a waiting question is answered whatever its ID looks
		// like: only a miss is judged by shape, a malformed ID being the
		// client's mistake (400) and a well-formed one a question that
		// does not wait (404).
		if verr := messages.ValidateID("requestID", messages.RequestPrefix, id); verr != nil {
			err = verr
		}
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
