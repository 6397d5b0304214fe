package persistence

import (
	"maps"

	"github.com/sessiond/sessiond/messages"
)

// project updates every projection an event affects. It runs inside the
// event's transaction; an error rolls the event back. Projectors read only
// the transaction and the event, so replay reproduces their output.
func (w *wtx) project(ev messages.Event) error {
	sid := ev.Durable.AggregateID
	seq := ev.Durable.Seq
	switch p := ev.Data.(type) {
	case *messages.SessionCreated:
		if seq != 0 {
			return messages.Errorf(messages.ErrInvalid, "session.created.1 at seq %d", seq)
		}
		if err := w.putBytes(bucketSessions, []byte(sid), nil); err != nil {
			return err
		}
		return w.putSession(Session{ID: sid, Location: p.Location, Title: p.Title,
			Agent: p.Agent, Model: p.Model, Created: ev.Created})
	case *messages.AgentSelected:
		return w.updateSession(sid, func(s *Session) { s.Agent = p.Agent })
	case *messages.ModelSelected:
		return w.updateSession(sid, func(s *Session) { s.Model = p.Model })
	case *messages.SessionMoved:
		if err := ValidateLocation(p.Location); err != nil {
			return err
		}
		if err := w.updateSession(sid, func(s *Session) { s.Location = p.Location.Clean() }); err != nil {
			return err
		}
		return w.del(bucketData, prefix(sid, kCheckpoint))
	case *messages.PromptAdmitted:
		return w.insertInput(sid, admittedInput(ev, p))
	case *messages.PromptPromoted:
		in, err := w.settleInput(sid, p.InputID, InputPrompt, seq)
		if err != nil {
			return err
		}
		return w.putMessage(&Message{ID: in.ID, SessionID: sid, Seq: seq, Role: RoleUser, Created: ev.Created,
			Prompt: in.Prompt, Delivery: in.Delivery})
	case *messages.CompactionAdmitted:
		if err := w.insertInput(sid, compactionInput(ev, p)); err != nil {
			return err
		}
		return w.putMessage(&Message{ID: p.InputID, SessionID: sid, Seq: seq, Role: RoleCompaction, Created: ev.Created,
			Compaction: &Compaction{Reason: messages.CompactionManual, State: CompactionQueued}})
	case *messages.CompactionStarted:
		return w.compactionStarted(ev, p)
	case *messages.CompactionEnded:
		return w.compactionSettled(sid, seq, p.InputID, p.Usage, func(c *Compaction) {
			c.State, c.Summary, c.Recent = CompactionCompleted, p.Text, p.Recent
		})
	case *messages.CompactionFailed:
		return w.compactionSettled(sid, seq, p.InputID, p.Usage, func(c *Compaction) {
			e := p.Error
			c.State, c.Error = CompactionFailed, &e
		})
	case *messages.InstructionsBaselined:
		return w.put(bucketData, prefix(sid, kCheckpoint), &Checkpoint{Baseline: p.Text, BaselineSeq: seq, Applied: maps.Clone(p.Applied)})
	case *messages.InstructionsUpdated:
		c, ok, err := loadCheckpoint(&w.v, sid)
		if err != nil {
			return err
		}
		if !ok {
			return messages.Errorf(messages.ErrInvalid, "instructions updated before a baseline")
		}
		c.Applied = maps.Clone(p.Applied)
		if err := w.put(bucketData, prefix(sid, kCheckpoint), &c); err != nil {
			return err
		}
		id := derivedID(ev)
		if err := w.claimID(id, sid, idSystem, seq); err != nil {
			return err
		}
		return w.putMessage(&Message{ID: id, SessionID: sid, Seq: seq, Role: RoleSystem, Created: ev.Created, Text: p.Text, Kind: p.Kind})
	case *messages.ExecutionStarted:
		// Busy-period observations are history only.
		return nil
	case *messages.ExecutionSucceeded, *messages.ExecutionFailed, *messages.ExecutionInterrupted:
		// A terminal clears a scheduled retry that will never run (for
		// instance interrupted during its delay).
		return w.clearRetry(sid, "")
	case *messages.StepStarted:
		// Any retry of the Session is cleared, whichever message it belongs
		// to: one left by a dead process names a message the next busy
		// period does not reuse.
		if err := w.clearRetry(sid, ""); err != nil {
			return err
		}
		return w.stepStarted(ev, p)
	case *messages.StepEnded:
		if err := w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			if err := w.closeStep(m); err != nil {
				return err
			}
			tokens := p.Tokens
			m.Finish, m.Tokens, m.Cost, m.Completed, m.Error = p.Finish, &tokens, p.Cost, ev.Created, nil
			return nil
		}); err != nil {
			return err
		}
		return w.updateSession(sid, func(s *Session) { s.Tokens = s.Tokens.Add(p.Tokens); s.Cost += p.Cost })
	case *messages.StepFailed:
		if err := w.clearRetry(sid, p.AssistantMessageID); err != nil {
			return err
		}
		return w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			if err := w.closeStep(m); err != nil {
				return err
			}
			e := p.Error
			m.Error, m.Completed, m.Retry = &e, ev.Created, nil
			return nil
		})
	case *messages.TextStarted:
		return w.updateAssistant(sid, p.AssistantMessageID, fragmentStarted(PartText, p.Ordinal, p.ProviderMetadata))
	case *messages.TextEnded:
		return w.updateAssistant(sid, p.AssistantMessageID, fragmentEnded(PartText, p.Ordinal, p.Text, p.ProviderMetadata))
	case *messages.ReasoningStarted:
		return w.updateAssistant(sid, p.AssistantMessageID, fragmentStarted(PartReasoning, p.Ordinal, p.ProviderMetadata))
	case *messages.ReasoningEnded:
		return w.updateAssistant(sid, p.AssistantMessageID, fragmentEnded(PartReasoning, p.Ordinal, p.Text, p.ProviderMetadata))
	case *messages.ToolInputStarted:
		return w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			if err := requireOpen(m); err != nil {
				return err
			}
			if toolPart(m, p.CallID) != nil {
				return messages.Errorf(messages.ErrAlreadyPublished, "tool call %q already exists in %s", p.CallID, m.ID)
			}
			m.Parts = append(m.Parts, Part{Kind: PartTool, Tool: &ToolPart{CallID: p.CallID, Name: p.Name, State: ToolPending}})
			return nil
		})
	case *messages.ToolInputEnded:
		return w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			t := toolPart(m, p.CallID)
			if t == nil || t.State != ToolPending {
				return messages.Errorf(messages.ErrInvalid, "tool input %q of %s is not streaming", p.CallID, m.ID)
			}
			t.InputText = p.Text
			return nil
		})
	case *messages.ToolCalled:
		return w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			if err := requireOpen(m); err != nil {
				return err
			}
			t := toolPart(m, p.CallID)
			if t == nil {
				m.Parts = append(m.Parts, Part{Kind: PartTool, Tool: &ToolPart{CallID: p.CallID}})
				t = m.Parts[len(m.Parts)-1].Tool
			} else if t.State != ToolPending || t.Input != nil {
				return messages.Errorf(messages.ErrAlreadyPublished, "tool call %q of %s already called", p.CallID, m.ID)
			}
			t.Name, t.State, t.Input, t.Executed, t.CallMetadata = p.Name, ToolRunning, p.Input, p.Executed, p.ProviderMetadata
			return nil
		})
	case *messages.ToolSucceeded:
		return w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			t, err := unsettled(m, p.CallID)
			if err != nil {
				return err
			}
			t.State, t.Output, t.Metadata, t.ResultMetadata = ToolCompleted, p.Output, p.Metadata, p.ProviderMetadata
			return nil
		})
	case *messages.ToolFailed:
		return w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			t, err := unsettled(m, p.CallID)
			if err != nil {
				return err
			}
			e := p.Error
			t.State, t.Error, t.ResultMetadata = ToolError, &e, p.ProviderMetadata
			return nil
		})
	case *messages.RetryScheduled:
		// A Session has one live retry: one scheduled for another message
		// will never run, and would stay in that message's projection
		// with nothing left to clear it (the retry row names one message).
		if err := w.clearRetry(sid, ""); err != nil {
			return err
		}
		return w.updateAssistant(sid, p.AssistantMessageID, func(m *Message) error {
			if m.Open {
				return messages.Errorf(messages.ErrInvalid, "retry scheduled while step of %s is open", m.ID)
			}
			m.Retry = &Retry{Attempt: p.Attempt, At: p.At, Error: p.Error}
			return w.putString(bucketData, prefix(sid, kRetry), string(m.ID))
		})
	}
	return messages.Errorf(messages.ErrInvalid, "no projector for %s", ev.Type)
}

