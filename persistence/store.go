package persistence

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/sessiond/sessiond/messages"
)

// Store is sessiond's durable state: per-Session append-only event logs and
// the projections derived from them. Every write is one transaction that
// appends events and updates their projections together, or changes nothing.
//
// Implementations are safe for concurrent use. Reads never wait for writes
// beyond the storage engine's own isolation. Returned values are copies the
// caller owns.
type Store interface {
	// CreateSession creates a Session when absent. With a supplied ID that
	// already exists it returns the existing Session and created=false. A
	// malformed request (ID, Location, a title over MaxTitleBytes or not
	// UTF-8) is refused with an invalid error and writes nothing.
	CreateSession(ctx context.Context, req CreateSession) (s Session, created bool, err error)
	// Get returns one Session, or an error of type session.not-found.
	Get(ctx context.Context, id messages.SessionID) (Session, error)
	// List returns every Session in creation order (by creation time, then
	// ID).
	List(ctx context.Context) ([]Session, error)

	// Admit records a prompt in the Session inbox, idempotently on its ID.
	// created is false for an exact retry of an existing admission.
	Admit(ctx context.Context, req Admission) (a Admitted, created bool, err error)
	// AdmitCompaction records a manual compaction barrier, coalescing with a
	// pending one unless that one shows a compaction running that was not
	// started since the store opened (its process stopped, and the next
	// drain settles it as interrupted): the request then gets its own.
	AdmitCompaction(ctx context.Context, id messages.SessionID) (input Input, created bool, err error)
	// Pending returns the Session's unsettled inbox rows in admission order.
	Pending(ctx context.Context, id messages.SessionID) ([]Input, error)
	// Input returns one inbox row by its message ID.
	Input(ctx context.Context, id messages.MessageID) (Input, error)

	// Append commits events for one Session with their projections in one
	// transaction and returns them with their envelopes. A projector error
	// (for instance promoting an input twice) rolls back every event of the
	// call. The store may keep the payloads (their byte slices included)
	// until a later commit of the Session, and the returned events share
	// them: neither may be modified afterwards.
	Append(ctx context.Context, id messages.SessionID, data ...messages.Payload) ([]messages.Event, error)
	// Commit is Append that also returns what the commit left in the
	// projections a step boundary reads (see Committed), so a caller that
	// mirrors them need not read them back.
	Commit(ctx context.Context, id messages.SessionID, data ...messages.Payload) (Committed, error)

	// History returns public durable events with seq > q.After, at most
	// q.Limit of them.
	History(ctx context.Context, id messages.SessionID, q Query) (Page[messages.Event], error)
	// Messages returns projected messages with source seq > q.After. A
	// prompt becomes a (user) message when the runner promotes it; until
	// then it is only in the inbox (Pending) and the log.
	Messages(ctx context.Context, id messages.SessionID, q Query) (Page[Message], error)
	// Message returns one projected message by ID.
	Message(ctx context.Context, sid messages.SessionID, id messages.MessageID) (Message, error)
	// Log replays durable events after `after` (-1 for all), then one
	// Synced marker, then (with follow) every later commit until ctx ends,
	// when the sequence stops without an error. It never skips or repeats
	// a sequence. A reader may write to the store while it iterates.
	Log(ctx context.Context, id messages.SessionID, after int64, follow bool) iter.Seq2[LogItem, error]
	// Watermark returns the Session's last committed seq, or -1.
	Watermark(ctx context.Context, id messages.SessionID) (int64, error)

	// Checkpoint returns the Session's instruction checkpoint; ok is false
	// when none is initialized.
	Checkpoint(ctx context.Context, id messages.SessionID) (c Checkpoint, ok bool, err error)

	// OpenSteps returns assistant messages whose step is open.
	OpenSteps(ctx context.Context, id messages.SessionID) ([]Message, error)

	// Boundary reads, in one snapshot, what a runner needs at a step
	// boundary: the Session record, its pending inputs, its instruction
	// checkpoint and every projected message with source seq > after.
	Boundary(ctx context.Context, id messages.SessionID, after int64) (Boundary, error)

	// PutEntry, DeleteEntry and Entries manage API-managed instruction
	// entries of a Session.
	PutEntry(ctx context.Context, id messages.SessionID, key, value string) error
	DeleteEntry(ctx context.Context, id messages.SessionID, key string) error
	Entries(ctx context.Context, id messages.SessionID) (map[string]string, error)

	// SaveApproval, Approved and Approvals manage saved "always" permission
	// replies per project.
	SaveApproval(ctx context.Context, project, permission string, patterns []string) error
	Approved(ctx context.Context, project, permission, pattern string) (bool, error)
	Approvals(ctx context.Context, project string) (map[string][]string, error)

	// Close stops the writer after in-flight commits and closes the store.
	Close() error
}

