package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sessiond/sessiond/messages"
)

// DecodeCreateSession decodes a sessions.create request body strictly:
// one JSON object, no unknown fields, typed errors naming the field.
func DecodeCreateSession(b []byte) (CreateSession, error) {
	var req CreateSession
	if err := decodeStrict(b, &req); err != nil {
		return req, err
	}
	if req.ID != "" {
		if err := req.ID.Validate(); err != nil {
			return req, err
		}
	}
	return req, ValidateLocation(req.Location)
}

// DecodePromptRequest decodes a sessions.prompt request body strictly. The
// Session ID usually comes from the route, so it may be absent here.
func DecodePromptRequest(b []byte) (PromptRequest, error) {
	var req PromptRequest
	if err := decodeStrict(b, &req); err != nil {
		return req, err
	}
	if req.ID != "" {
		if err := req.ID.Validate(); err != nil {
			return req, err
		}
	}
	if req.SessionID != "" {
		if err := req.SessionID.Validate(); err != nil {
			return req, err
		}
	}
	d := req.Delivery
	if d == "" {
		d = messages.DefaultDelivery
	}
	// The size limit is the store's; here only shape is checked.
	return req, ValidatePrompt(req.Prompt, d, int(^uint(0)>>1))
}

// decodeStrict decodes exactly one JSON object into v.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return messages.Errorf(messages.ErrInvalid, "body: unexpected data after the JSON object")
	}
	return nil
}

// jsonError turns a decoding error into a typed invalid error naming the
// field when the decoder knows it.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return messages.Errorf(messages.ErrInvalid, "body: malformed JSON at offset %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return messages.Errorf(messages.ErrInvalid, "%s: want %s, got JSON %s", field, typ.Type, typ.Value)
	case errors.Is(err, io.EOF):
		return messages.Errorf(messages.ErrInvalid, "body: empty, want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return messages.Errorf(messages.ErrInvalid, "body: truncated JSON")
	}
	return messages.Errorf(messages.ErrInvalid, "body: %s", fmt.Sprint(err))
}
