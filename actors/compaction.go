package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// compact replaces the active model representation of history with a
// checkpoint: a structured rolling summary plus token-bounded recent
// context. The full transcript stays durable. A failure settles the row
// (and a manual barrier) without moving the history boundary. It reports
// whether this compaction completed (another one, such as a manual request
// admitted meanwhile, may sit after it in history).
func (r *runner) compact(ctx context.Context, sess persistence.Session, agent locations.Agent, reason string, id messages.MessageID) (bool, error) {
	// usage sums what the summary requests cost, each try included.
	var usage *messages.Usage
	fail := func(t messages.ErrorType, msg string) (bool, error) {
		_, err := r.append(ctx, &messages.CompactionFailed{SessionID: r.sid, Reason: reason, InputID: id,
			Error: messages.Error{Type: t, Message: msg}, Usage: usage})
		return false, err
	}
	if reason == messages.CompactionManual {
		// A manual compaction still running here ran in a process that
		// died (drains are serialized): settle it, and its barrier, as
		// interrupted. Started again, it would be refused (its row is no
		// longer queued) and hold every prompt behind the barrier forever.
		m, err := r.store.Message(ctx, r.sid, id)
		if err != nil {
			return false, err
		}
		if m.Compaction != nil && m.Compaction.State == persistence.CompactionRunning {
			return fail(messages.ErrAborted, compactionOrphaned)
		}
	}
	if _, err := r.append(ctx, &messages.CompactionStarted{SessionID: r.sid, Reason: reason, InputID: id}); err != nil {
		return false, err
	}
	r.metrics.compaction(reason)
	model, provider, err := r.svc.Model(sess.Model, agent)
	if err != nil {
		return fail(messages.ErrCompactionUnavailable, err.Error())
	}
	msgs, err := r.history(ctx)
	if err != nil {
		_, ferr := fail(messages.ErrCompactionFailed, err.Error())
		return false, errors.Join(err, ferr)
	}
	previous := ""
	ck, _ := activeCheckpoint(msgs)
	if ck != nil {
		previous = ck.Summary
	}
	cp, _, err := r.checkpoint(ctx)
	if err != nil {
		_, ferr := fail(messages.ErrCompactionFailed, err.Error())
		return false, errors.Join(err, ferr)
	}
	// The prompts the checkpoint carries after it (see lower) go to the
	// model as they are: summarized too, they would take the room of
	// older history, which the summary is the only record of.
	summarized := msgs
	if carried := carriedPrompts(msgs, len(msgs), reason); len(carried) > 0 {
		summarized = msgs[:carried[0]]
	}
	history := lower(summarized, model.Ref, cp.BaselineSeq)
	if len(history) == 0 || ck != nil && len(history) == 1 {
		// Nothing since the last checkpoint (or ever): a summary would be
		// the model's guess at a conversation that has not happened.
		if len(summarized) < len(msgs) {
			return fail(messages.ErrCompactionFailed, compactionOnlyCarried)
		}
		return fail(messages.ErrCompactionFailed, compactionEmpty)
	}
	if ck != nil {
		// lower opened the history with the checkpoint's message. The
		// previous summary goes in the system text (compactionPrompt),
		// which no cut removes: sent in that message too, it would be
		// paid for twice. Its recent context stays.
		if ck.Recent == "" {
			history = history[1:]
		} else {
			history[0] = checkpointMessage(ck, false)
		}
	}
	// The span to summarize may itself overflow the context (an overflow
	// is what triggers this compaction): it is cut to fit, oldest first,
	// and cut further each time the provider still refuses it as too
	// long (the estimate counts characters, not the model's tokens).
	budget := compactionBudget(model)
	// When not even the newest turn fits whole (one huge tool output or
	// prompt), the summarizer gets the span as text, newest last, long
	// outputs cut, rather than nothing at all to summarize.
	_, since := activeCheckpoint(msgs)
	render := func(keep int) string {
		return recentContext(summarized[min(since, len(summarized)):], keep, cp.BaselineSeq)
	}
	var text strings.Builder
	var streamErr error
	finished := false
	prev := -1 // the estimate of the last request sent
	for try := 0; ; try++ {
		// Hosted tools are declared as on any request with history that may
		// hold their calls; the tool choice forbids using them.
		req := llm.Request{Model: model.Ref, System: []string{compactionPrompt(previous)}, ToolChoice: llm.ToolChoiceNone,
			HostedTools: model.HostedTools, MaxOutputTokens: model.Output, CacheKey: string(r.sid)}
		var some bool
		req.Messages, some = fitHistory(req, history, budget, previous != "", render)
		if !some && try == 0 {
			// Not even a rendering fits: a summary of nothing would be the
			// model's guess, and would replace the history.
			return fail(messages.ErrCompactionFailed, compactionTooLarge)
		}
		sent := estimateTokens(req)
		if sent == prev || !some {
			// Cutting to the smaller budget changed nothing, or left no
			// conversation: the provider would refuse the same request
			// again, or summarize nothing. Its last refusal is the failure.
			break
		}
		prev = sent
		text.Reset()
		streamErr, finished = nil, false
		r.metrics.request() // a summary request is a provider request too
		for ev, err := range provider.Stream(ctx, req) {
			if err != nil {
				streamErr = err
				break
			}
			switch ev.Kind {
			case llm.TextDelta:
				text.WriteString(ev.Text)
				r.live(&messages.CompactionDelta{SessionID: r.sid, InputID: id, Delta: ev.Text})
			case llm.StepFinish:
				finished = true
				cost := ev.Cost
				if cost == 0 {
					cost = model.Prices.Cost(ev.Usage)
				}
				if usage == nil {
					usage = &messages.Usage{}
				}
				usage.Tokens, usage.Cost = usage.Tokens.Add(ev.Usage), usage.Cost+cost
				switch ev.Finish {
				case llm.FinishContentFilter:
					streamErr = llm.Errorf(messages.ErrProviderContentFilter, "content filter stopped the summary")
				case llm.FinishLength:
					// A summary cut off at the output limit has lost its
					// last sections (Next Move among them): replacing
					// history with it would lose the work in flight.
					streamErr = llm.Errorf(messages.ErrCompactionFailed, "the summary was cut off at the model's output limit (%d tokens)", model.Output)
				}
			}
		}
		var le *llm.Error
		if try == compactionFits-1 || text.Len() > 0 || !errors.As(streamErr, &le) || le.Type != messages.ErrProviderContextOverflow {
			break
		}
		budget = sent / 2 // half of what the provider refused
	}
	switch {
	case ctx.Err() != nil && reason == messages.CompactionManual && reasonOf(ctx) == messages.ReasonSuperseded:
		// A move interrupted it: the request goes on at the new Location,
		// as the move's other work does, under a new barrier admitted in
		// the same commit (the settled one cannot run again).
		if _, err := r.append(ctx, &messages.CompactionFailed{SessionID: r.sid, Reason: reason, InputID: id,
			Error: messages.Error{Type: messages.ErrAborted, Message: compactionMoved}},
			&messages.CompactionAdmitted{SessionID: r.sid, InputID: r.ids.Message()}); err != nil {
			return false, err
		}
		return false, errInterrupted // the move carries a wake, or a run when one is owed (runner.owed)
	case ctx.Err() != nil:
		if _, err := fail(messages.ErrAborted, "Compaction interrupted"); err != nil {
			return false, err
		}
		return false, errInterrupted
	case streamErr != nil:
		msg := streamErr.Error()
		if le := (*llm.Error)(nil); errors.As(streamErr, &le) && le.Type == messages.ErrCompactionFailed {
			msg = le.Message // not "compaction.failed: …" under its own type
		}
		return fail(messages.ErrCompactionFailed, msg)
	case !finished || strings.TrimSpace(text.String()) == "":
		return fail(messages.ErrCompactionFailed, "the model returned no summary")
	}
	// The prompts the checkpoint carries after it (see lower) are left out
	// of the recent context, which would repeat them.
	recent := msgs
	if carried := carriedPrompts(msgs, len(msgs), reason); len(carried) > 0 {
		recent = msgs[:carried[0]]
	}
	// A completed compaction rebaselines instructions from current sources,
	// in the same commit: apart, a crash between the two would leave the
	// next attempt on the old baseline, the compaction done and the
	// checkpoint unchanged.
	baseline, err := r.rebaseline(ctx)
	if err != nil {
		_, ferr := fail(messages.ErrCompactionFailed, err.Error())
		return false, errors.Join(err, ferr)
	}
	superseded := cp.BaselineSeq
	if baseline != nil {
		// The fresh baseline this commit writes supersedes every
		// instruction update so far (and after a move, the old
		// Location's): none goes into the recent context.
		superseded = math.MaxInt64
	}
	keep := keepTokens(r.keepTokens, model)
	if reason == messages.CompactionOverflow {
		// The provider refused about this history (with its system text and
		// tools, which this leaves out): its window is smaller than that,
		// whatever the catalog says.
		keep = min(keep, max(estimateTokens(llm.Request{Messages: history})/4, minOverflowKeep))
	}
	ended := []messages.Payload{&messages.CompactionEnded{SessionID: r.sid, Reason: reason, InputID: id,
		Text: normalizeSummary(text.String()), Recent: recentContext(recent, keep, superseded), Usage: usage}}
	if baseline != nil {
		ended = append(ended, baseline)
	}
	if _, err := r.append(ctx, ended...); err != nil {
		return false, err
	}
	return true, nil
}

