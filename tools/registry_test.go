package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// echoInput is the input of the test tool "echo".
type echoInput struct {
	Text  string `json:"text"`
	Times int    `json:"times,omitempty"`
}

var echoSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"times":{"type":"integer","minimum":1}},"required":["text"],"additionalProperties":false}`)

func echoTool(name string, h Handler[echoInput]) Tool {
	if h == nil {
		h = func(_ context.Context, call *CallContext, in echoInput) (Result, error) {
			return Result{Title: "echo", Output: strings.Repeat(in.Text, max(in.Times, 1)),
				Metadata: mustJSON(map[string]string{"agent": call.Agent, "session": string(call.SessionID), "call": call.CallID})}, nil
		}
	}
	// Declared as asking for itself, though it asks nothing: these tests
	// are of the registry's other checks. The question it asks for a tool
	// that does not is TestRegistryAsksForToolsThatDoNot's.
	return NewTool(Definition{Name: name, Description: "Echo text.", InputSchema: echoSchema, AsksItself: true}, h)
}

func newTestRegistry(t *testing.T, agents map[string]Ruleset) *Registry {
	t.Helper()
	perms, err := NewPermissions(PermissionsConfig{Project: "p", Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(Config{Root: t.TempDir(), Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func names(defs []Definition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Name
	}
	return out
}

func TestRegistryScopesRebuildTheCatalog(t *testing.T) {
	reg := newTestRegistry(t, nil)
	builtin := reg.NewScope("builtin")
	plugin := reg.NewScope("plugin")
	for _, n := range []string{"zeta", "alpha"} {
		if err := reg.Register(builtin, echoTool(n, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Register(plugin, echoTool("mid", nil)); err != nil {
		t.Fatal(err)
	}
	if got := names(reg.Definitions("", nil)); !slices.Equal(got, []string{"alpha", "mid", "zeta"}) {
		t.Fatalf("catalog %v", got)
	}
	plugin.Close()
	plugin.Close() // idempotent
	if got := names(reg.Definitions("", nil)); !slices.Equal(got, []string{"alpha", "zeta"}) {
		t.Fatalf("after closing the plugin scope: %v", got)
	}
	_, err := reg.Execute(context.Background(), Call{Name: "mid", Input: json.RawMessage(`{"text":"x"}`)})
	if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "available tools: alpha, zeta") {
		t.Fatalf("calling a removed tool: %v", err)
	}
	if err := reg.Register(plugin, echoTool("late", nil)); !errors.Is(err, ErrScopeClosed) {
		t.Fatalf("register on a closed scope: %v", err)
	}
	// The name of a removed tool is free again.
	if err := reg.Register(reg.NewScope("plugin2"), echoTool("mid", nil)); err != nil {
		t.Fatalf("re-register after close: %v", err)
	}
}

func TestRegistryRegisterErrors(t *testing.T) {
	reg := newTestRegistry(t, nil)
	other := newTestRegistry(t, nil)
	s := reg.NewScope("s")
	if err := reg.Register(s, echoTool("echo", nil)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		tool Tool
		sc   *Scope
		want error
	}{
		{"duplicate", echoTool("echo", nil), s, ErrDuplicateTool},
		{"foreign scope", echoTool("x", nil), other.NewScope("o"), ErrForeignScope},
		{"nil scope", echoTool("x", nil), nil, ErrForeignScope},
		// A nil Tool panicked reading its definition.
		{"nil tool", nil, s, ErrInvalidDefinition},
		{"nil handler", NewTool[echoInput](Definition{Name: "nohandler", Description: "d", InputSchema: echoSchema}, nil), s, ErrInvalidDefinition},
		{"bad name", echoTool("has space", nil), s, ErrInvalidDefinition},
		{"long name", echoTool(strings.Repeat("a", 65), nil), s, ErrInvalidDefinition},
		{"no description", NewTool(Definition{Name: "nodesc", InputSchema: echoSchema}, func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil }), s, ErrInvalidDefinition},
		{"schema not JSON", NewTool(Definition{Name: "bad", Description: "d", InputSchema: json.RawMessage(`{`)}, func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil }), s, ErrInvalidDefinition},
		{"schema not object", NewTool(Definition{Name: "bad", Description: "d", InputSchema: json.RawMessage(`{"type":"string"}`)}, func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil }), s, ErrInvalidDefinition},
		{"schema invalid", NewTool(Definition{Name: "bad", Description: "d", InputSchema: json.RawMessage(`{"type":"object","minProperties":"x"}`)}, func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil }), s, ErrInvalidDefinition},
		{"remote ref", NewTool(Definition{Name: "bad", Description: "d", InputSchema: json.RawMessage(`{"type":"object","$ref":"https://example.com/s.json"}`)}, func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil }), s, ErrInvalidDefinition},
		{"metadata schema invalid", NewTool(Definition{Name: "bad", Description: "d", InputSchema: echoSchema, MetadataSchema: json.RawMessage(`[`)}, func(context.Context, *CallContext, echoInput) (Result, error) { return Result{}, nil }), s, ErrInvalidDefinition},
	}
	for _, tc := range tests {
		if err := reg.Register(tc.sc, tc.tool); !errors.Is(err, tc.want) {
			t.Errorf("%s: Register = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestRegistryDefinitionsPerAgent(t *testing.T) {
	reg := newTestRegistry(t, map[string]Ruleset{
		DefaultAgent: {{"*", "*", Allow}, {"bash", "*", Deny}},
		"plan":       {{"*", "*", Deny}, {"read", "*", Allow}},
		"careful":    {{"bash", "*", Deny}, {"bash", "git status", Allow}},
	})
	s := reg.NewScope("builtin")
	for _, d := range []Definition{
		{Name: "read", Description: "r", InputSchema: echoSchema},
		{Name: "bash", Description: "b", InputSchema: echoSchema},
		{Name: "apply_patch", Description: "p", InputSchema: echoSchema, Permission: "edit"},
	} {
		if err := reg.Register(s, NewTool(d, func(context.Context, *CallContext, echoInput) (Result, error) { return Result{Output: "ok"}, nil })); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		agent   string
		session Ruleset
		want    []string
	}{
		{"", nil, []string{"apply_patch", "read"}}, // empty agent means build
		{DefaultAgent, nil, []string{"apply_patch", "read"}},
		{"plan", nil, []string{"read"}},
		{"careful", nil, []string{"apply_patch", "bash", "read"}}, // bash is not denied for every pattern
		{"unknown-agent", nil, []string{"apply_patch", "bash", "read"}},
		{DefaultAgent, Ruleset{{"edit", "*", Deny}}, []string{"read"}},
		{"plan", Ruleset{{"bash", "*", Ask}}, []string{"bash", "read"}},
	}
	for _, tc := range tests {
		if got := names(reg.Definitions(tc.agent, tc.session)); !slices.Equal(got, tc.want) {
			t.Errorf("Definitions(%q, %v) = %v, want %v", tc.agent, tc.session, got, tc.want)
		}
	}
	// Calling a tool the agent cannot see fails like an unknown tool.
	_, err := reg.Execute(context.Background(), Call{Agent: "plan", Name: "bash", Input: json.RawMessage(`{"text":"x"}`)})
	if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "not available to agent plan; available tools: read") {
		t.Fatalf("hidden tool: %v", err)
	}
}

func TestRegistryDefinitionsAreCopies(t *testing.T) {
	reg := newTestRegistry(t, nil)
	if err := reg.Register(reg.NewScope("s"), echoTool("echo", nil)); err != nil {
		t.Fatal(err)
	}
	defs := reg.Definitions("", nil)
	defs[0].InputSchema[0] = 'X'
	if reg.Definitions("", nil)[0].InputSchema[0] != '{' {
		t.Fatal("mutating a returned definition changed the catalog")
	}
}

func TestExecuteSettlesEveryFailure(t *testing.T) {
	reg := newTestRegistry(t, map[string]Ruleset{DefaultAgent: allowAll})
	s := reg.NewScope("test")
	must := func(tool Tool) {
		t.Helper()
		if err := reg.Register(s, tool); err != nil {
			t.Fatal(err)
		}
	}
	must(echoTool("echo", nil))
	must(echoTool("fails", func(context.Context, *CallContext, echoInput) (Result, error) {
		return Result{}, errors.New("the widget is broken; try widget=2")
	}))
	must(echoTool("typed", func(context.Context, *CallContext, echoInput) (Result, error) {
		return Result{}, messages.Errorf(messages.ErrPermissionRejected, "no")
	}))
	must(echoTool("panics", func(context.Context, *CallContext, echoInput) (Result, error) {
		panic("boom")
	}))
	must(echoTool("cancels", func(ctx context.Context, _ *CallContext, _ echoInput) (Result, error) {
		<-ctx.Done()
		return Result{}, fmt.Errorf("stopped: %w", ctx.Err())
	}))
	must(echoTool("badutf8", func(context.Context, *CallContext, echoInput) (Result, error) {
		return Result{Output: "\xff\xfe"}, nil
	}))
	must(echoTool("badmeta", func(context.Context, *CallContext, echoInput) (Result, error) {
		return Result{Output: "x", Metadata: json.RawMessage(`{"a":`)}, nil
	}))
	must(NewTool(Definition{Name: "schemameta", Description: "d", InputSchema: echoSchema,
		MetadataSchema: json.RawMessage(`{"type":"object","required":["count"]}`)},
		func(_ context.Context, _ *CallContext, in echoInput) (Result, error) {
			if in.Text == "ok" {
				return Result{Output: "x", Metadata: json.RawMessage(`{"count":1}`)}, nil
			}
			return Result{Output: "x", Metadata: json.RawMessage(`{"other":1}`)}, nil
		}))

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		tool     string
		input    string
		wantType messages.ErrorType
		wantMsg  string
	}{
		{"success", nil, "echo", `{"text":"ab","times":2}`, "", ""},
		{"unknown tool", nil, "nope", `{}`, messages.ErrToolExecution, `unknown tool "nope"; available tools: badmeta, badutf8, cancels, echo, fails, panics, schemameta, typed`},
		{"not JSON", nil, "echo", `{"text":`, messages.ErrToolExecution, "not valid JSON"},
		{"trailing data", nil, "echo", `{"text":"a"} {}`, messages.ErrToolExecution, "not valid JSON"},
		{"missing property", nil, "echo", `{}`, messages.ErrToolExecution, "missing property 'text'"},
		{"empty input is {}", nil, "echo", ``, messages.ErrToolExecution, "missing property 'text'"},
		{"wrong type", nil, "echo", `{"text":1}`, messages.ErrToolExecution, "at /text"},
		{"extra property", nil, "echo", `{"text":"a","colour":"red"}`, messages.ErrToolExecution, "colour"},
		{"minimum", nil, "echo", `{"text":"a","times":0}`, messages.ErrToolExecution, "at /times"},
		{"handler error", nil, "fails", `{"text":"a"}`, messages.ErrToolExecution, "the widget is broken; try widget=2"},
		{"typed error kept", nil, "typed", `{"text":"a"}`, messages.ErrPermissionRejected, "no"},
		{"panic", nil, "panics", `{"text":"a"}`, messages.ErrUnknown, "tool panics panicked"},
		{"cancelled before start", cancelled, "echo", `{"text":"a"}`, messages.ErrAborted, "cancelled before it started"},
		{"invalid UTF-8 output", nil, "badutf8", `{"text":"a"}`, messages.ErrToolExecution, "not valid UTF-8"},
		{"invalid metadata JSON", nil, "badmeta", `{"text":"a"}`, messages.ErrToolExecution, "metadata that is not valid JSON"},
		{"metadata schema ok", nil, "schemameta", `{"text":"ok"}`, "", ""},
		{"metadata schema violated", nil, "schemameta", `{"text":"no"}`, messages.ErrToolExecution, "invalid metadata"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			res, err := reg.Execute(ctx, Call{SessionID: "ses_1", CallID: "c1", Name: tc.tool, Input: json.RawMessage(tc.input)})
			if got := errorType(t, err); got != tc.wantType {
				t.Fatalf("got %v (%+v), want type %q", err, res, tc.wantType)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("message %q lacks %q", err, tc.wantMsg)
			}
		})
	}
}

// TestIntegralNumbersDecodeAsIntegers: JSON Schema counts 2.0 and 1e1 as
// integers, so they pass validation; the typed tool then gets them as the
// integers they are instead of a decoding error. A fraction is refused.
func TestIntegralNumbersDecodeAsIntegers(t *testing.T) {
	reg := newTestRegistry(t, map[string]Ruleset{DefaultAgent: allowAll})
	if err := reg.Register(reg.NewScope("s"), echoTool("echo", nil)); err != nil {
		t.Fatal(err)
	}
	for input, want := range map[string]string{
		`{"text":"ab","times":2.0}`: "abab",
		`{"text":"a","times":1e1}`:  "aaaaaaaaaa",
		`{"text":"a","times":3E0}`:  "aaa",
		`{"times":2.00,"text":"x"}`: "xx",
	} {
		res, err := reg.Execute(context.Background(), Call{SessionID: "ses_1", CallID: "c1", Name: "echo", Input: json.RawMessage(input)})
		if err != nil || res.Output != want {
			t.Errorf("%s: %q, %v; want %q", input, res.Output, err, want)
		}
	}
	if _, err := reg.Execute(context.Background(), Call{SessionID: "ses_1", CallID: "c1", Name: "echo", Input: json.RawMessage(`{"text":"a","times":2.5}`)}); err == nil {
		t.Error("2.5 accepted as an integer")
	}
	for in, want := range map[string]string{
		`{"a":[1.0,{"b":-3e2}],"c":1.5,"d":"2.0"}`: `{"a":[1,{"b":-300}],"c":1.5,"d":"2.0"}`,
		`{"big":1e300,"n":1.0}`:                    `{"big":1e300,"n":1}`,
	} {
		out, ok := integralNumbers([]byte(in))
		if !ok || string(out) != want {
			t.Errorf("integralNumbers(%s) = %s, %v; want %s", in, out, ok, want)
		}
	}
	if _, ok := integralNumbers([]byte(`{"a":1,"b":1.5}`)); ok {
		t.Error("integralNumbers changed input without integral floats")
	}
}

func TestExecuteCancellationDuringCallIsAborted(t *testing.T) {
	reg := newTestRegistry(t, nil)
	started := make(chan struct{})
	if err := reg.Register(reg.NewScope("s"), echoTool("wait", func(ctx context.Context, _ *CallContext, _ echoInput) (Result, error) {
		close(started)
		<-ctx.Done()
		return Result{}, errors.New("interrupted while waiting")
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := reg.Execute(ctx, Call{Name: "wait", Input: json.RawMessage(`{"text":"x"}`)})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; errorType(t, err) != messages.ErrAborted {
		t.Fatalf("got %v, want aborted", err)
	}
}

func TestExecuteCallContext(t *testing.T) {
	reg := newTestRegistry(t, nil)
	if err := reg.Register(reg.NewScope("s"), echoTool("echo", nil)); err != nil {
		t.Fatal(err)
	}
	res, err := reg.Execute(context.Background(), Call{SessionID: "ses_9", CallID: "call_7", Name: "echo", Input: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]string
	if err := json.Unmarshal(res.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if meta["agent"] != DefaultAgent || meta["session"] != "ses_9" || meta["call"] != "call_7" || res.Output != "hi" {
		t.Fatalf("result %+v meta %v", res, meta)
	}
}

func TestExecuteAskCarriesCallIdentity(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	perms, err := NewPermissions(PermissionsConfig{Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(Config{Root: t.TempDir(), Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(reg.NewScope("s"), echoTool("asks", func(ctx context.Context, call *CallContext, in echoInput) (Result, error) {
		return Result{Output: "done"}, call.Ask(ctx, Request{Permission: "custom", Patterns: []string{in.Text}})
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Execute(context.Background(), Call{SessionID: "ses_1", AssistantMessageID: "msg_2", CallID: "c3", Name: "asks", Input: json.RawMessage(`{"text":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	got := asker.requests()
	want := Request{SessionID: "ses_1", Agent: DefaultAgent, AssistantMessageID: "msg_2", CallID: "c3", Permission: "custom", Patterns: []string{"x"}, Always: []string{"x"}}
	if len(got) != 1 || fmt.Sprint(got[0]) != fmt.Sprint(want) {
		t.Fatalf("asked %+v, want %+v", got, want)
	}
}

func TestRegistryConcurrentUse(t *testing.T) {
	reg := newTestRegistry(t, nil)
	base := reg.NewScope("base")
	if err := reg.Register(base, echoTool("echo", nil)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				s := reg.NewScope("p")
				name := fmt.Sprintf("t%d_%d", i, j)
				if err := reg.Register(s, echoTool(name, nil)); err != nil {
					t.Error(err)
					return
				}
				if _, err := reg.Execute(context.Background(), Call{Name: name, Input: json.RawMessage(`{"text":"x"}`)}); err != nil {
					t.Error(err)
				}
				_ = reg.Definitions("", nil)
				s.Close()
			}
		})
	}
	wg.Wait()
	if got := names(reg.Definitions("", nil)); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("catalog after concurrent churn: %v", got)
	}
}

