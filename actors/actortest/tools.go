package actortest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// ToolFunc is a test tool: it returns output or an error (a
// *messages.Error keeps its type; anything else becomes tool.execution).
type ToolFunc func(ctx context.Context, call locations.ToolCall) (string, error)

// Tools is a locations.Tools made of Go functions, for tests.
type Tools struct {
	mu    sync.Mutex
	funcs map[string]ToolFunc
}

var _ locations.Tools = (*Tools)(nil)

// NewTools returns an empty tool set.
func NewTools() *Tools { return &Tools{funcs: map[string]ToolFunc{}} }

// Add registers a tool, advertised to the model as "test tool <name>"
// with the input schema {"type":"object"}; its input is not validated. A
// nil f, or a name the daemon's registry refuses (tools.ValidName), is an
// error of the test's own code: Add panics. For a tool whose schema is
// enforced, with permission rules and questions, use the daemon's
// registry instead (the Example_registry of this package shows how).
func (t *Tools) Add(name string, f ToolFunc) *Tools {
	if f == nil {
		panic("actortest: Tools.Add(" + strconv.Quote(name) + ") with a nil function")
	}
	if !tools.ValidName(name) {
		panic("actortest: Tools.Add(" + strconv.Quote(name) + "): a tool name is 1 to 64 characters from A-Z, a-z, 0-9, _ and -")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.funcs[name] = f
	return t
}

// Definitions implements locations.Tools.
func (t *Tools) Definitions(string) []llm.ToolDefinition {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []llm.ToolDefinition
	for name := range t.funcs {
		out = append(out, llm.ToolDefinition{Name: name, Description: "test tool " + name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Blocking returns a tool that sends its call's ID on started (give it
// room for one, or read it) and then holds the call until release is
// closed, answering "released", or until its context ends, failing with
// the context's error: a tool a test interrupts or lets go at a point of
// its choosing.
func Blocking(started chan<- string, release <-chan struct{}) ToolFunc {
	return func(ctx context.Context, c locations.ToolCall) (string, error) {
		select {
		case started <- c.CallID:
		case <-ctx.Done():
			// Interrupted before the test read started: a second call
			// must not hold its drain past the interrupt.
			return "", ctx.Err()
		}
		select {
		case <-release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// Execute implements locations.Tools.
func (t *Tools) Execute(ctx context.Context, call locations.ToolCall) locations.ToolResult {
	t.mu.Lock()
	f, ok := t.funcs[call.Name]
	t.mu.Unlock()
	if !ok {
		return locations.ToolResult{Err: &messages.Error{Type: messages.ErrToolExecution, Message: fmt.Sprintf("unknown tool %q", call.Name)}}
	}
	out, err := f(ctx, call)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return locations.ToolResult{Err: &messages.Error{Type: messages.ErrAborted, Message: "Tool execution interrupted: " + call.Name}}
		}
		return locations.ToolResult{Err: messages.AsError(err, messages.ErrToolExecution)}
	}
	return locations.ToolResult{Output: out}
}
