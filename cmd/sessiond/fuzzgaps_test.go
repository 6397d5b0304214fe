package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzResponseError decodes any error response body: the API's envelope
// gives its type and message; anything else is an "http" error whose
// message is the start of the body, cut at a character boundary to at
// most 200 bytes, or the status text for an empty body.
func FuzzResponseError(f *testing.F) {
	for _, s := range []string{
		`{"error":{"type":"session.not-found","message":"session \"ses_x\" not found"}}`, `{"error":{"type":"","message":"m"}}`,
		`{"error":null}`, `{"error":{"type":1}}`, `<html>502 Bad Gateway</html>`, ``, "  \n", "0" + strings.Repeat("é", 150),
		strings.Repeat("a", 199) + "é", strings.Repeat("a", 200), "\xff\xfe", `{"error":{"type":"x"}} trailing`,
		// How encoding/json fills a struct, which the oracle models.
		`{"ERROR":{"TYPE":"a","Message":"m"}}`, `{"error":{"type":"a","message":"m"},"Error":{"type":"b"}}`,
		`{"error":{"type":"a"},"error":null}`, `{"error":null,"error":{"message":"m","type":"t"}}`,
		`{"error":{"type":"a","message":5}}`, `{"error":{"type":null,"message":"m"}}`, `{"error":{"type":"a","type":null}}`,
		`{"error":5}`, `[{"error":{"type":"a"}}]`, `null`, `{"error":{"type":"a","type":"b","x":[1,{"type":2}]}}`,
		`{"error":{"type":"a","meſſage":"long s"}}`, `{"eRRor":{"type":"\ud800"}}`, `{"other":7,"error":{"type":"a"},"x":"y"}`,
	} {
		f.Add(uint16(502), []byte(s))
	}
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		err := responseError(int(status), body)
		ae, ok := err.(*apiError)
		if !ok || ae.Status != int(status) {
			t.Fatalf("%#v", err)
		}
		if typ, msg, ok := envelope(body); ok {
			if ae.Type != typ || ae.Message != msg {
				t.Fatalf("envelope %s read as %#v, want type %q message %q", body, ae, typ, msg)
			}
			return
		}
		if ae.Type != "http" || ae.Message == "" {
			t.Fatalf("body %q read as %#v", body, ae)
		}
		trimmed := strings.TrimSpace(string(body))
		if trimmed == "" {
			return
		}
		if len(trimmed) <= 200 {
			if ae.Message != trimmed {
				t.Fatalf("short body %q read as message %q", body, ae.Message)
			}
			return
		}
		msg, cut := strings.CutSuffix(ae.Message, "…")
		if !cut || len(msg) > 200 || utf8.ValidString(trimmed) && len(msg) < 200-utf8.UTFMax || !strings.HasPrefix(trimmed, msg) {
			t.Fatalf("body %q read as message %q", body, ae.Message)
		}
		if utf8.ValidString(trimmed) && !utf8.ValidString(ae.Message) {
			t.Fatalf("valid body %q cut inside a character: %q", body, ae.Message)
		}
	})
}

// TestResponseErrorWithoutStatusText: an empty body with a status that has
// no standard text still says something (it said "http:  (HTTP 596)").
func TestResponseErrorWithoutStatusText(t *testing.T) {
	for status, want := range map[int]string{596: "http: empty response (HTTP 596)", 502: "http: Bad Gateway (HTTP 502)"} {
		if got := responseError(status, []byte(" \n")).Error(); got != want {
			t.Errorf("status %d: %q, want %q", status, got, want)
		}
	}
}

// envelope is FuzzResponseError's oracle: whether body is an API error
// envelope with a non-empty type, and its type and message. It walks the
// JSON tokens in order rather than decoding into a struct as responseError
// does, and models what encoding/json does there: keys match
// case-insensitively (bytes.EqualFold), a repeated "error" object fills
// the one before it, null empties the pointer but not a string, and a value
// of the wrong type anywhere it lands fails the whole decode.
func envelope(body []byte) (typ, msg string, ok bool) {
	if !json.Valid(body) {
		return "", "", false
	}
	fields, isObject := members(body)
	if !isObject {
		return "", "", false // null, or a type error
	}
	set := false
	for _, f := range fields {
		if !strings.EqualFold(f.key, "error") {
			continue
		}
		switch f.value[0] {
		case 'n':
			set, typ, msg = false, "", ""
		case '{':
			if !set {
				typ, msg = "", ""
			}
			set = true
			inner, _ := members(f.value)
			for _, g := range inner {
				var dst *string
				switch {
				case strings.EqualFold(g.key, "type"):
					dst = &typ
				case strings.EqualFold(g.key, "message"):
					dst = &msg
				default:
					continue
				}
				switch g.value[0] {
				case 'n':
				case '"':
					if json.Unmarshal(g.value, dst) != nil {
						panic("valid JSON string did not decode")
					}
				default:
					return "", "", false
				}
			}
		default:
			return "", "", false
		}
	}
	return typ, msg, set && typ != ""
}

type member struct {
	key   string
	value json.RawMessage // trimmed: starts with its first byte
}

// members lists the members of a valid JSON object in order, keeping
// repeats; isObject is false for any other value.
func members(obj []byte) (out []member, isObject bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			panic(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			panic(err)
		}
		out = append(out, member{key: tok.(string), value: bytes.TrimSpace(v)})
	}
	return out, true
}
