package script

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// player plays the steps of one response into one stream.
type player struct {
	ctx   context.Context
	n     int // the request's one-based number
	chunk int
	yield func(llm.Event, error) bool
	block int // counts opened blocks for deterministic block IDs
}

// play emits steps in order and ends the stream with exactly one
// step-finish event or one error, unless the consumer stops early.
func (pl *player) play(steps []Step) {
	tools := false
	for i, s := range steps {
		tools = tools || s.localToolCall()
		switch s.kind {
		case stepFinish:
			pl.emit(llm.Event{Kind: llm.StepFinish, Finish: defaultFinish(s.finish, tools), Usage: s.usage})
			return
		case stepFail:
			e := *s.err
			pl.yield(llm.Event{}, &e)
			return
		}
		if !pl.step(i, s) {
			return
		}
	}
	pl.emit(llm.Event{Kind: llm.StepFinish, Finish: defaultFinish("", tools)})
}

// defaultFinish returns reason, or when it is empty the reason a response
// gets by default: tool-calls after a local tool call, else stop.
func defaultFinish(reason string, tools bool) string {
	switch {
	case reason != "":
		return reason
	case tools:
		return llm.FinishToolCalls
	}
	return llm.FinishStop
}

// step plays one step and reports whether the stream goes on.
func (pl *player) step(i int, s Step) bool {
	switch s.kind {
	case stepText:
		return pl.streamBlock(llm.TextStart, llm.TextDelta, llm.TextEnd, "text", s)
	case stepReasoning:
		return pl.streamBlock(llm.ReasoningStart, llm.ReasoningDelta, llm.ReasoningEnd, "reasoning", s)
	case stepToolCall:
		return pl.toolCall(s)
	case stepToolResult:
		return pl.emit(llm.Event{Kind: llm.ToolResult, CallID: s.callID, Name: s.name, Output: s.text, IsError: s.failed,
			ProviderMetadata: cloneRaw(s.metadata)})
	case stepGate:
		return pl.wait(i, s.gate)
	case stepDelay:
		return pl.sleep(s.delay)
	case stepEvent:
		return pl.emit(cloneEvent(s.event))
	}
	pl.yield(llm.Event{}, llm.Errorf(messages.ErrProviderInvalidRequest,
		"script: request %d: step %d has no kind (build steps with the script package's functions)", pl.n, i))
	return false
}

// emit yields ev unless the context has ended, in which case it ends the
// stream with an aborted error.
func (pl *player) emit(ev llm.Event) bool {
	if pl.ctx.Err() != nil {
		pl.yield(llm.Event{}, aborted(pl.ctx, pl.n))
		return false
	}
	return pl.yield(ev, nil)
}

// nextID returns a block ID unique within the stream.
func (pl *player) nextID(prefix string) string {
	pl.block++
	return fmt.Sprintf("%s_%d", prefix, pl.block)
}

// streamBlock emits a text or reasoning block: start, deltas and, unless the
// step is partial, an end carrying the step's metadata.
func (pl *player) streamBlock(start, delta, end llm.EventKind, prefix string, s Step) bool {
	id := pl.nextID(prefix)
	if !pl.emit(llm.Event{Kind: start, ID: id}) {
		return false
	}
	chunks := s.chunks
	if chunks == nil {
		chunks = split(s.text, pl.chunk)
	}
	for _, c := range chunks {
		if !pl.emit(llm.Event{Kind: delta, ID: id, Text: c}) {
			return false
		}
	}
	if s.partial {
		return true
	}
	return pl.emit(llm.Event{Kind: end, ID: id, ProviderMetadata: cloneRaw(s.metadata)})
}

// toolCall streams a tool call's input and then the complete call.
func (pl *player) toolCall(s Step) bool {
	base := llm.Event{ID: pl.nextID("tool"), CallID: s.callID, Name: s.name}
	ev := base
	ev.Kind = llm.ToolInputStart
	if !pl.emit(ev) {
		return false
	}
	for _, c := range split(string(s.input), pl.chunk) {
		ev = base
		ev.Kind, ev.Text = llm.ToolInputDelta, c
		if !pl.emit(ev) {
			return false
		}
	}
	ev = base
	ev.Kind = llm.ToolInputEnd
	if !pl.emit(ev) {
		return false
	}
	return pl.emit(llm.Event{Kind: llm.ToolCall, CallID: s.callID, Name: s.name, Input: cloneRaw(s.input),
		Executed: s.executed, ProviderMetadata: cloneRaw(s.metadata)})
}

// wait blocks on gate g until it is released or the context ends.
func (pl *player) wait(i int, g *Gate) bool {
	if g == nil {
		pl.yield(llm.Event{}, llm.Errorf(messages.ErrProviderInvalidRequest, "script: request %d: step %d: nil gate", pl.n, i))
		return false
	}
	released := g.arrive()
	select {
	case <-released:
		return true
	case <-pl.ctx.Done():
		pl.yield(llm.Event{}, aborted(pl.ctx, pl.n))
		return false
	}
}

// sleep pauses for d or until the context ends.
func (pl *player) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-pl.ctx.Done():
		pl.yield(llm.Event{}, aborted(pl.ctx, pl.n))
		return false
	}
}

// aborted returns the error a stream ends with when its context ends; n is
// the request number, 0 before the request was recorded.
func aborted(ctx context.Context, n int) *llm.Error {
	cause := context.Cause(ctx)
	if n == 0 {
		return llm.Errorf(messages.ErrAborted, "script: request not sent: %v", cause)
	}
	return llm.Errorf(messages.ErrAborted, "script: request %d cancelled: %v", n, cause)
}

// split cuts s into pieces of at most n runes; "" yields no pieces.
func split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end, runes := 0, 0
		for end < len(s) && runes < n {
			_, size := utf8.DecodeRuneInString(s[end:])
			end += size
			runes++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}
