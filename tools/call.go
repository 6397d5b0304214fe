package tools

import (
	"context"
	"encoding/json"

	"github.com/sessiond/sessiond/messages"
)

// DefaultAgent is the agent a Session without an agent runs as. Tool
// materialization and permission evaluation both use it, so a Session never
// sees build behaviour while its permissions silently evaluate an empty
// policy.
const DefaultAgent = "build"

// AgentOrDefault returns agent, or DefaultAgent when agent is empty.
func AgentOrDefault(agent string) string {
	if agent == "" {
		return DefaultAgent
	}
	return agent
}

// Call is one tool call to execute, as the runner knows it.
type Call struct {
	// SessionID is the Session making the call.
	SessionID messages.SessionID
	// Agent is the Session's agent; empty means DefaultAgent.
	Agent string
	// AssistantMessageID is the assistant message the call belongs to.
	AssistantMessageID messages.MessageID
	// CallID is the provider's call ID, unique within the assistant message.
	CallID string
	// Name is the tool name the model called.
	Name string
	// Input is the JSON input the model produced. Empty means {}.
	Input json.RawMessage
	// Rules are optional Session-level permission rules evaluated after the
	// agent's rules (so they take precedence).
	Rules Ruleset
}

// CallContext is what a running tool knows about its call and what it may
// do besides its own work: resolve paths inside the Location and ask for
// permission.
type CallContext struct {
	// SessionID is the Session making the call.
	SessionID messages.SessionID
	// Agent is the effective agent, never empty.
	Agent string
	// AssistantMessageID is the assistant message the call belongs to.
	AssistantMessageID messages.MessageID
	// CallID is the provider's call ID.
	CallID string
	// Root is the canonical Location directory.
	Root string
	// Paths resolves tool paths relative to Root or a named reference.
	Paths *Resolver

	perms *Permissions
	rules Ruleset
}

// Ask checks one permission request against the agent's rules, saved
// approvals and, when needed, the user. The call's identity (Session,
// agent, assistant message, call ID) is filled in. It returns nil when the
// call may proceed, an error of type permission.rejected when it may not,
// and one of type aborted when ctx ends first: each is or wraps a
// *messages.Error (errors.As, messages.TypeOf).
func (c *CallContext) Ask(ctx context.Context, req Request) error {
	req.SessionID = c.SessionID
	req.Agent = c.Agent
	req.AssistantMessageID = c.AssistantMessageID
	req.CallID = c.CallID
	return c.perms.Check(ctx, req, c.rules)
}
