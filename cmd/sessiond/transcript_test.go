package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	eventually(t, "the withdrawal", func() bool {
		return strings.Contains(r.prompts.String(), "(question closed: reject: cancelled: context ended)")
	}, r.prompts.String)

	// A question waiting behind a withdrawn one is put next.
	ctx, cancel = context.WithCancel(context.Background())
	withdrawn := r.ask(ctx, "bash", "sleep 8")
	eventually(t, "the question to withdraw", func() bool { return strings.Contains(r.prompts.String(), `allow bash "sleep 8"?`) }, r.prompts.String)
	behind := r.ask(context.Background(), "edit", "behind.go")
	eventually(t, "the question behind it queued", func() bool { return len(r.pending.List()) == 2 }, r.prompts.String)
	cancel()
	if got := answer(t, withdrawn); got != context.Canceled.Error() {
		t.Fatalf("withdrawn = %s", got)
	}
	eventually(t, "the question behind", func() bool { return strings.Contains(r.prompts.String(), `allow edit "behind.go"?`) }, r.prompts.String)
	lines <- "y"
	if got := answer(t, behind); got != "once" {
		t.Fatalf("behind = %s", got)
	}

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
	if got := answer(t, fourth); got != "reject: "+rejectInputEnded {
		t.Fatalf("fourth = %s", got)
	}
	r.stop()
	if p := r.prompts.String(); !strings.Contains(p, "answer y (allow once), a (allow always) or n (reject): ") {
		t.Fatalf("prompts:\n%s", p)
	}
	// The transcript records what was answered on the terminal, as it
	// records --yes's answers.
	for _, want := range []string{`[permission] allowed always bash "make"`, `[permission] rejected edit "x.go"`, `[permission] allowed edit "behind.go"`} {
		if !strings.Contains(r.out.String(), want) {
			t.Fatalf("transcript lacks %q:\n%s", want, r.out.String())
		}
	}
}

// TestTranscriptAsksAfterItsReaderLeft: when the transcript's reader has
// gone (run | head -1), questions still reach the terminal; the failed
// writes to stdout silenced them too, and run waited on a question nobody
// could see.
func TestTranscriptAsksAfterItsReaderLeft(t *testing.T) {
	lines := make(chan string)
	r := newTranscriptRig(t, askTerminal, lines)
	r.tr.err = syscall.EPIPE // a write to the transcript failed: its reader left
	r.run()
	q := r.ask(context.Background(), "bash", "make")
	eventually(t, "the question", func() bool { return strings.Contains(r.prompts.String(), `allow bash "make"?`) }, r.prompts.String)
	lines <- "y"
	if got := answer(t, q); got != "once" {
		t.Fatalf("answer = %s", got)
	}
	close(lines)
	r.stop()
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
	calls := busBuffer + 110 // more than a page of history to catch up on
	var ps []messages.Payload
	for i := range calls {
		ps = append(ps, &messages.ToolCalled{SessionID: r.sid, AssistantMessageID: asst, CallID: "c" + strconv.Itoa(i), Name: "read", Input: []byte(`{}`)})
	}
	r.durable(ps...)
	// A question asked while cut off reaches the broker but not the
	// subscription. Another Session's, asked first, is not this
	// transcript's to answer.
	otherCtx, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	other := make(chan error, 1)
	r.wg.Go(func() {
		_, err := r.pending.Ask(otherCtx, tools.Request{SessionID: "ses_other", Permission: "bash", Patterns: []string{"rm x"}})
		other <- err
	})
	eventually(t, "the other question", func() bool { return len(r.pending.List()) == 1 }, func() string { return "" })
	asked := r.ask(context.Background(), "bash", "ls")
	eventually(t, "the question", func() bool { return len(r.pending.List()) == 2 }, func() string { return "" })
	if !r.tr.sub.Dropped() {
		t.Fatal("the subscription was not cut off")
	}
	r.run()
	if got := answer(t, asked); got != "once" {
		t.Fatalf("question answered %s", got)
	}
	if l := r.pending.List(); len(l) != 1 || l[0].SessionID != "ses_other" {
		t.Fatalf("pending after the resubscription: %+v", l)
	}
	cancelOther()
	if err := <-other; !errors.Is(err, context.Canceled) {
		t.Fatalf("the other Session's question: %v", err)
	}
	eventually(t, "every call", func() bool { return strings.Count(r.out.String(), "[tool] read") == calls }, func() string {
		return strconv.Itoa(strings.Count(r.out.String(), "[tool] read"))
	})
	r.stop()
	if r.tr.lastSeq != int64(calls+1) {
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
	// A newline is escaped where a line must stay one; C1 controls are
	// bytes to a terminal that reads 8-bit controls.
	for in, want := range map[string]string{"a\nb": `a\x0ab`, "\u0085\u009b": `\x85\x9b`, "\u2066": `\u2066`} {
		if got := terminalSafe(in, false); got != want {
			t.Errorf("terminalSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTranscriptJSON: with --json every event is one JSON line, and
// nothing else reaches the transcript.
func TestTranscriptJSON(t *testing.T) {
	r := newTranscriptRig(t, askAllow, nil)
	r.tr.jsonLines = true
	r.run()
	asst := r.ids.Message()
	r.durable(&messages.StepStarted{SessionID: r.sid, AssistantMessageID: asst, Agent: "build", Attempt: 1},
		&messages.TextStarted{SessionID: r.sid, AssistantMessageID: asst},
		&messages.TextEnded{SessionID: r.sid, AssistantMessageID: asst, Text: "Hello"},
		&messages.StepFailed{SessionID: r.sid, AssistantMessageID: asst, Error: messages.Error{Type: messages.ErrProviderTransport, Message: "reset"}})
	eventually(t, "the step failure", func() bool { return strings.Contains(r.out.String(), `"reset"`) }, r.out.String)
	r.stop()
	lines := strings.Split(strings.TrimSuffix(r.out.String(), "\n"), "\n")
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("line %q is not JSON; transcript:\n%s", l, r.out.String())
		}
	}
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), r.out.String())
	}
}

