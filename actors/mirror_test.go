package actors

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestMirrorYieldsToOtherWriters: a boundary after the runner's own
// commits comes from its mirror, and one after any other writer committed
// to the Session in between, even right after the runner's last commit,
// reads the store and sees it.
func TestMirrorYieldsToOtherWriters(t *testing.T) {
	ctx := context.Background()
	st, err := persistence.Open(filepath.Join(t.TempDir(), "s.db"), persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sess, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.ID
	r := &runner{sid: sid, store: st, bus: NewBus(), bndAt: -1}
	read := func(after int64) persistence.Boundary {
		t.Helper()
		b, err := st.Boundary(ctx, sid, after)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	boundary := func() (persistence.Boundary, bool) {
		t.Helper()
		checks, _ := MirrorChecks()
		b, err := r.boundary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(b, read(-1)) {
			t.Fatalf("boundary %+v, read %+v", b, read(-1))
		}
		now, _ := MirrorChecks()
		return b, now > checks
	}
	if _, mirrored := boundary(); mirrored {
		t.Fatal("the first boundary came from an empty mirror")
	}
	asst := messages.MessageID("msg_mirror_asst")
	if _, err := r.append(ctx, &messages.StepStarted{SessionID: sid, AssistantMessageID: asst, Agent: "build", Attempt: 1},
		&messages.ToolCalled{SessionID: sid, AssistantMessageID: asst, CallID: "c1", Name: "read", Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.append(ctx, &messages.ToolSucceeded{SessionID: sid, AssistantMessageID: asst, CallID: "c1", Output: "x"},
		&messages.StepEnded{SessionID: sid, AssistantMessageID: asst, Finish: "tool-calls"}); err != nil {
		t.Fatal(err)
	}
	if _, mirrored := boundary(); !mirrored {
		t.Fatal("a boundary after the runner's own commits read the store")
	}
	// Another writer commits after the runner's last commit.
	if _, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "steer"}, Delivery: messages.Steer}); err != nil {
		t.Fatal(err)
	}
	b, mirrored := boundary()
	if mirrored || len(b.Pending) != 1 {
		t.Fatalf("after an admission: mirrored %v, %d pending", mirrored, len(b.Pending))
	}
	// The runner promotes it: its own commit, after the read.
	if _, err := r.append(ctx, &messages.PromptPromoted{SessionID: sid, InputID: b.Pending[0].ID}); err != nil {
		t.Fatal(err)
	}
	if b, mirrored := boundary(); !mirrored || len(b.Pending) != 0 {
		t.Fatalf("after the promotion: mirrored %v, %d pending", mirrored, len(b.Pending))
	}
	// Another writer commits, then the runner: its commit does not follow
	// its last one, so the mirror is dropped at once.
	if err := st.PutEntry(ctx, sid, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, sid, &messages.AgentSelected{SessionID: sid, Agent: "plan"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.append(ctx, &messages.ExecutionSucceeded{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	if b, mirrored := boundary(); mirrored || b.Session.Agent != "plan" {
		t.Fatalf("after a selection: mirrored %v, agent %q", mirrored, b.Session.Agent)
	}
	if _, diff := MirrorChecks(); diff != "" {
		t.Fatal(diff)
	}
}
