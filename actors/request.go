package actors

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// basePrompt is the system text a request starts from when the agent has
// no prompt of its own: one baseline per provider family, since models of
// different families follow different conventions for tools and answers.
func basePrompt(family llm.ProviderType) string {
	switch family {
	case llm.ProviderAnthropic:
		return anthropicBasePrompt
	case llm.ProviderOpenAI:
		return openaiBasePrompt
	}
	return genericBasePrompt
}

const genericBasePrompt = "You are a capable software engineering agent running inside sessiond. " +
	"Work step by step, use the available tools to inspect and change the project, and report what you did."

// anthropicBasePrompt is the baseline of Claude models: they call tools
// well and in parallel, and are best told to keep answers short and to
// check their work.
const anthropicBasePrompt = "You are a software engineering agent running inside sessiond, working in the user's project. " +
	"Use the tools to read the code before you change it; when several tool calls do not depend on each other, make them in the same response. " +
	"Keep your answers short and concrete: say what you changed and how you checked it, and stop when the task is done."

// openaiBasePrompt is the baseline of OpenAI and OpenAI-compatible models
// (GPT and the open models local servers serve), which need the contract
// of function calls said plainly.
const openaiBasePrompt = "You are a software engineering agent running inside sessiond, working in the user's project. " +
	"Act through the provided functions: call one with arguments that are a JSON object matching its schema, then wait for its result before relying on it. " +
	"Inspect files before editing them, make the smallest change that does the job, and finish with a brief report of what you did."

// finalStepReminder is sent on the last step of an agent's allowance, when
// tools are withdrawn.
const finalStepReminder = "<system-reminder>Maximum steps reached. Tools are disabled for this response. " +
	"Summarize what you did, what remains, and the next step you would take.</system-reminder>"

// boundary reads the Session record, its inbox, its checkpoint and the
// messages history would re-read, in one snapshot. Until this runner
// commits again, history and checkpoint use it instead of reading: what
// other writers can commit meanwhile (selections, admissions, a queued
// compaction row) changes nothing a request shows before the next
// boundary reads it.
//
// When every event of the Session since the last read is one of this
// runner's own commits, the mirror of that read, kept up to date from
// what the commits returned (observe), is what the read would return, and
// checking the Session's last seq replaces it.
func (r *runner) boundary(ctx context.Context) (persistence.Boundary, error) {
	_, after := r.historyFrom()
	b, ok, err := r.mirrored(ctx, after)
	if err != nil {
		return b, err
	}
	if !ok {
		if b, err = r.store.Boundary(ctx, r.sid, after); err != nil {
			return b, err
		}
		r.mu.Lock()
		r.mirror, r.mirrorAfter, r.mirrorOK = b, after, true
		r.mirror.Messages = slices.Clone(b.Messages) // history takes b's
		r.mirror.Pending = slices.Clone(b.Pending)
		r.mu.Unlock()
	}
	r.bnd, r.bndAt, r.bndMsgs = b, r.commits, true
	return b, nil
}

// mirrored returns the boundary read after seq `after` from the mirror,
// or ok false when only the store can answer. It holds mu, as observe
// does: a commit flushing held live events runs on a timer's goroutine.
func (r *runner) mirrored(ctx context.Context, after int64) (b persistence.Boundary, ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mirrorOK || after < r.mirrorAfter {
		return b, false, nil
	}
	w, err := r.store.Watermark(ctx, r.sid)
	if err != nil || w != r.mirror.Seq {
		return b, false, err
	}
	b = r.fromMirror(after)
	if checkMirror.Load() {
		r.checkMirror(ctx, b, after)
	}
	return b, true, nil
}

