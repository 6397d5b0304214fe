package tools

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

func newPerms(t *testing.T, agents map[string]Ruleset, asker Asker) (*Permissions, *MemoryApprovals) {
	t.Helper()
	approvals := &MemoryApprovals{}
	p, err := NewPermissions(PermissionsConfig{Project: "proj", Agents: agents, Approvals: approvals, Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	return p, approvals
}

func TestCheckRulesDecideWithoutAsking(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	p, _ := newPerms(t, map[string]Ruleset{
		"build": {{"bash", "*", Allow}, {"bash", "rm *", Deny}},
	}, asker)
	ctx := context.Background()
	if err := p.Check(ctx, Request{Permission: "bash", Patterns: []string{"ls"}}, nil); err != nil {
		t.Fatalf("allowed command: %v", err)
	}
	err := p.Check(ctx, Request{Permission: "bash", Patterns: []string{"rm -rf x"}}, nil)
	if typ := errorType(t, err); typ != messages.ErrPermissionRejected {
		t.Fatalf("denied command: got %v", err)
	}
	if !strings.Contains(err.Error(), `bash "rm *" deny`) {
		t.Errorf("denial should name the rule: %v", err)
	}
	if n := len(asker.requests()); n != 0 {
		t.Fatalf("asker was asked %d times; rules alone should decide", n)
	}
}

func TestCheckDenyOfAnyPatternRejectsTheRequest(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	p, _ := newPerms(t, map[string]Ruleset{"build": {{"edit", "*", Allow}, {"edit", "*.env", Deny}}}, asker)
	err := p.Check(context.Background(), Request{Permission: "edit", Patterns: []string{"a.go", ".env"}}, nil)
	if typ := errorType(t, err); typ != messages.ErrPermissionRejected {
		t.Fatalf("got %v, want permission.rejected", err)
	}
}

func TestCheckEmptyAgentUsesDefaultAgent(t *testing.T) {
	p, _ := newPerms(t, map[string]Ruleset{DefaultAgent: {{"bash", "*", Allow}}}, nil)
	if err := p.Check(context.Background(), Request{Permission: "bash", Patterns: []string{"ls"}}, nil); err != nil {
		t.Fatalf("empty agent must evaluate the %s rules: %v", DefaultAgent, err)
	}
	if got := p.Rules(""); len(got) != 1 {
		t.Fatalf("Rules(\"\") = %v, want the build rules", got)
	}
	// Another agent's rules are not used for the default agent.
	p2, _ := newPerms(t, map[string]Ruleset{"plan": {{"bash", "*", Allow}}}, nil)
	if err := p2.Check(context.Background(), Request{Permission: "bash", Patterns: []string{"ls"}}, nil); errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("without build rules and without an asker the call must be rejected, got %v", err)
	}
}

func TestCheckSessionRulesComeLast(t *testing.T) {
	p, _ := newPerms(t, map[string]Ruleset{"build": {{"bash", "*", Allow}}}, nil)
	err := p.Check(context.Background(), Request{Permission: "bash", Patterns: []string{"ls"}}, Ruleset{{"bash", "*", Deny}})
	if errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("session deny must override agent allow, got %v", err)
	}
}

func TestCheckReplies(t *testing.T) {
	tests := []struct {
		name     string
		answer   Answer
		wantType messages.ErrorType
		wantMsg  string
		saved    bool
	}{
		{name: "once", answer: Answer{Reply: Once}},
		{name: "always", answer: Answer{Reply: Always}, saved: true},
		{name: "reject", answer: Answer{Reply: Reject}, wantType: messages.ErrPermissionRejected, wantMsg: "rejected"},
		{name: "reject with message", answer: Answer{Reply: Reject, Message: "use the staging database instead"},
			wantType: messages.ErrPermissionRejected, wantMsg: "use the staging database instead"},
		{name: "unknown reply", answer: Answer{Reply: "maybe"}, wantType: messages.ErrPermissionRejected, wantMsg: "unknown reply"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asker := &scriptedAsker{answer: func(Request) (Answer, error) { return tc.answer, nil }}
			p, approvals := newPerms(t, nil, asker)
			req := Request{SessionID: "ses_1", Permission: "bash", Patterns: []string{"make test"}, Always: []string{"make *"}}
			err := p.Check(context.Background(), req, nil)
			if got := errorType(t, err); got != tc.wantType {
				t.Fatalf("got %v, want type %q", err, tc.wantType)
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("message %q lacks %q", err, tc.wantMsg)
			}
			asked := asker.requests()
			if len(asked) != 1 || asked[0].Agent != DefaultAgent || !slices.Equal(asked[0].Patterns, []string{"make test"}) {
				t.Fatalf("asked %+v", asked)
			}
			saved := approvals.List("proj")
			if tc.saved != (len(saved) > 0) {
				t.Fatalf("saved approvals %v, want saved=%v", saved, tc.saved)
			}
			if tc.saved && saved[0] != (Approval{Permission: "bash", Pattern: "make *"}) {
				t.Fatalf("saved %v, want the Always pattern", saved)
			}
		})
	}
}