func TestNewRegistryConfigErrors(t *testing.T) {
	perms, _ := NewPermissions(PermissionsConfig{})
	for _, cfg := range []Config{
		{Root: t.TempDir()},                                // no permissions
		{Root: "relative/dir", Permissions: perms},         // not absolute
		{Root: "/definitely/not/here", Permissions: perms}, // missing
		{Root: t.TempDir(), Permissions: perms, References: map[string]string{"bad/name": "."}},
		{Root: t.TempDir(), Permissions: perms, References: map[string]string{"lib": "/definitely/not/here"}},
	} {
		if _, err := NewRegistry(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewRegistry(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// FuzzExecuteInput feeds arbitrary bytes as tool input: decoding and
// schema validation must settle every input as a result or a typed
// tool.execution error, never a panic or an untyped error.
func FuzzExecuteInput(f *testing.F) {
	for _, seed := range []string{`{"text":"a"}`, `{"text":"a","times":3}`, `{}`, ``, `[]`, `{"text":1}`, `{"text":"a"}{}`, `{"times":1e400,"text":""}`, "\xff"} {
		f.Add([]byte(seed))
	}
	perms, err := NewPermissions(PermissionsConfig{})
	if err != nil {
		f.Fatal(err)
	}
	reg, err := NewRegistry(Config{Root: f.TempDir(), Permissions: perms})
	if err != nil {
		f.Fatal(err)
	}
	if err := reg.Register(reg.NewScope("s"), echoTool("echo", func(_ context.Context, _ *CallContext, in echoInput) (Result, error) {
		if in.Times > 3 {
			in.Times = 3
		}
		return Result{Output: strings.Repeat(in.Text, max(in.Times, 1))}, nil
	})); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		res, err := reg.Execute(context.Background(), Call{Name: "echo", Input: input})
		if err != nil {
			var me *messages.Error
			if !errors.As(err, &me) || me.Type != messages.ErrToolExecution {
				t.Fatalf("input %q: error %v is not a tool.execution *messages.Error", input, err)
			}
			return
		}
		// Typed tools take an integral number such as 1e0 for an integer
		// (integralNumbers), which encoding/json refuses for an int: read
		// times as a number and require it whole. An integer written out
		// is taken as it is (10000000000000000 too); one written with a
		// fraction or an exponent only up to 2^53, where a float64 stops
		// holding every integer.
		var loose struct {
			Text  string      `json:"text"`
			Times json.Number `json:"times"`
		}
		if json.Unmarshal(input, &loose) != nil && len(strings.TrimSpace(string(input))) > 0 {
			t.Fatalf("input %q was accepted but does not decode", input)
		}
		times := 0
		if s := loose.Times.String(); s != "" {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				times = int(n)
			} else if f, err := strconv.ParseFloat(s, 64); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
				t.Fatalf("input %q was accepted with a times that is not a whole number", input)
			} else {
				times = int(f)
			}
		}
		in := echoInput{Text: loose.Text, Times: times}
		if res.Output != strings.Repeat(in.Text, max(min(in.Times, 3), 1)) {
			t.Fatalf("input %q: output %q", input, res.Output)
		}
	})
}