// fromMirror returns the mirror as a boundary read after seq `after`
// (>= mirrorAfter), and drops the messages at or before it from the
// mirror: history keeps them from here on.
func (r *runner) fromMirror(after int64) persistence.Boundary {
	i := 0
	for i < len(r.mirror.Messages) && r.mirror.Messages[i].Seq <= after {
		i++
	}
	r.mirror.Messages = slices.Delete(r.mirror.Messages, 0, i)
	r.mirrorAfter = after
	b := r.mirror
	b.Messages, b.Pending = cloneOrNil(b.Messages), cloneOrNil(b.Pending)
	return b
}

// cloneOrNil copies s, or returns nil when it is empty, as a read would.
func cloneOrNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// checkMirror, when set (the package's tests set it), has every boundary
// served from the mirror read the store too: mirrorChecks counts them, and
// mirrorMismatch keeps the first that differed.
var (
	checkMirror    atomic.Bool
	mirrorChecks   atomic.Int64
	mirrorMismatch atomic.Pointer[string]
)

func (r *runner) checkMirror(ctx context.Context, b persistence.Boundary, after int64) {
	read, err := r.store.Boundary(ctx, r.sid, after)
	if err == nil && read.Seq != b.Seq {
		// Another writer (an admission, a selection) committed after the
		// watermark the mirror was served at: this read is of a later
		// log, which the mirror need not match.
		return
	}
	mirrorChecks.Add(1)
	if err != nil || !reflect.DeepEqual(read, b) {
		msg := fmt.Sprintf("session %s, boundary after seq %d: from the mirror\n%+v\nread (%v)\n%+v", r.sid, after, b, err, read)
		mirrorMismatch.CompareAndSwap(nil, &msg)
	}
}

// observe applies one of this runner's commits to the mirror; the caller
// holds mu. The mirror stays valid only while the commits follow each
// other in the log with nothing between them, and carry only events whose
// effect on a boundary read the commit returns: messages, the record, and
// promotions, which leave the inbox.
func (r *runner) observe(c persistence.Committed) {
	if !r.mirrorOK {
		return
	}
	if c.Events[0].Seq() != r.mirror.Seq+1 {
		r.mirrorOK = false
		return
	}
	for _, ev := range c.Events {
		switch p := ev.Data.(type) {
		case *messages.PromptPromoted:
			r.mirror.Pending = slices.DeleteFunc(r.mirror.Pending, func(in persistence.Input) bool { return in.ID == p.InputID })
		case *messages.ExecutionStarted, *messages.ExecutionSucceeded, *messages.ExecutionFailed, *messages.ExecutionInterrupted,
			*messages.StepStarted, *messages.StepEnded, *messages.StepFailed, *messages.RetryScheduled,
			*messages.TextStarted, *messages.TextEnded, *messages.ReasoningStarted, *messages.ReasoningEnded,
			*messages.ToolInputStarted, *messages.ToolInputEnded, *messages.ToolCalled, *messages.ToolSucceeded, *messages.ToolFailed:
		default:
			// Instructions and compaction change the checkpoint or the
			// inbox: read again.
			r.mirrorOK = false
			return
		}
	}
	r.mirror.Seq = c.Events[len(c.Events)-1].Seq()
	if c.Session != nil {
		r.mirror.Session = *c.Session
	}
	for _, m := range c.Messages {
		i := slices.IndexFunc(r.mirror.Messages, func(old persistence.Message) bool { return old.ID == m.ID })
		switch {
		case i >= 0:
			r.mirror.Messages[i] = m
		case m.Seq > r.mirrorAfter:
			// New messages take the commit's seqs, after every other.
			r.mirror.Messages = append(r.mirror.Messages, m)
		default:
			// A message before the mirror's window changed: only a read
			// can place it.
			r.mirrorOK = false
			return
		}
	}
}

// fresh reports whether the last boundary read is still current.
func (r *runner) fresh() bool { return r.bndAt == r.commits }

// checkpoint returns the Session's instruction checkpoint, from the
// boundary read while it is current.
func (r *runner) checkpoint(ctx context.Context) (persistence.Checkpoint, bool, error) {
	if r.fresh() {
		if r.bnd.Checkpoint == nil {
			return persistence.Checkpoint{}, false, nil
		}
		return *r.bnd.Checkpoint, true, nil
	}
	return r.store.Checkpoint(ctx, r.sid)
}