// clearRetry clears the live retry state of the Session when it belongs to
// id (or to any message when id is empty). The state is its own small row,
// so the common case (no retry) costs one lookup and no decoding.
func (w *wtx) clearRetry(sid messages.SessionID, id messages.MessageID) error {
	v := w.v.get(bucketData, prefix(sid, kRetry))
	if v == nil || (id != "" && string(v) != string(id)) {
		return nil
	}
	m, ok, err := w.message(sid, messages.MessageID(v))
	if err != nil {
		return err
	}
	if ok && m.Retry != nil {
		m.Retry = nil
		if err := w.putMessage(m); err != nil {
			return err
		}
	}
	return w.del(bucketData, prefix(sid, kRetry))
}

func (w *wtx) updateSession(sid messages.SessionID, f func(*Session)) error {
	s, err := w.session(sid)
	if err != nil {
		return err
	}
	f(&s)
	return w.putSession(s)
}

// putSession writes a Session record, keeping its decoded form beside the
// bytes for the readers of the memtable (memEntry.session).
func (w *wtx) putSession(s Session) error {
	s.Updated, s.LastSeq = 0, 0 // not stored: readers fill them from the log
	e, err := w.putEntry(bucketData, prefix(s.ID, kSession), &s)
	if err == nil {
		e.session, w.record = &s, &s
	}
	return err
}

