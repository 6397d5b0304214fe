package persistence

import (
	"context"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
)

// CreateSession implements Store.
func (s *Bolt) CreateSession(ctx context.Context, req CreateSession) (Session, bool, error) {
	if req.ID == "" {
		req.ID = s.opts.IDs.Session()
	} else if err := req.ID.Validate(); err != nil {
		return Session{}, false, err
	}
	if err := ValidateLocation(req.Location); err != nil {
		return Session{}, false, err
	}
	if err := ValidateTitle(req.Title); err != nil {
		return Session{}, false, err
	}
	req.Location = req.Location.Clean()
	ev := messages.Event{ID: s.opts.IDs.Event(), Created: s.opts.Clock().UnixMilli(), Type: messages.TypeSessionCreated,
		Durable: &messages.Durable{AggregateID: req.ID, Seq: 0, Version: 1},
		Data:    &messages.SessionCreated{SessionID: req.ID, Location: req.Location, Title: req.Title, Agent: req.Agent, Model: req.Model}}
	var out Session
	var created bool
	err := s.submit(ctx, func(w *wtx) error {
		existing, err := w.session(req.ID)
		if err == nil {
			out, created = existing, false
			return fillSession(&w.v, &out)
		}
		if messages.TypeOf(err) != messages.ErrSessionNotFound {
			return err
		}
		if err := w.apply(ev); err != nil {
			return err
		}
		if out, err = w.session(req.ID); err != nil {
			return err
		}
		created = true
		out.LastSeq, out.Updated = 0, ev.Created
		return nil
	})
	return out, created, err
}

// ValidateLocation checks a Location's fields: an absolute directory that
// can name one (no NUL byte) and can be served as JSON unchanged (valid
// UTF-8) and, when set, a valid workspace ID.
func ValidateLocation(l messages.Location) error {
	if l.Directory == "" {
		return messages.Errorf(messages.ErrInvalid, "location.directory: required")
	}
	if !strings.HasPrefix(l.Directory, "/") {
		return messages.Errorf(messages.ErrInvalid, "location.directory: must be an absolute path, got %q", l.Directory)
	}
	if strings.IndexByte(l.Directory, 0) >= 0 {
		return messages.Errorf(messages.ErrInvalid, "location.directory: contains a NUL byte: %q", l.Directory)
	}
	if !utf8.ValidString(l.Directory) {
		return messages.Errorf(messages.ErrInvalid, "location.directory: not valid UTF-8: %q", l.Directory)
	}
	if l.WorkspaceID != "" {
		return messages.ValidateID("location.workspaceID", "wrk_", l.WorkspaceID)
	}
	return nil
}

// MaxTitleBytes bounds a Session title. Every Session listing carries
// every title, so the bound is on what a title costs there and in the log,
// bytes, not on what it shows: 1,024 bytes hold 256 characters in any
// script, and more than a title needs in most.
const MaxTitleBytes = 1024

// ValidateTitle checks a Session title: at most MaxTitleBytes of valid
// UTF-8 (a title is shown to people and served as JSON, which cannot carry
// invalid UTF-8 unchanged). Only new titles are checked: a Session created
// before the limit keeps its title.
func ValidateTitle(title string) error {
	if len(title) > MaxTitleBytes {
		return messages.Errorf(messages.ErrInvalid, "title: %d bytes exceeds the limit of %d", len(title), MaxTitleBytes)
	}
	if !utf8.ValidString(title) {
		return messages.Errorf(messages.ErrInvalid, "title: not valid UTF-8")
	}
	return nil
}

// ValidatePrompt checks a prompt and delivery against the store's limits.
func (s *Bolt) validatePrompt(p messages.Prompt, d messages.Delivery) error {
	return ValidatePrompt(p, d, s.opts.PromptBytes)
}