// Boundary is one consistent read of a Session at a step boundary (see
// Store.Boundary).
type Boundary struct {
	// Session is the record without its log-derived fields (LastSeq and
	// Updated are zero).
	Session Session
	Pending []Input
	// Checkpoint is nil when none is initialized.
	Checkpoint *Checkpoint
	Messages   []Message
	// Seq is the Session's last seq as of the read.
	Seq int64
}

// Committed is what one Commit wrote.
type Committed struct {
	Events []messages.Event
	// Messages are the messages the commit wrote (every one it created or
	// changed), as it left them, in seq order. They are the caller's.
	Messages []Message
	// Session is the record as the commit left it, when the commit changed
	// it, without its log-derived fields (as in Boundary); nil otherwise.
	Session *Session
}

// CreateSession asks for a new Session.
type CreateSession struct {
	// ID is optional; when empty one is generated.
	ID       messages.SessionID `json:"id,omitempty"`
	Location messages.Location  `json:"location"`
	// Title is at most MaxTitleBytes of UTF-8 (ValidateTitle).
	Title string            `json:"title,omitempty"`
	Agent string            `json:"agent,omitempty"`
	Model messages.ModelRef `json:"model,omitzero"`
}

// Session is the projected Session record.
type Session struct {
	ID       messages.SessionID `json:"id" msgpack:"i"`
	Location messages.Location  `json:"location" msgpack:"l"`
	Title    string             `json:"title" msgpack:"t"`
	Agent    string             `json:"agent" msgpack:"a"`
	Model    messages.ModelRef  `json:"model" msgpack:"m"`
	Created  int64              `json:"timeCreated" msgpack:"c"`
	Tokens   messages.Tokens    `json:"tokens" msgpack:"k"`
	Cost     float64            `json:"cost" msgpack:"o"`
	// Updated and LastSeq come from the log, not the stored record.
	Updated int64 `json:"timeUpdated" msgpack:"-"`
	LastSeq int64 `json:"lastSeq" msgpack:"-"`
}

// Admission asks to admit one prompt.
type Admission struct {
	// ID is optional; when empty one is generated.
	ID        messages.MessageID `json:"id,omitempty"`
	SessionID messages.SessionID `json:"sessionID"`
	Prompt    messages.Prompt    `json:"prompt"`
	// Delivery defaults to messages.DefaultDelivery.
	Delivery messages.Delivery `json:"delivery,omitempty"`
}

// Admitted is the admission receipt: what was admitted, where and when.
// Exact retries return an equal receipt, also after the input has been
// promoted (SEED.md: "the same admission receipt"); promotion is in the
// log (session.prompt.promoted.1).
type Admitted struct {
	ID          messages.MessageID `json:"id"`
	SessionID   messages.SessionID `json:"sessionID"`
	Prompt      messages.Prompt    `json:"prompt"`
	Delivery    messages.Delivery  `json:"delivery"`
	AdmittedSeq int64              `json:"admittedSeq"`
	TimeCreated int64              `json:"timeCreated"`
}