// claimID records a message ID in the global index, failing when any
// Session already uses it. seq is the source seq of the ID's message row
// when the claiming event also creates that row (0 for inputs, whose row
// comes with their promotion), so flush need not rewrite the entry.
func (w *wtx) claimID(id messages.MessageID, sid messages.SessionID, kind string, seq int64) error {
	return w.claim(id, idEntry{SessionID: sid, Kind: kind, Seq: seq})
}

// claim is claimID with the whole entry.
func (w *wtx) claim(id messages.MessageID, ent idEntry) error {
	if w.v.get(bucketIDs, []byte(id)) != nil {
		return messages.Errorf(messages.ErrPromptConflict, "message ID %q is already in use", id)
	}
	if ent.Seq > 0 {
		w.indexedAt(msgRef{ent.SessionID, id}, ent.Seq)
	}
	w.s.maxID = max(w.s.maxID, id)
	return w.put(bucketIDs, []byte(id), &ent)
}

// admittedInput is the inbox row of session.prompt.admitted.1. Its prompt
// is the event's (both are read-only).
func admittedInput(ev messages.Event, p *messages.PromptAdmitted) Input {
	return Input{ID: p.InputID, SessionID: ev.Durable.AggregateID, Kind: InputPrompt, Prompt: &p.Prompt,
		Delivery: p.Delivery, AdmittedSeq: ev.Durable.Seq, TimeCreated: ev.Created}
}

// compactionInput is the inbox row of session.compaction.admitted.1.
func compactionInput(ev messages.Event, p *messages.CompactionAdmitted) Input {
	return Input{ID: p.InputID, SessionID: ev.Durable.AggregateID, Kind: InputCompaction,
		AdmittedSeq: ev.Durable.Seq, TimeCreated: ev.Created}
}

// insertInput records an admitted input: its ID entry, which with the
// admission event is its inbox row (inputOf), and its place in the
// Session's pending index. Nothing else copies the event: an admission
// writes one row fewer than with a row of its own, and a flush puts one
// key fewer (schema 5; docs/performance-log.md, twenty-second sitting).
func (w *wtx) insertInput(sid messages.SessionID, in Input) error {
	ent := idEntry{SessionID: sid, Kind: idInput, Admitted: in.AdmittedSeq}
	if in.Kind == InputCompaction {
		ent.Seq = in.AdmittedSeq // its compaction row comes with it
	}
	if err := w.claim(in.ID, ent); err != nil {
		return err
	}
	w.countPending(sid, 1)
	return w.putString(bucketData, seqKey(sid, kPending, in.AdmittedSeq), string(in.ID))
}

