package llm

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestToolInput(t *testing.T) {
	for in, want := range map[string]string{
		"":                 `{}`,
		"  \n":             `{}`,
		`{"a":1}`:          `{"a":1}`,
		`{"a": [1, 2]} `:   `{"a": [1, 2]} `,
		`{"a":`:            `"{\"a\":"`,
		"not json \u2028x": `"not json \u2028x"`,
	} {
		got := ToolInput([]byte(in))
		if string(got) != want || !json.Valid(got) {
			t.Errorf("ToolInput(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzToolInput: the result is always valid JSON, equal to raw when raw is
// non-blank valid JSON, and otherwise a JSON string holding raw (or {}).
func FuzzToolInput(f *testing.F) {
	for _, s := range []string{"", "  \n", `{"a":1}`, `{"a": [1, 2]} `, `{"a":`, "not json \u2028x", "\xff", `"\ud800"`, "\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := ToolInput([]byte(raw))
		if !json.Valid(got) {
			t.Fatalf("ToolInput(%q) = %q is not valid JSON", raw, got)
		}
		switch {
		case strings.TrimSpace(raw) == "":
			if string(got) != "{}" {
				t.Fatalf("blank %q gave %s", raw, got)
			}
		case json.Valid([]byte(raw)):
			if string(got) != raw {
				t.Fatalf("valid %q changed to %s", raw, got)
			}
		default:
			var s string
			if err := json.Unmarshal(got, &s); err != nil {
				t.Fatalf("invalid %q gave non-string %s", raw, got)
			}
			if utf8.ValidString(raw) && s != raw {
				t.Fatalf("string of %q holds %q", raw, s)
			}
		}
	})
}