// Input kinds.
const (
	InputPrompt     = "prompt"
	InputCompaction = "compaction"
)

// Input is one durable inbox row.
type Input struct {
	ID          messages.MessageID `json:"id" msgpack:"i"`
	SessionID   messages.SessionID `json:"sessionID" msgpack:"s"`
	Kind        string             `json:"type" msgpack:"k"`
	Prompt      *messages.Prompt   `json:"prompt,omitempty" msgpack:"p,omitempty"`
	Delivery    messages.Delivery  `json:"delivery,omitempty" msgpack:"d,omitempty"`
	AdmittedSeq int64              `json:"admittedSeq" msgpack:"a"`
	// PromotedSeq is the seq of the promoting (or, for a compaction barrier,
	// settling) event; nil while pending.
	PromotedSeq *int64 `json:"promotedSeq,omitempty" msgpack:"q,omitempty"`
	TimeCreated int64  `json:"timeCreated" msgpack:"c"`
}

// Receipt returns the admission receipt of a prompt row.
func (in Input) Receipt() Admitted {
	r := Admitted{ID: in.ID, SessionID: in.SessionID, Delivery: in.Delivery, AdmittedSeq: in.AdmittedSeq,
		TimeCreated: in.TimeCreated}
	if in.Prompt != nil {
		r.Prompt = *in.Prompt
	}
	return r
}

// Query pages a log or message list. After is exclusive; -1 starts before
// seq 0, so the zero Query starts after session.created.1. A page's next
// After is the seq of its last item. Limit <= 0 means the store's default
// page size.
type Query struct {
	After int64
	Limit int
}

// Page is one page of results.
type Page[T any] struct {
	Data    []T  `json:"data"`
	HasMore bool `json:"hasMore"`
}

// LogItem is one item of a Log stream: an Event, or the Synced marker.
type LogItem struct {
	Event  *messages.Event
	Synced *messages.Synced
}

// Message roles of the projection.
const (
	RoleUser       = "user"
	RoleSystem     = "system"
	RoleAssistant  = "assistant"
	RoleCompaction = "compaction"
)

// Message is one projected Session message, keyed by its source seq so that
// listing order is durable event order.
type Message struct {
	ID        messages.MessageID `json:"id" msgpack:"i"`
	SessionID messages.SessionID `json:"sessionID" msgpack:"s"`
	Seq       int64              `json:"seq" msgpack:"q"`
	Role      string             `json:"role" msgpack:"r"`
	Created   int64              `json:"timeCreated" msgpack:"c"`

	// User messages.
	Prompt   *messages.Prompt  `json:"prompt,omitempty" msgpack:"p,omitempty"`
	Delivery messages.Delivery `json:"delivery,omitempty" msgpack:"d,omitempty"`
	// System messages (instruction updates).
	Text string `json:"text,omitempty" msgpack:"t,omitempty"`
	Kind string `json:"kind,omitempty" msgpack:"k,omitempty"`

	// Assistant messages.
	Agent     string            `json:"agent,omitempty" msgpack:"a,omitempty"`
	Model     messages.ModelRef `json:"model,omitzero" msgpack:"m,omitempty"`
	Attempts  int               `json:"attempts,omitempty" msgpack:"n,omitempty"`
	Parts     []Part            `json:"parts,omitempty" msgpack:"P,omitempty"`
	Retry     *Retry            `json:"retry,omitempty" msgpack:"R,omitempty"`
	Finish    string            `json:"finish,omitempty" msgpack:"f,omitempty"`
	Tokens    *messages.Tokens  `json:"tokens,omitempty" msgpack:"T,omitempty"`
	Cost      float64           `json:"cost,omitempty" msgpack:"o,omitempty"`
	Error     *messages.Error   `json:"error,omitempty" msgpack:"e,omitempty"`
	Completed int64             `json:"timeCompleted,omitempty" msgpack:"C,omitempty"`
	// Open is true while a step of this assistant message is running.
	Open bool `json:"open,omitempty" msgpack:"O,omitempty"`

	// Compaction rows.
	Compaction *Compaction `json:"compaction,omitempty" msgpack:"x,omitempty"`
}