// TestTranscriptProseDetails pins what the prose transcript prints for
// events TestTranscriptProse does not cover.
func TestTranscriptProseDetails(t *testing.T) {
	for _, tt := range []struct {
		name  string
		color bool
		evs   []messages.Payload
		want  string
	}{
		{"reasoning on a terminal is dimmed", true, []messages.Payload{&messages.ReasoningDelta{Delta: "hmm"}, &messages.ReasoningEnded{Text: "hmm"}},
			styleDim + "hmm" + styleReset + "\n"},
		{"reasoning elsewhere is labelled", false, []messages.Payload{&messages.ReasoningDelta{Delta: "hmm"}, &messages.ReasoningEnded{Text: "hmm"}},
			"[thinking] hmm\n"},
		{"an empty unseen fragment prints nothing", false, []messages.Payload{&messages.ReasoningEnded{}, &messages.TextEnded{}}, ""},
		{"a tool whose call was not seen goes by its call ID", false, []messages.Payload{&messages.ToolSucceeded{CallID: "c9", Output: "ok"}},
			"[done] c9: ok\n"},
		{"a source without a title is its URL", false, []messages.Payload{&messages.TextEnded{Text: "See.", ProviderMetadata: []byte(`{"citations":[{"url":"https://go.dev"}]}`)}},
			"See.\n[source] https://go.dev\n"},
	} {
		var out syncBuffer
		tr := &transcript{out: &out, color: tt.color, names: map[string]string{}, handled: map[string]bool{}}
		for _, p := range tt.evs {
			tr.prose(messages.Event{Data: p})
		}
		tr.endLine()
		if out.String() != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, out.String(), tt.want)
		}
	}

	// An event seen live and again from the store prints once; a question
	// on the terminal is not queued a second time.
	var out syncBuffer
	tr := &transcript{out: &out, prompts: &out, mode: askTerminal, lastSeq: -1, names: map[string]string{}, handled: map[string]bool{}}
	ev := messages.Event{Durable: &messages.Durable{Seq: 3}, Data: &messages.StepFailed{Error: messages.Error{Type: messages.ErrProviderTransport}}}
	tr.event(context.Background(), ev)
	tr.event(context.Background(), ev)
	if got := strings.Count(out.String(), "[step failed]"); got != 1 {
		t.Fatalf("the event printed %d times:\n%s", got, out.String())
	}
	q := &messages.PermissionAsked{RequestID: "per_1", Permission: "bash", Patterns: []string{"ls"}}
	tr.ask(q)
	tr.ask(q)
	if tr.asking != q || len(tr.queue) != 0 {
		t.Fatalf("asking %v, queue %v", tr.asking, tr.queue)
	}

	// A reply to a question withdrawn meanwhile (an interrupt) is no error.
	var replies syncBuffer
	tr.prompts, tr.pending = &replies, tools.NewPending(tools.PendingConfig{})
	tr.reply("per_gone", tools.Once, "")
	if replies.String() != "" || !tr.handled["per_gone"] {
		t.Fatalf("reply to a withdrawn question: %q", replies.String())
	}

	// Printing stops at the first failed write (a closed pipe).
	w := &failingWriter{}
	tr = &transcript{out: w, names: map[string]string{}, handled: map[string]bool{}}
	tr.prose(messages.Event{Data: &messages.StepFailed{Error: messages.Error{Type: messages.ErrProviderTransport}}})
	tr.prose(messages.Event{Data: &messages.StepFailed{Error: messages.Error{Type: messages.ErrProviderTransport}}})
	if w.writes != 1 || tr.err == nil {
		t.Fatalf("%d writes after a failed one, err %v", w.writes, tr.err)
	}

	// clip keeps a string of exactly n runes.
	if got := clip("héllo", 5); got != "héllo" {
		t.Fatalf("clip to its length = %q", got)
	}
	if got := clip("héllo!", 5); got != "héll…" {
		t.Fatalf("clip = %q", got)
	}
}

// TestTranscriptEndsAnOpenQuestionsLine: a question still on the
// terminal when the transcript ends gets its line ended, so that what
// follows does not continue the prompt.
func TestTranscriptEndsAnOpenQuestionsLine(t *testing.T) {
	r := newTranscriptRig(t, askTerminal, nil)
	r.tr.asking = &messages.PermissionAsked{RequestID: "per_1", Permission: "bash", Patterns: []string{"ls"}}
	r.run().stop()
	if got := r.prompts.String(); got != "\n" {
		t.Fatalf("prompts %q", got)
	}
}

// failingWriter fails every write and counts them.
type failingWriter struct{ writes int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("broken pipe")
}
