package messages

import (
	"strings"
	"testing"
)

// TestValidateIDNamesTheCharacter: ValidateID names the offending
// character of a malformed ID, but it formats one byte of the string with
// %q, so a non-ASCII character is named by its first UTF-8 byte read as
// Latin-1: "per_01HZX…" (the "…" docs/api.md's reply example has) is
// refused with "character 'â' is not allowed", a character the client
// never sent.
func TestValidateIDNamesTheCharacter(t *testing.T) {
	for id, char := range map[string]string{
		"per_01HZX…": "…",
		"per_é":      "é",
	} {
		err := ValidateID("requestID", RequestPrefix, id)
		if err == nil {
			t.Fatalf("%q: accepted", id)
		}
		if !strings.Contains(err.Error(), char) {
			t.Errorf("%q: message %q does not name the character %q", id, err.Error(), char)
		}
	}
}
