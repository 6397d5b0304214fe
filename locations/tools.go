package locations

import (
	"context"
	"errors"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// registryTools adapts a tools.Registry to the runner's Tools interface.
type registryTools struct {
	reg *tools.Registry
}

// NewTools returns the runner's view of a Location's tool registry, which
// must not be nil (a Location without tools has a nil Services.Tools).
func NewTools(reg *tools.Registry) Tools { return registryTools{reg: reg} }

// Definitions implements Tools.
func (t registryTools) Definitions(agent string) []llm.ToolDefinition {
	defs := t.reg.Definitions(agent, nil)
	out := make([]llm.ToolDefinition, len(defs))
	for i, d := range defs {
		out[i] = llm.ToolDefinition{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema}
	}
	return out
}

// Execute implements Tools.
func (t registryTools) Execute(ctx context.Context, call ToolCall) ToolResult {
	res, err := t.reg.Execute(ctx, tools.Call{SessionID: call.SessionID, Agent: call.Agent,
		AssistantMessageID: call.AssistantMessageID, CallID: call.CallID, Name: call.Name, Input: call.Input})
	if err != nil {
		return ToolResult{Err: messages.AsError(err, messages.ErrToolExecution), Halt: errors.Is(err, tools.ErrUserRejected)}
	}
	return ToolResult{Output: res.Output, Metadata: res.Metadata}
}

// ApprovalStore is the durable side of saved permission approvals; the
// bbolt store implements it.
type ApprovalStore interface {
	SaveApproval(ctx context.Context, project, permission string, patterns []string) error
	Approvals(ctx context.Context, project string) (map[string][]string, error)
}

// storeApprovals adapts the durable store to tools.ApprovalStore. Saved
// permissions and patterns are wildcards, so lookup lists the project's
// approvals and matches them.
type storeApprovals struct{ st ApprovalStore }

// NewApprovals returns a tools.ApprovalStore backed by st.
func NewApprovals(st ApprovalStore) tools.ApprovalStore { return storeApprovals{st: st} }

// Approved implements tools.ApprovalStore.
func (a storeApprovals) Approved(ctx context.Context, project, permission, pattern string) (bool, error) {
	all, err := a.st.Approvals(ctx, project)
	if err != nil {
		return false, err
	}
	for perm, patterns := range all {
		if !tools.Match(perm, permission) {
			continue
		}
		for _, p := range patterns {
			if tools.Match(p, pattern) {
				return true, nil
			}
		}
	}
	return false, nil
}

// Save implements tools.ApprovalStore.
func (a storeApprovals) Save(ctx context.Context, project, permission string, patterns []string) error {
	return a.st.SaveApproval(ctx, project, permission, patterns)
}