// Part kinds.
const (
	PartText      = "text"
	PartReasoning = "reasoning"
	PartTool      = "tool"
)

// Part is one ordered part of an assistant message.
type Part struct {
	Kind string `json:"type" msgpack:"k"`
	// Ordinal is the kind-specific ordinal of text and reasoning parts.
	Ordinal          int             `json:"ordinal,omitempty" msgpack:"o,omitempty"`
	Text             string          `json:"text,omitempty" msgpack:"t,omitempty"`
	Ended            bool            `json:"ended,omitempty" msgpack:"e,omitempty"`
	ProviderMetadata json.RawMessage `json:"providerMetadata,omitempty" msgpack:"p,omitempty"`
	Tool             *ToolPart       `json:"tool,omitempty" msgpack:"T,omitempty"`
}

// Tool states.
const (
	ToolPending   = "pending"
	ToolRunning   = "running"
	ToolCompleted = "completed"
	ToolError     = "error"
)

// ToolPart is a tool call and its settlement. Call-side and settlement-side
// provider metadata are kept apart so settlement cannot erase continuation
// identifiers.
type ToolPart struct {
	CallID         string          `json:"callID" msgpack:"c"`
	Name           string          `json:"name" msgpack:"n"`
	State          string          `json:"state" msgpack:"s"`
	InputText      string          `json:"inputText,omitempty" msgpack:"x,omitempty"`
	Input          json.RawMessage `json:"input,omitempty" msgpack:"i,omitempty"`
	Executed       bool            `json:"executed,omitempty" msgpack:"h,omitempty"`
	Output         string          `json:"output,omitempty" msgpack:"o,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty" msgpack:"m,omitempty"`
	Error          *messages.Error `json:"error,omitempty" msgpack:"e,omitempty"`
	CallMetadata   json.RawMessage `json:"callProviderMetadata,omitempty" msgpack:"p,omitempty"`
	ResultMetadata json.RawMessage `json:"resultProviderMetadata,omitempty" msgpack:"r,omitempty"`
}

// Retry is the projected scheduled-retry state of an assistant message.
type Retry struct {
	Attempt int            `json:"attempt" msgpack:"n"`
	At      int64          `json:"at" msgpack:"a"`
	Error   messages.Error `json:"error" msgpack:"e"`
}

// Compaction row states.
const (
	CompactionQueued    = "queued"
	CompactionRunning   = "running"
	CompactionCompleted = "completed"
	CompactionFailed    = "failed"
)

// Compaction is a compaction transcript row.
type Compaction struct {
	Reason  string          `json:"reason" msgpack:"r"`
	State   string          `json:"state" msgpack:"s"`
	Summary string          `json:"summary,omitempty" msgpack:"t,omitempty"`
	Recent  string          `json:"recent,omitempty" msgpack:"c,omitempty"`
	Error   *messages.Error `json:"error,omitempty" msgpack:"e,omitempty"`
	// StartedSeq is the seq of its session.compaction.started.1: the
	// summary covers the history before it. A manual compaction's row sits
	// at its admission, and steps of a continuation may come between.
	StartedSeq int64 `json:"startedSeq,omitempty" msgpack:"q,omitempty"`
	// Usage is what its summary requests cost, once settled.
	Usage *messages.Usage `json:"usage,omitempty" msgpack:"u,omitempty"`
}

// Checkpoint is the projected instruction checkpoint of a Session.
type Checkpoint struct {
	Baseline    string            `json:"baseline" msgpack:"b"`
	BaselineSeq int64             `json:"baselineSeq" msgpack:"q"`
	Applied     map[string]string `json:"applied" msgpack:"a"`
}