// settleInput marks a pending input of the given kind promoted (or
// settled) at seq and removes it from the pending index. An input that is
// missing, of another Session or kind, or already settled is an error, so
// two racing promotions commit exactly once. A promoted prompt's user
// message is at seq: its ID entry points there from this write on.
func (w *wtx) settleInput(sid messages.SessionID, id messages.MessageID, kind string, seq int64) (Input, error) {
	var ent idEntry
	ok, err := get(&w.v, bucketIDs, []byte(id), &ent)
	if err != nil {
		return Input{}, err
	}
	if !ok || ent.SessionID != sid || ent.Kind != idInput {
		return Input{}, messages.Errorf(messages.ErrNotFound, "no %s input %q in session %q", kind, id, sid)
	}
	in, err := w.inputOf(id, ent)
	if err != nil {
		return in, err
	}
	if in.Kind != kind {
		return in, messages.Errorf(messages.ErrNotFound, "no %s input %q in session %q", kind, id, sid)
	}
	if in.PromotedSeq != nil {
		return in, messages.Errorf(messages.ErrInputPromoted, "input %q was already settled at seq %d", id, *in.PromotedSeq)
	}
	in.PromotedSeq = &seq
	ent.Settled = seq
	if kind == InputPrompt {
		ent.Seq = seq
		w.indexedAt(msgRef{sid, id}, seq)
	}
	if err := w.put(bucketIDs, []byte(id), &ent); err != nil {
		return in, err
	}
	w.countPending(sid, -1)
	return in, w.del(bucketData, seqKey(sid, kPending, in.AdmittedSeq))
}

// putMessage records a message at its source seq; flush writes it and
// indexes its ID when the operation succeeds. m becomes the operation's
// working copy (see message).
func (w *wtx) putMessage(m *Message) error {
	e := w.opMsg(msgRef{m.SessionID, m.ID})
	e.m, e.dirty = m, true
	return nil
}

// msgRef names a message in the writer's caches. (A struct key: the string
// these used to concatenate was an allocation per lookup.)
type msgRef struct {
	sid messages.SessionID
	id  messages.MessageID
}

// opMsg is what an operation knows of one message: its working copy (nil
// until loaded or put), whether flush must write it, and the seq its ID
// entry is known to point at (0 when unknown: seq 0 creates no message).
// An operation touches one or two messages, so a slice beats a map.
type opMsg struct {
	key     msgRef
	m       *Message
	dirty   bool
	indexed int64
}

// opMsg returns the operation's entry for key, adding it when absent. The
// pointer is valid until the next call.
func (w *wtx) opMsg(key msgRef) *opMsg {
	for i := range w.msgs {
		if w.msgs[i].key == key {
			return &w.msgs[i]
		}
	}
	w.msgs = append(w.msgs, opMsg{key: key})
	return &w.msgs[len(w.msgs)-1]
}

// flush writes the operation's log rows and updated messages, and records
// a new message's seq in its ID's entry.
func (w *wtx) flush() error {
	if err := w.flushLog(); err != nil {
		return err
	}
	for i := range w.msgs {
		e := &w.msgs[i]
		if !e.dirty {
			continue
		}
		m := e.m
		if err := w.put(bucketData, streamKey(m.SessionID, m.Seq, rMessage), m); err != nil {
			return err
		}
		w.s.open.stage(e.key, m)
		if e.indexed == m.Seq {
			continue // its ID entry already points at this row
		}
		var ent idEntry
		ok, err := get(&w.v, bucketIDs, []byte(m.ID), &ent)
		if err != nil {
			return err
		}
		if !ok || ent.SessionID != m.SessionID {
			return messages.Errorf(messages.ErrInternal, "persistence: message %q has no ID entry in session %q", m.ID, m.SessionID)
		}
		if ent.Seq != m.Seq {
			ent.Seq = m.Seq
			if err := w.put(bucketIDs, []byte(m.ID), &ent); err != nil {
				return err
			}
		}
	}
	w.msgs = w.msgs[:0]
	return nil
}

