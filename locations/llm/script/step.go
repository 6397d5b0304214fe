package script

import (
	"encoding/json"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// stepKind says which fields of a Step are set.
type stepKind uint8

const (
	stepText stepKind = iota + 1
	stepReasoning
	stepToolCall
	stepFinish
	stepFail
	stepGate
	stepDelay
	stepEvent
	stepToolResult
)

// Step is one scripted piece of a response: a text or reasoning block, a tool
// call, a finish, an injected error, a gate, a delay or a raw event. Steps
// are immutable values built by the functions of this package; the methods
// that refine a Step return a modified copy.
type Step struct {
	kind stepKind
	// text is the whole text of a text or reasoning block; chunks, when
	// set, are its exact deltas instead.
	text   string
	chunks []string
	// partial leaves a text block open (no end event).
	partial  bool
	metadata json.RawMessage
	callID   string
	name     string
	input    json.RawMessage
	executed bool
	// failed marks a hosted result as an error.
	failed bool
	finish string
	usage  messages.Tokens
	err    *llm.Error
	gate   *Gate
	delay  time.Duration
	event  llm.Event
}

// Text returns a step that streams one text block: a start event, the text
// split into deltas of the Provider's chunk size, and an end event.
func Text(s string) Step { return Step{kind: stepText, text: s} }

// TextChunks returns a step that streams one text block whose deltas are
// exactly chunks, for tests that pin delta boundaries.
func TextChunks(chunks ...string) Step {
	return Step{kind: stepText, chunks: append([]string(nil), chunks...)}
}

// PartialText returns a step that opens a text block and streams s as deltas
// but never ends the block, as a provider does when its connection breaks
// mid-answer. Follow it with Fail to script a mid-stream failure.
func PartialText(s string) Step { return Step{kind: stepText, text: s, partial: true} }

// Reasoning returns a step that streams one reasoning block like Text does.
// Use WithMetadata to attach provider continuation state (for instance a
// thinking signature) to its end event.
func Reasoning(s string) Step { return Step{kind: stepReasoning, text: s} }

// ToolCall returns a step that streams the input of one tool call
// (tool-input start, deltas and end) and then emits the complete call with
// the given call ID, tool name and JSON input. The input is passed through
// unchecked, so tests may script malformed arguments on purpose.
func ToolCall(callID, name, input string) Step {
	return Step{kind: stepToolCall, callID: callID, name: name, input: json.RawMessage(input)}
}

// Finish returns a step that ends the stream with a step-finish event
// carrying reason and usage. An empty reason means the default a response
// gets without Finish: tool-calls when the response scripted a local tool
// call, else stop. Steps after Finish are never played. Like ToolCall's
// input, reason is passed through unchecked (a JSON script's is checked),
// so a test may script one no adapter sends.
func Finish(reason string, usage messages.Tokens) Step {
	return Step{kind: stepFinish, finish: reason, usage: usage}
}

// Fail returns a step that ends the stream with err as the final error,
// after whatever output the earlier steps produced. Fail keeps a copy of
// err and each stream yields its own copy. A nil err fails with
// provider.unknown. Steps after Fail
// are never played.
func Fail(err *llm.Error) Step {
	if err == nil {
		return Step{kind: stepFail, err: llm.Errorf(messages.ErrProviderUnknown, "script: Fail(nil)")}
	}
	e := *err
	return Step{kind: stepFail, err: &e}
}

// Hold returns a step that holds the stream open at gate g until g is
// released. A stream held at a gate whose context is cancelled ends with an
// aborted *llm.Error.
func Hold(g *Gate) Step { return Step{kind: stepGate, gate: g} }

// Delay returns a step that pauses the stream for d, or until its context is
// cancelled. It exists for demos that want visible streaming; tests should
// use a Gate to synchronise.
func Delay(d time.Duration) Step { return Step{kind: stepDelay, delay: d} }

// Event returns a step that emits ev verbatim, for tests of how a consumer
// handles streams no well-behaved adapter produces (for instance a second
// text start before the first ends).
func Event(ev llm.Event) Step { return Step{kind: stepEvent, event: cloneEvent(ev)} }

// WithMetadata returns a copy of s carrying the JSON provider metadata meta.
// It attaches to the end event of a text or reasoning block, to a tool
// call and to a hosted result; other steps ignore it.
func (s Step) WithMetadata(meta string) Step {
	s.metadata = json.RawMessage(meta)
	return s
}

// ProviderExecuted returns a copy of the tool-call step s marked as a
// provider-hosted call (Event.Executed). Hosted calls do not make the
// default finish reason tool-calls.
func (s Step) ProviderExecuted() Step {
	s.executed = true
	return s
}

// HostedResult returns a step that settles the provider-hosted call callID
// (a ToolCall step marked ProviderExecuted, earlier in the response) with
// output: a tool-result event. Use WithMetadata to attach the provider's
// result state, which the runner stores apart from the call's.
func HostedResult(callID, name, output string) Step {
	return Step{kind: stepToolResult, callID: callID, name: name, text: output}
}

// HostedError is HostedResult for a hosted call the provider reports as
// failed (the event's IsError).
func HostedError(callID, name, output string) Step {
	s := HostedResult(callID, name, output)
	s.failed = true
	return s
}

// localToolCall reports whether s is a tool call the consumer must execute.
func (s Step) localToolCall() bool {
	switch s.kind {
	case stepToolCall:
		return !s.executed
	case stepEvent:
		return s.event.Kind == llm.ToolCall && !s.event.Executed
	}
	return false
}

// cloneEvent returns ev with its byte slices copied.
func cloneEvent(ev llm.Event) llm.Event {
	ev.Input = cloneRaw(ev.Input)
	ev.ProviderMetadata = cloneRaw(ev.ProviderMetadata)
	return ev
}

// cloneRaw copies b, keeping nil as nil.
func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage{}, b...)
}
