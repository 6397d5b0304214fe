package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// busBuffer is how many events the run command's bus subscription holds
// before the bus cuts it off; the transcript then catches up from the
// store. A variable so that tests can make falling behind cheap.
var busBuffer = 4096

// askMode says how run answers permission questions.
type askMode int

const (
	// askReject rejects every question at once: there is no terminal to
	// ask on and --yes was not given. Never a hang.
	askReject askMode = iota
	// askAllow allows every question once (--yes).
	askAllow
	// askTerminal asks on the terminal.
	askTerminal
)

// rejectNoTerminal and rejectInputEnded are the reply messages of
// askReject; the model reads them.
const (
	rejectNoTerminal = "no terminal to ask on and --yes was not given"
	rejectInputEnded = "the terminal's input ended (^D) before an answer"
)

// ANSI styles for a terminal.
const (
	styleDim   = "\x1b[2m"
	styleReset = "\x1b[0m"
)

// transcript prints one Session's events as they happen and answers its
// permission questions. Its methods run on one goroutine (loop).
type transcript struct {
	sid       messages.SessionID
	out       io.Writer // the transcript
	prompts   io.Writer // permission questions and notes (the terminal)
	jsonLines bool      // one JSON line per event instead of prose
	color     bool      // out is a terminal: dim the reasoning
	mode      askMode
	pending   *tools.Pending
	store     persistence.Store
	bus       *actors.Bus
	// lines delivers the terminal's input lines; nil unless mode is
	// askTerminal.
	lines <-chan string

	sub     *actors.Subscription
	lastSeq int64
	// open is the kind of block whose deltas are mid-line: "text",
	// "reasoning" or "".
	open     string
	streamed bool              // the open block printed deltas
	names    map[string]string // assistantMessageID+callID -> tool name
	queue    []*messages.PermissionAsked
	asking   *messages.PermissionAsked
	handled  map[string]bool // request IDs answered or seen withdrawn
	rejected int             // questions rejected for want of a terminal
	// rejectWhy is the reply message of askReject: no terminal, or its
	// input ended.
	rejectWhy string
	err       error // first write error of out; the transcript stops there
	// promptErr is the first write error of prompts, apart: a reader of
	// the transcript that left (run | head -1) must not silence the
	// questions on the terminal, which run would then wait on unseen.
	promptErr error
}

// newTranscript subscribes to sid's live events. Subscribe before the
// prompt so that nothing is missed.
func newTranscript(sid messages.SessionID, bus *actors.Bus, store persistence.Store, pending *tools.Pending) *transcript {
	return &transcript{sid: sid, bus: bus, store: store, pending: pending, lastSeq: -1,
		sub: bus.Subscribe(busBuffer, actors.SessionFilter(sid)), names: map[string]string{}, handled: map[string]bool{}}
}

// loop prints events until finish is closed, then prints what is still
// buffered and catches up with the store, so that the transcript holds
// every durable event of the busy period.
func (t *transcript) loop(ctx context.Context, finish <-chan struct{}) {
	defer func() { t.sub.Close() }() // the subscription in use at the end: resubscribe replaces it
	for {
		select {
		case ev, ok := <-t.sub.C:
			if !ok {
				t.resubscribe(ctx)
				continue
			}
			t.event(ctx, ev)
		case line, ok := <-t.lines:
			if !ok {
				t.endOfInput(rejectInputEnded)
				continue
			}
			t.answerLine(line)
		case <-finish:
			t.drainBuffered(ctx)
			t.catchUp(ctx)
			t.endLine()
			if t.asking != nil {
				t.prompt("\n")
			}
			return
		}
	}
}

// drainBuffered handles the events already buffered in the subscription.
func (t *transcript) drainBuffered(ctx context.Context) {
	for {
		select {
		case ev, ok := <-t.sub.C:
			if !ok {
				return
			}
			t.event(ctx, ev)
		default:
			return
		}
	}
}