// ValidatePrompt checks prompt text, attachments and delivery. maxBytes caps
// the text size.
func ValidatePrompt(p messages.Prompt, d messages.Delivery, maxBytes int) error {
	if strings.TrimSpace(p.Text) == "" && len(p.Files) == 0 {
		return messages.Errorf(messages.ErrInvalid, "prompt.text: must not be empty")
	}
	if len(p.Text) > maxBytes {
		return messages.Errorf(messages.ErrTooLarge, "prompt.text: %d bytes exceeds the limit of %d", len(p.Text), maxBytes)
	}
	if !utf8.ValidString(p.Text) {
		return messages.Errorf(messages.ErrInvalid, "prompt.text: not valid UTF-8")
	}
	for i, f := range p.Files {
		if strings.TrimSpace(f.URL) == "" || strings.TrimSpace(f.Mime) == "" {
			// Blank ones too, as blank text is: no model can use them.
			return messages.Errorf(messages.ErrInvalid, "prompt.files[%d]: mime and url are required, not blank", i)
		}
	}
	if !d.Valid() {
		return messages.Errorf(messages.ErrInvalid, "delivery: want %q or %q, got %q", messages.Steer, messages.Queue, d)
	}
	return nil
}

// Admit implements Store. Idempotency rules (SEED.md, sessions.prompt):
// an omitted ID generates one; a supplied ID inserts one row when absent;
// exact reuse returns the same receipt; reuse for another Session, prompt
// or delivery is a prompt.conflict.
func (s *Bolt) Admit(ctx context.Context, req Admission) (Admitted, bool, error) {
	if req.Delivery == "" {
		req.Delivery = messages.DefaultDelivery
	}
	if err := req.SessionID.Validate(); err != nil {
		return Admitted{}, false, err
	}
	supplied := req.ID != ""
	if !supplied {
		req.ID = s.opts.IDs.Message()
	} else if err := req.ID.Validate(); err != nil {
		return Admitted{}, false, err
	}
	if err := s.validatePrompt(req.Prompt, req.Delivery); err != nil {
		return Admitted{}, false, err
	}
	if len(req.Prompt.Files) == 0 {
		// As stored (the encoding omits an empty list), so the first
		// receipt equals a retry's, which is read back.
		req.Prompt.Files = nil
	}
	var out Admitted
	var done bool
	if supplied {
		// Fast path for retries: an exact reuse needs no write. A freshly
		// generated ID cannot have been used.
		err := s.view(func(v *view) error {
			var err error
			out, done, err = existingReceipt(v, req)
			return err
		})
		if err != nil || done {
			return out, false, err
		}
	}
	evID, now := s.opts.IDs.Event(), s.opts.Clock().UnixMilli()
	data := &messages.PromptAdmitted{SessionID: req.SessionID, InputID: req.ID, Prompt: req.Prompt, Delivery: req.Delivery}
	enc, err := messages.Marshal(data)
	if err != nil {
		return Admitted{}, false, err
	}
	err = s.submit(ctx, func(w *wtx) error {
		if supplied {
			var err error
			if out, done, err = existingReceipt(&w.v, req); err != nil || done {
				return err
			}
		}
		last, err := w.lastSeq(req.SessionID)
		if err != nil {
			return err
		}
		if err := w.checkBacklog(req.SessionID); err != nil {
			return err
		}
		ev := messages.Event{ID: evID, Created: now, Type: messages.TypePromptAdmitted,
			Durable: &messages.Durable{AggregateID: req.SessionID, Seq: last + 1, Version: 1}, Data: data}
		if err := w.applyData(ev, enc); err != nil {
			return err
		}
		// The receipt of the row the projector just wrote, built as it was.
		out = admittedInput(ev, data).Receipt()
		return nil
	})
	return out, err == nil && !done, err
}

// existingReceipt returns the receipt of an exact reuse of req.ID, a
// conflict when the ID is in use otherwise, or done=false when it is free.
func existingReceipt(v *view, req Admission) (Admitted, bool, error) {
	var ent idEntry
	ok, err := get(v, bucketIDs, []byte(req.ID), &ent)
	if err != nil || !ok {
		return Admitted{}, false, err
	}
	// A prompt for a Session that does not exist is refused as such, before
	// whatever its ID collides with: the caller's mistake is the Session.
	if _, err := existing(lastSeq(v, req.SessionID), req.SessionID); err != nil {
		return Admitted{}, false, err
	}
	switch {
	case ent.Kind != idInput:
		return Admitted{}, false, messages.Errorf(messages.ErrPromptConflict, "message ID %q already names another message", req.ID)
	case ent.SessionID != req.SessionID: // known without reading the admission
		return Admitted{}, false, messages.Errorf(messages.ErrPromptConflict, "message ID %q was admitted to another session", req.ID)
	}
	in, err := inputOf(v, req.ID, ent)
	if err != nil {
		return Admitted{}, false, err
	}
	switch {
	case in.Kind != InputPrompt:
		return Admitted{}, false, messages.Errorf(messages.ErrPromptConflict, "message ID %q names a %s input", req.ID, in.Kind)
	case in.Delivery != req.Delivery:
		return Admitted{}, false, messages.Errorf(messages.ErrPromptConflict, "message ID %q was admitted with delivery %q", req.ID, in.Delivery)
	case !samePrompt(*in.Prompt, req.Prompt):
		return Admitted{}, false, messages.Errorf(messages.ErrPromptConflict, "message ID %q was admitted with a different prompt", req.ID)
	}
	return in.Receipt(), true, nil
}

