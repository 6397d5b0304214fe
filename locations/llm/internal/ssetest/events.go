package ssetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"

	"github.com/sessiond/sessiond/locations/llm"
)

// Collect drains a provider stream and returns its events and its final
// error. It reports a contract violation as the error if the stream yields
// anything after an error.
func Collect(seq iter.Seq2[llm.Event, error]) ([]llm.Event, error) {
	var (
		events []llm.Event
		final  error
		after  bool
	)
	for ev, err := range seq {
		if final != nil {
			after = true
			continue
		}
		if err != nil {
			final = err
			continue
		}
		events = append(events, ev)
	}
	if after {
		return events, errors.New("ssetest: stream yielded after its error")
	}
	return events, final
}

// Line prints one event compactly and deterministically, with every field
// its kind uses, for comparison against expected transcripts.
func Line(ev llm.Event) string {
	switch ev.Kind {
	case llm.TextStart, llm.TextEnd, llm.ReasoningStart:
		return fmt.Sprintf("%s %s", ev.Kind, ev.ID)
	case llm.ReasoningEnd:
		if len(ev.ProviderMetadata) > 0 {
			return fmt.Sprintf("%s %s %s", ev.Kind, ev.ID, ev.ProviderMetadata)
		}
		return fmt.Sprintf("%s %s", ev.Kind, ev.ID)
	case llm.TextDelta, llm.ReasoningDelta, llm.ToolInputDelta:
		return fmt.Sprintf("%s %s %s", ev.Kind, ev.ID, strconv.Quote(ev.Text))
	case llm.ToolInputStart, llm.ToolInputEnd:
		return fmt.Sprintf("%s %s %s %s", ev.Kind, ev.ID, ev.CallID, ev.Name)
	case llm.ToolCall:
		l := fmt.Sprintf("%s %s %s %s", ev.Kind, ev.CallID, ev.Name, ev.Input)
		if ev.Executed {
			l += " executed"
			if len(ev.ProviderMetadata) > 0 {
				l += " " + string(ev.ProviderMetadata)
			}
		}
		return l
	case llm.ToolResult:
		l := fmt.Sprintf("%s %s %s %s", ev.Kind, ev.CallID, ev.Name, strconv.Quote(ev.Output))
		if ev.IsError {
			l += " error"
		}
		return l + " " + string(ev.ProviderMetadata)
	case llm.StepFinish:
		u := ev.Usage
		return fmt.Sprintf("%s %s in=%d out=%d reasoning=%d cache.read=%d cache.write=%d cost=%.6f",
			ev.Kind, ev.Finish, u.Input, u.Output, u.Reasoning, u.Cache.Read, u.Cache.Write, ev.Cost)
	}
	return ev.Kind.String()
}

// Lines prints events with Line.
func Lines(events []llm.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = Line(ev)
	}
	return out
}

