package script_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait, so a broken gate fails a test instead of
// hanging it.
const testTimeout = 10 * time.Second

// ctxT returns a context that ends with the test or after testTimeout.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// collect drains seq and returns its events and final error.
func collect(seq iter.Seq2[llm.Event, error]) ([]llm.Event, error) {
	var evs []llm.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// describe renders events compactly, one string each, for table tests.
func describe(evs []llm.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		var b strings.Builder
		b.WriteString(ev.Kind.String())
		if ev.ID != "" {
			b.WriteString(" " + ev.ID)
		}
		if ev.CallID != "" || ev.Name != "" {
			fmt.Fprintf(&b, " %s:%s", ev.CallID, ev.Name)
		}
		if ev.Kind == llm.TextDelta || ev.Kind == llm.ReasoningDelta || ev.Kind == llm.ToolInputDelta {
			fmt.Fprintf(&b, " %q", ev.Text)
		}
		if ev.Kind == llm.ToolResult {
			fmt.Fprintf(&b, " %q", ev.Output)
			if ev.IsError {
				b.WriteString(" error")
			}
		}
		if ev.Input != nil {
			b.WriteString(" " + string(ev.Input))
		}
		if ev.Executed {
			b.WriteString(" executed")
		}
		if ev.ProviderMetadata != nil {
			b.WriteString(" meta=" + string(ev.ProviderMetadata))
		}
		if ev.Kind == llm.StepFinish {
			b.WriteString(" " + ev.Finish)
			if ev.Usage != (messages.Tokens{}) {
				fmt.Fprintf(&b, " in=%d out=%d reasoning=%d read=%d write=%d",
					ev.Usage.Input, ev.Usage.Output, ev.Usage.Reasoning, ev.Usage.Cache.Read, ev.Usage.Cache.Write)
			}
		}
		out[i] = b.String()
	}
	return out
}

// userRequest returns a request holding one user message.
func userRequest(text string) llm.Request {
	return llm.Request{
		Model:    messages.ModelRef{ProviderID: "script", ID: "test"},
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: text}}}},
	}
}

// asLLMError returns err as an *llm.Error, failing the test otherwise.
func asLLMError(t *testing.T, err error) *llm.Error {
	t.Helper()
	e, ok := err.(*llm.Error)
	if !ok {
		t.Fatalf("error = %T %v, want *llm.Error", err, err)
	}
	return e
}