// compactionMargin is the room, in estimated tokens, a compaction request
// leaves beside its input and the summary's output; compactionFits is how
// many sizes it tries when the provider finds it too long.
const (
	compactionMargin = 1024
	compactionFits   = 3
)

// compactionBudget is what a compaction request's input may take of
// model's context window, in estimated tokens: the window less the
// summary's output and compactionMargin, at least one token when the
// window is known (a small window must still cut), 0 (no limit) when it is
// not.
func compactionBudget(model llm.Model) int {
	if model.Context <= 0 {
		return 0
	}
	return max(model.Context-model.Output-compactionMargin, 1)
}

// fitHistory returns history, followed by the instruction to summarize,
// cut from the oldest message on until req's estimate fits budget tokens
// (budget <= 0: no limit). The kept history starts at a user turn, so no
// tool result loses its call; what was cut is named in the instruction,
// whose few extra words compactionMargin absorbs, and which points to the
// previous summary when there is one (previous). When no turn fits whole,
// the instruction alone is returned, holding what render (when not nil)
// makes of the history within the tokens left. It reports whether the
// request holds any of the conversation (an empty history holds none).
func fitHistory(req llm.Request, history []llm.Message, budget int, previous bool, render func(keep int) string) ([]llm.Message, bool) {
	ask := "Write the checkpoint summary now."
	fits := func(msgs []llm.Message) bool {
		req.Messages = msgs
		return budget <= 0 || estimateTokens(req) <= budget
	}
	final := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: ask}}}
	cut := 0
	for cut < len(history) && !fits(append(history[cut:len(history):len(history)], final)) {
		cut++
		for cut < len(history) && history[cut].Role != llm.RoleUser {
			cut++
		}
	}
	if cut == len(history) && len(history) > 0 {
		head := "The conversation is too long to send whole, even its newest turn; what follows is its newest part as text, long tool outputs cut. "
		if previous {
			head = "The conversation since the previous checkpoint is too long to send whole, even its newest turn; what follows is its newest part as text, long tool outputs cut. Summarize from the previous summary and it. "
		}
		req.Messages = []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: head + "\n\n\n\n" + ask}}}}
		if room := budget - estimateTokens(req); render != nil && room > 0 {
			if part := render(room); part != "" {
				final.Parts[0].Text = head + "\n\n" + part + "\n\n" + ask
				return []llm.Message{final}, true
			}
		}
		return []llm.Message{final}, false
	}
	switch {
	case cut > 0 && previous:
		final.Parts[0].Text = fmt.Sprintf("The %d oldest messages since the previous checkpoint did not fit and are left out; "+
			"summarize from the previous summary and what follows. %s", cut, ask)
	case cut > 0:
		final.Parts[0].Text = fmt.Sprintf("The %d oldest messages of the conversation did not fit and are left out; "+
			"summarize what follows. %s", cut, ask)
	}
	return append(history[cut:len(history):len(history)], final), cut < len(history)
}