// message returns the operation's working copy of a projected message,
// loading it on first use; ok is false when absent. Projectors change the
// copy in place and then hand it to putMessage; an operation that fails is
// discarded with all its copies.
func (w *wtx) message(sid messages.SessionID, id messages.MessageID) (*Message, bool, error) {
	key := msgRef{sid, id}
	for i := range w.msgs {
		if e := &w.msgs[i]; e.key == key && e.m != nil {
			return e.m, true, nil
		}
	}
	m, ok := w.s.openMessage(key)
	if !ok {
		var err error
		if m, ok, err = loadMessage(&w.v, sid, id); err != nil || !ok {
			return nil, false, err
		}
	}
	// Either way its ID entry points at it (it was read through it, or
	// cached when written).
	e := w.opMsg(key)
	e.m, e.indexed = &m, m.Seq
	return &m, true, nil
}

// indexedAt notes that the ID entry of message key points at seq.
func (w *wtx) indexedAt(key msgRef, seq int64) { w.opMsg(key).indexed = seq }

func (w *wtx) compactionStarted(ev messages.Event, p *messages.CompactionStarted) error {
	sid, seq := ev.Durable.AggregateID, ev.Durable.Seq
	if p.InputID == "" {
		return messages.Errorf(messages.ErrInvalid, "compaction started without inputID")
	}
	m, ok, err := w.message(sid, p.InputID)
	if err != nil {
		return err
	}
	if !ok {
		// Automatic or overflow compaction: the row is new.
		if err := w.claimID(p.InputID, sid, idRow, seq); err != nil {
			return err
		}
		return w.putMessage(&Message{ID: p.InputID, SessionID: sid, Seq: seq, Role: RoleCompaction, Created: ev.Created,
			Compaction: &Compaction{Reason: p.Reason, State: CompactionRunning, StartedSeq: seq}})
	}
	if m.Compaction == nil || m.Compaction.State != CompactionQueued {
		return messages.Errorf(messages.ErrInvalid, "compaction row %q is not queued", p.InputID)
	}
	m.Compaction.State, m.Compaction.StartedSeq = CompactionRunning, seq
	if !w.restoring {
		w.s.compacting.stage(p.InputID, true)
	}
	return w.putMessage(m)
}

func (w *wtx) compactionSettled(sid messages.SessionID, seq int64, id messages.MessageID, usage *messages.Usage, f func(*Compaction)) error {
	m, ok, err := w.message(sid, id)
	if err != nil {
		return err
	}
	if !ok || m.Compaction == nil || m.Compaction.State != CompactionRunning {
		return messages.Errorf(messages.ErrInvalid, "compaction row %q is not running", id)
	}
	f(m.Compaction)
	if usage != nil {
		u := *usage
		m.Compaction.Usage = &u
	}
	if err := w.putMessage(m); err != nil {
		return err
	}
	if usage != nil {
		// Summary requests are paid for as steps are.
		if err := w.updateSession(sid, func(s *Session) { s.Tokens = s.Tokens.Add(usage.Tokens); s.Cost += usage.Cost }); err != nil {
			return err
		}
	}
	if m.Compaction.Reason == messages.CompactionManual {
		w.s.compacting.stage(id, false)
		_, err := w.settleInput(sid, id, InputCompaction, seq)
		return err
	}
	return nil
}

func (w *wtx) stepStarted(ev messages.Event, p *messages.StepStarted) error {
	sid, seq := ev.Durable.AggregateID, ev.Durable.Seq
	m, ok, err := w.message(sid, p.AssistantMessageID)
	if err != nil {
		return err
	}
	if ok {
		// A retry attempt reopens the same assistant projection.
		if m.Role != RoleAssistant {
			return messages.Errorf(messages.ErrPromptConflict, "message %q is not an assistant message", m.ID)
		}
		if m.Open {
			return messages.Errorf(messages.ErrInvalid, "step of %s is already open", m.ID)
		}
		m.Open, m.Attempts, m.Agent, m.Model = true, m.Attempts+1, p.Agent, p.Model
		m.Retry, m.Error, m.Finish, m.Tokens, m.Cost, m.Completed = nil, nil, "", nil, 0, 0
		if err := w.putBytes(bucketData, strKey(sid, kOpen, string(m.ID)), nil); err != nil {
			return err
		}
		return w.putMessage(m)
	}
	if err := w.claimID(p.AssistantMessageID, sid, idAssistant, seq); err != nil {
		return err
	}
	if err := w.putBytes(bucketData, strKey(sid, kOpen, string(p.AssistantMessageID)), nil); err != nil {
		return err
	}
	return w.putMessage(&Message{ID: p.AssistantMessageID, SessionID: sid, Seq: seq, Role: RoleAssistant,
		Created: ev.Created, Agent: p.Agent, Model: p.Model, Attempts: 1, Open: true})
}

