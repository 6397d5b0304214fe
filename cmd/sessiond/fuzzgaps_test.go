package main

import (
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
		strings.Repeat("a", 199) + "é", "\xff\xfe", `{"error":{"type":"x"}} trailing`,
	} {
		f.Add(uint16(502), []byte(s))
	}
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		err := responseError(int(status), body)
		ae, ok := err.(*apiError)
		if !ok || ae.Status != int(status) {
			t.Fatalf("%#v", err)
		}
		var env struct {
			Error *struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Type != "" {
			if ae.Type != env.Error.Type || ae.Message != env.Error.Message {
				t.Fatalf("envelope %s read as %#v", body, ae)
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