// TestRegistryAsksForToolsThatDoNot: a tool that does not ask for its
// calls itself is asked for by the registry before it runs (its
// permission, pattern "*", its input shown), so that a tool of one's own
// never runs unchecked; rules and replies decide as for any question, and
// a tool that asks itself gets no second question.
func TestRegistryAsksForToolsThatDoNot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		asksItself bool
		rules      Ruleset
		reply      Reply
		wantAsked  bool
		wantErr    messages.ErrorType
	}{
		{name: "asked, once", reply: Once, wantAsked: true},
		{name: "asked, rejected", reply: Reject, wantAsked: true, wantErr: messages.ErrPermissionRejected},
		{name: "allowed by a rule", rules: Ruleset{{Permission: "quiet", Pattern: "*", Action: Allow}}},
		{name: "asks itself", asksItself: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asker := &scriptedAsker{answer: answerAlways(tc.reply)}
			perms, err := NewPermissions(PermissionsConfig{Project: "p", Asker: asker, Agents: map[string]Ruleset{DefaultAgent: tc.rules}})
			if err != nil {
				t.Fatal(err)
			}
			reg, err := NewRegistry(Config{Root: t.TempDir(), Permissions: perms})
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			tool := NewTool(Definition{Name: "quiet", Description: "d", InputSchema: echoSchema, AsksItself: tc.asksItself},
				func(context.Context, *CallContext, echoInput) (Result, error) {
					ran = true
					return Result{Output: "ran"}, nil
				})
			if err := reg.Register(reg.NewScope("s"), tool); err != nil {
				t.Fatal(err)
			}
			_, err = reg.Execute(context.Background(), Call{SessionID: "ses_1", CallID: "c1", Name: "quiet", Input: json.RawMessage(`{"text":"hi"}`)})
			if got := errorType(t, err); got != tc.wantErr {
				t.Fatalf("error %v, want type %q", err, tc.wantErr)
			}
			if ran != (tc.wantErr == "") {
				t.Fatalf("ran = %v with error %v", ran, err)
			}
			asked := asker.requests()
			if !tc.wantAsked {
				if len(asked) != 0 {
					t.Fatalf("asked %+v, want no question", asked)
				}
				return
			}
			if len(asked) != 1 {
				t.Fatalf("asked %d questions, want 1", len(asked))
			}
			q := asked[0]
			if q.Permission != "quiet" || !slices.Equal(q.Patterns, []string{"*"}) || q.SessionID != "ses_1" || q.CallID != "c1" ||
				string(q.Metadata) != `{"input":{"text":"hi"}}` {
				t.Fatalf("question %+v", q)
			}
		})
	}
}

// TestRegistryAsksUnderThePermission: the registry's own question for a
// tool that does not ask is for the tool's Permission, not its name, with
// pattern "*" and the input shown as JSON even when the call sent none,
// so that rules written for the permission decide it.
func TestRegistryAsksUnderThePermission(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	perms, err := NewPermissions(PermissionsConfig{Project: "p", Asker: asker})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(Config{Root: t.TempDir(), Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	tool := NewTool(Definition{Name: "deploy", Description: "d", Permission: "network", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *CallContext, struct{}) (Result, error) { return Result{Output: "ran"}, nil })
	if err := reg.Register(reg.NewScope("s"), tool); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Execute(context.Background(), Call{SessionID: "ses_1", CallID: "c1", Name: "deploy", Input: json.RawMessage("  ")}); err != nil {
		t.Fatal(err)
	}
	asked := asker.requests()
	if len(asked) != 1 {
		t.Fatalf("asked %d questions, want 1", len(asked))
	}
	q := asked[0]
	if q.Permission != "network" || !slices.Equal(q.Patterns, []string{"*"}) || string(q.Metadata) != `{"input":{}}` {
		t.Fatalf("question %+v, want permission network, pattern *, metadata {\"input\":{}}", q)
	}
}
