package tools

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// siblingRig is one Pending broker shared by the permission gates of two
// projects, "proj" and "other", over one approval store, as the daemon
// shares one broker between its Locations.
type siblingRig struct {
	t         *testing.T
	pending   *Pending
	rec       *recorder
	asked     chan string
	approvals *MemoryApprovals
	perms     map[string]*Permissions
	wg        sync.WaitGroup
}

func newSiblingRig(t *testing.T) *siblingRig {
	t.Helper()
	return newSiblingRigWithRules(t, nil)
}

// newSiblingRigWithRules is newSiblingRig with the agents' rules.
func newSiblingRigWithRules(t *testing.T, agents map[string]Ruleset) *siblingRig {
	t.Helper()
	pending, rec, asked := newRecordedPending()
	r := &siblingRig{t: t, pending: pending, rec: rec, asked: asked, approvals: &MemoryApprovals{}, perms: map[string]*Permissions{}}
	for _, project := range []string{"proj", "other"} {
		p, err := NewPermissions(PermissionsConfig{Project: project, Agents: agents, Approvals: r.approvals, Asker: pending})
		if err != nil {
			t.Fatal(err)
		}
		r.perms[project] = p
	}
	// Whatever a failing test leaves waiting is withdrawn, and every
	// asking goroutine ends before goleak looks.
	t.Cleanup(func() {
		pending.CancelAll()
		r.wg.Wait()
	})
	return r
}

// ask starts a Check of req in project and returns once its question is
// registered: the question's ID, and where the Check's result arrives.
// Questions are asked one at a time, so their IDs are per_1, per_2, ...
func (r *siblingRig) ask(project string, req Request) (string, <-chan error) {
	r.t.Helper()
	return r.askWith(project, req, nil)
}

// askWith is ask with the call's Session rules.
func (r *siblingRig) askWith(project string, req Request, extra Ruleset) (string, <-chan error) {
	r.t.Helper()
	done := make(chan error, 1)
	r.wg.Go(func() { done <- r.perms[project].Check(context.Background(), req, extra) })
	return <-r.asked, done
}

// replied returns the permission.replied events recorded so far.
func (r *siblingRig) replied() []string {
	var out []string
	for _, e := range r.rec.list() {
		if strings.HasPrefix(e, "replied ") {
			out = append(out, e)
		}
	}
	return out
}

// waitingIDs returns the IDs of the questions still waiting.
func (r *siblingRig) waitingIDs() []string {
	var ids []string
	for _, q := range r.pending.List() {
		ids = append(ids, q.ID)
	}
	return ids
}

func wantUserRejected(t *testing.T, what string, err error) {
	t.Helper()
	if errorType(t, err) != messages.ErrPermissionRejected || !errors.Is(err, ErrUserRejected) {
		t.Fatalf("%s settled as %v, want a user's rejection", what, err)
	}
}

