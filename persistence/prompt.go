package persistence

import (
	"context"

	"github.com/sessiond/sessiond/messages"
)

// PromptRequest is sessions.prompt: admission plus whether to resume.
type PromptRequest struct {
	// ID is the prompt's message ID: supplied, it makes the admission
	// idempotent (an exact retry gets the same receipt); empty, one is
	// generated.
	ID        messages.MessageID `json:"id,omitempty"`
	SessionID messages.SessionID `json:"sessionID"`
	// Prompt is the text and attachments; text or a file is required.
	Prompt messages.Prompt `json:"prompt"`
	// Delivery is Steer (the default: at the next step boundary) or Queue
	// (once the Session would otherwise go idle).
	Delivery messages.Delivery `json:"delivery,omitempty"`
	// Resume nil or true schedules execution after admission; false admits
	// only.
	Resume *bool `json:"resume,omitempty"`
}

// PromptResult is the admission receipt and whether the caller owes the
// Session a wake.
type PromptResult struct {
	Admitted Admitted
	// Wake is true unless Resume was false, including on an exact retry.
	Wake bool
	// Created is false for an exact retry.
	Created bool
}

// Prompt is the admission half of sessions.prompt, shared by every caller
// (the execution router, the HTTP adapter, the CLI).
func Prompt(ctx context.Context, st Store, req PromptRequest) (PromptResult, error) {
	a, created, err := st.Admit(ctx, Admission{ID: req.ID, SessionID: req.SessionID, Prompt: req.Prompt, Delivery: req.Delivery})
	if err != nil {
		return PromptResult{}, err
	}
	return PromptResult{Admitted: a, Wake: req.Resume == nil || *req.Resume, Created: created}, nil
}

// Create is sessions.create: it creates the Session when absent and returns
// the existing one on reuse.
func Create(ctx context.Context, st Store, req CreateSession) (Session, error) {
	s, _, err := st.CreateSession(ctx, req)
	return s, err
}
