package ssetest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheck(t *testing.T) {
	ev := func(k llm.EventKind, id string) llm.Event { return llm.Event{Kind: k, ID: id} }
	finish := llm.Event{Kind: llm.StepFinish, Finish: llm.FinishStop}
	start := llm.Event{Kind: llm.ToolInputStart, ID: "t", CallID: "c", Name: "f"}
	end := llm.Event{Kind: llm.ToolInputEnd, ID: "t", CallID: "c", Name: "f"}
	call := llm.Event{Kind: llm.ToolCall, CallID: "c", Name: "f", Input: json.RawMessage(`{}`)}
	typed := &llm.Error{Type: messages.ErrProviderTransport}
	hostedCall := call
	hostedCall.Executed = true
	result := llm.Event{Kind: llm.ToolResult, CallID: "c", Name: "f", Output: "ok", ProviderMetadata: json.RawMessage(`{}`)}
	for _, tc := range []struct {
		name   string
		events []llm.Event
		err    error
		ok     bool
	}{
		{"text", []llm.Event{ev(llm.TextStart, "1"), ev(llm.TextDelta, "1"), ev(llm.TextEnd, "1"), finish}, nil, true},
		{"tool", []llm.Event{start, end, call, finish}, nil, true},
		{"error ends", []llm.Event{ev(llm.TextStart, "1")}, typed, true},
		{"untyped error", nil, errors.New("x"), false},
		{"no end", []llm.Event{ev(llm.TextStart, "1"), ev(llm.TextDelta, "1")}, nil, false},
		{"open at finish", []llm.Event{ev(llm.TextStart, "1"), finish}, nil, false},
		{"overlap", []llm.Event{ev(llm.TextStart, "1"), ev(llm.ReasoningStart, "2")}, typed, false},
		{"tool while text open", []llm.Event{ev(llm.TextStart, "1"), start}, typed, false},
		{"delta wrong id", []llm.Event{ev(llm.TextStart, "1"), ev(llm.TextDelta, "2")}, typed, false},
		{"call without input", []llm.Event{call, finish}, nil, false},
		{"input without call", []llm.Event{start, end, finish}, nil, false},
		{"bad input", []llm.Event{start, end, {Kind: llm.ToolCall, CallID: "c", Input: json.RawMessage(`{`)}, finish}, nil, false},
		{"hosted result", []llm.Event{start, end, hostedCall, result, finish}, nil, true},
		{"result of a local call", []llm.Event{start, end, call, result, finish}, nil, false},
		{"result before its call", []llm.Event{start, end, result, hostedCall, finish}, nil, false},
		{"result twice", []llm.Event{start, end, hostedCall, result, result, finish}, nil, false},
		{"result without metadata", []llm.Event{start, end, hostedCall, {Kind: llm.ToolResult, CallID: "c", Name: "f"}, finish}, nil, false},
		{"after finish", []llm.Event{finish, ev(llm.TextStart, "1")}, nil, false},
		{"finish and error", []llm.Event{finish}, typed, false},
		{"finish without reason", []llm.Event{{Kind: llm.StepFinish}}, nil, false},
		{"nothing", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check(tc.events, tc.err); (err == nil) != tc.ok {
				t.Fatalf("Check = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCollectRejectsYieldAfterError(t *testing.T) {
	seq := func(yield func(llm.Event, error) bool) {
		if !yield(llm.Event{}, errors.New("boom")) {
			return
		}
		yield(llm.Event{Kind: llm.TextStart}, nil)
	}
	if _, err := Collect(seq); err == nil || !strings.Contains(err.Error(), "after its error") {
		t.Fatalf("Collect = %v", err)
	}
}

func TestSplit(t *testing.T) {
	if got := Split("abcdef", 2, 2, 0, 4, 99); strings.Join(got, "|") != "ab|cd|ef" {
		t.Fatalf("Split = %q", got)
	}
	got := SplitAfter("a\n\nbcd\n\n", "\n\n")
	if strings.Join(got, "") != "a\n\nbcd\n\n" || len(got) != 4 {
		t.Fatalf("SplitAfter = %q", got)
	}
}

func TestServerAndTransport(t *testing.T) {
	srv := NewServer(t, Reply{Chunks: []string{"ab", "cd"}}, Reply{Status: 418, Chunks: []string{"{}"}})
	for i, want := range []string{"abcd", "{}", "{}"} {
		res, err := srv.Client().Post(srv.URL+"/x", "application/json", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if string(b) != want {
			t.Fatalf("reply %d = %q, want %q", i, b, want)
		}
	}
	if reqs := srv.Requests(); len(reqs) != 3 || string(srv.LastBody()) != "body" || reqs[0].Path != "/x" {
		t.Fatalf("requests %+v", reqs)
	}

	tr := &Transport{Chunks: []string{"a", "bc", "", "d"}}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://x.invalid", strings.NewReader("q"))
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	var reads []string
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			reads = append(reads, string(buf[:n]))
		}
		if err != nil {
			break
		}
	}
	if strings.Join(reads, "|") != "a|bc|d" || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("reads %q, header %v", reads, res.Header)
	}
}