// resubscribe replaces a subscription the bus cut off for falling behind:
// it subscribes again, then replays the durable events it missed from the
// store and takes up questions still waiting. Streamed deltas in between
// are lost; ended fragments print in full instead.
func (t *transcript) resubscribe(ctx context.Context) {
	t.sub = t.bus.Subscribe(busBuffer, actors.SessionFilter(t.sid))
	t.catchUp(ctx)
	for _, req := range t.pending.List() {
		if req.SessionID == t.sid && !t.handled[req.ID] && !t.queued(req.ID) {
			t.ask(req.Asked())
		}
	}
}

// catchUp handles the durable events after the last one seen.
func (t *transcript) catchUp(ctx context.Context) {
	for {
		page, err := t.store.History(ctx, t.sid, persistence.Query{After: t.lastSeq, Limit: 100})
		if err != nil {
			return // the live stream already showed what it could
		}
		for _, ev := range page.Data {
			t.event(ctx, ev)
		}
		if !page.HasMore || len(page.Data) == 0 {
			return
		}
	}
}

// event handles one live or durable event.
func (t *transcript) event(ctx context.Context, ev messages.Event) {
	if ev.Durable != nil {
		if ev.Durable.Seq <= t.lastSeq {
			return // already shown (live, then again from the store)
		}
		t.lastSeq = ev.Durable.Seq
	}
	if t.jsonLines {
		b, err := json.Marshal(ev)
		if err == nil {
			t.printf(t.out, "%s\n", b)
		}
	}
	switch p := ev.Data.(type) {
	case *messages.PermissionAsked:
		t.ask(p)
	case *messages.PermissionReplied:
		t.replied(p)
	}
	if !t.jsonLines {
		t.prose(ev)
	}
}

// prose prints ev as part of the human-readable transcript.
func (t *transcript) prose(ev messages.Event) {
	switch p := ev.Data.(type) {
	case *messages.TextDelta:
		t.delta("text", p.Delta)
	case *messages.TextEnded:
		t.ended("text", p.Text)
		for _, src := range citedSources(p.ProviderMetadata) {
			t.line("[source] %s", src)
		}
	case *messages.ReasoningDelta:
		t.delta("reasoning", p.Delta)
	case *messages.ReasoningEnded:
		t.ended("reasoning", p.Text)
	case *messages.ToolCalled:
		t.names[string(p.AssistantMessageID)+"\x00"+p.CallID] = p.Name
		label := "[tool]"
		if p.Executed {
			label = "[hosted tool]" // the provider runs it, not sessiond
		}
		t.line("%s %s %s", label, p.Name, clip(string(p.Input), 200))
	case *messages.ToolSucceeded:
		t.line("[done] %s: %s", t.toolName(p.AssistantMessageID, p.CallID), summarize(p.Output))
	case *messages.ToolFailed:
		t.line("[failed] %s: %s: %s", t.toolName(p.AssistantMessageID, p.CallID), p.Error.Type, clip(p.Error.Message, 300))
	case *messages.StepFailed:
		t.line("[step failed] %s: %s", p.Error.Type, clip(p.Error.Message, 300))
	case *messages.RetryScheduled:
		t.line("[retry] attempt %d at %s after %s: %s", p.Attempt, time.UnixMilli(p.At).Format(time.TimeOnly), p.Error.Type, clip(p.Error.Message, 200))
	case *messages.CompactionStarted:
		t.line("[compaction] started (%s)", p.Reason)
	case *messages.CompactionEnded:
		t.line("[compaction] done (%s)", p.Reason)
	case *messages.CompactionFailed:
		t.line("[compaction] failed (%s): %s: %s", p.Reason, p.Error.Type, clip(p.Error.Message, 200))
	case *messages.InstructionsUpdated:
		t.line("[instructions] %s", p.Kind)
	}
}

// delta prints a streamed fragment piece, opening its block when needed.
func (t *transcript) delta(kind, text string) {
	if t.open != kind {
		t.endLine()
		t.open, t.streamed = kind, false
		if kind == "reasoning" && !t.color {
			t.printf(t.out, "[thinking] ")
		}
	}
	t.streamed = true
	text = terminalSafe(text, true)
	if kind == "reasoning" && t.color {
		t.printf(t.out, "%s%s%s", styleDim, text, styleReset)
		return
	}
	t.printf(t.out, "%s", text)
}

