package wire

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"nil", nil, 0},
		{"ms wins", http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond},
		{"fractional ms", http.Header{"Retry-After-Ms": {"2.5"}}, 2500 * time.Microsecond},
		{"bad ms falls back", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"3"}}, 3 * time.Second},
		{"seconds", http.Header{"Retry-After": {"20"}}, 20 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"negative", http.Header{"Retry-After": {"-4"}}, 0},
		{"date", http.Header{"Retry-After": {now.Add(2 * time.Minute).Format(http.TimeFormat)}}, 2 * time.Minute},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"garbage", http.Header{"Retry-After": {"later"}}, 0},
		{"huge", http.Header{"Retry-After": {"1e300"}}, time.Duration(1<<63 - 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RetryAfter(tc.h, now); got != tc.want {
				t.Fatalf("RetryAfter = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStatusType(t *testing.T) {
	for status, want := range map[int]messages.ErrorType{
		400: messages.ErrProviderInvalidRequest, 401: messages.ErrProviderAuth, 403: messages.ErrProviderAuth,
		404: messages.ErrProviderInvalidRequest, 408: messages.ErrProviderTransport, 413: messages.ErrProviderInvalidRequest,
		422: messages.ErrProviderInvalidRequest, 429: messages.ErrProviderRateLimit, 500: messages.ErrProviderInternal,
		502: messages.ErrProviderInternal, 503: messages.ErrProviderInternal, StatusOverloaded: messages.ErrProviderInternal,
		200: messages.ErrProviderUnknown, 302: messages.ErrProviderUnknown, 0: messages.ErrProviderUnknown,
	} {
		if got := StatusType(status); got != want {
			t.Errorf("StatusType(%d) = %s, want %s", status, got, want)
		}
	}
}

func TestFailure(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), now)
	defer cancel2()
	live := context.Background()
	typed := &llm.Error{Type: messages.ErrProviderAuth, Message: "x"}
	var syntax *json.SyntaxError
	jsonErr := json.Unmarshal([]byte("{"), &struct{}{})
	if !errors.As(jsonErr, &syntax) {
		t.Fatal("expected a syntax error")
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		err       error
		responded bool
		want      messages.ErrorType
	}{
		{"typed passes through", live, fmt.Errorf("wrapped: %w", typed), false, messages.ErrProviderAuth},
		{"cancelled ctx", cancelled, errors.New("anything"), true, messages.ErrAborted},
		{"expired ctx", expired, context.DeadlineExceeded, false, messages.ErrProviderTransport},
		{"canceled error", live, fmt.Errorf("x: %w", context.Canceled), false, messages.ErrAborted},
		{"url error", live, &url.Error{Op: "Post", URL: "http://x", Err: errors.New("dial tcp: connection refused")}, false, messages.ErrProviderTransport},
		{"reset", live, reset, true, messages.ErrProviderTransport},
		{"unexpected EOF", live, io.ErrUnexpectedEOF, true, messages.ErrProviderTransport},
		{"deadline", live, fmt.Errorf("read: %w", context.DeadlineExceeded), false, messages.ErrProviderTransport},
		{"body read failure", live, errors.New("http2: stream closed"), true, messages.ErrProviderTransport},
		{"malformed event", live, jsonErr, true, messages.ErrProviderUnknown},
		{"request build failure", live, errors.New("cannot marshal"), false, messages.ErrProviderUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Failure(tc.ctx, tc.err, tc.responded); got.Type != tc.want {
				t.Fatalf("Failure = %s (%s), want %s", got.Type, got.Message, tc.want)
			}
		})
	}
}

func TestDataURL(t *testing.T) {
	for _, tc := range []struct {
		in, mediaType, data string
		ok                  bool
	}{
		{"data:image/png;base64,iVBORw0KGgo=", "image/png", "iVBORw0KGgo=", true},
		{"data:text/plain;charset=utf-8,hello%20world", "text/plain", "aGVsbG8gd29ybGQ=", true},
		{"data:,A%20brief%20note", "text/plain", "QSBicmllZiBub3Rl", true},
		{"data:;base64,aGk=", "text/plain", "aGk=", true},
		{"data:image/png;base64,!!!", "", "", false},
		{"data:image/png;base64", "", "", false},
		{"data:bad type;x,abc", "", "", false},
		{"https://example.com/a.png", "", "", false},
	} {
		mt, data, ok := DataURL(tc.in)
		if mt != tc.mediaType || data != tc.data || ok != tc.ok {
			t.Errorf("DataURL(%q) = %q %q %v, want %q %q %v", tc.in, mt, data, ok, tc.mediaType, tc.data, tc.ok)
		}
	}
}