// Check verifies the stream contract of package llm on a collected stream:
//
//   - the stream ends with exactly one StepFinish, or with err (an *llm.Error)
//     and no StepFinish;
//   - at most one text and one reasoning block are open at a time, and a
//     text or reasoning block is closed before any later block starts;
//   - deltas and ends belong to an open block with the same ID;
//   - every tool input that starts ends, and is followed by its ToolCall,
//     before StepFinish; every ToolCall has valid JSON input;
//   - a ToolResult settles, once, a hosted ToolCall that came before it,
//     and has a name and JSON metadata;
//   - nothing is open at StepFinish.
func Check(events []llm.Event, err error) error {
	if err != nil {
		var le *llm.Error
		if !errors.As(err, &le) {
			return fmt.Errorf("final error %T is not an *llm.Error: %v", err, err)
		}
	}
	var (
		text, reasoning string // open block IDs
		textOpen        bool
		reasoningOpen   bool
		tools           = map[string]string{} // open tool input ID -> call ID
		ended           = map[string]bool{}   // call IDs whose input ended without a ToolCall yet
		hosted          = map[string]bool{}   // hosted call IDs -> settled
		finishes        int
	)
	closeCheck := func(i int) error {
		if textOpen || reasoningOpen {
			return fmt.Errorf("event %d (%s) starts a block while a text or reasoning block is open", i, events[i].Kind)
		}
		return nil
	}
	for i, ev := range events {
		if finishes > 0 {
			return fmt.Errorf("event %d (%s) after step-finish", i, ev.Kind)
		}
		switch ev.Kind {
		case llm.TextStart, llm.ReasoningStart:
			if err := closeCheck(i); err != nil {
				return err
			}
			if ev.Kind == llm.TextStart {
				text, textOpen = ev.ID, true
			} else {
				reasoning, reasoningOpen = ev.ID, true
			}
		case llm.TextDelta, llm.TextEnd:
			if !textOpen || ev.ID != text {
				return fmt.Errorf("event %d (%s %s) outside an open text block", i, ev.Kind, ev.ID)
			}
			textOpen = textOpen && ev.Kind != llm.TextEnd
		case llm.ReasoningDelta, llm.ReasoningEnd:
			if !reasoningOpen || ev.ID != reasoning {
				return fmt.Errorf("event %d (%s %s) outside an open reasoning block", i, ev.Kind, ev.ID)
			}
			reasoningOpen = reasoningOpen && ev.Kind != llm.ReasoningEnd
		case llm.ToolInputStart:
			if err := closeCheck(i); err != nil {
				return err
			}
			if _, dup := tools[ev.ID]; dup || ev.CallID == "" || ev.Name == "" {
				return fmt.Errorf("event %d: bad tool-input-start %q call %q name %q", i, ev.ID, ev.CallID, ev.Name)
			}
			tools[ev.ID] = ev.CallID
		case llm.ToolInputDelta:
			if _, ok := tools[ev.ID]; !ok {
				return fmt.Errorf("event %d: tool-input-delta for %q which is not open", i, ev.ID)
			}
		case llm.ToolInputEnd:
			call, ok := tools[ev.ID]
			if !ok || call != ev.CallID {
				return fmt.Errorf("event %d: tool-input-end for %q which is not open", i, ev.ID)
			}
			delete(tools, ev.ID)
			ended[call] = true
		case llm.ToolCall:
			if !ended[ev.CallID] {
				return fmt.Errorf("event %d: tool-call %q without a completed tool input", i, ev.CallID)
			}
			delete(ended, ev.CallID)
			if !jsonValid(ev.Input) {
				return fmt.Errorf("event %d: tool-call %q has invalid JSON input %q", i, ev.CallID, ev.Input)
			}
			if ev.Executed {
				hosted[ev.CallID] = false
			}
		case llm.ToolResult:
			settled, ok := hosted[ev.CallID]
			switch {
			case !ok || settled:
				return fmt.Errorf("event %d: tool-result for %q, which is no unsettled hosted call before it", i, ev.CallID)
			case ev.Name == "" || !jsonValid(ev.ProviderMetadata):
				return fmt.Errorf("event %d: tool-result %q with name %q and metadata %q", i, ev.CallID, ev.Name, ev.ProviderMetadata)
			}
			hosted[ev.CallID] = true
		case llm.StepFinish:
			finishes++
			if textOpen || reasoningOpen || len(tools) > 0 || len(ended) > 0 {
				return fmt.Errorf("step-finish with open blocks (text %v, reasoning %v, tools %d, calls %d)",
					textOpen, reasoningOpen, len(tools), len(ended))
			}
			if ev.Finish == "" {
				return errors.New("step-finish without a finish reason")
			}
		default:
			return fmt.Errorf("event %d has unknown kind %d", i, ev.Kind)
		}
	}
	switch {
	case err != nil && finishes > 0:
		return errors.New("stream has both a step-finish and an error")
	case err == nil && finishes == 0:
		return errors.New("stream ended without step-finish or error")
	}
	return nil
}

// jsonValid reports whether b is one valid JSON value.
func jsonValid(b []byte) bool { return len(b) > 0 && json.Valid(b) }