// ended closes a fragment; one whose deltas were not seen (the bus cut the
// subscription off) prints in full.
func (t *transcript) ended(kind, text string) {
	if t.open != kind || !t.streamed {
		t.endLine()
		if text != "" {
			t.delta(kind, text)
		}
	}
	t.endLine()
}

// endLine ends a block of deltas that is mid-line.
func (t *transcript) endLine() {
	if t.open != "" {
		t.printf(t.out, "\n")
		t.open, t.streamed = "", false
	}
}

// line prints one line of its own. Its string arguments are made safe
// for a terminal (terminalSafe): they come from the model and its tools.
func (t *transcript) line(format string, args ...any) {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = terminalSafe(s, false)
		}
	}
	t.endLine()
	t.printf(t.out, format+"\n", args...)
}

// printf writes to w, the transcript, unless an earlier write failed (a
// closed pipe).
func (t *transcript) printf(w io.Writer, format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(w, format, args...)
	}
}

// prompt writes to the terminal unless an earlier write to it failed.
func (t *transcript) prompt(format string, args ...any) {
	if t.promptErr == nil {
		_, t.promptErr = fmt.Fprintf(t.prompts, format, args...)
	}
}

func (t *transcript) toolName(asst messages.MessageID, callID string) string {
	if n, ok := t.names[string(asst)+"\x00"+callID]; ok {
		return n
	}
	return callID
}

// ask answers or queues a permission question.
func (t *transcript) ask(p *messages.PermissionAsked) {
	if t.handled[p.RequestID] || t.queued(p.RequestID) {
		return
	}
	what := p.Permission + " " + quotePatterns(p.Patterns)
	switch t.mode {
	case askAllow:
		t.reply(p.RequestID, tools.Once, "")
		if !t.jsonLines {
			t.line("[permission] allowed %s (--yes)", what)
		}
	case askReject:
		why := cmp.Or(t.rejectWhy, rejectNoTerminal)
		t.reply(p.RequestID, tools.Reject, why)
		t.rejected++
		if !t.jsonLines {
			t.line("[permission] rejected %s: %s (pass --yes to allow)", what, why)
		}
	case askTerminal:
		t.queue = append(t.queue, p)
		t.next()
	}
}

// queued reports whether question id waits for the terminal.
func (t *transcript) queued(id string) bool {
	if t.asking != nil && t.asking.RequestID == id {
		return true
	}
	for _, q := range t.queue {
		if q.RequestID == id {
			return true
		}
	}
	return false
}

// next puts the next queued question to the terminal, unless one is open.
func (t *transcript) next() {
	if t.asking != nil || len(t.queue) == 0 {
		return
	}
	t.asking, t.queue = t.queue[0], t.queue[1:]
	t.endLine()
	where := ""
	if t.asking.Where != "" {
		where = fmt.Sprintf(" in %q", t.asking.Where)
	}
	t.prompt("allow %s %s%s? [y]es once / [a]lways / [n]o: ", t.asking.Permission, quotePatterns(t.asking.Patterns), where)
	if t.promptErr != nil {
		// The terminal cannot be written to: nobody sees the question.
		t.endOfInput(rejectNoTerminal)
	}
}

// answerLine answers the open question with a line typed on the terminal.
func (t *transcript) answerLine(line string) {
	if t.asking == nil {
		return // typed ahead of any question
	}
	var r tools.Reply
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes", "o", "once":
		r = tools.Once
	case "a", "always":
		r = tools.Always
	case "n", "no", "r", "reject":
		r = tools.Reject
	default:
		t.prompt("answer y (allow once), a (allow always) or n (reject): ")
		return
	}
	q := t.asking
	t.asking = nil
	t.reply(q.RequestID, r, "")
	if !t.jsonLines {
		// The transcript records the decision, as it does --yes's.
		verb := map[tools.Reply]string{tools.Once: "allowed", tools.Always: "allowed always", tools.Reject: "rejected"}[r]
		t.line("[permission] %s %s %s", verb, q.Permission, quotePatterns(q.Patterns))
	}
	t.next()
}

