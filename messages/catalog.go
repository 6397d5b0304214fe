package messages

import (
	"encoding/json"
	"path/filepath"
)

// Location says where a Session runs. An empty WorkspaceID means
// implicit-local placement.
type Location struct {
	Directory   string `json:"directory" msgpack:"d"`
	WorkspaceID string `json:"workspaceID,omitempty" msgpack:"w,omitempty"`
}

// Key returns the Location's cache key.
func (l Location) Key() string { return l.WorkspaceID + "\x00" + l.Directory }

// Clean returns l with its directory in lexical clean form (filepath.Clean:
// no trailing slash, no "." or ".." elements), so that one directory has
// one Key however a client spelled it. Symbolic links are not resolved.
func (l Location) Clean() Location {
	if l.Directory != "" {
		l.Directory = filepath.Clean(l.Directory)
	}
	return l
}

// ModelRef names a model of a provider.
type ModelRef struct {
	ProviderID string `json:"providerID" msgpack:"p"`
	ID         string `json:"id" msgpack:"i"`
}

// String returns "provider/model", or "" for the zero ModelRef.
func (m ModelRef) String() string {
	if m.ProviderID == "" && m.ID == "" {
		return ""
	}
	return m.ProviderID + "/" + m.ID
}

// Delivery says when an admitted prompt is promoted.
type Delivery string

// Deliveries. Steer inputs promote at the next safe step boundary; queue
// inputs wait until the Session would otherwise become idle, one at a time.
const (
	Steer Delivery = "steer"
	Queue Delivery = "queue"
)

// DefaultDelivery is used when a prompt omits delivery.
const DefaultDelivery = Steer

// Valid reports whether d is a known delivery.
func (d Delivery) Valid() bool { return d == Steer || d == Queue }

// File is a typed attachment of a prompt.
type File struct {
	Mime     string `json:"mime" msgpack:"m"`
	Filename string `json:"filename,omitempty" msgpack:"n,omitempty"`
	URL      string `json:"url" msgpack:"u"`
}

// Prompt is user input: text plus optional attachments.
type Prompt struct {
	Text  string `json:"text" msgpack:"t"`
	Files []File `json:"files,omitempty" msgpack:"f,omitempty"`
}

// Tokens is token usage of a step.
type Tokens struct {
	Input     int64      `json:"input" msgpack:"i"`
	Output    int64      `json:"output" msgpack:"o"`
	Reasoning int64      `json:"reasoning" msgpack:"r"`
	Cache     CacheUsage `json:"cache" msgpack:"c"`
}

// CacheUsage is prompt-cache token usage.
type CacheUsage struct {
	Read  int64 `json:"read" msgpack:"r"`
	Write int64 `json:"write" msgpack:"w"`
}

// Add returns the sum of t and u.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{
		Input: t.Input + u.Input, Output: t.Output + u.Output, Reasoning: t.Reasoning + u.Reasoning,
		Cache: CacheUsage{Read: t.Cache.Read + u.Cache.Read, Write: t.Cache.Write + u.Cache.Write},
	}
}

// Reasons for compaction.
const (
	CompactionAuto     = "auto"
	CompactionManual   = "manual"
	CompactionOverflow = "overflow"
)

// Interruption reasons.
const (
	ReasonUser       = "user"
	ReasonShutdown   = "shutdown"
	ReasonSuperseded = "superseded"
)

// Instruction update kinds.
const (
	InstructionsUpdate  = "update"
	InstructionsRemoval = "removal"
)

// Payload is the data of an event. Type returns its versioned type string.
type Payload interface {
	Type() string
	Session() SessionID
}

