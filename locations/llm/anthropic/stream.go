package anthropic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// metadata is this adapter's ProviderMetadata of text and reasoning: the
// thinking block's signature, or a redacted_thinking block's data; a text
// block's citations, each as the API sent it (the sources a web search
// answer quotes).
type metadata struct {
	Signature string            `json:"signature,omitempty"`
	Redacted  string            `json:"redacted,omitempty"`
	Citations []json.RawMessage `json:"citations,omitempty"`
}

// blockKind says what a content block becomes.
type blockKind uint8

const (
	blockIgnored blockKind = iota // hosted results (emitted at their start) and unknown types
	blockText
	blockReasoning
	blockTool // tool_use, or server_tool_use when hosted is set
)

// resultTypes are the block types that carry the result of a server tool
// call, which the API sends whole in content_block_start.
var resultTypes = map[string]bool{
	"web_search_tool_result":                 true,
	"web_fetch_tool_result":                  true,
	"code_execution_tool_result":             true,
	"bash_code_execution_tool_result":        true,
	"text_editor_code_execution_tool_result": true,
	"tool_search_tool_result":                true,
}

// block is one content block being streamed.
type block struct {
	kind         blockKind
	id           string // event ID: the block index
	callID, name string
	hosted       bool            // a server_tool_use block: the provider runs the call
	callMeta     json.RawMessage // a hosted call's members besides type, id, name and input
	args         strings.Builder // tool input JSON
	startInput   string          // tool input given whole in content_block_start
	signature    strings.Builder
	redacted     string
	citations    []json.RawMessage // of a text block
	open         bool
}

// state turns stream events into normalized events. emit returns false once
// the consumer stops; every method then returns false and emits nothing
// more.
type state struct {
	emit func(llm.Event) bool

	blocks  map[int64]*block
	callIDs map[string]bool   // tool call IDs used so far, local and hosted
	hosted  map[string]*block // hosted calls by the call ID they came with
	// hostedCalls counts the hosted calls, those with a made-up ID too.
	hostedCalls int
	settled     map[string]bool // call IDs a hosted result already answered
	// deferred are the hosted calls of the continued message that it left
	// unanswered (deferredCalls): their results come in this stream.
	deferred map[string]llm.Part
	local    int      // local tool calls started
	order    []*block // in start order, for closing at message_stop
	current  *block   // the open text or reasoning block

	usage    messages.Tokens
	thinking int64 // output tokens spent thinking
	reason   sdk.StopReason
	stopped  bool // message_stop arrived
}

func newState(emit func(llm.Event) bool) *state {
	return &state{emit: emit, blocks: map[int64]*block{}, callIDs: map[string]bool{},
		hosted: map[string]*block{}, settled: map[string]bool{}}
}

// event handles one stream event.
func (s *state) event(ev sdk.MessageStreamEventUnion) bool {
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		s.usage = messages.Tokens{
			Input:  u.InputTokens,
			Output: u.OutputTokens,
			Cache:  messages.CacheUsage{Read: u.CacheReadInputTokens, Write: u.CacheCreationInputTokens},
		}
		s.thinking = u.OutputTokensDetails.ThinkingTokens
	case "content_block_start":
		return s.start(ev.Index, &ev.ContentBlock)
	case "content_block_delta":
		return s.delta(ev.Index, &ev.Delta)
	case "content_block_stop":
		if b := s.blocks[ev.Index]; b != nil {
			return s.end(b)
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			s.reason = ev.Delta.StopReason
		}
		s.deltaUsage(ev.Usage)
	case "message_stop":
		for _, b := range s.order {
			if !s.end(b) {
				return false
			}
		}
		s.stopped = true
	}
	return true
}

// start opens a block. A text or reasoning block still open (its stop never
// came) is closed first, so blocks never overlap.
func (s *state) start(index int64, cb *sdk.ContentBlockStartEventContentBlockUnion) bool {
	if s.current != nil && !s.end(s.current) {
		return false
	}
	if old := s.blocks[index]; old != nil && !s.end(old) {
		return false
	}
	b := &block{id: strconv.FormatInt(index, 10), open: true}
	s.blocks[index] = b
	s.order = append(s.order, b)
	switch cb.Type {
	case "text":
		b.kind = blockText
		s.current = b
		if raw := cb.JSON.Citations.Raw(); cb.JSON.Citations.Valid() {
			_ = json.Unmarshal([]byte(raw), &b.citations) // null or a list; anything else is no citations
		}
		if !s.emit(llm.Event{Kind: llm.TextStart, ID: b.id}) {
			return false
		}
		if cb.Text != "" {
			return s.emit(llm.Event{Kind: llm.TextDelta, ID: b.id, Text: cb.Text})
		}
	case "thinking", "redacted_thinking":
		b.kind = blockReasoning
		b.signature.WriteString(cb.Signature)
		b.redacted = cb.Data
		s.current = b
		if !s.emit(llm.Event{Kind: llm.ReasoningStart, ID: b.id}) {
			return false
		}
		if cb.Thinking != "" {
			return s.emit(llm.Event{Kind: llm.ReasoningDelta, ID: b.id, Text: cb.Thinking})
		}
	case "tool_use", "server_tool_use":
		if cb.Name == "" {
			return true // cannot be executed nor sent back: ignored
		}
		b.kind = blockTool
		b.hosted = cb.Type == "server_tool_use"
		b.callID, b.name = cb.ID, cb.Name
		if b.callID == "" || s.callIDs[b.callID] {
			// Compatible servers that send no ID or repeat one: call IDs
			// must be unique within a step. A made-up ID has a part no
			// provider's IDs have, so that it cannot take the ID of a later
			// call, whose result would then settle this one.
			prefix := "toolu_sessiond_"
			if b.hosted {
				prefix = "srvtoolu_sessiond_"
			}
			b.callID = prefix + b.id
		}
		s.callIDs[b.callID] = true
		b.startInput = cb.JSON.Input.Raw()
		if b.hosted {
			b.callMeta = callMetadata(cb.RawJSON())
			s.hostedCalls++
			if b.callID == cb.ID {
				// Results name the ID on the wire: a call that had none, or
				// repeated one, cannot be answered unambiguously.
				s.hosted[b.callID] = b
			}
		} else {
			s.local++
		}
		return s.emit(llm.Event{Kind: llm.ToolInputStart, ID: b.id, CallID: b.callID, Name: b.name})
	default:
		if resultTypes[cb.Type] {
			return s.result(cb)
		}
	}
	return true
}

