package openai

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// reasoningMeta marks reasoning this adapter produced, so that replay can
// tell it from another model's reasoning (see lowerAssistant), and names
// the delta field it came in.
type reasoningMeta struct {
	Native bool   `json:"native"`
	Field  string `json:"field,omitempty"`
}

// reasoningMetadata returns the ProviderMetadata of reasoning that came in
// delta field field ("" when unknown).
func reasoningMetadata(field string) json.RawMessage {
	b, _ := json.Marshal(reasoningMeta{Native: true, Field: field}) // cannot fail
	return b
}

// Delta fields OpenAI-compatible servers use for reasoning text, in order of
// preference; a server sends one of them.
var reasoningFields = [...]string{"reasoning_content", "reasoning"}

// toolCall is one tool call being streamed.
type toolCall struct {
	givenID      string // the ID the server sent, if any
	callID, name string // callID is givenID unless that was empty, taken or late
	started      bool
	args         strings.Builder
}

// state turns chunks into normalized events. emit returns false once the
// consumer stops; every method then returns false and emits nothing more.
type state struct {
	emit func(llm.Event) bool

	textID, reasoningID string
	reasoningField      string // the delta field reasoning came in
	blocks              int    // numbers text and reasoning block IDs

	calls   []*toolCall
	byIndex map[int64]*toolCall

	finished bool   // a finish reason came
	reason   string // the last finish reason, mapped by end
	raw      string // the last finish reason as the server sent it
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
		if ch.Index != 0 {
			continue // n is never set, so only choice 0 exists
		}
		if !s.delta(&ch.Delta) {
			return false
		}
		if ch.FinishReason != "" {
			// Not yet the end: some proxies put a finish reason on chunks
			// before the last (Open WebUI sets stop on a chunk with empty
			// content, as a reasoning model's first one is, and has been
			// seen setting it on every chunk). Taken for the end, it cut
			// the answer to what came before it, and a call's arguments
			// with it. What follows goes on in the same blocks, the last
			// finish reason counts, and end runs once the stream is over.
			s.finished, s.raw = true, ch.FinishReason
		}
	}
	return true
}