func TestFileNote(t *testing.T) {
	for _, tc := range []struct {
		f    messages.File
		want string
	}{
		{messages.File{Mime: "text/plain", Filename: "a.txt", URL: "data:text/plain;base64,aGk="}, "<file name=\"a.txt\" type=\"text/plain\">\nhi\n</file>"},
		{messages.File{Mime: "application/json", URL: "data:application/json,%7B%7D"}, "<file name=\"attachment\" type=\"application/json\">\n{}\n</file>"},
		{messages.File{Mime: "application/zip", Filename: "a.zip", URL: "data:application/zip;base64,UEsD"}, `[Attached file "a.zip" (application/zip); its content is not available to the model.]`},
		{messages.File{Mime: "text/plain", Filename: "bin.txt", URL: "data:text/plain;base64,/w=="}, `[Attached file "bin.txt" (text/plain); its content is not available to the model.]`},
		{messages.File{Mime: "application/pdf", Filename: "s.pdf", URL: "file:///tmp/s.pdf"}, `[Attached file "s.pdf" (application/pdf) at file:///tmp/s.pdf]`},
	} {
		if got := FileNote(tc.f); got != tc.want {
			t.Errorf("FileNote(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestPairToolResults(t *testing.T) {
	call := func(id, name string) llm.Part { return llm.Part{Kind: llm.PartToolCall, CallID: id, Name: name} }
	result := func(id, out string) llm.Part { return llm.Part{Kind: llm.PartToolResult, CallID: id, Output: out} }
	missing := func(id, name string) llm.Part {
		return llm.Part{Kind: llm.PartToolResult, CallID: id, Name: name, Output: MissingResult, IsError: true}
	}
	text := func(s string) llm.Part { return llm.Part{Kind: llm.PartText, Text: s} }
	hosted := func(p llm.Part) llm.Part { p.Executed = true; return p }
	msg := func(role llm.Role, parts ...llm.Part) llm.Message { return llm.Message{Role: role, Parts: parts} }

	in := []llm.Message{
		msg(llm.RoleTool, result("x", "orphan before any call")),
		msg(llm.RoleUser, text("go")),
		msg(llm.RoleAssistant, text("two calls"), call("a", "read"), call("b", "bash")),
		msg(llm.RoleTool, result("b", "B"), result("zz", "orphan")),
		msg(llm.RoleSystem, text("instructions changed")),
		msg(llm.RoleTool, result("a", "A"), result("a", "duplicate")),
		msg(llm.RoleUser, text("again")),
		msg(llm.RoleAssistant, call("a", "read")), // same callID, next step
		msg(llm.RoleUser, text("interrupted")),
		msg(llm.RoleAssistant, text("no calls")),
		msg(llm.RoleTool, result("a", "late orphan")),
		msg(llm.RoleUser, text("search")),
		msg(llm.RoleAssistant, hosted(call("h", "web_search")), hosted(result("h", "found")), text("only hosted")),
	}
	orig := fmt.Sprint(in)
	want := []llm.Message{
		msg(llm.RoleUser, text("go")),
		msg(llm.RoleAssistant, text("two calls"), call("a", "read"), call("b", "bash")),
		msg(llm.RoleTool, result("a", "A"), result("b", "B")),
		msg(llm.RoleSystem, text("instructions changed")),
		msg(llm.RoleUser, text("again")),
		msg(llm.RoleAssistant, call("a", "read")),
		msg(llm.RoleTool, missing("a", "read")),
		msg(llm.RoleUser, text("interrupted")),
		msg(llm.RoleAssistant, text("no calls")),
		msg(llm.RoleUser, text("search")),
		// A hosted call's result is in the assistant message: no tool turn.
		msg(llm.RoleAssistant, hosted(call("h", "web_search")), hosted(result("h", "found")), text("only hosted")),
	}
	got := PairToolResults(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PairToolResults:\n%v\nwant:\n%v", got, want)
	}
	if fmt.Sprint(in) != orig {
		t.Fatal("input modified")
	}
}

func TestCheckBaseURL(t *testing.T) {
	for _, u := range []string{"http://localhost:11434/v1", "https://api.example.com"} {
		if err := CheckBaseURL("p", u); err != nil {
			t.Errorf("%q: %v", u, err)
		}
	}
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://", "::"} {
		if err := CheckBaseURL("p", u); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

// TestUniqueCallIDs: call IDs repeat across steps (a server that starts
// them over each response), and the request gets them unique, each renamed
// call's result with it; hosted calls, and a history without repeats, are
// left as they are, and the input is not modified.
func TestUniqueCallIDs(t *testing.T) {
	call := func(id string) llm.Part { return llm.Part{Kind: llm.PartToolCall, CallID: id, Name: "read"} }
	result := func(id, out string) llm.Part { return llm.Part{Kind: llm.PartToolResult, CallID: id, Output: out} }
	hosted := func(p llm.Part) llm.Part { p.Executed = true; return p }
	msg := func(role llm.Role, parts ...llm.Part) llm.Message { return llm.Message{Role: role, Parts: parts} }
	user := msg(llm.RoleUser, llm.Part{Kind: llm.PartText, Text: "go"})

	in := PairToolResults([]llm.Message{
		user,
		msg(llm.RoleAssistant, call("functions.read:0"), call("functions.read:1")),
		msg(llm.RoleTool, result("functions.read:0", "A"), result("functions.read:1", "B")),
		msg(llm.RoleAssistant, call("functions.read:0"), hosted(call("srv_1")), hosted(result("srv_1", "found"))),
		msg(llm.RoleTool, result("functions.read:0", "C")),
		user,
		// Taken already: "functions.read:0_2" is the first renamed call's.
		msg(llm.RoleAssistant, call("functions.read:0"), call("functions.read:0_2"), hosted(call("srv_1"))),
		msg(llm.RoleTool, result("functions.read:0", "D"), result("functions.read:0_2", "E")),
	})
	orig := fmt.Sprint(in)
	want := []llm.Message{
		user,
		msg(llm.RoleAssistant, call("functions.read:0"), call("functions.read:1")),
		msg(llm.RoleTool, result("functions.read:0", "A"), result("functions.read:1", "B")),
		msg(llm.RoleAssistant, call("functions.read:0_2"), hosted(call("srv_1")), hosted(result("srv_1", "found"))),
		msg(llm.RoleTool, result("functions.read:0_2", "C")),
		user,
		msg(llm.RoleAssistant, call("functions.read:0_3"), call("functions.read:0_2_2"), hosted(call("srv_1"))),
		msg(llm.RoleTool, result("functions.read:0_3", "D"), result("functions.read:0_2_2", "E")),
	}
	if got := UniqueCallIDs(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("UniqueCallIDs:\n%v\nwant:\n%v", got, want)
	}
	if fmt.Sprint(in) != orig {
		t.Fatal("input modified")
	}
	unique := want[:3]
	if got := UniqueCallIDs(unique); &got[0] != &unique[0] {
		t.Fatal("a history without repeated IDs was copied")
	}
}

// TestToolName: a name both APIs accept goes unchanged; another keeps what
// it can of itself and gains a hash of the whole, within 64 bytes.
func TestToolName(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct{ in, want string }{
		{"read", "read"},
		{"apply_patch-2", "apply_patch-2"},
		{long, long},
		{"functions.read", "functions_read_" + hash6("functions.read")},
		{"read<|channel|>commentary", "read__channel__commentary_" + hash6("read<|channel|>commentary")},
		{"", "tool_" + hash6("")},
		{long + "a", strings.Repeat("a", 51) + "_" + hash6(long+"a")},
		{"é", "__" + "_" + hash6("é")},
	} {
		if got := ToolName(tc.in); got != tc.want {
			t.Errorf("ToolName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func hash6(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}