// result emits the ToolResult of a hosted call's result block. The block
// arrives whole, so it settles the call at its start. A result that names
// no hosted call of this stream (no ID, a local call, an unknown one) or a
// call already answered is dropped: the runner would have nothing to
// settle with it, or would settle a call twice.
func (s *state) result(cb *sdk.ContentBlockStartEventContentBlockUnion) bool {
	id := cb.ToolUseID
	call := s.hosted[id]
	if d, ok := s.deferred[id]; ok && call == nil && !s.callIDs[id] {
		// The result of a call the continued message left unanswered: this
		// step records the call again (IDs are unique within a step), so
		// that its result settles a call of the stream.
		call = &block{id: "deferred_" + id, kind: blockTool, hosted: true, open: true, callID: id, name: d.Name,
			startInput: string(d.Input), callMeta: d.ProviderMetadata}
		s.callIDs[id] = true
		s.hosted[id] = call
		s.hostedCalls++
		if !s.emit(llm.Event{Kind: llm.ToolInputStart, ID: call.id, CallID: id, Name: d.Name}) {
			return false
		}
	}
	if call == nil || s.settled[id] {
		// A result must settle a hosted call of this stream, once: the
		// runner fails a step on any other (llm.ToolResult).
		return true
	}
	// A call whose stop never came is complete by now: it must reach the
	// runner before the result that settles it.
	if !s.end(call) {
		return false
	}
	name := call.name
	s.settled[id] = true
	output, isError := resultOutput(cb.JSON.Content.Raw())
	return s.emit(llm.Event{Kind: llm.ToolResult, CallID: id, Name: name, Output: output, IsError: isError,
		ProviderMetadata: json.RawMessage(cb.RawJSON())})
}

// callMetadata returns the members of a server_tool_use block other than
// those the ToolCall event carries itself (type, id, name and input), such
// as the caller of a call made from code execution, so that the block goes
// back to the model whole; nil when there are none.
func callMetadata(raw string) json.RawMessage {
	var members map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &members) != nil {
		return nil
	}
	for _, k := range []string{"type", "id", "name", "input"} {
		delete(members, k)
	}
	if len(members) == 0 {
		return nil
	}
	meta, _ := json.Marshal(members) // raw JSON values always marshal
	return meta
}

// searchResult is what resultOutput reads of a web search result.
type searchResult struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

// missingURL reports whether r is not a search result: a list of results
// only renders as one when every item has a URL.
func (r searchResult) missingURL() bool { return r.URL == "" }