// updateAssistant loads an assistant message, applies f and stores it.
func (w *wtx) updateAssistant(sid messages.SessionID, id messages.MessageID, f func(*Message) error) error {
	m, ok, err := w.message(sid, id)
	if err != nil {
		return err
	}
	if !ok || m.Role != RoleAssistant {
		return messages.Errorf(messages.ErrNotFound, "no assistant message %q in session %q", id, sid)
	}
	if err := f(m); err != nil {
		return err
	}
	return w.putMessage(m)
}

func requireOpen(m *Message) error {
	if !m.Open {
		return messages.Errorf(messages.ErrInvalid, "step of %s is not open", m.ID)
	}
	return nil
}

// closeStep enforces settlement-first ordering: a step ends only when it is
// open, its fragments are ended and every local tool call has settled.
func (w *wtx) closeStep(m *Message) error {
	if err := requireOpen(m); err != nil {
		return err
	}
	for _, p := range m.Parts {
		if p.Tool != nil && (p.Tool.State == ToolPending || p.Tool.State == ToolRunning) {
			return messages.Errorf(messages.ErrInvalid, "step of %s closed before tool call %q settled", m.ID, p.Tool.CallID)
		}
		if (p.Kind == PartText || p.Kind == PartReasoning) && !p.Ended {
			return messages.Errorf(messages.ErrInvalid, "step of %s closed before %s %d ended", m.ID, p.Kind, p.Ordinal)
		}
	}
	m.Open = false
	return w.del(bucketData, strKey(m.SessionID, kOpen, string(m.ID)))
}

func toolPart(m *Message, callID string) *ToolPart {
	for i := range m.Parts {
		if t := m.Parts[i].Tool; t != nil && t.CallID == callID {
			return t
		}
	}
	return nil
}

func unsettled(m *Message, callID string) (*ToolPart, error) {
	t := toolPart(m, callID)
	if t == nil {
		return nil, messages.Errorf(messages.ErrNotFound, "no tool call %q in %s", callID, m.ID)
	}
	if t.State != ToolPending && t.State != ToolRunning {
		return nil, messages.Errorf(messages.ErrAlreadyPublished, "tool call %q of %s already settled", callID, m.ID)
	}
	return t, nil
}

// fragmentStarted opens a text or reasoning part. At most one fragment of a
// kind is open, and its ordinal must be the next one of that kind.
func fragmentStarted(kind string, ordinal int, meta []byte) func(*Message) error {
	return func(m *Message) error {
		if err := requireOpen(m); err != nil {
			return err
		}
		n := 0
		for _, p := range m.Parts {
			if p.Kind != kind {
				continue
			}
			if !p.Ended {
				return messages.Errorf(messages.ErrInvalid, "%s %d of %s is still open", kind, p.Ordinal, m.ID)
			}
			n++
		}
		if ordinal != n {
			return messages.Errorf(messages.ErrInvalid, "%s ordinal %d of %s, want %d", kind, ordinal, m.ID, n)
		}
		m.Parts = append(m.Parts, Part{Kind: kind, Ordinal: ordinal, ProviderMetadata: meta})
		return nil
	}
}

func fragmentEnded(kind string, ordinal int, text string, meta []byte) func(*Message) error {
	return func(m *Message) error {
		if err := requireOpen(m); err != nil {
			return err
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			if p.Kind == kind && p.Ordinal == ordinal {
				if p.Ended {
					return messages.Errorf(messages.ErrAlreadyPublished, "%s %d of %s already ended", kind, ordinal, m.ID)
				}
				p.Text, p.Ended = text, true
				// Empty metadata is absent: the event's encoding omits it, so
				// replay sees none and must project the same.
				if len(meta) > 0 {
					p.ProviderMetadata = meta
				}
				return nil
			}
		}
		return messages.Errorf(messages.ErrInvalid, "%s %d of %s was not started", kind, ordinal, m.ID)
	}
}