// compactionMoved is the error message of a manual compaction a move
// interrupted, which runs again at the new Location.
const compactionMoved = "Compaction interrupted: the Session moved, and compacts at its new Location"

// compactionEmpty is the failure of a manual compaction with no history
// to summarize since the last one.
const compactionEmpty = "nothing to compact: no messages since the last compaction"

// compactionOnlyCarried is the failure of a compaction with nothing to
// summarize but the prompts it would carry after it as they are.
const compactionOnlyCarried = "nothing to compact: since the last compaction there are only the prompts not yet answered, which go to the model as they are"

// compactionTooLarge is the failure of a compaction of whose history not
// even a rendering fits the model's window beside the summary's output.
const compactionTooLarge = "the conversation does not fit the model's context window, even cut: a summary request would hold none of it"

// compactionOrphaned is the error message of a compaction whose process
// died.
const compactionOrphaned = "Compaction interrupted: the process running it stopped"

// failInterruptedCompactions settles the automatic and overflow
// compactions a dead process left running, as interrupted: drains are
// serialized, so none of them still runs, and their rows would show a
// compaction in progress forever. (A manual one is settled with its
// barrier, when compact comes to it.) It reads history, which the step
// about to run reads anyway.
func (r *runner) failInterruptedCompactions(ctx context.Context) error {
	return r.failRunningCompactions(ctx, false, messages.Error{Type: messages.ErrAborted, Message: compactionOrphaned})
}