// Durable event types.
const (
	TypeSessionCreated        = "session.created.1"
	TypeAgentSelected         = "session.agent.selected.1"
	TypeModelSelected         = "session.model.selected.1"
	TypeSessionMoved          = "session.moved.1"
	TypePromptAdmitted        = "session.prompt.admitted.1"
	TypePromptPromoted        = "session.prompt.promoted.1"
	TypeCompactionAdmitted    = "session.compaction.admitted.1"
	TypeCompactionStarted     = "session.compaction.started.1"
	TypeCompactionEnded       = "session.compaction.ended.1"
	TypeCompactionFailed      = "session.compaction.failed.1"
	TypeInstructionsBaselined = "session.instructions.baselined.1"
	TypeInstructionsUpdated   = "session.instructions.updated.1"
	TypeExecutionStarted      = "session.execution.started.1"
	TypeExecutionSucceeded    = "session.execution.succeeded.1"
	TypeExecutionFailed       = "session.execution.failed.1"
	TypeExecutionInterrupted  = "session.execution.interrupted.1"
	TypeStepStarted           = "session.step.started.1"
	TypeStepEnded             = "session.step.ended.1"
	TypeStepFailed            = "session.step.failed.1"
	TypeTextStarted           = "session.text.started.1"
	TypeTextEnded             = "session.text.ended.1"
	TypeReasoningStarted      = "session.reasoning.started.1"
	TypeReasoningEnded        = "session.reasoning.ended.1"
	TypeToolInputStarted      = "session.tool.input.started.1"
	TypeToolInputEnded        = "session.tool.input.ended.1"
	TypeToolCalled            = "session.tool.called.1"
	TypeToolSucceeded         = "session.tool.success.1"
	TypeToolFailed            = "session.tool.failed.1"
	TypeRetryScheduled        = "session.retry.scheduled.1"
)

// Live-only event types: never stored, never advance a cursor.
const (
	TypeTextDelta         = "session.text.delta"
	TypeReasoningDelta    = "session.reasoning.delta"
	TypeToolInputDelta    = "session.tool.input.delta"
	TypeCompactionDelta   = "session.compaction.delta"
	TypeUsageUpdated      = "session.usage.updated"
	TypePermissionAsked   = "permission.asked"
	TypePermissionReplied = "permission.replied"
	// TypeLogSynced is the marker Log emits once replay reaches the watermark.
	TypeLogSynced = "log.synced"
)

// SessionCreated records a new Session. It is always the event at seq 0.
type SessionCreated struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Location  Location  `json:"location" msgpack:"l"`
	Title     string    `json:"title" msgpack:"t"`
	Agent     string    `json:"agent" msgpack:"a"`
	Model     ModelRef  `json:"model" msgpack:"m"`
}

// AgentSelected selects the agent for the next step.
type AgentSelected struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Agent     string    `json:"agent" msgpack:"a"`
}

// ModelSelected selects the model for the next step.
type ModelSelected struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Model     ModelRef  `json:"model" msgpack:"m"`
}

// SessionMoved moves a Session to another Location and resets its
// instruction checkpoint.
type SessionMoved struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Location  Location  `json:"location" msgpack:"l"`
}

// PromptAdmitted records accepted user input in the Session inbox. It is not
// yet part of model-visible history.
type PromptAdmitted struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	InputID   MessageID `json:"inputID" msgpack:"i"`
	Prompt    Prompt    `json:"prompt" msgpack:"p"`
	Delivery  Delivery  `json:"delivery" msgpack:"d"`
}

// PromptPromoted makes an admitted prompt a visible user message. Its
// projector writes the message and marks the inbox row promoted in the same
// transaction.
type PromptPromoted struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	InputID   MessageID `json:"inputID" msgpack:"i"`
}

// CompactionAdmitted records one coalesced manual compaction barrier.
type CompactionAdmitted struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	InputID   MessageID `json:"inputID" msgpack:"i"`
}

// CompactionStarted identifies a compaction attempt. For a manual
// compaction InputID names the barrier row; otherwise the row is new and
// takes MessageID.
type CompactionStarted struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Reason    string    `json:"reason" msgpack:"r"`
	InputID   MessageID `json:"inputID,omitempty" msgpack:"i,omitempty"`
}

// CompactionEnded stores the final summary and serialized recent context,
// completes the row, and settles a manual barrier.
type CompactionEnded struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Reason    string    `json:"reason" msgpack:"r"`
	InputID   MessageID `json:"inputID,omitempty" msgpack:"i,omitempty"`
	Text      string    `json:"text" msgpack:"t"`
	Recent    string    `json:"recent" msgpack:"c"`
	// Usage is what the summary requests cost, when the provider
	// reported any.
	Usage *Usage `json:"usage,omitempty" msgpack:"u,omitempty"`
}

// Usage is the token usage and cost (USD) of a compaction's summary
// requests, which count toward the Session's totals as steps do.
type Usage struct {
	Tokens Tokens  `json:"tokens" msgpack:"t"`
	Cost   float64 `json:"cost" msgpack:"c"`
}