// TestSiblingAlwaysApprovesCoveredQuestions: replying "always" to one
// question also approves every other question of the same Session and
// project that the approval just saved covers, with a permission.replied
// event each; a covered question of another Session, or of the same
// Session in another project, keeps waiting.
func TestSiblingAlwaysApprovesCoveredQuestions(t *testing.T) {
	tests := []struct {
		name          string
		first, second Request
		saved         []Approval
	}{
		{
			name:   "the same command twice",
			first:  Request{Permission: PermissionBash, Patterns: []string{"make test"}},
			second: Request{Permission: PermissionBash, Patterns: []string{"make test"}},
			saved:  []Approval{{Permission: PermissionBash, Pattern: "make test"}},
		},
		{
			name:   "a wildcard approval",
			first:  Request{Permission: PermissionBash, Patterns: []string{"git status"}, Always: []string{"git *"}},
			second: Request{Permission: PermissionBash, Patterns: []string{"git log"}},
			saved:  []Approval{{Permission: PermissionBash, Pattern: "git *"}},
		},
		{
			name:   "an external directory",
			first:  externalDirectoryRequest("/ext", "read"),
			second: externalDirectoryRequest("/ext/sub", "bash"),
			saved:  []Approval{{Permission: PermissionExternalDirectory, Pattern: "/ext/*"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newSiblingRig(t)
			in := func(sid messages.SessionID, req Request) Request { req.SessionID = sid; return req }
			first, firstDone := r.ask("proj", in("ses_1", tc.first))
			second, secondDone := r.ask("proj", in("ses_1", tc.second))
			otherSession, _ := r.ask("proj", in("ses_2", tc.second))
			otherProject, _ := r.ask("other", in("ses_1", tc.second))

			if err := r.pending.Reply(first, Always, ""); err != nil {
				t.Fatal(err)
			}
			// Reply settles the covered question before it returns.
			if got, want := r.waitingIDs(), []string{otherSession, otherProject}; !slices.Equal(got, want) {
				t.Fatalf("waiting %q, want %q", got, want)
			}
			if err := <-firstDone; err != nil {
				t.Fatalf("the answered call: %v", err)
			}
			if err := <-secondDone; err != nil {
				t.Fatalf("the covered call: %v", err)
			}
			want := []string{"replied " + first + " always ", "replied " + second + " always "}
			if got := r.replied(); !slices.Equal(got, want) {
				t.Fatalf("replied events %q, want %q", got, want)
			}
			// The covered call saves nothing of its own: what covers it is
			// what the user approved.
			if got := r.approvals.List("proj"); !slices.Equal(got, tc.saved) {
				t.Fatalf("saved %v, want %v", got, tc.saved)
			}
			if got := r.approvals.List("other"); len(got) != 0 {
				t.Fatalf("saved %v for the other project", got)
			}
		})
	}
}

// TestSiblingAlwaysLeavesUncoveredQuestionsWaiting: a question the saved
// approval does not cover, entirely, keeps waiting for its own answer.
func TestSiblingAlwaysLeavesUncoveredQuestionsWaiting(t *testing.T) {
	r := newSiblingRig(t)
	first, firstDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionBash, Patterns: []string{"git status"}})
	other, otherDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionBash, Patterns: []string{"git log"}})
	partly, partlyDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionBash, Patterns: []string{"git status", "make"}})
	edit, editDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionEdit, Patterns: []string{"git status"}})

	if err := r.pending.Reply(first, Always, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if got, want := r.waitingIDs(), []string{other, partly, edit}; !slices.Equal(got, want) {
		t.Fatalf("waiting %q, want %q", got, want)
	}
	if got, want := r.replied(), []string{"replied " + first + " always "}; !slices.Equal(got, want) {
		t.Fatalf("replied events %q, want %q", got, want)
	}
	for _, q := range []struct {
		id   string
		done <-chan error
	}{{other, otherDone}, {partly, partlyDone}, {edit, editDone}} {
		if err := r.pending.Reply(q.id, Once, ""); err != nil {
			t.Fatal(err)
		}
		if err := <-q.done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSiblingRejectRejectsTheSessionsOtherQuestions: rejecting one
// question rejects every other question of the same Session, so that a
// step that asked twice ends; another Session's questions keep waiting.
func TestSiblingRejectRejectsTheSessionsOtherQuestions(t *testing.T) {
	r := newSiblingRig(t)
	first, firstDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionBash, Patterns: []string{"rm -rf build"}})
	second, secondDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionEdit, Patterns: []string{"main.go"}})
	// A question put to the broker directly, without a permission gate.
	direct := make(chan Answer, 1)
	r.wg.Go(func() {
		a, err := r.pending.Ask(context.Background(), Request{SessionID: "ses_1", Permission: "custom"})
		if err != nil {
			a = Answer{Reply: Reply("error: " + err.Error())}
		}
		direct <- a
	})
	third := <-r.asked
	other, otherDone := r.ask("proj", Request{SessionID: "ses_2", Permission: PermissionBash, Patterns: []string{"rm -rf build"}})

	if err := r.pending.Reply(first, Reject, "not now"); err != nil {
		t.Fatal(err)
	}
	if got, want := r.waitingIDs(), []string{other}; !slices.Equal(got, want) {
		t.Fatalf("waiting %q, want %q", got, want)
	}
	err := <-firstDone
	wantUserRejected(t, "the rejected call", err)
	if !strings.Contains(err.Error(), "not now") {
		t.Fatalf("the user's message must reach the model: %v", err)
	}
	wantUserRejected(t, "the other call of the Session", <-secondDone)
	if a := <-direct; a.Reply != Reject {
		t.Fatalf("the direct question got %+v, want a rejection", a)
	}
	want := []string{"replied " + first + " reject not now", "replied " + second + " reject ", "replied " + third + " reject "}
	if got := r.replied(); !slices.Equal(got, want) {
		t.Fatalf("replied events %q, want %q", got, want)
	}
	if err := r.pending.Reply(other, Once, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-otherDone; err != nil {
		t.Fatalf("the other Session's call: %v", err)
	}
}