// failRunningCompactions settles the compactions the Session shows
// running with e: the automatic and overflow ones, and with manual the
// manual ones too, which settles their barriers.
func (r *runner) failRunningCompactions(ctx context.Context, manual bool, e messages.Error) error {
	msgs, err := r.history(ctx)
	if err != nil {
		return err
	}
	var ps []messages.Payload
	for _, m := range msgs {
		if c := m.Compaction; c != nil && c.State == persistence.CompactionRunning && (manual || c.Reason != messages.CompactionManual) {
			ps = append(ps, &messages.CompactionFailed{SessionID: r.sid, Reason: c.Reason, InputID: m.ID, Error: e})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	_, err = r.append(ctx, ps...)
	return err
}

// defaultKeepTokens is the recent context a checkpoint keeps when none is
// configured.
const defaultKeepTokens = 8000

// minOverflowKeep is the least recent context, in estimated tokens, an
// overflow compaction keeps however small the refused history was.
const minOverflowKeep = 256

// keepTokens is the recent context, in estimated tokens, a compaction with
// model keeps: the configured amount (keep, 0 for defaultKeepTokens), but
// at most a quarter of the model's context window, so that the request
// after the checkpoint fits with room to spare even on a small model.
func keepTokens(keep int, model llm.Model) int {
	if keep <= 0 {
		keep = defaultKeepTokens
	}
	if model.Context > 0 {
		keep = max(min(keep, model.Context/4), 1)
	}
	return keep
}

// recentContext serializes the newest messages, newest last, within about
// keep tokens (four characters each), leaving out instruction updates older
// than baselineSeq, which the baseline in force supersedes. A tool output
// is kept whole up to half the budget, so that one large result does not
// crowd out everything before it.
func recentContext(msgs []persistence.Message, keep int, baselineSeq int64) string {
	if keep <= 0 {
		keep = defaultKeepTokens
	}
	budget := keep * 4
	var lines []string
	for i := len(msgs) - 1; i >= 0 && budget > 0; i-- {
		if msgs[i].Role == persistence.RoleSystem && msgs[i].Seq < baselineSeq {
			continue // superseded by the baseline in force, as in lower
		}
		line := renderMessage(msgs[i], keep*4/2)
		if line == "" {
			continue
		}
		if len(line) > budget {
			// Keep the tail, from a character boundary: stored text must be
			// UTF-8, or the JSON clients read differs from what is stored.
			// It keeps its role's label ("user: …"), or the model could
			// not tell who wrote it.
			label := lineLabel(line)
			if len(label) >= budget {
				label = ""
			}
			cut := len(line) - (budget - len(label))
			for cut < len(line) && !utf8.RuneStart(line[cut]) {
				cut++
			}
			line = label + line[cut:]
		}
		budget -= len(line)
		lines = append(lines, line)
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return strings.Join(lines, "\n")
}

// lineLabel returns what names the writer of a recent context line
// (renderMessage), with "…" for the part a cut leaves out: "user: …",
// "tool read {…} -> …". A label longer than a line is worth is left out.
func lineLabel(line string) string {
	for _, role := range []string{"user: ", "system: ", "assistant: "} {
		if strings.HasPrefix(line, role) {
			return role + "…"
		}
	}
	if i := strings.Index(line, " -> "); strings.HasPrefix(line, "tool ") && i >= 0 && i < 200 {
		return line[:i+len(" -> ")] + "…"
	}
	return ""
}

// renderMessage serializes one message for the recent context, cutting
// each tool output to maxOutput bytes.
func renderMessage(m persistence.Message, maxOutput int) string {
	switch m.Role {
	case persistence.RoleUser:
		return "user: " + m.Prompt.Text
	case persistence.RoleSystem:
		return "system: " + m.Text
	case persistence.RoleAssistant:
		var b strings.Builder
		for _, p := range m.Parts {
			switch {
			case p.Kind == persistence.PartText:
				fmt.Fprintf(&b, "assistant: %s\n", p.Text)
			case p.Tool != nil:
				fmt.Fprintf(&b, "tool %s %s -> %s\n", p.Tool.Name, p.Tool.Input, truncate(p.Tool.Output, maxOutput))
			}
		}
		return strings.TrimRight(b.String(), "\n")
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // not within a character
	}
	return s[:n] + "…"
}

// defaultCompactionBuffer is the reserved headroom, in tokens, when none is
// configured, for a window of at least four times as much.
const defaultCompactionBuffer = 20000

// needsCompaction reports whether a request exceeds the model's context
// window minus the reserve (the larger of the output allowance and the
// buffer) while complete steps exist to fold away. A buffer of 0 takes
// defaultCompactionBuffer, but at most a quarter of the window: a default
// sized for large windows would leave a small model no room at all, and
// every step would compact history that fits. A configured buffer is
// taken as it is.
func needsCompaction(req llm.Request, model llm.Model, buffer int, msgs []persistence.Message) bool {
	if model.Context <= 0 {
		return false
	}
	if buffer <= 0 {
		buffer = min(defaultCompactionBuffer, model.Context/4)
	}
	reserve := max(model.Output, buffer)
	if estimateTokens(req) <= model.Context-reserve {
		return false
	}
	// Only steps after the active checkpoint's boundary are left to fold:
	// right after a compaction another one would summarize nothing new.
	_, start := activeCheckpoint(msgs)
	for _, m := range msgs[start:] {
		if m.Role == persistence.RoleAssistant && !m.Open && m.Error == nil {
			return true
		}
	}
	return false
}

// autoCompaction compacts before a step whose request would not fit the
// model's context window minus its reserve.
func (r *runner) autoCompaction(ctx context.Context, sess persistence.Session, agent locations.Agent, model llm.Model, final bool) error {
	req, err := r.request(ctx, agent, model, final)
	if err != nil {
		return err
	}
	msgs, err := r.history(ctx)
	if err != nil {
		return err
	}
	if !needsCompaction(req, model, r.compactionBuffer, msgs) {
		return nil
	}
	_, err = r.compact(ctx, sess, agent, messages.CompactionAuto, r.ids.Message())
	return err
}
