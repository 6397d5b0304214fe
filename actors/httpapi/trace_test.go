package httpapi

import (
	"net/http"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestHistoryPageSizes: GET /api/session/:id/history "defaults to 50
// events, and accepts at most 100" (SEED.md): on a log longer than both,
// the default page holds 50 events and limit=100 a hundred, each saying
// there is more, and the next page from the last sequence ends the log.
func TestHistoryPageSizes(t *testing.T) {
	e := newHarnessEnv(t, nil)
	sid := e.createSession()
	const events = 121 // session.created plus 120 admissions
	for range events - 1 {
		if _, _, err := e.store.Admit(t.Context(), persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "later"}}); err != nil {
			t.Fatal(err)
		}
	}
	base := "/api/session/" + string(sid) + "/history"
	if p := pageOf(t, e.do("GET", base, nil)); len(p.Data) != 50 || !p.HasMore || p.Data[49].Seq() != 49 {
		t.Fatalf("default page: %d events, hasMore %v", len(p.Data), p.HasMore)
	}
	full := pageOf(t, e.do("GET", base+"?limit=100", nil))
	if len(full.Data) != 100 || !full.HasMore || full.Data[99].Seq() != 99 {
		t.Fatalf("limit=100: %d events, hasMore %v", len(full.Data), full.HasMore)
	}
	if p := pageOf(t, e.do("GET", base+"?limit=100&after=99", nil)); len(p.Data) != events-100 || p.HasMore {
		t.Fatalf("the last page: %d events, hasMore %v", len(p.Data), p.HasMore)
	}
	e.do("GET", base+"?limit=101", nil).wantError(t, http.StatusBadRequest, messages.ErrInvalid)
}
