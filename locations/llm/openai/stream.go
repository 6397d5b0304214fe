package openai

import (
	"encoding/json"
	"strconv"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// reasoningMetadata marks reasoning this adapter produced, so that replay can
// tell it from another model's reasoning (see lowerAssistant).
var reasoningMetadata = json.RawMessage(`{"native":true}`)

// Delta fields OpenAI-compatible servers use for reasoning text, in order of
// preference; a server sends one of them.
var reasoningFields = [...]string{"reasoning_content", "reasoning"}

// toolCall is one tool call being streamed.
type toolCall struct {
	givenID      string // the ID the server sent, if any
	callID, name string // callID is givenID unless that was empty or taken
	started      bool
	args         strings.Builder
}

// state turns chunks into normalized events. emit returns false once the
// consumer stops; every method then returns false and emits nothing more.
type state struct {
	emit func(llm.Event) bool

	textID, reasoningID string
	blocks              int // numbers text and reasoning block IDs

	calls   []*toolCall
	byIndex map[int64]*toolCall

	finished bool
	reason   string
	refusal  bool
	usage    messages.Tokens
}

func newState(emit func(llm.Event) bool) *state {
	return &state{emit: emit, byIndex: map[int64]*toolCall{}}
}

// chunk handles one chunk.
func (s *state) chunk(c oa.ChatCompletionChunk) bool {
	if c.JSON.Usage.Valid() {
		s.usage = usage(c.Usage)
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 || s.finished {
			continue // n is never set, so only choice 0 exists
		}
		if !s.delta(&ch.Delta) {
			return false
		}
		if ch.FinishReason != "" && !s.end(ch.FinishReason) {
			return false
		}
	}
	return true
}

// delta handles one choice delta: reasoning, then content, then tool calls.
func (s *state) delta(d *oa.ChatCompletionChunkChoiceDelta) bool {
	if r := reasoningText(d.JSON.ExtraFields); r != "" {
		if !s.closeText() || !s.openReasoning() || !s.emit(llm.Event{Kind: llm.ReasoningDelta, ID: s.reasoningID, Text: r}) {
			return false
		}
	}
	for _, text := range [...]string{d.Content, d.Refusal} {
		if text == "" {
			continue
		}
		if !s.closeReasoning() || !s.openText() || !s.emit(llm.Event{Kind: llm.TextDelta, ID: s.textID, Text: text}) {
			return false
		}
	}
	s.refusal = s.refusal || d.Refusal != ""
	for i := range d.ToolCalls {
		if !s.toolDelta(&d.ToolCalls[i]) {
			return false
		}
	}
	return true
}

// toolDelta handles one tool call fragment. Fragments are matched to calls by
// index; a fragment that brings a different ID at a known index starts a new
// call (some servers reuse index 0 for every call). A call's input starts
// once its name is known.
func (s *state) toolDelta(tc *oa.ChatCompletionChunkChoiceDeltaToolCall) bool {
	call := s.byIndex[tc.Index]
	if call != nil && tc.ID != "" && tc.ID != call.givenID && (call.givenID != "" || call.started) {
		call = nil // a new call at a reused index
	}
	switch {
	case call == nil:
		call = &toolCall{givenID: tc.ID, callID: s.uniqueID(tc.ID)}
		s.calls = append(s.calls, call)
		s.byIndex[tc.Index] = call
	case call.givenID == "" && tc.ID != "" && !call.started:
		call.givenID, call.callID = tc.ID, s.uniqueID(tc.ID) // the ID came late
	}
	if call.name == "" {
		call.name = tc.Function.Name
	}
	args := tc.Function.Arguments
	if !call.started && call.name != "" {
		if !s.startTool(call) {
			return false
		}
		args = call.args.String() + args // arguments that came before the name
		call.args.Reset()
	}
	call.args.WriteString(args)
	if call.started && args != "" {
		return s.emit(llm.Event{Kind: llm.ToolInputDelta, ID: call.callID, CallID: call.callID, Name: call.name, Text: args})
	}
	return true
}

// uniqueID returns id, or a made-up call ID when id is empty (servers that
// send no IDs) or already taken by another call of this response (IDs must
// be unique within a step).
func (s *state) uniqueID(id string) string {
	taken := func(id string) bool {
		for _, c := range s.calls {
			if c.callID == id {
				return true
			}
		}
		return false
	}
	if id != "" && !taken(id) {
		return id
	}
	for n := len(s.calls); ; n++ {
		if made := "call_" + strconv.Itoa(n); !taken(made) {
			return made
		}
	}
}

func (s *state) startTool(call *toolCall) bool {
	call.started = true
	return s.closeText() && s.closeReasoning() &&
		s.emit(llm.Event{Kind: llm.ToolInputStart, ID: call.callID, CallID: call.callID, Name: call.name})
}

// end handles the finish reason: it closes every block and completes every
// named tool call, in the order the calls first appeared.
func (s *state) end(reason string) bool {
	s.finished = true
	named := false
	for _, call := range s.calls {
		named = named || call.started
	}
	s.reason = finishReason(reason, named, s.refusal)
	if !s.closeText() || !s.closeReasoning() {
		return false
	}
	for _, call := range s.calls {
		if !call.started {
			// A call whose name never came cannot be executed nor sent
			// back (the API requires the name): it is dropped.
			continue
		}
		if !s.emit(llm.Event{Kind: llm.ToolInputEnd, ID: call.callID, CallID: call.callID, Name: call.name}) ||
			!s.emit(llm.Event{Kind: llm.ToolCall, CallID: call.callID, Name: call.name, Input: wire.ToolInput(call.args.String())}) {
			return false
		}
	}
	return true
}

// finish returns the StepFinish event, without cost.
func (s *state) finish() llm.Event {
	return llm.Event{Kind: llm.StepFinish, Finish: s.reason, Usage: s.usage}
}

func (s *state) openText() bool { return s.openBlock(&s.textID, "text-", llm.TextStart) }

func (s *state) closeText() bool { return s.closeBlock(&s.textID, llm.Event{Kind: llm.TextEnd}) }

func (s *state) openReasoning() bool {
	return s.openBlock(&s.reasoningID, "reasoning-", llm.ReasoningStart)
}

func (s *state) closeReasoning() bool {
	return s.closeBlock(&s.reasoningID, llm.Event{Kind: llm.ReasoningEnd, ProviderMetadata: reasoningMetadata})
}

// openBlock starts a block whose ID *id holds, unless one is open.
func (s *state) openBlock(id *string, prefix string, start llm.EventKind) bool {
	if *id != "" {
		return true
	}
	*id = prefix + strconv.Itoa(s.blocks)
	s.blocks++
	return s.emit(llm.Event{Kind: start, ID: *id})
}

// closeBlock ends the block *id names, if open, with end.
func (s *state) closeBlock(id *string, end llm.Event) bool {
	if *id == "" {
		return true
	}
	end.ID, *id = *id, ""
	return s.emit(end)
}

// reasoningText returns the reasoning delta from a chunk delta's fields the
// SDK does not know.
func reasoningText(extra map[string]respjson.Field) string {
	for _, name := range reasoningFields {
		f, ok := extra[name]
		if !ok {
			continue
		}
		var text string
		if raw := f.Raw(); len(raw) > 0 && raw[0] == '"' && json.Unmarshal([]byte(raw), &text) == nil && text != "" {
			return text
		}
	}
	return ""
}

// finishReason maps a Chat Completions finish reason. Some compatible
// servers report stop for a response that called tools; a response with tool
// calls therefore finishes as tool-calls. A refusal finishes as
// content-filter.
func finishReason(reason string, calls, refusal bool) string {
	switch {
	case reason == "content_filter" || (refusal && reason == "stop"):
		return llm.FinishContentFilter
	case reason == "tool_calls" || reason == "function_call" || (calls && reason == "stop"):
		return llm.FinishToolCalls
	case reason == "stop":
		return llm.FinishStop
	case reason == "length":
		return llm.FinishLength
	}
	return llm.FinishOther
}

// usage converts Chat Completions usage. prompt_tokens includes cached and
// cache-write tokens and completion_tokens includes reasoning tokens; both
// are split out so that no token is counted twice.
func usage(u oa.CompletionUsage) messages.Tokens {
	read := u.PromptTokensDetails.CachedTokens
	write := u.PromptTokensDetails.CacheWriteTokens
	reasoning := u.CompletionTokensDetails.ReasoningTokens
	return messages.Tokens{
		Input:     max(0, u.PromptTokens-read-write),
		Output:    max(0, u.CompletionTokens-reasoning),
		Reasoning: reasoning,
		Cache:     messages.CacheUsage{Read: read, Write: write},
	}
}