func TestCheckAlwaysApprovalCoversLaterRequests(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Always)}
	p, _ := newPerms(t, nil, asker)
	ctx := context.Background()
	if err := p.Check(ctx, Request{Permission: "bash", Patterns: []string{"go test ./..."}, Always: []string{"go test *"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx, Request{Permission: "bash", Patterns: []string{"go test -run X ./tools"}}, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(asker.requests()); n != 1 {
		t.Fatalf("asked %d times, want 1: the saved approval covers the second command", n)
	}
	// Saved approvals never override a deny rule.
	pDeny, approvals := newPerms(t, map[string]Ruleset{"build": {{"bash", "go test *", Deny}}}, asker)
	if err := approvals.Save(ctx, "proj", "bash", []string{"*"}); err != nil {
		t.Fatal(err)
	}
	if err := pDeny.Check(ctx, Request{Permission: "bash", Patterns: []string{"go test ./..."}}, nil); errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("deny rule must win over a saved approval, got %v", err)
	}
}

func TestAlwaysApprovalIsLiteral(t *testing.T) {
	// The request's patterns are what the user saw; saved verbatim, the
	// '*' of "ls *.txt" would approve commands the user never saw.
	asker := &scriptedAsker{answer: answerAlways(Always)}
	p, approvals := newPerms(t, nil, asker)
	ctx := context.Background()
	for _, cmd := range []string{"ls *.txt", `echo \?`} {
		if err := p.Check(ctx, Request{Permission: "bash", Patterns: []string{cmd}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []Approval{{Permission: "bash", Pattern: `ls \*.txt`}, {Permission: "bash", Pattern: `echo \\\?`}}
	if got := approvals.List("proj"); !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
	for _, tc := range []struct {
		cmd   string
		asked bool
	}{
		{"ls *.txt", false},
		{`echo \?`, false},
		{"ls /; touch pwned; echo .txt", true},
		{"ls a.txt", true},
		{`echo \x`, true},
	} {
		before := len(asker.requests())
		if err := p.Check(ctx, Request{Permission: "bash", Patterns: []string{tc.cmd}}, nil); err != nil {
			t.Fatal(err)
		}
		if asked := len(asker.requests()) > before; asked != tc.asked {
			t.Errorf("%q: asked = %v, want %v", tc.cmd, asked, tc.asked)
		}
	}
}

func TestCheckApprovalsArePerProject(t *testing.T) {
	approvals := &MemoryApprovals{}
	ctx := context.Background()
	if err := approvals.Save(ctx, "other", "bash", []string{"*"}); err != nil {
		t.Fatal(err)
	}
	asker := &scriptedAsker{answer: answerAlways(Reject)}
	p, err := NewPermissions(PermissionsConfig{Project: "proj", Approvals: approvals, Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx, Request{Permission: "bash", Patterns: []string{"ls"}}, nil); errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("another project's approval must not apply: %v", err)
	}
}

func TestCheckInterruptIsAborted(t *testing.T) {
	asker := &scriptedAsker{blockCh: make(chan struct{})}
	p, _ := newPerms(t, nil, asker)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Check(ctx, Request{Permission: "bash", Patterns: []string{"ls"}}, nil) }()
	<-asker.blockCh
	cancel()
	if err := <-done; errorType(t, err) != messages.ErrAborted {
		t.Fatalf("got %v, want aborted", err)
	}
}

// failingApprovals is an ApprovalStore whose operations fail.
type failingApprovals struct{}

func (failingApprovals) Approved(context.Context, string, string, string) (bool, error) {
	return false, errors.New("disk on fire")
}
func (failingApprovals) Save(context.Context, string, string, []string) error {
	return errors.New("disk on fire")
}

func TestCheckApprovalStoreFailureIsUnknown(t *testing.T) {
	p, err := NewPermissions(PermissionsConfig{Approvals: failingApprovals{}, Asker: &scriptedAsker{answer: answerAlways(Always)}})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Check(context.Background(), Request{Permission: "bash", Patterns: []string{"ls"}}, nil)
	if errorType(t, err) != messages.ErrUnknown || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckWithoutAskerRejects(t *testing.T) {
	p, _ := newPerms(t, nil, nil)
	err := p.Check(context.Background(), Request{Permission: "edit", Patterns: []string{"a.go"}}, nil)
	if errorType(t, err) != messages.ErrPermissionRejected || !strings.Contains(err.Error(), "nobody can be asked") {
		t.Fatalf("got %v", err)
	}
}

func TestMemoryApprovalsMatchWildcards(t *testing.T) {
	m := &MemoryApprovals{}
	ctx := context.Background()
	if err := m.Save(ctx, "p", "bash", []string{"git *", "git *"}); err != nil {
		t.Fatal(err)
	}
	if got := m.List("p"); len(got) != 1 {
		t.Fatalf("duplicate saves kept %d copies", len(got))
	}
	for _, tc := range []struct {
		perm, pattern string
		want          bool
	}{
		{"bash", "git status", true},
		{"bash", "gitk", false},
		{"edit", "git status", false},
	} {
		got, err := m.Approved(ctx, "p", tc.perm, tc.pattern)
		if err != nil || got != tc.want {
			t.Errorf("Approved(%s, %q) = %v, %v; want %v", tc.perm, tc.pattern, got, err, tc.want)
		}
	}
}

// TestAlwaysReplySavedWhenTheCallIsCancelled checks that an "always" reply
// accepted just before the asking call is cancelled (an interrupt racing
// the reply) is still saved: the reply was accepted, and the approval is
// the user's, not the call's. The call itself ends aborted.
func TestAlwaysReplySavedWhenTheCallIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The reply wins the race (Pending then honours it) and the interrupt
	// lands before the asking call goes on: cancelled as the answer comes.
	asker := &scriptedAsker{answer: func(Request) (Answer, error) {
		cancel()
		return Answer{Reply: Always}, nil
	}}
	approvals := &MemoryApprovals{}
	perms, err := NewPermissions(PermissionsConfig{Project: "/p", Approvals: approvals, Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	err = perms.Check(ctx, Request{SessionID: "ses_x", Permission: "bash", Patterns: []string{"make"}}, nil)
	if messages.TypeOf(err) != messages.ErrAborted {
		t.Fatalf("cancelled call: %v", err)
	}
	if got := approvals.List("/p"); len(got) != 1 || got[0] != (Approval{Permission: "bash", Pattern: "make"}) {
		t.Fatalf("approvals %v", got)
	}
}

// TestUserRejectionIsMarked: a user's rejection, with or without a message,
// carries ErrUserRejected (the runner ends the busy period on it); a
// denial by the rules does not.
func TestUserRejectionIsMarked(t *testing.T) {
	for _, msg := range []string{"", "not today"} {
		asker := &scriptedAsker{answer: func(Request) (Answer, error) { return Answer{Reply: Reject, Message: msg}, nil }}
		h := newHarness(t, harnessConfig{asker: asker})
		_, err := h.call(context.Background(), t, "bash", BashInput{Command: "echo hi"})
		if errorType(t, err) != messages.ErrPermissionRejected || !errors.Is(err, ErrUserRejected) {
			t.Fatalf("reject %q: %v", msg, err)
		}
	}
	h := newHarness(t, harnessConfig{rules: Ruleset{{Permission: PermissionBash, Pattern: "echo *", Action: Deny}}})
	_, err := h.call(context.Background(), t, "bash", BashInput{Command: "echo hi"})
	if errorType(t, err) != messages.ErrPermissionRejected || errors.Is(err, ErrUserRejected) {
		t.Fatalf("a rule's denial marked as the user's: %v", err)
	}
}

// TestAskShowsOnlyWhatIsOpen: a question lists only the patterns no rule
// allows and no saved approval covers, and "always" saves those alone.
func TestAskShowsOnlyWhatIsOpen(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Always)}
	h := newHarness(t, harnessConfig{asker: asker, rules: Ruleset{{Permission: PermissionBash, Pattern: "echo *", Action: Allow}}})
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "echo a && true x"}); err != nil {
		t.Fatal(err)
	}
	asked := asker.requests()
	if len(asked) != 1 || !slices.Equal(asked[0].Patterns, []string{"true x"}) {
		t.Fatalf("asked %+v, want only the command no rule allows", asked)
	}
	if got := h.approvals.List("proj"); len(got) != 1 || got[0].Pattern != LiteralPattern("true x") {
		t.Fatalf("saved %+v", got)
	}
	// Saved now: the next run asks nothing for it, and only for what is new.
	if _, err := h.call(context.Background(), t, "bash", BashInput{Command: "true x; false y || true"}); err != nil {
		t.Fatal(err)
	}
	if asked := asker.requests(); len(asked) != 2 || !slices.Equal(asked[1].Patterns, []string{"false y", "true"}) {
		t.Fatalf("second question %+v", asked[len(asked)-1])
	}
}

// TestRejectionNamesAtMostFivePatterns: a message about a request of many
// patterns quotes the first five and counts the rest.
func TestRejectionNamesAtMostFivePatterns(t *testing.T) {
	p, _ := newPerms(t, nil, nil)
	pats := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}
	err := p.Check(context.Background(), Request{Permission: "edit", Patterns: pats}, nil)
	if err == nil || !strings.Contains(err.Error(), `"p4", and 2 more needs approval`) || strings.Contains(err.Error(), "p5") {
		t.Fatalf("got %v", err)
	}
}

