package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Definition is what the model sees of a tool, plus the permission key the
// registry uses to decide whether to advertise it.
type Definition struct {
	// Name is the tool name the model calls: 1 to 64 characters from
	// [A-Za-z0-9_-].
	Name string `json:"name"`
	// Description tells the model what the tool does and when to use it.
	// Required.
	Description string `json:"description"`
	// InputSchema is the JSON schema (draft 2020-12) of the tool's input.
	// Its top level must be an object schema.
	InputSchema json.RawMessage `json:"inputSchema"`
	// MetadataSchema optionally constrains Result.Metadata. The registry
	// validates the metadata of every successful call against it.
	MetadataSchema json.RawMessage `json:"metadataSchema,omitempty"`
	// Permission is the permission key of the tool's calls, such as "edit"
	// for apply_patch. Empty means the tool's Name. A tool that an agent's
	// rules deny for every pattern is not advertised to that agent, and a
	// call of it is refused.
	Permission string `json:"permission,omitempty"`
	// AsksItself says that the tool asks for every call itself
	// (CallContext.Ask with the patterns the call touches), as the
	// built-ins do. Otherwise the registry asks before each call runs, for
	// Permission and pattern "*" with the call's input shown: the rules
	// and saved approvals decide, and the user where they say ask. So a
	// tool of one's own never runs unchecked, and one that knows what a
	// call touches asks about exactly that.
	AsksItself bool `json:"asksItself,omitempty"`
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
// h. It is the usual way to write a tool. h must not be nil: Register
// refuses such a tool.
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

// runnable reports whether the tool has a handler to run: Register
// refuses one made without.
func (t *typedTool[In]) runnable() bool { return t.h != nil }

// Run decodes input and calls the handler.
func (t *typedTool[In]) Run(ctx context.Context, call *CallContext, input json.RawMessage) (Result, error) {
	var in In
	err := json.Unmarshal(input, &in)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && strings.HasPrefix(te.Value, "number") {
		// JSON Schema counts 1.0 and 1e2 as integers, so validation let
		// them through, and models do write them; Go's decoder refuses
		// them for integer fields. Decode again with every integral
		// number written as an integer.
		if fixed, ok := integralNumbers(input); ok {
			in = *new(In)
			err = json.Unmarshal(fixed, &in)
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("invalid input for %s: %v", t.def.Name, err)
	}
	return t.h(ctx, call, in)
}

// integralNumbers returns input with each number that has an integral
// value within ±2^53 (where a float64 holds every integer exactly) but is
// written with a fraction or an exponent
// rewritten as a plain integer, and whether it changed any.
func integralNumbers(input []byte) ([]byte, bool) {
	d := json.NewDecoder(bytes.NewReader(input))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case json.Number:
			if !strings.ContainsAny(string(x), ".eE") {
				return x
			}
			f, err := strconv.ParseFloat(string(x), 64)
			// Beyond 2^53 a float64 no longer holds every integer exactly.
			if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				return x
			}
			changed = true
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		return v
	}
	v = walk(v)
	if !changed {
		return nil, false
	}
	out, err := json.Marshal(v)
	return out, err == nil
}
