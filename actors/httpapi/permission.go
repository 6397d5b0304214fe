package httpapi

import (
	"net/http"

	"github.com/sessiond/sessiond/tools"
)

// listPermissions is GET /api/permission: the questions waiting for a
// reply, in the order they were asked.
func (a *api) listPermissions(w http.ResponseWriter, r *http.Request) {
	list := []tools.Request{}
	if a.cfg.Pending != nil {
		list = a.cfg.Pending.List()
	}
	a.data(w, r, list)
}

// replyPermission is POST /api/permission/{requestID}/reply {reply,
// message?}: 204 once the asking tool call has its answer, 404 when no such
// question waits (answered, withdrawn or never asked), 400 for a bad reply.
func (a *api) replyPermission(w http.ResponseWriter, r *http.Request) {
	// Request IDs are the broker's to choose (Ask keeps a caller's ID), so
	// any ID is looked up rather than validated by shape.
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
	if a.cfg.Pending == nil {
		a.fail(w, r, &tools.RequestNotFoundError{RequestID: id})
		return
	}
	if err := a.cfg.Pending.Reply(id, b.Reply, b.Message); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