// historyFrom returns how many cached messages can no longer change and
// the seq after which history must re-read.
func (r *runner) historyFrom() (int, int64) {
	from := len(r.hist)
	lastAssistant := -1
	for i := len(r.hist) - 1; i >= 0; i-- {
		if r.hist[i].Role == persistence.RoleAssistant {
			lastAssistant = i
			break
		}
	}
	for i, m := range r.hist {
		if i == lastAssistant || m.Open || m.Retry != nil ||
			(m.Compaction != nil && m.Compaction.State != persistence.CompactionCompleted && m.Compaction.State != persistence.CompactionFailed) {
			from = i
			break
		}
	}
	after := int64(-1)
	if from > 0 {
		after = r.hist[from-1].Seq
	}
	return from, after
}

// noHistory reports whether the Session had no projected message at all
// as of b, the boundary just read: history keeps none from earlier reads,
// and b found none after them.
func (r *runner) noHistory(b persistence.Boundary) bool {
	from, _ := r.historyFrom()
	return from == 0 && len(b.Messages) == 0
}

// history returns every projected message of the Session in source order.
// Between calls it keeps the messages that can no longer change and
// re-reads only from the first one that still can (an open or retrying
// assistant message, the latest assistant message, an unsettled compaction
// row), so a step does not re-decode the whole transcript; right after a
// boundary read it re-reads nothing.
func (r *runner) history(ctx context.Context) ([]persistence.Message, error) {
	from, after := r.historyFrom()
	r.hist = r.hist[:from]
	r.lowered.keep(from)
	if r.fresh() && r.bndMsgs {
		r.hist = append(r.hist, r.bnd.Messages...)
		r.bnd.Messages, r.bndMsgs = nil, false // r.hist owns them now
		return r.hist, nil
	}
	for {
		p, err := r.store.Messages(ctx, r.sid, persistence.Query{After: after, Limit: 500})
		if err != nil {
			r.hist = nil
			return nil, err
		}
		r.hist = append(r.hist, p.Data...)
		if !p.HasMore || len(p.Data) == 0 {
			return r.hist, nil
		}
		after = p.Data[len(p.Data)-1].Seq
	}
}

// request assembles the Model Context of one step from projected history:
// system text (agent prompt, instruction baseline, reminders), the
// compaction checkpoint and the messages after it, and tool definitions.
func (r *runner) request(ctx context.Context, agent locations.Agent, model llm.Model, final bool) (llm.Request, error) {
	msgs, err := r.history(ctx)
	if err != nil {
		return llm.Request{}, err
	}
	req := llm.Request{Model: model.Ref, ToolChoice: llm.ToolChoiceAuto, MaxOutputTokens: model.Output, CacheKey: string(r.sid)}
	prompt := agent.Prompt
	if prompt == "" {
		prompt = basePrompt(model.Family)
	}
	req.System = append(req.System, prompt)
	cp, ok, err := r.checkpoint(ctx)
	if err != nil {
		return llm.Request{}, err
	}
	if ok && cp.Baseline != "" {
		req.System = append(req.System, cp.Baseline)
	}
	req.Messages = lowerWith(msgs, model.Ref, &r.lowered, cp.BaselineSeq)
	if final {
		req.ToolChoice = llm.ToolChoiceNone
		req.System = append(req.System, finalStepReminder)
	} else if r.svc.Tools != nil {
		req.Tools = r.svc.Tools.Definitions(agent.Name)
	}
	// Declared on the final step too, where the tool choice forbids their
	// use: history may hold the model's earlier hosted calls, which a
	// provider may refuse to see without their tool.
	req.HostedTools = model.HostedTools
	return req, nil
}