// TestSiblingOnceChangesNothing: "once" answers its own question only,
// even when another question asks for the very same thing.
func TestSiblingOnceChangesNothing(t *testing.T) {
	r := newSiblingRig(t)
	req := Request{SessionID: "ses_1", Permission: PermissionBash, Patterns: []string{"make test"}}
	first, firstDone := r.ask("proj", req)
	second, secondDone := r.ask("proj", req)
	if err := r.pending.Reply(first, Once, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if got, want := r.waitingIDs(), []string{second}; !slices.Equal(got, want) {
		t.Fatalf("waiting %q, want %q", got, want)
	}
	if got, want := r.replied(), []string{"replied " + first + " once "}; !slices.Equal(got, want) {
		t.Fatalf("replied events %q, want %q", got, want)
	}
	if got := r.approvals.List("proj"); len(got) != 0 {
		t.Fatalf("once saved %v", got)
	}
	if err := r.pending.Reply(second, Reject, ""); err != nil {
		t.Fatal(err)
	}
	wantUserRejected(t, "the second call", <-secondDone)
}

// TestSiblingCoverageUsesTheRulesOfTheAsk: whether the saved approval
// covers another question is decided as the ask itself was, by the
// agent's rules and the call's Session rules before saved approvals: a
// question whose other patterns those rules allow is covered, the same
// question without the Session rule is not.
func TestSiblingCoverageUsesTheRulesOfTheAsk(t *testing.T) {
	r := newSiblingRigWithRules(t, map[string]Ruleset{DefaultAgent: {{PermissionBash, "ls", Allow}}})
	// Explicit Always patterns keep every pattern in the question, the
	// ones the rules allow too.
	first, firstDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionBash,
		Patterns: []string{"git status"}, Always: []string{"git *"}})
	byAgent, byAgentDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionBash,
		Patterns: []string{"git log", "ls"}, Always: []string{"git log", "ls"}})
	sessionRules := Ruleset{{PermissionBash, "make", Allow}}
	bySession, bySessionDone := r.askWith("proj", Request{SessionID: "ses_1", Permission: PermissionBash,
		Patterns: []string{"git log", "make"}, Always: []string{"git log", "make"}}, sessionRules)
	without, withoutDone := r.ask("proj", Request{SessionID: "ses_1", Permission: PermissionBash,
		Patterns: []string{"git log", "make"}, Always: []string{"git log", "make"}})

	if err := r.pending.Reply(first, Always, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := r.waitingIDs(), []string{without}; !slices.Equal(got, want) {
		t.Fatalf("waiting %q, want %q", got, want)
	}
	for what, done := range map[string]<-chan error{"answered": firstDone, "allowed by the agent": byAgentDone, "allowed by the Session": bySessionDone} {
		if err := <-done; err != nil {
			t.Fatalf("the call %s: %v", what, err)
		}
	}
	want := []string{"replied " + first + " always ", "replied " + byAgent + " always ", "replied " + bySession + " always "}
	if got := r.replied(); !slices.Equal(got, want) {
		t.Fatalf("replied events %q, want %q", got, want)
	}
	if err := r.pending.Reply(without, Reject, ""); err != nil {
		t.Fatal(err)
	}
	wantUserRejected(t, "the uncovered call", <-withoutDone)
}

// failingSaves is an approval store whose saves fail.
type failingSaves struct{ MemoryApprovals }

func (*failingSaves) Save(context.Context, string, string, []string) error {
	return errors.New("disk full")
}

// TestSiblingAlwaysWithAFailedSaveApprovesNothingElse: when the approval
// cannot be saved, the reply is still taken (the call fails with the
// store's error) and no other question is approved on its strength.
func TestSiblingAlwaysWithAFailedSaveApprovesNothingElse(t *testing.T) {
	r := newSiblingRig(t)
	perms, err := NewPermissions(PermissionsConfig{Project: "proj", Approvals: &failingSaves{}, Asker: r.pending})
	if err != nil {
		t.Fatal(err)
	}
	r.perms["failing"] = perms
	req := Request{SessionID: "ses_1", Permission: PermissionBash, Patterns: []string{"make test"}}
	first, firstDone := r.ask("failing", req)
	second, secondDone := r.ask("failing", req)
	if err := r.pending.Reply(first, Always, ""); err != nil {
		t.Fatalf("Reply = %v: the reply was taken", err)
	}
	if err := <-firstDone; errorType(t, err) != messages.ErrUnknown || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("the answered call: %v, want the store's error", err)
	}
	if got, want := r.waitingIDs(), []string{second}; !slices.Equal(got, want) {
		t.Fatalf("waiting %q, want %q", got, want)
	}
	if err := r.pending.Reply(second, Once, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
}
