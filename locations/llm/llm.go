package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/sessiond/sessiond/messages"
)

// Provider streams one model request. Implementations must be safe for
// concurrent use by many Sessions.
type Provider interface {
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}

// ToolChoice constrains tool use for a request.
type ToolChoice string

// Tool choices. ToolChoiceNone is sent on the final step of an agent's
// allowance.
const (
	ToolChoiceAuto ToolChoice = "auto"
	ToolChoiceNone ToolChoice = "none"
)

// Request is one provider-neutral model request, assembled by the runner from
// projected Session history. Adapters lower it to their wire format.
type Request struct {
	// Model is the model to call; adapters use Model.ID on the wire.
	Model messages.ModelRef
	// System holds system text parts in order (agent prompt, instruction
	// baseline, reminders).
	System []string
	// Messages is the chronological conversation.
	Messages []Message
	// Tools are the definitions advertised for this step; empty on the final
	// step.
	Tools []ToolDefinition
	// ToolChoice is auto unless the runner forbids tools for this step.
	ToolChoice ToolChoice
	// HostedTools names the provider-hosted tools to enable (for instance
	// "web_search"), from the model's catalog entry. The provider runs them
	// and streams each call (ToolCall with Executed) and its ToolResult.
	// They are declared on the final step too, where ToolChoiceNone forbids
	// their use, because history may hold earlier hosted calls.
	HostedTools []string
	// MaxOutputTokens caps the response; 0 means the model's output limit.
	MaxOutputTokens int
	// CacheKey is a stable per-Session prompt-cache key for providers that
	// support one.
	CacheKey string
}

// Role is the author of a Message.
type Role string

// Roles. RoleSystem is a chronological system message inside history (for
// instance an instruction update), not the leading system prompt.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one turn of the conversation.
type Message struct {
	Role  Role
	Parts []Part
}

// PartKind says which fields of a Part are set.
type PartKind string

// Part kinds.
const (
	PartText       PartKind = "text"
	PartReasoning  PartKind = "reasoning"
	PartFile       PartKind = "file"
	PartToolCall   PartKind = "tool-call"
	PartToolResult PartKind = "tool-result"
)

// Part is a piece of a Message.
type Part struct {
	Kind PartKind
	// Text is the text of a text or reasoning part.
	Text string
	// File is set for PartFile.
	File *messages.File
	// CallID, Name and Input describe a tool call; CallID and Name also
	// identify the call a tool result answers.
	CallID string
	Name   string
	Input  json.RawMessage
	// Output and IsError are a tool result.
	Output  string
	IsError bool
	// Executed marks a provider-hosted call or its result. The runner
	// sends both in the assistant message, call then result, and only to
	// the model that produced them (with their ProviderMetadata: the call's
	// on the call, the result's on the result); for any other model it
	// lowers them to text.
	Executed bool
	// ProviderMetadata is the adapter's own opaque continuation state (for
	// instance an Anthropic thinking signature). The runner sets it only when
	// the historical assistant model equals the request model.
	ProviderMetadata json.RawMessage
}

// ToolDefinition advertises one tool to the model.
type ToolDefinition struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object.
	InputSchema json.RawMessage
}

// EventKind says which normalized stream event an Event is.
type EventKind uint8

// Normalized stream events.
const (
	TextStart EventKind = iota + 1
	TextDelta
	TextEnd
	ReasoningStart
	ReasoningDelta
	ReasoningEnd
	ToolInputStart
	ToolInputDelta
	ToolInputEnd
	// ToolCall is one complete tool call with JSON arguments.
	ToolCall
	// StepFinish ends the stream with a finish reason and usage.
	StepFinish
	// ToolResult settles a provider-hosted call (a ToolCall with Executed
	// set, earlier in the same stream) with the provider's result: Output
	// and IsError, and in ProviderMetadata what the adapter needs to send
	// the result back to the same model.
	ToolResult
)

var kindNames = [...]string{"", "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta",
	"reasoning-end", "tool-input-start", "tool-input-delta", "tool-input-end", "tool-call", "step-finish", "tool-result"}

// String returns the kind's wire-style name.
func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// ToolInput returns the complete arguments of a tool call as JSON. Empty
// arguments become {} (models emit nothing for tools without parameters);
// valid JSON is returned as is; anything else, which only a malformed model
// output produces, becomes a JSON string holding the raw text. The call is
// stored and run with what it returns, so the tool's input validation
// reports to the model what it sent, and history keeps it. Valid input is
// returned as it is, not copied.
func ToolInput(raw []byte) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}")
	}
	if json.Valid(raw) {
		return raw
	}
	b, _ := json.Marshal(string(raw)) // a string always marshals
	return b
}

