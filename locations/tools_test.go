package locations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// fakeApprovals is an ApprovalStore holding one project's approvals.
type fakeApprovals struct {
	all map[string][]string
	err error
}

func (f fakeApprovals) SaveApproval(context.Context, string, string, []string) error { return f.err }

func (f fakeApprovals) Approvals(context.Context, string) (map[string][]string, error) {
	return f.all, f.err
}

// TestApprovalsMatchSavedWildcards: a saved approval covers a request when
// both its permission and one of its patterns match as wildcards, whatever
// other permissions the project has approvals for.
func TestApprovalsMatchSavedWildcards(t *testing.T) {
	all := map[string][]string{"bash": {"ls *", "git status"}, "edit*": {"src/*"}}
	for i := range 20 {
		all[fmt.Sprintf("other%d", i)] = []string{"*"}
	}
	a := NewApprovals(fakeApprovals{all: all})
	for _, tc := range []struct {
		permission, pattern string
		want                bool
	}{
		{"bash", "ls -la", true},
		{"bash", "git status", true},
		{"bash", "rm -rf /", false},
		{"edit", "src/a.go", true},
		{"edit", "docs/a.md", false},
		{"read", "src/a.go", false},
	} {
		got, err := a.Approved(context.Background(), "/p", tc.permission, tc.pattern)
		if err != nil || got != tc.want {
			t.Errorf("Approved(%s, %q) = %v, %v; want %v", tc.permission, tc.pattern, got, err, tc.want)
		}
	}
}

// TestApprovalsStoreFailureIsReported: a failing store is an error, never
// an approval.
func TestApprovalsStoreFailureIsReported(t *testing.T) {
	boom := errors.New("boom")
	a := NewApprovals(fakeApprovals{all: map[string][]string{"*": {"*"}}, err: boom})
	if ok, err := a.Approved(context.Background(), "/p", "bash", "ls"); ok || !errors.Is(err, boom) {
		t.Fatalf("Approved = %v, %v; want false, boom", ok, err)
	}
	if err := a.Save(context.Background(), "/p", "bash", []string{"ls"}); !errors.Is(err, boom) {
		t.Fatalf("Save = %v; want boom", err)
	}
}

// rejectAsker answers every permission question with reject.
type rejectAsker struct{}

func (rejectAsker) Ask(context.Context, tools.Request) (tools.Answer, error) {
	return tools.Answer{Reply: tools.Reject}, nil
}

// newProbeTools returns the runner's view of a registry holding one tool,
// probe, that asks for permission "probe" when its input says so.
func newProbeTools(t *testing.T) Tools {
	t.Helper()
	perms, err := tools.NewPermissions(tools.PermissionsConfig{Project: "/p", Asker: rejectAsker{}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tools.Config{Root: t.TempDir(), Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		Ask bool `json:"ask"`
	}
	probe := tools.NewTool(tools.Definition{Name: "probe", Description: "probes", AsksItself: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"ask":{"type":"boolean"}}}`)},
		func(ctx context.Context, call *tools.CallContext, in in) (tools.Result, error) {
			if in.Ask {
				if err := call.Ask(ctx, tools.Request{Permission: "probe", Patterns: []string{"x"}}); err != nil {
					return tools.Result{}, err
				}
			}
			return tools.Result{Output: "done", Metadata: json.RawMessage(`{"n":1}`)}, nil
		})
	if err := reg.Register(reg.NewScope("test"), probe); err != nil {
		t.Fatal(err)
	}
	return NewTools(reg)
}

// TestToolsExecuteSettlesResults: the runner's view of the registry passes
// a result through, and marks a call the user refused as halting, unlike
// other failures.
func TestToolsExecuteSettlesResults(t *testing.T) {
	ts := newProbeTools(t)
	if defs := ts.Definitions(""); len(defs) != 1 || defs[0].Name != "probe" || defs[0].Description != "probes" || len(defs[0].InputSchema) == 0 {
		t.Fatalf("definitions %+v", defs)
	}
	ctx := context.Background()
	call := ToolCall{SessionID: "ses_1", CallID: "c1", Name: "probe", Input: json.RawMessage(`{}`)}
	if res := ts.Execute(ctx, call); res.Err != nil || res.Halt || res.Output != "done" || string(res.Metadata) != `{"n":1}` {
		t.Fatalf("plain call: %+v", res)
	}
	call.Input = json.RawMessage(`{"ask":true}`)
	if res := ts.Execute(ctx, call); res.Err == nil || res.Err.Type != messages.ErrPermissionRejected || !res.Halt {
		t.Fatalf("rejected call: %+v", res)
	}
	call.Name = "missing"
	if res := ts.Execute(ctx, call); res.Err == nil || res.Halt {
		t.Fatalf("unknown tool: %+v", res)
	}
}