// CompactionFailed settles an unsuccessful compaction without changing the
// history boundary.
type CompactionFailed struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Reason    string    `json:"reason" msgpack:"r"`
	InputID   MessageID `json:"inputID,omitempty" msgpack:"i,omitempty"`
	Error     Error     `json:"error" msgpack:"e"`
	// Usage is what the summary requests cost, when the provider
	// reported any (a summary cut off at the output limit is paid for).
	Usage *Usage `json:"usage,omitempty" msgpack:"u,omitempty"`
}

// InstructionsBaselined initializes or rebaselines the instruction
// checkpoint with the exact instructions shown to the model.
type InstructionsBaselined struct {
	SessionID SessionID         `json:"sessionID" msgpack:"s"`
	Text      string            `json:"text" msgpack:"t"`
	Applied   map[string]string `json:"applied" msgpack:"a"`
}

// InstructionsUpdated publishes a chronological system message for changed
// instructions and advances the checkpoint's applied record atomically.
type InstructionsUpdated struct {
	SessionID SessionID         `json:"sessionID" msgpack:"s"`
	Text      string            `json:"text" msgpack:"t"`
	Kind      string            `json:"kind" msgpack:"k"`
	Applied   map[string]string `json:"applied" msgpack:"a"`
}

// ExecutionStarted opens a process-local busy period. It is history, not a
// durable execution identity.
type ExecutionStarted struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
}

// ExecutionSucceeded closes a busy period that ended normally.
type ExecutionSucceeded struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
}

// ExecutionFailed closes a busy period that ended in error.
type ExecutionFailed struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Error     Error     `json:"error" msgpack:"e"`
}

// ExecutionInterrupted closes an interrupted busy period.
type ExecutionInterrupted struct {
	SessionID SessionID `json:"sessionID" msgpack:"s"`
	Reason    string    `json:"reason" msgpack:"r"`
}

// StepStarted opens a step. Repeated starts for one AssistantMessageID (retry
// attempts) reopen the same assistant projection.
type StepStarted struct {
	SessionID          SessionID `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID `json:"assistantMessageID" msgpack:"m"`
	Agent              string    `json:"agent" msgpack:"a"`
	Model              ModelRef  `json:"model" msgpack:"o"`
	Attempt            int       `json:"attempt" msgpack:"n"`
}

// StepEnded closes a step successfully.
type StepEnded struct {
	SessionID          SessionID `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID `json:"assistantMessageID" msgpack:"m"`
	Finish             string    `json:"finish" msgpack:"f"`
	Tokens             Tokens    `json:"tokens" msgpack:"t"`
	Cost               float64   `json:"cost" msgpack:"c"`
}

// StepFailed closes a step in failure.
type StepFailed struct {
	SessionID          SessionID `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID `json:"assistantMessageID" msgpack:"m"`
	Error              Error     `json:"error" msgpack:"e"`
}

// TextStarted opens a text fragment with a Session-assigned ordinal.
type TextStarted struct {
	SessionID          SessionID       `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID       `json:"assistantMessageID" msgpack:"m"`
	Ordinal            int             `json:"ordinal" msgpack:"o"`
	ProviderMetadata   json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
}

// TextEnded carries a text fragment's full value.
type TextEnded struct {
	SessionID          SessionID       `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID       `json:"assistantMessageID" msgpack:"m"`
	Ordinal            int             `json:"ordinal" msgpack:"o"`
	Text               string          `json:"text" msgpack:"t"`
	ProviderMetadata   json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
}

// ReasoningStarted opens a reasoning fragment.
type ReasoningStarted struct {
	SessionID          SessionID       `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID       `json:"assistantMessageID" msgpack:"m"`
	Ordinal            int             `json:"ordinal" msgpack:"o"`
	ProviderMetadata   json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
}

// ReasoningEnded carries a reasoning fragment's full value.
type ReasoningEnded struct {
	SessionID          SessionID       `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID       `json:"assistantMessageID" msgpack:"m"`
	Ordinal            int             `json:"ordinal" msgpack:"o"`
	Text               string          `json:"text" msgpack:"t"`
	ProviderMetadata   json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
}

// ToolInputStarted opens a streamed tool input.
type ToolInputStarted struct {
	SessionID          SessionID `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID `json:"assistantMessageID" msgpack:"m"`
	CallID             string    `json:"callID" msgpack:"c"`
	Name               string    `json:"name" msgpack:"n"`
}

