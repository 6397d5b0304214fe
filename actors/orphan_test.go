package actors_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

const orphanEnv = "SESSIOND_ORPHAN_CHILD_DB"

// TestOrphanChild is the child half of TestOrphanSweepAfterSIGKILL: it
// starts a tool that never returns and reports the Session ID, then waits
// to be killed. It does nothing in a normal run.
func TestOrphanChild(t *testing.T) {
	path := os.Getenv(orphanEnv)
	if path == "" {
		return
	}
	h := actortest.New(t, actortest.Options{StorePath: path})
	h.Tools.Add("hang", func(ctx context.Context, c locations.ToolCall) (string, error) {
		fmt.Printf("running %s\n", c.SessionID)
		<-ctx.Done()
		select {} // never returns: the parent kills the process
	})
	h.Model.Reply(script.ToolCall("call_1", "hang", `{"x":1}`))
	sid := h.Session()
	h.Prompt(sid, "start the hanging tool")
	select {}
}

// TestOrphanSweepAfterSIGKILL kills a real process with SIGKILL while a
// tool runs, restarts on the same store, and checks the sweep: the tool
// fails with aborted "Tool execution interrupted", attributed to its
// original assistant message, the orphaned step is closed, and the tool is
// never re-run.
func TestOrphanSweepAfterSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orphan.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanChild$", "-test.count=1")
	// The child is killed before its own cleanup runs, so its temporary
	// directories go under this test's, which is removed.
	cmd.Env = append(os.Environ(), orphanEnv+"="+path, "TMPDIR="+filepath.Dir(path))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var sid messages.SessionID
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "running "); ok {
			sid = messages.SessionID(s)
			break
		}
	}
	if sid == "" {
		t.Fatal("child never started the tool")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	h := actortest.New(t, actortest.Options{StorePath: path})
	h.Tools.Add("hang", func(context.Context, locations.ToolCall) (string, error) {
		t.Error("the orphaned tool was re-run")
		return "", nil
	})
	if len(h.Runtime.Active()) != 0 {
		t.Fatal("activity must not survive a restart")
	}
	h.Model.Reply(script.Text("recovered"))
	if _, err := h.Runtime.Resume(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h.WaitIdle(sid)
	var called *messages.ToolCalled
	var failed *messages.ToolFailed
	for _, ev := range h.Events(sid) {
		switch p := ev.Data.(type) {
		case *messages.ToolCalled:
			called = p
		case *messages.ToolFailed:
			failed = p
		}
	}
	if called == nil || failed == nil || failed.AssistantMessageID != called.AssistantMessageID || failed.CallID != "call_1" ||
		failed.Error.Type != messages.ErrAborted || !strings.HasPrefix(failed.Error.Message, "Tool execution interrupted") {
		t.Fatalf("sweep: called %+v failed %+v", called, failed)
	}
	open, err := h.Store.OpenSteps(h.Ctx(), sid)
	if err != nil || len(open) != 0 {
		t.Fatalf("orphaned step still open: %v %v", open, err)
	}
	m, err := h.Store.Message(h.Ctx(), sid, called.AssistantMessageID)
	if err != nil || m.Error == nil || m.Error.Type != messages.ErrAborted {
		t.Fatalf("orphaned assistant %+v %v", m, err)
	}
	types := h.Types(sid)
	if types[len(types)-1] != "session.execution.succeeded" {
		t.Fatalf("%v", types)
	}
	h.CheckReplay()
}

// echoCrashedAt runs a Session whose model calls the tool echo (call_1)
// and then answers "done", and returns a harness on the log as a process
// killed just after its first event of type typ would have left it, with
// the Session and how many events were kept (crashedAt).
func echoCrashedAt(t *testing.T, typ string) (*actortest.Harness, messages.SessionID, int) {
	t.Helper()
	h := actortest.New(t)
	h.Tools.Add("echo", func(context.Context, locations.ToolCall) (string, error) { return "e", nil })
	h.Model.Reply(script.ToolCall("call_1", "echo", `{}`))
	h.Model.Reply(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	h2, kept := crashedAt(t, h, sid, typ)
	return h2, sid, kept
}

// TestOrphanSweepFailsACallCutOffMidInput checks the sweep for a call a
// dead process left pending (its input started streaming, the call never
// completed), not only for one left running: it is failed as interrupted
// under its original assistant message with DESIGN.md §5's message
// "Tool execution interrupted: <tool>", and the step is closed.
func TestOrphanSweepFailsACallCutOffMidInput(t *testing.T) {
	h2, sid, _ := echoCrashedAt(t, messages.TypeToolInputStarted)
	h2.Model.Reply(script.Text("recovered"))
	if _, err := h2.Runtime.Resume(h2.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	h2.WaitIdle(sid)
	started := lastOf[*messages.ToolInputStarted](h2, sid)
	failed := lastOf[*messages.ToolFailed](h2, sid)
	if failed == nil || failed.CallID != "call_1" || failed.AssistantMessageID != started.AssistantMessageID ||
		failed.Error.Type != messages.ErrAborted || failed.Error.Message != "Tool execution interrupted: echo" {
		t.Fatalf("sweep: failed %+v; %v", failed, h2.Types(sid))
	}
	if open, err := h2.Store.OpenSteps(h2.Ctx(), sid); err != nil || len(open) != 0 {
		t.Fatalf("orphaned step still open: %v %v", open, err)
	}
	h2.CheckReplay()
}