// lower turns projected messages into provider-neutral messages. History
// before the last completed compaction is replaced by its checkpoint.
// Provider-native reasoning and metadata replay only for assistant messages
// of the same model that did not fail. Instruction updates committed
// before baselineSeq (the seq of the instruction baseline in force) are
// left out: that baseline is a complete observation made after them. A
// move resets the checkpoint, so without this the old Location's updates
// would follow the destination's baseline as the latest instructions.
func lower(msgs []persistence.Message, model messages.ModelRef, baselineSeq int64) []llm.Message {
	return lowerWith(msgs, model, nil, baselineSeq)
}

// carriedPrompts returns the indexes, ascending, of the prompts a
// checkpoint of a compaction for reason carries after it: the user
// messages right before msgs[end] (compaction rows and, for an overflow,
// the failed attempt in between), none for a manual compaction.
func carriedPrompts(msgs []persistence.Message, end int, reason string) []int {
	if reason == messages.CompactionManual {
		return nil
	}
	var carried []int
	skipFailed := reason == messages.CompactionOverflow
walk:
	for i := end - 1; i >= 0; i-- {
		m := &msgs[i]
		switch {
		case m.Compaction != nil:
		case skipFailed && m.Role == persistence.RoleAssistant && m.Error != nil:
			skipFailed = false
		case m.Role == persistence.RoleUser:
			carried = append(carried, i)
		default:
			break walk
		}
	}
	slices.Reverse(carried)
	return carried
}

// checkpointMessage is the message a checkpoint opens the history with:
// its summary (unless summary is false: a compaction's request carries the
// previous summary in its system text instead) and its recent context.
// With neither it has no text.
func checkpointMessage(ck *persistence.Compaction, summary bool) llm.Message {
	var parts []string
	if summary {
		parts = append(parts, "<summary>\n"+ck.Summary+"\n</summary>")
	}
	if ck.Recent != "" {
		parts = append(parts, "Recent context before the summary point:\n"+ck.Recent)
	}
	return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: strings.Join(parts, "\n\n")}}}
}

// lowerWith is lower reusing cache, the lowered form of the messages that
// have not changed since the previous call (nil: a throwaway one).
func lowerWith(msgs []persistence.Message, model messages.ModelRef, cache *lowered, baselineSeq int64) []llm.Message {
	if cache == nil {
		cache = &lowered{}
	}
	checkpoint, start := activeCheckpoint(msgs)
	// Prompts not yet answered when the compaction started stay after the
	// checkpoint as they are: the summary holds their text, but not their
	// attachments. An automatic compaction runs after its step promoted
	// them; an overflow one after the attempt that failed, which is
	// skipped. A manual one runs once every promoted prompt was answered,
	// and carries none: the prompts of earlier turns, failed ones
	// included, are the summary's.
	var carried []int
	if checkpoint != nil {
		carried = carriedPrompts(msgs, start, checkpoint.Reason)
	}
	cache.update(msgs, model)
	n := 0
	if checkpoint != nil {
		n++
	}
	for _, i := range carried {
		n += len(cache.per[i])
	}
	superseded := func(i int) bool { return msgs[i].Role == persistence.RoleSystem && msgs[i].Seq < baselineSeq }
	for i := start; i < len(msgs); i++ {
		if !superseded(i) {
			n += len(cache.per[i])
		}
	}
	out := make([]llm.Message, 0, n)
	if checkpoint != nil {
		out = append(out, checkpointMessage(checkpoint, true))
	}
	for _, i := range carried {
		out = append(out, cache.per[i]...)
	}
	// The request continues the last assistant message when nothing but
	// instruction updates came after it (its local results, or a paused
	// turn): that message goes as continuing, which sends hosted calls
	// the provider left for its next turn back to it.
	last := -1
	for i := len(msgs) - 1; i >= start; i-- {
		if msgs[i].Role == persistence.RoleAssistant {
			last = i
			break
		}
		if msgs[i].Role != persistence.RoleSystem {
			break
		}
	}
	for i := start; i < len(msgs); i++ {
		switch {
		case superseded(i):
		case i == last && leftUnanswered(msgs[i]):
			out = append(out, lowerOne(msgs[i], model, true)...)
		default:
			out = append(out, cache.per[i]...)
		}
	}
	return out
}