// delta handles one choice delta: reasoning, then content, then tool calls.
func (s *state) delta(d *oa.ChatCompletionChunkChoiceDelta) bool {
	if r, field := reasoningText(d.JSON.ExtraFields); r != "" {
		s.reasoningField = field
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
// index, since that is the only key every fragment carries; see newCall for
// when a fragment at a known index starts another call. A call's input
// starts once its name is known.
func (s *state) toolDelta(tc *oa.ChatCompletionChunkChoiceDeltaToolCall) bool {
	call := s.byIndex[tc.Index]
	if call != nil && repeats(call, tc) {
		return true
	}
	if call != nil && newCall(call, tc) {
		call = nil
	}
	switch {
	case call == nil:
		call = &toolCall{givenID: tc.ID, callID: s.uniqueID(tc.ID)}
		s.calls = append(s.calls, call)
		s.byIndex[tc.Index] = call
	case call.givenID == "" && tc.ID != "":
		// The ID came late. Once tool-input-start went out under the made-up
		// ID, the call keeps it: every event of a call must carry one ID,
		// and replay needs none of the server's (lowerAssistant sends
		// CallID both in tool_calls and in the tool message, and Chat
		// Completions only pairs them within the request, as uniqueID's
		// made-up IDs already rely on). givenID still records it, so that
		// later fragments repeating it stay here.
		call.givenID = tc.ID
		if !call.started {
			call.callID = s.uniqueID(tc.ID)
		}
	}
	if call.name == "" {
		call.name = tc.Function.Name
	}
	args := newArgs(call.args.String(), tc.Function.Arguments)
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

// newCall reports whether fragment tc, at the index of call, starts another
// call. Some servers reuse an index for every call (older Ollama and some
// gateways send all calls at index 0, or omit the index, which reads as 0),
// and some of those send no IDs either. A fragment starts another call when:
//
//   - it brings an ID other than the one call was given; an ID at a call
//     that has none yet is that call's ID arriving late;
//   - it brings a name while call is named and its arguments so far are
//     complete JSON. Some servers repeat the name in every fragment of a
//     call, but while that call's arguments are still partial;
//   - it brings another name while call has no arguments yet: a call does
//     not change its name, and an empty argument string is not JSON, so
//     the rule above misses a call made without arguments.
func newCall(call *toolCall, tc *oa.ChatCompletionChunkChoiceDeltaToolCall) bool {
	if tc.ID != "" && call.givenID != "" && tc.ID != call.givenID {
		return true
	}
	name := tc.Function.Name
	if name == "" || call.name == "" {
		return false
	}
	if call.args.Len() == 0 {
		return name != call.name
	}
	return argsComplete(call.args.String())
}

// repeats reports whether fragment tc, at the index of call, only repeats
// the call: its arguments are the call's complete arguments again, and it
// brings no other ID or name. Some gateways send the whole arguments once
// more after streaming them, alone or in a closing fragment with the ID
// and name. Nothing but white space can follow complete arguments, so
// appended, the repeat made them no JSON (the call then failed validation);
// with a name, newCall took it for another call, and the tool ran twice.
func repeats(call *toolCall, tc *oa.ChatCompletionChunkChoiceDeltaToolCall) bool {
	args := strings.TrimSpace(tc.Function.Arguments)
	if args == "" || (tc.ID != "" && tc.ID != call.givenID) || (tc.Function.Name != "" && tc.Function.Name != call.name) {
		return false
	}
	return args == strings.TrimSpace(call.args.String()) && argsComplete(args)
}

// newArgs returns what fragment brings to a call's arguments so far,
// prev. Some servers send the arguments so far in every fragment (a
// cumulative mode of some compatible providers and gateways) instead of
// what is new: appended, those made the arguments no JSON, and the call
// failed validation. A fragment that starts with prev, and that appended
// to it could not lead to JSON, is taken for such a snapshot, and only
// what follows prev is new. A fragment that appended can still lead to JSON
// is appended, so arguments that are streamed as usual are never changed.
func newArgs(prev, fragment string) string {
	if prev == "" || len(fragment) < len(prev) || !strings.HasPrefix(fragment, prev) || jsonPrefix(prev+fragment) {
		return fragment
	}
	return fragment[len(prev):]
}

// jsonPrefix reports whether s is one JSON value, or the start of one.
func jsonPrefix(s string) bool {
	dec := json.NewDecoder(strings.NewReader(s))
	depth, values := 0, 0
	for {
		t, err := dec.Token()
		switch {
		case errors.Is(err, io.EOF):
			return true
		case err != nil:
			return errors.Is(err, io.ErrUnexpectedEOF) // the start of a value
		case values > 0:
			return false // a second value
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			values++
		}
	}
}

// argsComplete reports whether args is a complete JSON value. Arguments are
// JSON objects, so the cheap suffix check spares a full parse of a long
// partial argument on every fragment of a server that repeats the name.
func argsComplete(args string) bool {
	trimmed := strings.TrimRight(args, " \t\r\n")
	return strings.HasSuffix(trimmed, "}") && json.Valid([]byte(trimmed))
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

// end ends a response that came with a finish reason, once its stream is
// over: it maps the last finish reason, closes every block and completes
// every named tool call, in the order the calls first appeared.
func (s *state) end() bool {
	named := false
	for _, call := range s.calls {
		named = named || call.started
	}
	s.reason = finishReason(s.raw, named, s.refusal)
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
			!s.emit(llm.Event{Kind: llm.ToolCall, CallID: call.callID, Name: call.name, Input: llm.ToolInput([]byte(call.args.String()))}) {
			return false
		}
	}
	return true
}

// callsComplete reports whether the arguments of every named call so far
// are complete JSON, or empty (a call without parameters).
func (s *state) callsComplete() bool {
	for _, call := range s.calls {
		if call.started && call.args.Len() > 0 && !argsComplete(call.args.String()) {
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
	return s.closeBlock(&s.reasoningID, llm.Event{Kind: llm.ReasoningEnd, ProviderMetadata: reasoningMetadata(s.reasoningField)})
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
func reasoningText(extra map[string]respjson.Field) (text, field string) {
	for _, name := range reasoningFields {
		f, ok := extra[name]
		if !ok {
			continue
		}
		if raw := f.Raw(); len(raw) > 0 && raw[0] == '"' && json.Unmarshal([]byte(raw), &text) == nil && text != "" {
			return text, name
		}
	}
	return "", ""
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