// endOfInput rejects the open and queued questions, and every later one,
// with reply message why: once the terminal's input ends (^D), or it
// cannot be written to.
func (t *transcript) endOfInput(why string) {
	t.lines, t.mode, t.rejectWhy = nil, askReject, why
	open := t.queue
	if t.asking != nil {
		open = append([]*messages.PermissionAsked{t.asking}, open...)
		t.prompt("\n")
	}
	t.asking, t.queue = nil, nil
	for _, q := range open {
		t.ask(q)
	}
}

// replied notes an answer from elsewhere: a question withdrawn by an
// interrupt stops waiting on the terminal.
func (t *transcript) replied(p *messages.PermissionReplied) {
	if t.handled[p.RequestID] {
		return
	}
	t.handled[p.RequestID] = true
	if t.asking != nil && t.asking.RequestID == p.RequestID {
		t.asking = nil
		t.prompt("(question closed: %s)\n", terminalSafe(p.Reply+withMessage(p.Message), false))
		t.next()
		return
	}
	for i, q := range t.queue {
		if q.RequestID == p.RequestID {
			t.queue = append(t.queue[:i], t.queue[i+1:]...)
			break
		}
	}
}

// reply answers question id. A question withdrawn in the meantime (an
// interrupt) is not an error.
func (t *transcript) reply(id string, r tools.Reply, message string) {
	t.handled[id] = true
	var nf *tools.RequestNotFoundError
	if err := t.pending.Reply(id, r, message); err != nil && !errors.As(err, &nf) {
		t.prompt("sessiond: reply to %s: %v\n", id, err)
	}
}

func withMessage(m string) string {
	if m == "" {
		return ""
	}
	return ": " + m
}

// quotePatterns renders a question's patterns for a prompt.
func quotePatterns(ps []string) string {
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, " ")
}

// terminalSafe shows the control characters of s as escapes (\x1b,
// \u202e): text from the model, a file or a command could otherwise move
// the cursor and redraw the permission question above it, or reorder what
// is shown. Tabs stay, and newlines when multiline. Bytes that are not
// UTF-8 are escaped too: a terminal that reads 8-bit controls takes a lone
// 0x9b for the escape sequence introducer.
func terminalSafe(s string, multiline bool) string {
	unsafe := func(r rune) bool {
		if r == '\t' || multiline && r == '\n' {
			return false
		}
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	}
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unsafe) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i]) // one byte that is not UTF-8
		case !unsafe(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// summarize shortens a tool's output to its first non-empty line and a
// line count.
func summarize(out string) string {
	out = strings.TrimRight(out, "\n")
	n := strings.Count(out, "\n") + 1
	first := ""
	for l := range strings.SplitSeq(out, "\n") {
		if strings.TrimSpace(l) != "" {
			first = strings.TrimSpace(l)
			break
		}
	}
	if out == "" {
		return "(no output)"
	}
	if n == 1 {
		return clip(first, 160)
	}
	return fmt.Sprintf("%s (%d lines)", clip(first, 160), n)
}

// clip shortens s to at most n runes on one line.
func clip(s string, n int) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// citedSources returns the sources a text's provider metadata cites (the
// Anthropic adapter keeps a web search answer's citations there), each
// once, as "title — url".
func citedSources(meta json.RawMessage) []string {
	var m struct {
		Citations []struct {
			Title string `json:"title"`
			URL   string `json:"url"`
		} `json:"citations"`
	}
	if len(meta) == 0 || json.Unmarshal(meta, &m) != nil {
		return nil
	}
	var out []string
	for _, c := range m.Citations {
		src := clip(c.URL, 300)
		if c.URL == "" {
			continue
		}
		if c.Title != "" {
			src = clip(c.Title, 200) + " — " + src
		}
		if !slices.Contains(out, src) {
			out = append(out, src)
		}
	}
	return out
}