// resultOutput renders the content of a hosted result as readable text: a
// list of search results one per line as "title — url", an error as its
// code (and message, when there is one), anything else as compact JSON. It
// is what the runner shows and what another model reads; the model that ran
// the call gets the block itself back.
func resultOutput(raw string) (output string, isError bool) {
	content := []byte(strings.TrimSpace(raw))
	if len(content) == 0 {
		return "", false
	}
	switch content[0] {
	case '[':
		var results []searchResult
		if json.Unmarshal(content, &results) == nil && !slices.ContainsFunc(results, searchResult.missingURL) {
			if len(results) == 0 {
				return "No results.", false
			}
			lines := make([]string, len(results))
			for i, r := range results {
				lines[i] = r.URL
				if r.Title != "" {
					lines[i] = r.Title + " — " + r.URL
				}
			}
			return strings.Join(lines, "\n"), false
		}
	case '{':
		var e struct {
			Type         string `json:"type"`
			ErrorCode    string `json:"error_code"`
			ErrorMessage string `json:"error_message"`
		}
		if json.Unmarshal(content, &e) == nil && (e.ErrorCode != "" || strings.HasSuffix(e.Type, "_error")) {
			text := cmp.Or(e.ErrorCode, e.Type)
			if e.ErrorMessage != "" {
				text += ": " + e.ErrorMessage
			}
			return text, true
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, content) != nil {
		return string(content), false
	}
	return b.String(), false
}

// delta handles a content_block_delta.
func (s *state) delta(index int64, d *sdk.MessageStreamEventUnionDelta) bool {
	b := s.blocks[index]
	if b == nil || !b.open {
		return true
	}
	switch {
	case d.Type == "text_delta" && b.kind == blockText && d.Text != "":
		return s.emit(llm.Event{Kind: llm.TextDelta, ID: b.id, Text: d.Text})
	case d.Type == "thinking_delta" && b.kind == blockReasoning && d.Thinking != "":
		return s.emit(llm.Event{Kind: llm.ReasoningDelta, ID: b.id, Text: d.Thinking})
	case d.Type == "signature_delta" && b.kind == blockReasoning:
		b.signature.WriteString(d.Signature)
	case d.Type == "citations_delta" && b.kind == blockText:
		if raw := d.JSON.Citation.Raw(); d.JSON.Citation.Valid() && json.Valid([]byte(raw)) {
			b.citations = append(b.citations, json.RawMessage(raw))
		}
	case d.Type == "input_json_delta" && b.kind == blockTool && d.PartialJSON != "":
		b.args.WriteString(d.PartialJSON)
		return s.emit(llm.Event{Kind: llm.ToolInputDelta, ID: b.id, CallID: b.callID, Name: b.name, Text: d.PartialJSON})
	}
	return true
}

// end closes a block once.
func (s *state) end(b *block) bool {
	if !b.open {
		return true
	}
	b.open = false
	if s.current == b {
		s.current = nil
	}
	switch b.kind {
	case blockText:
		var meta json.RawMessage
		if len(b.citations) > 0 {
			meta, _ = json.Marshal(metadata{Citations: b.citations}) // raw JSON values always marshal
		}
		return s.emit(llm.Event{Kind: llm.TextEnd, ID: b.id, ProviderMetadata: meta})
	case blockReasoning:
		meta, _ := json.Marshal(metadata{Signature: b.signature.String(), Redacted: b.redacted})
		if string(meta) == "{}" {
			meta = nil
		}
		return s.emit(llm.Event{Kind: llm.ReasoningEnd, ID: b.id, ProviderMetadata: meta})
	case blockTool:
		input := b.args.String()
		if input == "" {
			input = b.startInput // the whole input came in content_block_start
		}
		return s.emit(llm.Event{Kind: llm.ToolInputEnd, ID: b.id, CallID: b.callID, Name: b.name}) &&
			s.emit(llm.Event{Kind: llm.ToolCall, CallID: b.callID, Name: b.name, Input: llm.ToolInput([]byte(input)),
				Executed: b.hosted, ProviderMetadata: b.callMeta})
	}
	return true
}

// deltaUsage applies the cumulative usage of a message_delta; fields it
// leaves out keep their message_start values.
func (s *state) deltaUsage(u sdk.MessageDeltaUsage) {
	if u.JSON.InputTokens.Valid() {
		s.usage.Input = u.InputTokens
	}
	if u.JSON.OutputTokens.Valid() {
		s.usage.Output = u.OutputTokens
	}
	if u.JSON.CacheReadInputTokens.Valid() {
		s.usage.Cache.Read = u.CacheReadInputTokens
	}
	if u.JSON.CacheCreationInputTokens.Valid() {
		s.usage.Cache.Write = u.CacheCreationInputTokens
	}
	if u.OutputTokensDetails.JSON.ThinkingTokens.Valid() {
		s.thinking = u.OutputTokensDetails.ThinkingTokens
	}
}

// complete reports whether the message is whole although message_stop did
// not arrive: the stop reason came (in message_delta, which follows every
// content block) and every block was closed. message_stop itself carries
// nothing.
func (s *state) complete() bool {
	if s.reason == "" {
		return false
	}
	for _, b := range s.order {
		if b.open {
			return false
		}
	}
	return true
}

// finish returns the StepFinish event, without cost.
func (s *state) finish() llm.Event {
	u := s.usage
	u.Reasoning = min(s.thinking, u.Output)
	u.Output -= u.Reasoning
	fin := finishReason(s.reason)
	if fin == llm.FinishToolCalls && s.local == 0 && s.hostedCalls > 0 {
		// tool-calls asks the runner to run calls and go on; hosted calls
		// ran already, so a step with only those did not stop for tools.
		fin = llm.FinishOther
	}
	return llm.Event{Kind: llm.StepFinish, Finish: fin, Usage: u}
}

// finishReason maps a stop reason.
func finishReason(r sdk.StopReason) string {
	switch r {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence:
		return llm.FinishStop
	case sdk.StopReasonToolUse:
		return llm.FinishToolCalls
	case sdk.StopReasonMaxTokens:
		return llm.FinishLength
	case sdk.StopReasonRefusal:
		return llm.FinishContentFilter
	case sdk.StopReasonPauseTurn:
		return llm.FinishPause
	}
	return llm.FinishOther
}
