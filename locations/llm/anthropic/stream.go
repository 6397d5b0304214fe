package anthropic

import (
	"encoding/json"
	"strconv"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// metadata is this adapter's ProviderMetadata for reasoning: the thinking
// block's signature, or a redacted_thinking block's data.
type metadata struct {
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
}

// blockKind says what a content block becomes.
type blockKind uint8

const (
	blockIgnored blockKind = iota // server tool blocks and unknown types
	blockText
	blockReasoning
	blockTool
)

// block is one content block being streamed.
type block struct {
	kind         blockKind
	id           string // event ID: the block index
	callID, name string
	args         strings.Builder // tool input JSON
	startInput   string          // tool input given whole in content_block_start
	signature    strings.Builder
	redacted     string
	open         bool
}

// state turns stream events into normalized events. emit returns false once
// the consumer stops; every method then returns false and emits nothing
// more.
type state struct {
	emit func(llm.Event) bool

	blocks  map[int64]*block
	callIDs map[string]bool // tool call IDs used so far
	order   []*block        // in start order, for closing at message_stop
	current *block          // the open text or reasoning block

	usage    messages.Tokens
	thinking int64 // output tokens spent thinking
	reason   sdk.StopReason
	stopped  bool // message_stop arrived
}

func newState(emit func(llm.Event) bool) *state {
	return &state{emit: emit, blocks: map[int64]*block{}, callIDs: map[string]bool{}}
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
	case "tool_use":
		if cb.Name == "" {
			return true // cannot be executed nor sent back: ignored
		}
		b.kind = blockTool
		b.callID, b.name = cb.ID, cb.Name
		if b.callID == "" || s.callIDs[b.callID] {
			// Compatible servers that send no ID or repeat one: call IDs
			// must be unique within a step.
			b.callID = "toolu_" + b.id
		}
		s.callIDs[b.callID] = true
		b.startInput = cb.JSON.Input.Raw()
		return s.emit(llm.Event{Kind: llm.ToolInputStart, ID: b.id, CallID: b.callID, Name: b.name})
	}
	return true
}

// delta handles a content_block_delta. Citations deltas are ignored.
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
		return s.emit(llm.Event{Kind: llm.TextEnd, ID: b.id})
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
			s.emit(llm.Event{Kind: llm.ToolCall, CallID: b.callID, Name: b.name, Input: wire.ToolInput(input)})
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
	return llm.Event{Kind: llm.StepFinish, Finish: finishReason(s.reason), Usage: u}
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
	}
	return llm.FinishOther
}