// ToolInputEnded carries a streamed tool input's full text.
type ToolInputEnded struct {
	SessionID          SessionID `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID `json:"assistantMessageID" msgpack:"m"`
	CallID             string    `json:"callID" msgpack:"c"`
	Name               string    `json:"name" msgpack:"n"`
	Text               string    `json:"text" msgpack:"t"`
}

// ToolCalled durably records one complete tool call before it executes.
// Executed marks provider-hosted calls. CallID is unique only within its
// assistant message.
type ToolCalled struct {
	SessionID          SessionID       `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID       `json:"assistantMessageID" msgpack:"m"`
	CallID             string          `json:"callID" msgpack:"c"`
	Name               string          `json:"name" msgpack:"n"`
	Input              json.RawMessage `json:"input" msgpack:"i"`
	Executed           bool            `json:"executed" msgpack:"x"`
	ProviderMetadata   json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
}

// ToolSucceeded settles a tool call with its output.
type ToolSucceeded struct {
	SessionID          SessionID       `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID       `json:"assistantMessageID" msgpack:"m"`
	CallID             string          `json:"callID" msgpack:"c"`
	Output             string          `json:"output" msgpack:"o"`
	Metadata           json.RawMessage `json:"metadata,omitempty" msgpack:"d,omitempty"`
	ProviderMetadata   json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
}

// ToolFailed settles a tool call with a typed error.
type ToolFailed struct {
	SessionID          SessionID       `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID       `json:"assistantMessageID" msgpack:"m"`
	CallID             string          `json:"callID" msgpack:"c"`
	Error              Error           `json:"error" msgpack:"e"`
	ProviderMetadata   json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
}

// RetryScheduled is committed before a retry delay: Attempt is the upcoming
// one-based attempt, At its absolute epoch-millisecond time.
type RetryScheduled struct {
	SessionID          SessionID `json:"sessionID" msgpack:"s"`
	AssistantMessageID MessageID `json:"assistantMessageID" msgpack:"m"`
	Attempt            int       `json:"attempt" msgpack:"n"`
	At                 int64     `json:"at" msgpack:"a"`
	Error              Error     `json:"error" msgpack:"e"`
}

// TextDelta is live-only streamed text.
type TextDelta struct {
	SessionID          SessionID `json:"sessionID"`
	AssistantMessageID MessageID `json:"assistantMessageID"`
	Ordinal            int       `json:"ordinal"`
	Delta              string    `json:"delta"`
}

// ReasoningDelta is live-only streamed reasoning.
type ReasoningDelta struct {
	SessionID          SessionID `json:"sessionID"`
	AssistantMessageID MessageID `json:"assistantMessageID"`
	Ordinal            int       `json:"ordinal"`
	Delta              string    `json:"delta"`
}

// ToolInputDelta is live-only streamed tool input.
type ToolInputDelta struct {
	SessionID          SessionID `json:"sessionID"`
	AssistantMessageID MessageID `json:"assistantMessageID"`
	CallID             string    `json:"callID"`
	Delta              string    `json:"delta"`
}

// CompactionDelta is live-only compaction progress.
type CompactionDelta struct {
	SessionID SessionID `json:"sessionID"`
	InputID   MessageID `json:"inputID,omitempty"`
	Delta     string    `json:"delta"`
}

// UsageUpdated is live-only usage progress of a step.
type UsageUpdated struct {
	SessionID          SessionID `json:"sessionID"`
	AssistantMessageID MessageID `json:"assistantMessageID"`
	Tokens             Tokens    `json:"tokens"`
	Cost               float64   `json:"cost"`
}

// PermissionAsked is a live-only question a tool asks before acting.
type PermissionAsked struct {
	SessionID  SessionID `json:"sessionID"`
	RequestID  string    `json:"requestID"`
	Permission string    `json:"permission"`
	Patterns   []string  `json:"patterns"`
	// Where is the directory the call acts in when an approval depends on
	// it (bash's workdir outside the Session's directory root).
	Where              string          `json:"where,omitempty"`
	Metadata           json.RawMessage `json:"metadata,omitempty"`
	AssistantMessageID MessageID       `json:"assistantMessageID,omitempty"`
	CallID             string          `json:"callID,omitempty"`
}

// PermissionReplied is the live-only answer to a PermissionAsked.
type PermissionReplied struct {
	SessionID SessionID `json:"sessionID"`
	RequestID string    `json:"requestID"`
	Reply     string    `json:"reply"`
	Message   string    `json:"message,omitempty"`
}
