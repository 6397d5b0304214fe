package actors

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
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
	st, sid, r := mirrorRunner(t)
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

// TestMirrorServesABoundaryPastAllItsMessages: once history holds every
// message the mirror has (a promoted prompt, no assistant message yet), a
// boundary after the runner's next own commit comes from the mirror with
// no messages, as a read returns.
func TestMirrorServesABoundaryPastAllItsMessages(t *testing.T) {
	ctx := context.Background()
	st, sid, r := mirrorRunner(t)
	in, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "hi"}, Delivery: messages.Steer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.append(ctx, &messages.PromptPromoted{SessionID: sid, InputID: in.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.boundary(ctx); err != nil {
		t.Fatal(err)
	}
	if hist, err := r.history(ctx); err != nil || len(hist) != 1 || hist[0].Role != persistence.RoleUser {
		t.Fatalf("history %+v, %v", hist, err)
	}
	if _, err := r.append(ctx, &messages.ExecutionSucceeded{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	checks, _ := MirrorChecks()
	b, err := r.boundary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read, err := st.Boundary(ctx, sid, r.hist[0].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := MirrorChecks(); now == checks || !reflect.DeepEqual(b, read) || len(b.Messages) != 0 {
		t.Fatalf("boundary %+v (mirrored: %v), read %+v", b, now > checks, read)
	}
}

// TestMirrorDroppedByAnEarlierMessageIsNotServed: a commit that changes a
// message before the mirror's window (a step reopening an older
// assistant message, which the store accepts though the runner reopens
// only a retrying one) and creates another leaves the mirror invalid,
// though its seq is the Session's: the next boundary reads the store, and
// sees the new message.
func TestMirrorDroppedByAnEarlierMessageIsNotServed(t *testing.T) {
	ctx := context.Background()
	st, sid, r := mirrorRunner(t)
	a1, a2 := messages.MessageID("msg_mirror_a1"), messages.MessageID("msg_mirror_a2")
	for _, a := range []messages.MessageID{a1, a2} {
		if _, err := r.append(ctx, &messages.StepStarted{SessionID: sid, AssistantMessageID: a, Agent: "build", Attempt: 1},
			&messages.StepEnded{SessionID: sid, AssistantMessageID: a, Finish: "stop"}); err != nil {
			t.Fatal(err)
		}
	}
	in, _, err := st.Admit(ctx, persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: "steer"}, Delivery: messages.Steer})
	if err != nil {
		t.Fatal(err)
	}
	boundary := func() persistence.Boundary {
		t.Helper()
		b, err := r.boundary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, after := r.historyFrom()
		read, err := st.Boundary(ctx, sid, after)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(b, read) {
			t.Fatalf("boundary after %d\n%+v\nread\n%+v", after, b, read)
		}
		return b
	}
	boundary()
	if hist, err := r.history(ctx); err != nil || len(hist) != 2 {
		t.Fatalf("history %+v, %v", hist, err)
	}
	if _, err := r.append(ctx, &messages.ExecutionSucceeded{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	checks, _ := MirrorChecks()
	boundary() // from the mirror, its window after a1
	if now, _ := MirrorChecks(); now == checks {
		t.Fatal("a boundary after the runner's own commits read the store")
	}
	if _, err := r.append(ctx, &messages.StepStarted{SessionID: sid, AssistantMessageID: a1, Agent: "build", Attempt: 2},
		&messages.PromptPromoted{SessionID: sid, InputID: in.ID}); err != nil {
		t.Fatal(err)
	}
	if b := boundary(); len(b.Messages) != 2 || b.Messages[1].Role != persistence.RoleUser {
		t.Fatalf("boundary messages %+v", b.Messages)
	}
}

// TestMirrorCheckReportsADifference: the check the package's tests run on
// every boundary served from a mirror records one that differs from a read
// at the same seq, and counts it.
func TestMirrorCheckReportsADifference(t *testing.T) {
	ctx := context.Background()
	st, sid, r := mirrorRunner(t)
	b, err := st.Boundary(ctx, sid, -1)
	if err != nil {
		t.Fatal(err)
	}
	b.Session.Agent = "not what the store has"
	earlier := mirrorMismatch.Swap(nil)
	defer mirrorMismatch.Store(earlier) // the difference made here is not a failure of the run
	checks, _ := MirrorChecks()
	r.checkMirror(ctx, b, -1)
	now, diff := MirrorChecks()
	if now != checks+1 || !strings.Contains(diff, "not what the store has") {
		t.Fatalf("checks %d -> %d, difference %q", checks, now, diff)
	}
}

// mirrorRunner returns a store with one new Session and a runner of it
// that drives no actors, for tests of the boundary mirror.
func mirrorRunner(t *testing.T) (*persistence.Bolt, messages.SessionID, *runner) {
	t.Helper()
	st, err := persistence.Open(filepath.Join(t.TempDir(), "s.db"), persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sess, _, err := st.CreateSession(context.Background(), persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	return st, sess.ID, &runner{sid: sess.ID, store: st, bus: NewBus(), bndAt: -1}
}
