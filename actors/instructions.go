package actors

import (
	"context"
	"errors"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// observeInstructions loads every instruction source of the Session's
// Location, concurrently, with the Session's API-managed entries.
func (r *runner) observeInstructions(ctx context.Context) (*locations.Instructions, locations.Observed, bool, error) {
	if r.svc.Instructions == nil {
		return nil, locations.Observed{}, false, nil
	}
	cfg := *r.svc.Instructions
	cfg.Entries = func(ctx context.Context) (map[string]string, error) { return r.store.Entries(ctx, r.sid) }
	ins, err := locations.NewInstructions(cfg)
	if err != nil {
		return nil, locations.Observed{}, false, err
	}
	return ins, ins.Load(ctx), true, nil
}

// prepareInstructions runs before input promotion at every step boundary:
// the first complete observation initializes the checkpoint; later changes
// publish one chronological update that advances the applied record in the
// same commit. An initial unavailable source stops execution with the
// prompt still pending. A retried attempt is not a boundary: it reuses its
// step's assistant message, whose row keeps its place in history, so an
// update published before it would be replayed after its answer.
func (r *runner) prepareInstructions(ctx context.Context) error {
	_, obs, ok, err := r.observeInstructions(ctx)
	if err != nil || !ok {
		return err
	}
	r.metrics.instructions(obs)
	cp, has, err := r.checkpoint(ctx)
	if err != nil {
		return err
	}
	var cpp = &cp
	if !has {
		cpp = nil
	}
	d := locations.Reconcile(cpp, obs)
	if d.Kind != locations.DecisionBlocked && len(d.Unavailable) > 0 {
		// A Session that ran before goes on with what the model last saw
		// of an unavailable source, unless its directory is gone: then
		// every tool would fail, and the busy period end as if it had
		// worked.
		if dir := r.svc.Location.Directory; dir != "" {
			if err := locations.CheckDirectory(dir); err != nil {
				d.Kind, d.Err = locations.DecisionBlocked, messages.Errorf(messages.ErrInstructions,
					"the Session's directory %q %s: restore it, or move the Session to another (session move)", dir, locations.DirectoryProblem(err))
			}
		}
		if d.Kind != locations.DecisionBlocked && !r.warnedUnavailable {
			r.warnedUnavailable = true // once a busy period, not each step
			ev := r.log.Warn().Str("session", string(r.sid)).Strs("sources", d.Unavailable)
			if o, ok := obs.Lookup(d.Unavailable[0]); ok && o.Err() != nil {
				ev = ev.Str("error", o.Err().Error())
			}
			ev.Msg("instruction sources unavailable: the model keeps what it last saw of them")
		}
	}
	if d.Kind == locations.DecisionBlocked {
		// The prompt stays pending; the busy period is recorded, so that
		// its execution.failed tells clients why nothing answers it.
		return errors.Join(d.Err, r.begin(ctx))
	}
	if d.Kind == locations.DecisionUpdate {
		// A completed compaction causes the next physical attempt to
		// rebaseline from current instructions (SEED.md). The compaction
		// wrote a baseline when it ended; when they changed since and no
		// attempt has shown that one yet, the change replaces it rather
		// than follow it as an update.
		unseen, err := r.unseenCompaction(ctx)
		if err != nil {
			return err
		}
		if unseen {
			d = locations.Decision{Kind: locations.DecisionBaseline, Text: locations.RenderBaseline(obs.Keys(), d.Applied),
				Applied: d.Applied, Unavailable: d.Unavailable}
		}
	}
	switch d.Kind {
	case locations.DecisionBaseline:
		r.metrics.baseline(len(d.Text))
	case locations.DecisionUpdate:
		r.metrics.update()
	}
	if p := d.Payload(r.sid); p != nil {
		_, err := r.append(ctx, p)
		return err
	}
	return nil
}

// unseenCompaction reports whether a compaction completed and no physical
// attempt has run since: no assistant message follows its boundary.
func (r *runner) unseenCompaction(ctx context.Context) (bool, error) {
	msgs, err := r.history(ctx)
	if err != nil {
		return false, err
	}
	ck, start := activeCheckpoint(msgs)
	if ck == nil {
		return false, nil
	}
	for _, m := range msgs[start:] {
		if m.Role == persistence.RoleAssistant {
			return false, nil
		}
	}
	return true, nil
}

// rebaseline returns the event of a fresh baseline from current sources
// for a completed compaction to commit with it (nil when the sources
// cannot be observed). Unavailable sources are restated from the model's
// last applied belief.
func (r *runner) rebaseline(ctx context.Context) (messages.Payload, error) {
	ins, obs, ok, err := r.observeInstructions(ctx)
	if err != nil || !ok {
		return nil, err
	}
	cp, _, err := r.store.Checkpoint(ctx, r.sid)
	if err != nil {
		return nil, err
	}
	applied := obs.Merge(cp.Applied)
	d := locations.Decision{Kind: locations.DecisionBaseline, Text: locations.RenderBaseline(ins.Keys(), applied), Applied: applied}
	r.metrics.baseline(len(d.Text))
	return d.Payload(r.sid), nil
}