// TestExplicitAlwaysKeptWhenRulesAllowSome: when a tool sets Always on
// purpose, "always" saves those patterns even though rules already allow
// some of the request's patterns.
func TestExplicitAlwaysKeptWhenRulesAllowSome(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Always)}
	p, approvals := newPerms(t, map[string]Ruleset{DefaultAgent: {{"bash", "make a", Allow}}}, asker)
	req := Request{Permission: "bash", Patterns: []string{"make a", "make b"}, Always: []string{"make *"}}
	if err := p.Check(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := approvals.List("proj"), []Approval{{Permission: "bash", Pattern: "make *"}}; !slices.Equal(got, want) {
		t.Fatalf("saved %q, want %q", got, want)
	}
}

// TestSessionRulesApplyWithoutAgentRules: a Session's rules decide on their
// own for an agent that has no rules, however many there are.
func TestSessionRulesApplyWithoutAgentRules(t *testing.T) {
	p, _ := newPerms(t, nil, nil)
	extra := Ruleset{{"bash", "git *", Deny}, {"bash", "ls *", Allow}}
	if err := p.Check(context.Background(), Request{Permission: "bash", Patterns: []string{"ls -la"}}, extra); err != nil {
		t.Fatalf("session allow rule ignored: %v", err)
	}
	if err := p.Check(context.Background(), Request{Permission: "bash", Patterns: []string{"git push"}}, extra); errorType(t, err) != messages.ErrPermissionRejected || !strings.Contains(err.Error(), "denied by the rules") {
		t.Fatalf("session deny rule ignored: %v", err)
	}
}

// TestAskerFailuresSettle: while the call is live, an Asker that fails is
// unknown, and one that reports a cancellation or deadline of its own is
// aborted.
func TestAskerFailuresSettle(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want messages.ErrorType
	}{
		{errors.New("broker down"), messages.ErrUnknown},
		{context.Canceled, messages.ErrAborted},
		{context.DeadlineExceeded, messages.ErrAborted},
		{ErrAskCancelled, messages.ErrAborted},
	} {
		asker := &scriptedAsker{answer: func(Request) (Answer, error) { return Answer{}, tc.err }}
		p, _ := newPerms(t, nil, asker)
		err := p.Check(context.Background(), Request{Permission: "bash", Patterns: []string{"ls"}}, nil)
		if got := errorType(t, err); got != tc.want {
			t.Errorf("asker error %v: got %v, want type %q", tc.err, err, tc.want)
		}
	}
}
