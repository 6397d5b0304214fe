package tools

import (
	"context"
	"encoding/json"
	"fmt"
)

// Definition is what the model sees of a tool, plus the permission key the
// registry uses to decide whether to advertise it.
type Definition struct {
	// Name is the tool name the model calls: 1 to 64 characters from
	// [A-Za-z0-9_-].
	Name string `json:"name"`
	// Description tells the model what the tool does and when to use it.
	Description string `json:"description"`
	// InputSchema is the JSON schema (draft 2020-12) of the tool's input.
	// Its top level must be an object schema.
	InputSchema json.RawMessage `json:"inputSchema"`
	// MetadataSchema optionally constrains Result.Metadata. The registry
	// validates the metadata of every successful call against it.
	MetadataSchema json.RawMessage `json:"metadataSchema,omitempty"`
	// Permission is the permission the tool's calls are checked against,
	// such as "edit" for apply_patch. Empty means the tool's Name. A tool
	// that an agent's rules deny for every pattern is not advertised to
	// that agent.
	Permission string `json:"permission,omitempty"`
}

// permission returns the permission key of the definition.
func (d Definition) permission() string {
	if d.Permission != "" {
		return d.Permission
	}
	return d.Name
}

// clone returns a copy of d that shares no memory with it.
func (d Definition) clone() Definition {
	d.InputSchema = append(json.RawMessage(nil), d.InputSchema...)
	if d.MetadataSchema != nil {
		d.MetadataSchema = append(json.RawMessage(nil), d.MetadataSchema...)
	}
	return d
}

// Result is the successful outcome of a tool call.
type Result struct {
	// Title is a short human-readable summary for user interfaces.
	Title string `json:"title,omitempty"`
	// Output is what the model sees. It must be valid UTF-8.
	Output string `json:"output"`
	// Metadata is optional structured detail for clients, a JSON value
	// (an object by convention). The model does not see it.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Tool is one callable tool. Implementations must be safe for concurrent
// use: the registry may run many calls of one tool at once.
type Tool interface {
	// Definition describes the tool. It is read once, at registration.
	Definition() Definition
	// Run executes one call. Input has already been validated against the
	// definition's input schema. Run must honour ctx: when it is cancelled
	// Run returns promptly, leaving no work behind. A returned
	// *messages.Error keeps its type; any other error becomes a
	// tool.execution error whose message the model sees.
	Run(ctx context.Context, call *CallContext, input json.RawMessage) (Result, error)
}

// Handler runs one call of a typed tool built by NewTool.
type Handler[In any] func(ctx context.Context, call *CallContext, in In) (Result, error)

// NewTool returns a Tool that decodes its validated input into In and calls
// h. It is the usual way to write a tool.
func NewTool[In any](def Definition, h Handler[In]) Tool {
	return &typedTool[In]{def: def, h: h}
}

// typedTool adapts a Handler to Tool.
type typedTool[In any] struct {
	def Definition
	h   Handler[In]
}

// Definition returns the definition given to NewTool.
func (t *typedTool[In]) Definition() Definition { return t.def }

// Run decodes input and calls the handler.
func (t *typedTool[In]) Run(ctx context.Context, call *CallContext, input json.RawMessage) (Result, error) {
	var in In
	if err := json.Unmarshal(input, &in); err != nil {
		return Result{}, fmt.Errorf("invalid input for %s: %v", t.def.Name, err)
	}
	return t.h(ctx, call, in)
}
