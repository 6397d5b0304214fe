package main

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// transcriptRig is a transcript over a real bus, store and permission
// broker, without a runtime: tests publish events and ask questions.
type transcriptRig struct {
	t       *testing.T
	bus     *actors.Bus
	store   *persistence.Bolt
	pending *tools.Pending
	ids     *messages.IDs
	sid     messages.SessionID
	tr      *transcript
	out     syncBuffer
	prompts syncBuffer
	finish  chan struct{}
	wg      sync.WaitGroup
}

func newTranscriptRig(t *testing.T, mode askMode, lines <-chan string) *transcriptRig {
	t.Helper()
	st, err := persistence.Open(filepath.Join(t.TempDir(), StoreFileName), persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &transcriptRig{t: t, bus: actors.NewBus(), store: st, ids: messages.NewIDs(nil, nil), finish: make(chan struct{})}
	r.pending = tools.NewPending(tools.PendingConfig{
		OnAsked:   func(p *messages.PermissionAsked) { r.live(p) },
		OnReplied: func(p *messages.PermissionReplied) { r.live(p) },
	})
	sess, _, err := st.CreateSession(context.Background(), persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	r.sid = sess.ID
	r.tr = newTranscript(sess.ID, r.bus, st, r.pending)
	r.tr.out, r.tr.prompts, r.tr.mode, r.tr.lines = &r.out, &r.prompts, mode, lines
	r.tr.catchUp(context.Background())
	return r
}

// run starts the transcript's loop.
func (r *transcriptRig) run() *transcriptRig {
	r.wg.Go(func() { r.tr.loop(context.Background(), r.finish) })
	return r
}

func (r *transcriptRig) live(p messages.Payload) {
	r.bus.Publish(messages.Event{ID: r.ids.Event(), Created: time.Now().UnixMilli(), Type: p.Type(), Data: p})
}

// durable commits events and publishes them, as the runner does.
func (r *transcriptRig) durable(ps ...messages.Payload) {
	r.t.Helper()
	evs, err := r.store.Append(context.Background(), r.sid, ps...)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, ev := range evs {
		r.bus.Publish(ev)
	}
}

// ask asks a question as a tool would and returns the answer's channel.
func (r *transcriptRig) ask(ctx context.Context, permission, pattern string, where ...string) <-chan error {
	ch := make(chan error, 1)
	r.wg.Go(func() {
		ans, err := r.pending.Ask(ctx, tools.Request{SessionID: r.sid, Permission: permission, Patterns: []string{pattern}, Where: strings.Join(where, "")})
		if err == nil && ans.Reply != tools.Once && ans.Reply != tools.Always {
			err = errors.New(string(ans.Reply) + ": " + ans.Message)
		}
		if err == nil {
			err = errors.New(string(ans.Reply))
		}
		ch <- err
	})
	return ch
}

// stop ends the loop and checks that it left no subscription behind.
func (r *transcriptRig) stop() {
	r.t.Helper()
	close(r.finish)
	r.wg.Wait()
	if n := r.bus.Subscribers(); n != 0 {
		r.t.Fatalf("%d bus subscriptions left open", n)
	}
}

func answer(t *testing.T, ch <-chan error) string {
	t.Helper()
	select {
	case err := <-ch:
		return err.Error()
	case <-time.After(deadline):
		t.Fatal("the question was never answered")
		return ""
	}
}

func TestTranscriptProse(t *testing.T) {
	r := newTranscriptRig(t, askAllow, nil).run()
	asst := r.ids.Message()
	r.durable(&messages.StepStarted{SessionID: r.sid, AssistantMessageID: asst, Agent: "build", Attempt: 1},
		&messages.ReasoningStarted{SessionID: r.sid, AssistantMessageID: asst})
	r.live(&messages.ReasoningDelta{SessionID: r.sid, AssistantMessageID: asst, Delta: "hmm, "})
	r.live(&messages.ReasoningDelta{SessionID: r.sid, AssistantMessageID: asst, Delta: "let me see"})
	r.durable(&messages.ReasoningEnded{SessionID: r.sid, AssistantMessageID: asst, Text: "hmm, let me see"},
		&messages.TextStarted{SessionID: r.sid, AssistantMessageID: asst})
	r.live(&messages.TextDelta{SessionID: r.sid, AssistantMessageID: asst, Delta: "Hello"})
	r.live(&messages.TextDelta{SessionID: r.sid, AssistantMessageID: asst, Delta: ", world"})
	r.durable(&messages.TextEnded{SessionID: r.sid, AssistantMessageID: asst, Text: "Hello, world"},
		&messages.ToolCalled{SessionID: r.sid, AssistantMessageID: asst, CallID: "c1", Name: "bash", Input: []byte(`{"command":"ls"}`)},
		&messages.ToolCalled{SessionID: r.sid, AssistantMessageID: asst, CallID: "c2", Name: "read", Input: []byte(`{"path":"x"}`)},
		&messages.ToolCalled{SessionID: r.sid, AssistantMessageID: asst, CallID: "h1", Name: "web_search", Input: []byte(`{"query":"go"}`), Executed: true})
	if got := answer(t, r.ask(context.Background(), "bash", "ls")); got != "once" {
		t.Fatalf("--yes answered %s", got)
	}
	r.durable(&messages.ToolSucceeded{SessionID: r.sid, AssistantMessageID: asst, CallID: "c1", Output: "a\nb\nc\n"},
		&messages.ToolFailed{SessionID: r.sid, AssistantMessageID: asst, CallID: "c2", Error: messages.Error{Type: messages.ErrToolExecution, Message: "boom\nline"}},
		&messages.ToolSucceeded{SessionID: r.sid, AssistantMessageID: asst, CallID: "h1", Output: "Go — https://go.dev"},
		// A fragment whose deltas were never seen prints in full.
		&messages.TextStarted{SessionID: r.sid, AssistantMessageID: asst, Ordinal: 1},
		&messages.TextEnded{SessionID: r.sid, AssistantMessageID: asst, Ordinal: 1, Text: "Unseen text.",
			ProviderMetadata: []byte(`{"citations":[{"type":"web_search_result_location","url":"https://go.dev","title":"Go","cited_text":"x"},` +
				`{"type":"web_search_result_location","url":"https://go.dev","title":"Go","cited_text":"y"},{"type":"char_location","cited_text":"z"}]}`)},
		&messages.StepFailed{SessionID: r.sid, AssistantMessageID: asst, Error: messages.Error{Type: messages.ErrProviderTransport, Message: "reset"}})
	eventually(t, "the step failure", func() bool { return strings.Contains(r.out.String(), "[step failed]") }, r.out.String)
	r.stop()
	want := `[thinking] hmm, let me see
Hello, world
[tool] bash {"command":"ls"}
[tool] read {"path":"x"}
[hosted tool] web_search {"query":"go"}
[permission] allowed bash "ls" (--yes)
[done] bash: a (3 lines)
[failed] read: tool.execution: boom line
[done] web_search: Go — https://go.dev
Unseen text.
[source] Go — https://go.dev
[step failed] provider.transport: reset
`
	if got := r.out.String(); got != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
	}
}

func TestTranscriptRejectsWithoutTerminal(t *testing.T) {
	r := newTranscriptRig(t, askReject, nil).run()
	got := answer(t, r.ask(context.Background(), "edit", "a.txt"))
	r.stop()
	if got != "reject: "+rejectNoTerminal || r.tr.rejected != 1 ||
		!strings.Contains(r.out.String(), `[permission] rejected edit "a.txt": `+rejectNoTerminal) {
		t.Fatalf("answer %q, rejected %d, out:\n%s", got, r.tr.rejected, r.out.String())
	}
}

func TestTranscriptTerminal(t *testing.T) {
	lines := make(chan string)
	r := newTranscriptRig(t, askTerminal, lines).run()
	first := r.ask(context.Background(), "bash", "make")
	eventually(t, "the first question", func() bool { return strings.Contains(r.prompts.String(), `allow bash "make"?`) }, r.prompts.String)
	second := r.ask(context.Background(), "edit", "x.go")
	lines <- "what?"
	lines <- "A"
	if got := answer(t, first); got != "always" {
		t.Fatalf("first = %s", got)
	}
	eventually(t, "the second question", func() bool { return strings.Contains(r.prompts.String(), `allow edit "x.go"?`) }, r.prompts.String)
	lines <- "n"
	if got := answer(t, second); got != "reject: " {
		t.Fatalf("second = %s", got)
	}

	// A question withdrawn while it is on the terminal (an interrupt)
	// stops waiting for an answer.
	ctx, cancel := context.WithCancel(context.Background())
	third := r.ask(ctx, "bash", "sleep 9")
	eventually(t, "the third question", func() bool { return strings.Contains(r.prompts.String(), `allow bash "sleep 9"?`) }, r.prompts.String)
	cancel()
	if got := answer(t, third); got != context.Canceled.Error() {
		t.Fatalf("third = %s", got)
	}
	eventually(t, "the withdrawal", func() bool { return strings.Contains(r.prompts.String(), "(reject: cancelled: context ended)") }, r.prompts.String)

	// A command run in another directory says where.
	inBuild := r.ask(context.Background(), "bash", "make", "build")
	eventually(t, "the question with a directory", func() bool { return strings.Contains(r.prompts.String(), `allow bash "make" in "build"?`) }, r.prompts.String)
	lines <- "y"
	if got := answer(t, inBuild); got != "once" {
		t.Fatalf("in build = %s", got)
	}

	// The end of input rejects what is asked from then on.
	fourth := r.ask(context.Background(), "bash", "rm x")
	eventually(t, "the fourth question", func() bool { return strings.Contains(r.prompts.String(), `allow bash "rm x"?`) }, r.prompts.String)
	close(lines)
	if got := answer(t, fourth); got != "reject: "+rejectNoTerminal {
		t.Fatalf("fourth = %s", got)
	}
	r.stop()
	if p := r.prompts.String(); !strings.Contains(p, "answer y (allow once), a (allow always) or n (reject): ") {
		t.Fatalf("prompts:\n%s", p)
	}
}

// TestTranscriptResubscribes: a subscription the bus cut off for falling
// behind is replaced, the durable events it missed are replayed from the
// store, and a question asked meanwhile is still answered.
func TestTranscriptResubscribes(t *testing.T) {
	defer func(n int) { busBuffer = n }(busBuffer)
	busBuffer = 16
	r := newTranscriptRig(t, askAllow, nil)
	asst := r.ids.Message()
	// The loop is not running yet, so this overflows the subscription.
	r.durable(&messages.StepStarted{SessionID: r.sid, AssistantMessageID: asst, Agent: "build", Attempt: 1})
	var ps []messages.Payload
	for i := range busBuffer + 10 {
		ps = append(ps, &messages.ToolCalled{SessionID: r.sid, AssistantMessageID: asst, CallID: "c" + strconv.Itoa(i), Name: "read", Input: []byte(`{}`)})
	}
	r.durable(ps...)
	// A question asked while cut off reaches the broker but not the
	// subscription.
	asked := r.ask(context.Background(), "bash", "ls")
	eventually(t, "the question", func() bool { return len(r.pending.List()) == 1 }, func() string { return "" })
	if !r.tr.sub.Dropped() {
		t.Fatal("the subscription was not cut off")
	}
	r.run()
	if got := answer(t, asked); got != "once" {
		t.Fatalf("question answered %s", got)
	}
	eventually(t, "every call", func() bool { return strings.Count(r.out.String(), "[tool] read") == busBuffer+10 }, func() string {
		return strconv.Itoa(strings.Count(r.out.String(), "[tool] read"))
	})
	r.stop()
	if r.tr.lastSeq != int64(busBuffer+11) {
		t.Fatalf("last seq %d", r.tr.lastSeq)
	}
}

// TestTranscriptEscapesControlCharacters checks that text from the model
// and its tools reaches the terminal with its control characters shown as
// escapes: an escape sequence in a file or a command's output could
// otherwise erase the permission question and draw another in its place.
func TestTranscriptEscapesControlCharacters(t *testing.T) {
	var out syncBuffer
	tr := &transcript{out: &out, names: map[string]string{}, handled: map[string]bool{}}
	fake := "\x1b[1A\x1b[2K\rallow read \"README.md\"? [y]es once / [a]lways / [n]o: \u202e"
	tr.prose(messages.Event{Data: &messages.ToolSucceeded{CallID: "c1", Output: fake}})
	tr.prose(messages.Event{Data: &messages.TextDelta{Delta: "line one\n\tline two" + fake}})
	tr.endLine()
	got := out.String()
	if strings.ContainsAny(got, "\x1b\r\u202e") {
		t.Fatalf("raw control characters reached the terminal: %q", got)
	}
	if !strings.Contains(got, `\x1b[1A\x1b[2K\x0dallow read`) || !strings.Contains(got, `\u202e`) || !strings.Contains(got, "line one\n\tline two") {
		t.Fatalf("transcript %q", got)
	}
}
