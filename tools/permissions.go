package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sessiond/sessiond/messages"
)

// Names of the permissions the built-in tools ask for.
const (
	PermissionRead              = "read"
	PermissionBash              = "bash"
	PermissionEdit              = "edit"
	PermissionExternalDirectory = "external_directory"
)

// BuiltinPermissions returns the permissions the built-in tools ask for,
// for a configuration that has no other tools to check its rules against.
func BuiltinPermissions() []string {
	return []string{PermissionRead, PermissionEdit, PermissionBash, PermissionExternalDirectory}
}

// Request is one permission question: may the call use Permission for
// every one of Patterns?
type Request struct {
	// ID identifies a pending question; the Pending broker assigns it.
	ID string `json:"id"`
	// SessionID, Agent, AssistantMessageID and CallID identify the asking
	// call; CallContext.Ask fills them in.
	SessionID          messages.SessionID `json:"sessionID"`
	Agent              string             `json:"agent,omitempty"`
	AssistantMessageID messages.MessageID `json:"assistantMessageID,omitempty"`
	CallID             string             `json:"callID,omitempty"`
	// Permission is the permission asked for, such as "bash".
	Permission string `json:"permission"`
	// Patterns are the resources the call touches, such as the command or
	// the canonical path. They are plain text that the wildcard patterns of
	// rules and saved approvals are matched against, never wildcards
	// themselves. Empty means "*".
	Patterns []string `json:"patterns"`
	// Always are the wildcard patterns (see Match) saved when the user
	// replies "always". Empty means every one of Patterns as a literal
	// (LiteralPattern): the approval covers exactly what the user was
	// shown, so approving "ls *.txt" does not approve every command that
	// starts with "ls " and ends with ".txt". A tool sets Always only to
	// approve more on purpose, such as a directory and everything in it.
	Always []string `json:"always,omitempty"`
	// Where is the directory the call acts in, when that matters to what
	// an approval covers (bash's workdir, relative to the Session's
	// directory when inside it). Rules still match Patterns alone, so a
	// deny rule holds in every directory; saved approvals are looked up,
	// and by default saved, for each pattern followed by "  # in <Where>",
	// so approving "rm -f *" in build/ does not approve it elsewhere.
	Where string `json:"where,omitempty"`
	// Metadata is optional detail for the user interface (a JSON object).
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// approvalPattern is what saved approvals are matched against for pat.
func (r Request) approvalPattern(pat string) string {
	if r.Where == "" {
		return pat
	}
	return pat + "  # in " + r.Where
}

// Asked returns the live permission.asked payload announcing r.
func (r Request) Asked() *messages.PermissionAsked {
	return &messages.PermissionAsked{
		SessionID:          r.SessionID,
		RequestID:          r.ID,
		Permission:         r.Permission,
		Patterns:           slices.Clone(r.Patterns),
		Where:              r.Where,
		Metadata:           r.Metadata,
		AssistantMessageID: r.AssistantMessageID,
		CallID:             r.CallID,
	}
}

// Reply is the user's answer to a permission question.
type Reply string

// Replies to permission questions.
const (
	// Once allows this call only.
	Once Reply = "once"
	// Always allows this call and saves an approval for the project.
	Always Reply = "always"
	// Reject refuses the call.
	Reject Reply = "reject"
)

// Valid reports whether r is a known reply.
func (r Reply) Valid() bool { return r == Once || r == Always || r == Reject }

// Answer is a reply with the user's optional message. A message
// accompanying a rejection reaches the model.
type Answer struct {
	Reply   Reply  `json:"reply"`
	Message string `json:"message,omitempty"`
}

// Asker puts a permission question to the user and waits for the answer.
// Ask blocks until an answer arrives or ctx ends; when ctx ends it returns
// ctx's error, and when the question is withdrawn (an interrupt) it returns
// an error matching ErrAskCancelled. Implementations must be safe for
// concurrent use; Pending is the in-process implementation.
type Asker interface {
	Ask(ctx context.Context, req Request) (Answer, error)
}

// PermissionsConfig configures Permissions.
type PermissionsConfig struct {
	// Project keys saved approvals, such as the project's canonical root.
	Project string
	// Agents maps agent names to their rules. An agent without rules asks
	// for everything.
	Agents map[string]Ruleset
	// Approvals stores "always" replies. Nil means a new MemoryApprovals.
	Approvals ApprovalStore
	// Asker asks the user. Nil means nobody can be asked, and every
	// request that needs asking is rejected.
	Asker Asker
}

// Permissions is the permission gate of one Location: agent rules, then
// saved project approvals, then the user. It is safe for concurrent use.
type Permissions struct {
	project   string
	agents    map[string]Ruleset
	approvals ApprovalStore
	asker     Asker
}

// NewPermissions validates cfg and returns its gate.
func NewPermissions(cfg PermissionsConfig) (*Permissions, error) {
	agents := make(map[string]Ruleset, len(cfg.Agents))
	for name, rules := range cfg.Agents {
		if err := rules.Validate(); err != nil {
			return nil, fmt.Errorf("tools: agent %q: %w", name, err)
		}
		agents[name] = slices.Clone(rules)
	}
	p := &Permissions{project: cfg.Project, agents: agents, approvals: cfg.Approvals, asker: cfg.Asker}
	if p.approvals == nil {
		p.approvals = &MemoryApprovals{}
	}
	return p, nil
}

// Agents returns the names of the agents with rules, sorted.
func (p *Permissions) Agents() []string {
	return slices.Sorted(maps.Keys(p.agents))
}

// Rules returns a copy of the rules of agent; an empty agent means
// DefaultAgent.
func (p *Permissions) Rules(agent string) Ruleset {
	return slices.Clone(p.agents[AgentOrDefault(agent)])
}

// Check decides req for its agent (DefaultAgent when empty) with the
// agent's rules followed by extra. A pattern denied by the rules rejects
// the request; patterns the rules send to ask and no saved approval covers
// go to the Asker as one question. Replies: once allows, always saves the
// request's Always patterns and then allows, reject rejects with the user's
// message. With Pending as the Asker, a reply to another question of the
// Session may answer this one (see Pending.Reply): always when the approval
// saved for it covers this request, evaluated as here, which then saves
// nothing of its own; reject, without a message. The error is nil or a
// *messages.Error: permission.rejected,
// aborted (ctx ended or the question was withdrawn), or unknown (the
// approval store failed).
func (p *Permissions) Check(ctx context.Context, req Request, extra Ruleset) error {
	if req.Permission == "" {
		return messages.Errorf(messages.ErrUnknown, "tools: permission request without a permission")
	}
	req.Agent = AgentOrDefault(req.Agent)
	if len(req.Patterns) == 0 {
		req.Patterns = []string{"*"}
	}
	derived := len(req.Always) == 0
	if derived {
		req.Always = make([]string, len(req.Patterns))
		for i, pat := range req.Patterns {
			req.Always[i] = LiteralPattern(req.approvalPattern(pat))
		}
	}
	if err := ctx.Err(); err != nil {
		return aborted(req)
	}
	rules := concat(p.agents[req.Agent], extra)
	unapproved, err := p.evaluate(ctx, req, rules)
	if err != nil {
		return err
	}
	if len(unapproved) == 0 {
		return nil
	}
	if derived && len(unapproved) < len(req.Patterns) {
		// Ask only for what rules and saved approvals leave open: "always"
		// then saves exactly what the user was shown.
		req.Patterns = unapproved
		req.Always = req.Always[:0]
		for _, pat := range unapproved {
			req.Always = append(req.Always, LiteralPattern(req.approvalPattern(pat)))
		}
	}
	return p.ask(ctx, req, rules)
}

// evaluate returns the patterns of req that rules send to ask and no saved
// approval covers. The error is a *messages.Error: permission.rejected when
// rules deny a pattern, aborted when ctx ended while the approvals were
// read, unknown when the approval store failed.
func (p *Permissions) evaluate(ctx context.Context, req Request, rules Ruleset) ([]string, error) {
	var pending []string
	for _, pat := range req.Patterns {
		r, matched := rules.Find(req.Permission, pat)
		switch {
		case matched && r.Action == Deny:
			return nil, messages.Errorf(messages.ErrPermissionRejected,
				"permission %s for %q is denied by the rules of agent %s (rule: %s); do not retry this call",
				req.Permission, pat, req.Agent, r)
		case matched && r.Action == Allow:
		default:
			pending = append(pending, pat)
		}
	}
	var unapproved []string
	for _, pat := range pending {
		ok, err := p.approvals.Approved(ctx, p.project, req.Permission, req.approvalPattern(pat))
		if err != nil {
			if ctx.Err() != nil {
				return nil, aborted(req)
			}
			return nil, messages.Errorf(messages.ErrUnknown, "checking saved approvals for %s: %v", req.Permission, err)
		}
		if !ok {
			unapproved = append(unapproved, pat)
		}
	}
	return unapproved, nil
}

// grant is what a question asked through Permissions carries besides the
// Request: how to save the approval an "always" reply gives, and how to
// tell whether rules and saved approvals now allow the request without
// asking. Pending uses it to apply an "always" reply before anything else
// happens, and to settle the other questions of the Session the saved
// approval covers.
type grant struct {
	// project keys the approvals the gate saves and reads.
	project string
	// save saves the request's Always patterns.
	save func() error
	// covered re-evaluates the request as Check did: every pattern allowed
	// by the rules or covered by a saved approval.
	covered func() bool

	once sync.Once
	err  error
}

// apply saves the approval once, however often it is called, and returns
// the outcome of that one save.
func (g *grant) apply() error {
	g.once.Do(func() { g.err = g.save() })
	return g.err
}

// coveredAlready marks the approval as in place without saving anything:
// the request is answered by an approval saved for another question.
func (g *grant) coveredAlready() { g.once.Do(func() {}) }

// granter is an Asker that takes a question's grant along (Pending).
type granter interface {
	askGranted(ctx context.Context, req Request, g *grant) (Answer, error)
}

// ask puts req, which rules evaluated to ask, to the Asker and settles the
// answer.
func (p *Permissions) ask(ctx context.Context, req Request, rules Ruleset) error {
	if p.asker == nil {
		return messages.Errorf(messages.ErrPermissionRejected,
			"permission %s for %s needs approval, but nobody can be asked here; do not retry this call", req.Permission, quoteList(req.Patterns))
	}
	// The user's answer is saved even when the call was cancelled
	// meanwhile (an interrupt racing the reply): the reply was accepted,
	// and the approval is theirs, not the call's.
	saveCtx := context.WithoutCancel(ctx)
	g := &grant{
		project: p.project,
		save:    func() error { return p.approvals.Save(saveCtx, p.project, req.Permission, req.Always) },
		covered: func() bool {
			left, err := p.evaluate(ctx, req, rules)
			return err == nil && len(left) == 0
		},
	}
	var ans Answer
	var err error
	if ga, ok := p.asker.(granter); ok {
		ans, err = ga.askGranted(ctx, req, g)
	} else {
		ans, err = p.asker.Ask(ctx, req)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrAskCancelled) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return aborted(req)
		}
		return messages.Errorf(messages.ErrUnknown, "asking for permission %s: %v", req.Permission, err)
	}
	switch ans.Reply {
	case Once:
		// A reply can win the race with an interrupt (Pending honours it):
		// the call is cancelled all the same, and must not start its
		// work, a command that the settled call would not record.
		if ctx.Err() != nil {
			return aborted(req)
		}
		return nil
	case Always:
		// Pending saved the approval already when it took the reply (apply
		// then reports that save), or saved nothing because an approval
		// saved for another question covers this one.
		if err := g.apply(); err != nil {
			return messages.Errorf(messages.ErrUnknown, "saving the approval of %s: %v", req.Permission, err)
		}
		if ctx.Err() != nil {
			return aborted(req)
		}
		return nil
	case Reject:
		if msg := strings.TrimSpace(ans.Message); msg != "" {
			return errors.Join(messages.Errorf(messages.ErrPermissionRejected,
				"the user rejected permission %s for %s with the message: %s", req.Permission, quoteList(req.Patterns), msg),
				ErrUserRejected)
		}
		return errors.Join(messages.Errorf(messages.ErrPermissionRejected,
			"the user rejected permission %s for %s; do not retry this call unless the user asks you to", req.Permission, quoteList(req.Patterns)),
			ErrUserRejected)
	}
	return messages.Errorf(messages.ErrPermissionRejected, "permission %s: unknown reply %q", req.Permission, ans.Reply)
}

// externalDirectoryRequest asks for tool to use dir, a canonical directory
// outside the Location. The pattern asked about is "<dir>/*"; "always"
// approves dir and everything beneath it, but only dir: any wildcard
// characters in its name are escaped.
func externalDirectoryRequest(dir, tool string) Request {
	prefix := strings.TrimSuffix(dir, "/")
	return Request{
		Permission: PermissionExternalDirectory,
		Patterns:   []string{prefix + "/*"},
		Always:     []string{LiteralPattern(prefix) + "/*"},
		Metadata:   mustJSON(map[string]string{"directory": dir, "tool": tool}),
	}
}

func aborted(req Request) error {
	return messages.Errorf(messages.ErrAborted, "permission request for %s %s was cancelled", req.Permission, quoteList(req.Patterns))
}

// quoteList formats patterns for a message.
func quoteList(patterns []string) string {
	const max = 5
	q := make([]string, 0, max+1)
	for i, p := range patterns {
		if i == max {
			q = append(q, fmt.Sprintf("and %d more", len(patterns)-max))
			break
		}
		q = append(q, fmt.Sprintf("%q", p))
	}
	return strings.Join(q, ", ")
}