// activeCheckpoint returns the checkpoint history is lowered from, the
// completed compaction that started last, and the index of the first
// message after its boundary (nil and 0 when no compaction completed).
// Compactions run one at a time, so it is also the one that ended last;
// it is not always the newest row: a manual compaction's row sits at its
// admission, and an automatic one may run between its admission and its
// start. The summary covers everything before the start, so the messages
// in between do not survive the boundary either.
func activeCheckpoint(msgs []persistence.Message) (*persistence.Compaction, int) {
	var ck *persistence.Compaction
	at, from := -1, int64(-1)
	for i := range msgs {
		c := msgs[i].Compaction
		if c == nil || c.State != persistence.CompactionCompleted {
			continue
		}
		started := c.StartedSeq
		if started == 0 { // a row stored before StartedSeq existed
			started = msgs[i].Seq
		}
		if started > from {
			ck, at, from = c, i, started
		}
	}
	if ck == nil {
		return nil, 0
	}
	start := at + 1
	for start < len(msgs) && msgs[start].Seq < from {
		start++
	}
	return ck, start
}

// lowered caches the lowered form of each history message for as long as
// the message and the selected model stay the same, so a step lowers only
// the messages that are new or could have changed since the last one (see
// runner.history). Providers treat requests as read-only, so steps share
// the cached parts.
type lowered struct {
	model messages.ModelRef
	// valid is how many leading messages are unchanged since they were
	// lowered; history lowers this after re-reading.
	valid int
	per   [][]llm.Message
}

// keep marks the first n messages as unchanged.
func (c *lowered) keep(n int) { c.valid = min(c.valid, n) }

// update drops what the model switch or the new history invalidates and
// lowers the rest.
func (c *lowered) update(msgs []persistence.Message, model messages.ModelRef) {
	if c.model != model {
		c.model, c.valid = model, 0
	}
	c.per = c.per[:min(c.valid, len(c.per), len(msgs))]
	for i := len(c.per); i < len(msgs); i++ {
		c.per = append(c.per, lowerOne(msgs[i], model, false))
	}
	c.valid = len(msgs)
}

// lowerHosted lowers a settled provider-hosted call. The model that ran it
// gets the call and its result back as it sent them, both inside the
// assistant message, each with its own provider metadata; that needs the
// result's metadata, which a call the provider never answered (or an
// interrupted one) lacks. Any other model, or a call without it, gets a
// text account instead: a hosted call of one provider means nothing to
// another, and a provider rejects a hosted call sent without its result.
func lowerHosted(t *persistence.ToolPart, native, continuing bool) []llm.Part {
	if native && continuing && t.ResultMetadata == nil && t.Error != nil && t.Error.Type == messages.ErrToolResultMissing {
		// The step this request continues ended with the call unanswered
		// (a paused turn, or one that also called a local tool): the
		// provider runs it when it gets the call back as it sent it.
		return []llm.Part{{Kind: llm.PartToolCall, CallID: t.CallID, Name: t.Name, Input: t.Input, Executed: true, ProviderMetadata: t.CallMetadata}}
	}
	if native && t.ResultMetadata != nil {
		res := llm.Part{Kind: llm.PartToolResult, CallID: t.CallID, Name: t.Name, Output: t.Output, Executed: true, ProviderMetadata: t.ResultMetadata}
		if t.Error != nil {
			res.IsError, res.Output = true, t.Error.Message
		}
		return []llm.Part{
			{Kind: llm.PartToolCall, CallID: t.CallID, Name: t.Name, Input: t.Input, Executed: true, ProviderMetadata: t.CallMetadata},
			res,
		}
	}
	text := fmt.Sprintf("[The provider ran %s with input %s", t.Name, t.Input)
	if t.Error != nil {
		text += fmt.Sprintf(" and it failed (%s): %s]", t.Error.Type, t.Error.Message)
	} else {
		text += ". Result:\n" + t.Output + "\n]"
	}
	return []llm.Part{{Kind: llm.PartText, Text: text}}
}

