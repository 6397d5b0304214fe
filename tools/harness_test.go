package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
)

// allowAll is a ruleset that allows every permission.
var allowAll = Ruleset{{Permission: "*", Pattern: "*", Action: Allow}}

// harness is a registry with the built-ins over a temporary Location.
type harness struct {
	root      string // canonical Location root
	reg       *Registry
	perms     *Permissions
	approvals *MemoryApprovals
}

// harnessConfig customizes newHarness.
type harnessConfig struct {
	rules    Ruleset
	asker    Asker
	refs     map[string]string
	builtins BuiltinConfig
}

func newHarness(t testing.TB, cfg harnessConfig) *harness {
	t.Helper()
	dir := t.TempDir()
	approvals := &MemoryApprovals{}
	perms, err := NewPermissions(PermissionsConfig{
		Project:   "proj",
		Agents:    map[string]Ruleset{DefaultAgent: cfg.rules},
		Approvals: approvals,
		Asker:     cfg.asker,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(Config{Root: dir, References: cfg.refs, Permissions: perms})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := RegisterBuiltins(reg, cfg.builtins)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(scope.Close)
	return &harness{root: reg.Paths().Root(), reg: reg, perms: perms, approvals: approvals}
}

// call executes tool name with input (marshalled to JSON).
func (h *harness) call(ctx context.Context, t testing.TB, name string, input any) (Result, error) {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return h.reg.Execute(ctx, Call{SessionID: "ses_test", AssistantMessageID: "msg_a", CallID: "call_1", Name: name, Input: raw})
}

// write creates a file under the Location root.
func (h *harness) write(t testing.TB, rel, content string) string {
	t.Helper()
	p := filepath.Join(h.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// errorType returns the type of a settled error, or "" for nil.
func errorType(t testing.TB, err error) messages.ErrorType {
	t.Helper()
	if err == nil {
		return ""
	}
	var me *messages.Error
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T) is not a *messages.Error", err, err)
	}
	return me.Type
}

// scriptedAsker answers permission questions from a function and records
// them.
type scriptedAsker struct {
	mu      sync.Mutex
	asked   []Request
	answer  func(Request) (Answer, error)
	blockCh chan struct{} // when set, Ask blocks until ctx ends
}

func (s *scriptedAsker) Ask(ctx context.Context, req Request) (Answer, error) {
	s.mu.Lock()
	s.asked = append(s.asked, req)
	s.mu.Unlock()
	if s.blockCh != nil {
		close(s.blockCh)
		<-ctx.Done()
		return Answer{}, ctx.Err()
	}
	return s.answer(req)
}

func (s *scriptedAsker) requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.asked...)
}

func answerAlways(r Reply) func(Request) (Answer, error) {
	return func(Request) (Answer, error) { return Answer{Reply: r}, nil }
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		<-tick.C
	}
}