func samePrompt(a, b messages.Prompt) bool {
	if len(a.Files) == 0 && len(b.Files) == 0 {
		return a.Text == b.Text
	}
	return reflect.DeepEqual(a, b)
}

func (w *wtx) checkBacklog(sid messages.SessionID) error {
	limit := w.s.opts.InboxBacklog
	if limit <= 0 {
		return nil
	}
	if n := w.pendingCount(sid); n >= limit {
		return messages.Errorf(messages.ErrInboxFull, "session %q has %d pending inputs (limit %d)", sid, n, limit)
	}
	return nil
}

// pendingCount returns how many unsettled inbox rows the Session has. With
// a backlog limit the writer keeps the count (Bolt.pend), so an admission
// does not walk every pending row of its Session: at the daemon's limit of
// 1,000 that walk halved admissions/s once Sessions had a few hundred rows
// waiting. The first use per Session counts the rows once.
func (w *wtx) pendingCount(sid messages.SessionID) int {
	if n, ok := w.s.pend.get(sid); ok {
		return n
	}
	n := 0
	for range w.v.prefixed(bucketData, prefix(sid, kPending), nil) {
		n++
	}
	w.s.pend.stage(sid, n)
	return n
}

// countPending adds delta to the Session's kept pending count; call it
// before writing the pending row, so a first count does not include it.
func (w *wtx) countPending(sid messages.SessionID, delta int) {
	if w.s.opts.InboxBacklog > 0 {
		w.s.pend.stage(sid, w.pendingCount(sid)+delta)
	}
}

// AdmitCompaction implements Store: a pending manual compaction barrier is
// reused rather than duplicated, unless it shows a compaction running that
// a stopped process started. That one no drain will finish: the next
// drain settles it as interrupted, so a request coalesced into it would
// never run. A new barrier is admitted behind it instead.
func (s *Bolt) AdmitCompaction(ctx context.Context, sid messages.SessionID) (Input, bool, error) {
	if err := sid.Validate(); err != nil {
		return Input{}, false, err
	}
	id, evID, now := s.opts.IDs.Message(), s.opts.IDs.Event(), s.opts.Clock().UnixMilli()
	var out Input
	var created bool
	err := s.submit(ctx, func(w *wtx) error {
		if err := w.exists(sid); err != nil {
			return err
		}
		rows, err := pending(&w.v, sid)
		if err != nil {
			return err
		}
		for _, in := range rows {
			if in.Kind != InputCompaction {
				continue
			}
			orphaned, err := w.orphanedCompaction(sid, in.ID)
			if err != nil {
				return err
			}
			if !orphaned {
				out, created = in, false
				return nil
			}
		}
		ev := messages.Event{ID: evID, Created: now, Type: messages.TypeCompactionAdmitted,
			Durable: &messages.Durable{AggregateID: sid, Seq: w.last(sid) + 1, Version: 1},
			Data:    &messages.CompactionAdmitted{SessionID: sid, InputID: id}}
		if err := w.apply(ev); err != nil {
			return err
		}
		created = true
		out = compactionInput(ev, ev.Data.(*messages.CompactionAdmitted))
		return nil
	})
	return out, created, err
}

// orphanedCompaction reports whether barrier id's row shows a compaction
// running that was not started since this store opened.
func (w *wtx) orphanedCompaction(sid messages.SessionID, id messages.MessageID) (bool, error) {
	if running, _ := w.s.compacting.get(id); running {
		return false, nil
	}
	m, ok, err := w.message(sid, id)
	if err != nil || !ok {
		return false, err
	}
	return m.Compaction != nil && m.Compaction.State == CompactionRunning, nil
}