// Finish reasons of a StepFinish.
const (
	FinishStop          = "stop"
	FinishToolCalls     = "tool-calls"
	FinishLength        = "length"
	FinishContentFilter = "content-filter"
	FinishOther         = "other"
	// FinishPause: the provider paused a long turn of hosted tool use
	// (Anthropic's pause_turn); sending the response back continues it,
	// so the runner takes another step, as after local tool calls.
	FinishPause = "pause"
)

// Event is one normalized stream event. Which fields are set depends on
// Kind.
type Event struct {
	Kind EventKind
	// ID is the provider's block ID for text, reasoning and tool-input
	// events; internal only.
	ID string
	// Text is the delta of a *Delta event.
	Text string
	// CallID and Name identify a tool input or tool call. CallID is
	// required and unique within the stream: the runner fails a stream
	// that sends a tool event without one, or a second call with one.
	CallID string
	Name   string
	// Input is the complete JSON arguments of a ToolCall, as ToolInput
	// normalizes them (the runner applies it too, for providers that do
	// not).
	Input json.RawMessage
	// Executed marks a provider-hosted tool call.
	Executed bool
	// Output and IsError are a ToolResult's.
	Output  string
	IsError bool
	// ProviderMetadata is opaque adapter state attached to an end event or
	// tool call (un-nested: the adapter's own entry only).
	ProviderMetadata json.RawMessage
	// Finish and Usage are set on StepFinish.
	Finish string
	Usage  messages.Tokens
	// Cost is the step's cost in USD, when the provider reports one; 0
	// leaves it to the runner, which prices Usage at the catalog's prices.
	Cost float64
}

// Error is a typed provider failure. Type is one of the provider.* error
// types of package messages (or aborted). RetryAfter is the provider's
// requested delay for rate limits, zero when none was given.
type Error struct {
	Type       messages.ErrorType
	Message    string
	RetryAfter time.Duration
	// StatusCode is the HTTP status, when there was one.
	StatusCode int
	// NoRetry records that the provider asked not to retry this response
	// (x-should-retry: false), whatever its type.
	NoRetry bool
}

// Error implements error.
func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s (%d): %s", e.Type, e.StatusCode, e.Message)
	}
	return string(e.Type) + ": " + e.Message
}

// Retryable reports whether the runner's retry policy may retry this error
// (before durable output): rate limits, provider-internal and transport
// failures only, unless the provider asked not to (NoRetry).
func (e *Error) Retryable() bool {
	if e.NoRetry {
		return false
	}
	switch e.Type {
	case messages.ErrProviderRateLimit, messages.ErrProviderInternal, messages.ErrProviderTransport:
		return true
	}
	return false
}

// Typed returns the error as a stored messages.Error.
func (e *Error) Typed() messages.Error { return messages.Error{Type: e.Type, Message: e.Message} }

// Errorf returns an *Error of type t.
func Errorf(t messages.ErrorType, format string, args ...any) *Error {
	return &Error{Type: t, Message: fmt.Sprintf(format, args...)}
}

// AsError converts any error to an *Error; untyped errors become
// provider.unknown, and context cancellation becomes aborted.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Type: messages.ErrAborted, Message: err.Error()}
	}
	return &Error{Type: messages.ErrProviderUnknown, Message: err.Error()}
}

// Prices are USD per million tokens.
type Prices struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// Cost returns the USD cost of usage at these prices. Input counts tokens
// that were neither read from nor written to the cache. A cache price left
// at 0 while Input has one bills those tokens at Input: they are input the
// provider charges for, and a configuration that names no discount should
// not make them free.
func (p Prices) Cost(u messages.Tokens) float64 {
	const m = 1e6
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	return (float64(u.Input)*p.Input + float64(u.Output+u.Reasoning)*p.Output +
		float64(u.Cache.Read)*read + float64(u.Cache.Write)*write) / m
}

// Model describes one model of a provider in the catalog.
type Model struct {
	Ref messages.ModelRef
	// Family is the type of the provider serving it, which picks the base
	// instructions a request starts from.
	Family ProviderType
	// Context is the context window in tokens.
	Context int
	// Output is the maximum output tokens.
	Output int
	// Prices are optional; the zero value means cost is reported as 0.
	Prices Prices
	// HostedTools are the provider-hosted tools its requests enable.
	HostedTools []string
}
