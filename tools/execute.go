package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
)

// Execute runs one call and settles it. On success it returns the tool's
// Result and a nil error; otherwise the error is or wraps a *messages.Error
// (read it with errors.As or messages.AsError; a user's rejection joins
// its reason to it):
//
//   - tool.execution: unknown or unavailable tool (the message lists the
//     available tools), input that is not JSON or violates the schema,
//     handler errors, and results that violate the output contract;
//   - permission.rejected: a rule denied the call or the user rejected it;
//   - aborted: ctx ended before or during the call;
//   - unknown: the handler panicked (the panic is recovered).
//
// Execute runs the handler on the calling goroutine and returns when it
// does; tools honour ctx, so cancelling ctx ends the call promptly.
func (r *Registry) Execute(ctx context.Context, call Call) (Result, error) {
	agent := AgentOrDefault(call.Agent)
	rules := concat(r.perms.Rules(agent), call.Rules)
	e, ok := r.lookup(call.Name)
	if !ok || rules.DeniesAll(e.def.permission()) {
		return Result{}, r.unknownTool(call.Name, agent, call.Rules, ok)
	}
	if ctx.Err() != nil {
		return Result{}, messages.Errorf(messages.ErrAborted, "tool %s was cancelled before it started", call.Name)
	}
	if err := r.rootUnmoved(); err != nil {
		return Result{}, err
	}
	input := call.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	doc, err := decodeJSON(input)
	if err != nil {
		return Result{}, messages.Errorf(messages.ErrToolExecution, "invalid input for tool %s: not valid JSON: %v", call.Name, err)
	}
	if err := e.input.Validate(doc); err != nil {
		return Result{}, messages.Errorf(messages.ErrToolExecution, "invalid input for tool %s: %s; fix the input to match the tool's schema and call it again", call.Name, describeValidation(err))
	}
	cc := &CallContext{
		SessionID:          call.SessionID,
		Agent:              agent,
		AssistantMessageID: call.AssistantMessageID,
		CallID:             call.CallID,
		Root:               r.paths.Root(),
		Paths:              r.paths,
		perms:              r.perms,
		rules:              call.Rules,
	}
	if !e.def.AsksItself {
		req := Request{Permission: e.def.permission(), Metadata: askInput(input)}
		if err := cc.Ask(ctx, req); err != nil {
			return Result{}, settleError(ctx, call.Name, err)
		}
	}
	res, err := run(ctx, e.tool, cc, input)
	if err != nil {
		return Result{}, settleError(ctx, call.Name, err)
	}
	if err := e.checkResult(res); err != nil {
		return Result{}, err
	}
	return res, nil
}

// askInput is the metadata of the question the registry asks for a tool
// that does not ask itself: the call's input, which is what the user
// decides on.
func askInput(input json.RawMessage) json.RawMessage {
	b := make([]byte, 0, len(input)+10)
	b = append(b, `{"input":`...)
	b = append(b, input...)
	return append(b, '}')
}

// run calls the tool, turning a panic into a typed unknown error.
func run(ctx context.Context, t Tool, cc *CallContext, input json.RawMessage) (res Result, err error) {
	defer func() {
		if v := recover(); v != nil {
			res = Result{}
			err = &panicError{value: v}
		}
	}()
	return t.Run(ctx, cc, input)
}

// panicError carries a recovered panic out of run.
type panicError struct {
	value any
}

// Error implements error.
func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// settleError maps a handler error to a typed tool error.
func settleError(ctx context.Context, name string, err error) error {
	var p *panicError
	if errors.As(err, &p) {
		return messages.Errorf(messages.ErrUnknown, "tool %s panicked: %v", name, p.value)
	}
	var typed *messages.Error
	if errors.As(err, &typed) {
		if errors.Is(err, ErrUserRejected) {
			return errors.Join(typed, ErrUserRejected) // the runner stops on it
		}
		return typed
	}
	if ctx.Err() != nil {
		return messages.Errorf(messages.ErrAborted, "tool %s was cancelled", name)
	}
	return messages.Errorf(messages.ErrToolExecution, "%s", err.Error())
}

// checkResult validates a result against the output contract.
func (e *entry) checkResult(res Result) error {
	name := e.def.Name
	if !utf8.ValidString(res.Output) {
		return messages.Errorf(messages.ErrToolExecution, "tool %s returned output that is not valid UTF-8", name)
	}
	if len(res.Metadata) == 0 {
		if e.metadata != nil {
			return messages.Errorf(messages.ErrToolExecution, "tool %s returned no metadata, but its definition requires it", name)
		}
		return nil
	}
	doc, err := decodeJSON(res.Metadata)
	if err != nil {
		return messages.Errorf(messages.ErrToolExecution, "tool %s returned metadata that is not valid JSON: %v", name, err)
	}
	if e.metadata != nil {
		if err := e.metadata.Validate(doc); err != nil {
			return messages.Errorf(messages.ErrToolExecution, "tool %s returned invalid metadata: %s", name, describeValidation(err))
		}
	}
	return nil
}

// unknownTool builds the error for a call of a tool that does not exist or
// is not available to the agent.
func (r *Registry) unknownTool(name, agent string, session Ruleset, exists bool) error {
	defs := r.Definitions(agent, session)
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	available := "none"
	if len(names) > 0 {
		available = strings.Join(names, ", ")
	}
	if exists {
		return messages.Errorf(messages.ErrToolExecution, "tool %q is not available to agent %s; available tools: %s", name, agent, available)
	}
	return messages.Errorf(messages.ErrToolExecution, "unknown tool %q; available tools: %s", name, available)
}

// rootUnmoved refuses to run a tool when the Location directory no longer
// resolves to the canonical root the registry was built on: a symbolic
// link swapped in since (the directory renamed away and a link to
// elsewhere put at its path) would take every path the tools resolve by
// name outside it, and outside the roots the daemon allows, which were
// checked when the Location was set up. (A swap between this check and a
// tool's own open is not caught.)
func (r *Registry) rootUnmoved() error {
	root := r.paths.Root()
	real, err := filepath.EvalSymlinks(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return messages.Errorf(messages.ErrToolExecution, "the Session's directory %s does not exist: no tool runs until it is restored, or the Session moved", root)
	case err != nil:
		return messages.Errorf(messages.ErrToolExecution, "the Session's directory %s cannot be resolved (%v): no tool runs until it is restored, or the Session moved", root, err)
	case real != root:
		return messages.Errorf(messages.ErrToolExecution, "the Session's directory %s now resolves to %s (a symbolic link changed since its Location was set up): no tool runs there until it is restored, or the Session moved", root, real)
	}
	return nil
}