// leftUnanswered reports whether m has a hosted call the provider did not
// answer in its step, which lowers differently when m is continued.
func leftUnanswered(m persistence.Message) bool {
	for _, p := range m.Parts {
		if t := p.Tool; t != nil && t.Executed && t.ResultMetadata == nil && t.Error != nil && t.Error.Type == messages.ErrToolResultMissing {
			return true
		}
	}
	return false
}

// lowerOne lowers one projected message (compaction rows lower to nothing:
// the checkpoint stands in for what came before them).
func lowerOne(m persistence.Message, model messages.ModelRef, continuing bool) []llm.Message {
	switch m.Role {
	case persistence.RoleUser:
		parts := []llm.Part{{Kind: llm.PartText, Text: m.Prompt.Text}}
		for i := range m.Prompt.Files {
			f := m.Prompt.Files[i]
			parts = append(parts, llm.Part{Kind: llm.PartFile, File: &f})
		}
		return []llm.Message{{Role: llm.RoleUser, Parts: parts}}
	case persistence.RoleSystem:
		return []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{{Kind: llm.PartText, Text: m.Text}}}}
	case persistence.RoleAssistant:
		native := m.Model == model && m.Error == nil
		var parts, results []llm.Part
		for _, p := range m.Parts {
			switch {
			case p.Kind == persistence.PartReasoning && native:
				parts = append(parts, llm.Part{Kind: llm.PartReasoning, Text: p.Text, ProviderMetadata: p.ProviderMetadata})
			case p.Kind == persistence.PartReasoning || p.Kind == persistence.PartText:
				if p.Text == "" {
					continue
				}
				part := llm.Part{Kind: llm.PartText, Text: p.Text}
				if native {
					part.ProviderMetadata = p.ProviderMetadata
				}
				parts = append(parts, part)
			case p.Tool != nil && p.Tool.Executed && (p.Tool.State == persistence.ToolCompleted || p.Tool.State == persistence.ToolError):
				parts = append(parts, lowerHosted(p.Tool, native, continuing)...)
			case p.Tool != nil && (p.Tool.State == persistence.ToolCompleted || p.Tool.State == persistence.ToolError):
				call := llm.Part{Kind: llm.PartToolCall, CallID: p.Tool.CallID, Name: p.Tool.Name, Input: p.Tool.Input}
				if native {
					call.ProviderMetadata = p.Tool.CallMetadata
				}
				parts = append(parts, call)
				res := llm.Part{Kind: llm.PartToolResult, CallID: p.Tool.CallID, Name: p.Tool.Name, Output: p.Tool.Output}
				if p.Tool.Error != nil {
					res.IsError = true
					res.Output = fmt.Sprintf("Error (%s): %s", p.Tool.Error.Type, p.Tool.Error.Message)
				}
				results = append(results, res)
			}
		}
		var out []llm.Message
		if len(parts) > 0 {
			out = append(out, llm.Message{Role: llm.RoleAssistant, Parts: parts})
		}
		if len(results) > 0 {
			out = append(out, llm.Message{Role: llm.RoleTool, Parts: results})
		}
		return out
	}
	return nil
}

// estimateTokens is the runner's cheap size estimate of a request: about
// four characters per token, which errs high for code and prose alike.
func estimateTokens(req llm.Request) int {
	n := 0
	for _, s := range req.System {
		n += len(s)
	}
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			n += len(p.Text) + len(p.Output) + len(p.Input)
			if p.Executed {
				// A hosted call or result goes back to its model as the
				// provider sent it, which its metadata holds: a web search
				// result carries every page's encrypted content.
				n += len(p.ProviderMetadata)
			}
			if p.File != nil {
				n += fileChars(p.File)
			}
		}
	}
	for _, t := range req.Tools {
		n += len(t.Description) + len(t.InputSchema)
	}
	return n/4 + 1
}

