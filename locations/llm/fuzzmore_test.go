package llm

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// FuzzParseModelRef: an accepted reference splits at its first '/', has
// no white space around either part, and prints back as itself;
// refusals are typed invalid errors.
func FuzzParseModelRef(f *testing.F) {
	for _, s := range []string{"openai/gpt-5", "openrouter/meta/llama", "/m", "p/", "p", " p/m", "p /m", "p/ m", "p/m\n", "é/\u00a0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseModelRef(s)
		if err != nil {
			var e *messages.Error
			if !errors.As(err, &e) || e.Type != messages.ErrInvalid {
				t.Fatalf("ParseModelRef(%q) error %v is not typed invalid", s, err)
			}
			return
		}
		if ref.ProviderID == "" || ref.ID == "" || strings.Contains(ref.ProviderID, "/") {
			t.Fatalf("ParseModelRef(%q) = %+v", s, ref)
		}
		if ref.String() != s {
			t.Fatalf("ParseModelRef(%q) prints as %q", s, ref.String())
		}
		for _, p := range []string{ref.ProviderID, ref.ID} {
			if strings.TrimSpace(p) != p {
				t.Fatalf("ParseModelRef(%q) part %q has white space around it", s, p)
			}
		}
		again, err := ParseModelRef(ref.String())
		if err != nil || again != ref {
			t.Fatalf("re-parse of %q: %+v %v", s, again, err)
		}
	})
}
