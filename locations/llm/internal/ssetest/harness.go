package ssetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// MustStream streams req from p and fails tb when the stream breaks the
// contract of Check. It returns the events and the stream's final error.
func MustStream(tb testing.TB, p llm.Provider, req llm.Request) ([]llm.Event, error) {
	tb.Helper()
	events, err := Collect(p.Stream(context.Background(), req))
	if bad := Check(events, err); bad != nil {
		tb.Fatalf("stream contract: %v\nevents:\n%s\nerr: %v", bad, strings.Join(Lines(events), "\n"), err)
	}
	return events, err
}

// Outcome is MustStream reduced to comparable values: the event lines and
// the final error as "type: message" ("" for none).
func Outcome(tb testing.TB, p llm.Provider, req llm.Request) ([]string, string) {
	tb.Helper()
	events, err := MustStream(tb, p, req)
	errText := ""
	if err != nil {
		le := err.(*llm.Error)
		errText = string(le.Type) + ": " + le.Message
	}
	return Lines(events), errText
}

// CheckSplits cuts body into chunks (each byte of cuts is the length of
// the next chunk, minus one; no cuts leaves it whole) and fails t unless
// streaming the chunks gives the same outcome as streaming body whole.
// stream runs one stream whose body arrives in exactly the given chunks.
func CheckSplits(t *testing.T, body string, cuts []byte, stream func(t *testing.T, chunks []string) ([]string, string)) {
	t.Helper()
	var chunks []string
	rest := body
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if len(cuts) > 0 {
			n = min(int(cuts[i%len(cuts)])+1, len(rest))
		}
		chunks, rest = append(chunks, rest[:n]), rest[n:]
	}
	wantEvents, wantErr := stream(t, []string{body})
	gotEvents, gotErr := stream(t, chunks)
	if !slices.Equal(gotEvents, wantEvents) || gotErr != wantErr {
		t.Fatalf("split into %d chunks:\n%s\nerr %q\nwant:\n%s\nerr %q", len(chunks),
			strings.Join(gotEvents, "\n"), gotErr, strings.Join(wantEvents, "\n"), wantErr)
	}
}

// BenchCase is one stream of BenchStream: its body and how many events the
// adapter turns it into.
type BenchCase struct {
	Name, Body string
	Events     int
}

// BenchStream measures an adapter's cost per stream against a Server: for
// each case a raw/ row reads the same bytes through net/http without
// parsing (a POST of rawBody to rawPath), and an adapter/ row streams req
// from the provider newProvider builds, reporting its ratio to the raw row
// as x-raw.
func BenchStream(b *testing.B, cases []BenchCase, newProvider func(testing.TB, *Server) llm.Provider,
	req llm.Request, rawPath, rawBody string) {
	for _, bc := range cases {
		srv := NewServer(b, Reply{Chunks: []string{bc.Body}})
		var raw float64
		b.Run("raw/"+bc.Name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.Body)))
			b.ReportAllocs()
			for b.Loop() {
				rawRead(b, srv, rawPath, rawBody)
			}
			raw = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run("adapter/"+bc.Name, func(b *testing.B) {
			p := newProvider(b, srv)
			b.SetBytes(int64(len(bc.Body)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for ev, err := range p.Stream(context.Background(), req) {
					if err != nil {
						b.Fatal(err)
					}
					n++
					if ev.Kind == llm.StepFinish && n != bc.Events {
						b.Fatalf("%d events, want %d", n, bc.Events)
					}
				}
			}
			if raw > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/raw, "x-raw")
			}
		})
	}
}

// rawRead posts body to srv's path and reads the whole response without
// parsing it.
func rawRead(b *testing.B, srv *Server, path, body string) {
	res, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		b.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatal(res.Status)
	}
}

// FuzzHTTPError is the body of an adapter's fuzz target for HTTP error
// responses: newProvider builds the adapter over transport, and every
// status 400-599 with any body and any Retry-After-Ms and Retry-After
// headers must give no event and one *llm.Error with that status, a known
// type, a message (from the body, else the status text, which is "" only
// for statuses like 520), and a delay only when retryable and never
// negative.
func FuzzHTTPError(f *testing.F, newProvider func(t *testing.T, transport http.RoundTripper) llm.Provider, req llm.Request) {
	f.Fuzz(func(t *testing.T, status uint16, body, ms, secs string) {
		code := 400 + int(status)%200
		h := http.Header{"Content-Type": {"application/json"}}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		if secs != "" {
			h.Set("Retry-After", secs)
		}
		p := newProvider(t, &Transport{Status: code, Header: h, Chunks: []string{body}})
		events, err := MustStream(t, p, req)
		if len(events) != 0 {
			t.Fatalf("status %d gave %d events", code, len(events))
		}
		var le *llm.Error
		if !errors.As(err, &le) {
			t.Fatalf("status %d: error %T %v", code, err, err)
		}
		switch {
		case le.StatusCode != code:
			t.Fatalf("status %d reported as %d (%v)", code, le.StatusCode, le)
		case le.Message == "" && (strings.TrimSpace(body) != "" || http.StatusText(code) != ""):
			t.Fatalf("status %d: empty message for body %q", code, body)
		case le.Type == "" || le.Type == messages.ErrProviderUnknown:
			t.Fatalf("status %d: untyped error %+v", code, le)
		case le.RetryAfter < 0 || (le.RetryAfter > 0 && !le.Retryable()):
			t.Fatalf("status %d: retry after %v for %s", code, le.RetryAfter, le.Type)
		}
	})
}

// MadeUpToolCalls returns a history of calls of names a model may make up
// (another provider's, a chat template's leaked tokens) and one real name,
// each answered with the runner's refusal, and the names as
// wire.ToolName lowers them (in order; ID prefix starts each call's ID).
func MadeUpToolCalls(idPrefix string) ([]llm.Message, []string) {
	var history []llm.Message
	var lowered []string
	for i, name := range []string{"functions.read", "read<|channel|>commentary", "read"} {
		id := fmt.Sprint(idPrefix, i)
		history = append(history,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, CallID: id, Name: name, Input: json.RawMessage(`{}`)}}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: id, Name: name, Output: "unknown tool", IsError: true}}})
		lowered = append(lowered, name)
	}
	sum := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:6])
	}
	lowered[0] = "functions_read_" + sum(lowered[0])
	lowered[1] = "read__channel__commentary_" + sum(lowered[1])
	return history, lowered
}
