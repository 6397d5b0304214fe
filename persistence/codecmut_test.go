package persistence_test

// Tests written while mutation testing persistence/decode.go: each pins a
// behaviour that a changed line did not break in any other test.

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// textLevel is a number kind that takes a JSON string (through
// encoding.TextUnmarshaler).
type textLevel int

func (l *textLevel) UnmarshalText(b []byte) error { *l = textLevel(len(b)); return nil }

// TestDecodeErrorsDescribeJSONShapes: a type that decodes from text wants
// a string whatever its kind, and a byte array (unlike a byte slice) wants
// a JSON array, not base64.
func TestDecodeErrorsDescribeJSONShapes(t *testing.T) {
	var v struct {
		L textLevel `json:"l"`
		K [4]byte   `json:"k"`
	}
	if err := persistence.DecodeStrict([]byte(`{"l":"ab"}`), &v); err != nil || v.L != 2 {
		t.Fatalf("text member: %v, %d", err, v.L)
	}
	for body, want := range map[string]string{
		`{"l":1}`:   "l: want a string, got a number",
		`{"k":"x"}`: "k: want a JSON array, got a string",
	} {
		err := persistence.DecodeStrict([]byte(body), &v)
		if err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want invalid %q", body, err, want)
		}
	}
}

// TestDecodePromptRequestLeavesSizeToTheStore: the request decoder checks
// the prompt's shape only; how large a prompt may be is the store's limit
// (Options), so a large one decodes.
func TestDecodePromptRequestLeavesSizeToTheStore(t *testing.T) {
	text := strings.Repeat("x", 4<<20)
	req, err := persistence.DecodePromptRequest([]byte(`{"prompt":{"text":"` + text + `"}}`))
	if err != nil || len(req.Prompt.Text) != len(text) {
		t.Fatalf("a 4 MiB prompt: %v", err)
	}
}

// TestDecodeSyntaxErrorSaysWhere: malformed JSON is refused with the
// offset the decoder stopped at.
func TestDecodeSyntaxErrorSaysWhere(t *testing.T) {
	_, err := persistence.DecodeCreateSession([]byte(`{"location":}`))
	want := "body: malformed JSON at offset 13: invalid character '}' looking for beginning of value"
	if err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
		t.Fatalf("%v, want invalid %q", err, want)
	}
}