// imageChars is what an image counts in the estimate: providers bill an
// image by its pixels, capped around 1,600 tokens, not by its bytes.
const imageChars = 1600 * 4

// fileChars is an attachment's share of the estimate, in characters: an
// image counts imageChars; another inline file (a PDF, text) its decoded
// size, whose text the provider extracts; a file by reference, whose size
// is unknown here, counts as an image.
func fileChars(f *messages.File) int {
	data, inline := strings.CutPrefix(f.URL, "data:")
	if strings.HasPrefix(f.Mime, "image/") || !inline {
		return imageChars
	}
	if _, payload, ok := strings.Cut(data, ","); ok {
		if strings.Contains(data[:len(data)-len(payload)], ";base64") {
			return len(payload) * 3 / 4
		}
		return len(payload)
	}
	return 0
}

// summaryHeadings is the fixed heading order of a compaction summary.
var summaryHeadings = []string{"## Objective", "## Important Details", "## Work State", "### Completed", "### Active", "### Blocked", "## Next Move"}

// summaryHeading returns the summary heading line names, or "" when it
// names none. A heading is marked as one ('#'s before it, '**' or '__'
// around it, or a ':' after it) and its title matches case-insensitively.
func summaryHeading(line string) string {
	t := strings.TrimSpace(line)
	marked := strings.HasPrefix(t, "#") || strings.HasPrefix(t, "**") || strings.HasPrefix(t, "__") || strings.HasSuffix(t, ":")
	if !marked {
		return ""
	}
	t = strings.TrimSpace(strings.TrimLeft(t, "#"))
	t = strings.TrimSpace(strings.Trim(t, "*_"))
	t = strings.TrimSpace(strings.Trim(strings.TrimSuffix(t, ":"), "*_"))
	for _, h := range summaryHeadings {
		if strings.EqualFold(t, strings.TrimLeft(h, "# ")) {
			return h
		}
	}
	return ""
}

// compactionPrompt asks the model for the rolling summary.
func compactionPrompt(previous string) string {
	var b strings.Builder
	b.WriteString("Summarize the conversation so far as a continuation checkpoint for another engineer. ")
	b.WriteString("Use exactly these headings in this order, writing (none) under any heading with nothing to say:\n\n")
	b.WriteString(strings.Join(summaryHeadings, "\n"))
	// What each section records (SEED.md): the headings alone leave Next
	// Move to one action, and the work in flight to the model's guess.
	b.WriteString("\n\nWork State records the completed, active and blocked work under its three subheadings. " +
		"Next Move records the immediate next action and the actions that follow it.")
	if previous != "" {
		b.WriteString("\n\nUpdate this previous summary with the newer messages rather than starting over:\n\n")
		b.WriteString(previous)
	}
	return b.String()
}

// normalizeSummary guarantees every heading is present, in order, adding
// (none) for any the model left out. Headings are recognized in the forms
// models write them ("# Objective", "## Objective:", "**Objective**"), and
// text before the first one counts as the objective: a summary is what
// replaces the history, so none of it may be dropped for its formatting.
func normalizeSummary(text string) string {
	sections := map[string]string{}
	current := summaryHeadings[0]
	for _, line := range strings.Split(text, "\n") {
		if h := summaryHeading(line); h != "" {
			current = h
			continue
		}
		sections[current] += line + "\n"
	}
	var b strings.Builder
	for i, h := range summaryHeadings {
		if i > 0 {
			b.WriteString("\n")
		}
		body := strings.TrimSpace(sections[h])
		isParent := h == "## Work State"
		if body == "" && !isParent {
			body = "(none)"
		}
		b.WriteString(h + "\n")
		if body != "" {
			b.WriteString(body + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
