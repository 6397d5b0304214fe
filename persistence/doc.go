// Package persistence is sessiond's durable store: per-Session append-only
// event logs in one embedded bbolt file, with every projection (Session
// record, inbox, messages, instruction checkpoint) updated in the same
// transaction as the event that causes it.
//
// # Invariants
//
//   - Per Session, seq starts at 0 (session.created.1) and increases by one
//     per committed event: no gaps, no duplicates.
//   - An event is committed with all of its projections or not at all; a
//     projector error rolls the whole Append back.
//   - Projections are a pure function of the log: replaying every event into
//     an empty store reproduces them byte for byte (Restore, tested for every
//     event type).
//   - Message IDs are unique across all Sessions (the global ids bucket),
//     whether they name inbox inputs, assistant, system or compaction rows.
//   - Values returned by the store are copies; bbolt memory never escapes a
//     transaction.
//
// # Layout
//
// One bbolt file with flat top-level buckets: log (sid\x00seq -> event),
// sessions, ids (message ID -> owner), inbox (message ID -> row), pending
// (sid\x00admittedSeq -> message ID, only unsettled rows), messages
// (sid\x00sourceSeq -> message), msgidx (sid\x00messageID -> sourceSeq),
// checkpoints, entries, approvals, meta. Keys embed big-endian seqs so cursor
// order is log order.
//
// Why flat and not a bucket per Session: a nested bucket is its own B+tree
// whose root is inlined in, or pointed to by, its parent; a commit that
// touches a Session's sub-bucket rewrites that bucket's leaf and every
// ancestor page up to the root bucket, and a probe measured about 11 KB
// written per event that way. With flat buckets an event costs the log leaf
// plus the few projection leaves it touches, and appends of one Session land
// on adjacent keys of the same leaf. Admissions of many Sessions in one
// group commit share branch pages.
//
// # Group commit
//
// All writes go through one writer goroutine that takes everything queued
// (no timer, capped batch), runs each operation in order inside one bbolt
// transaction, commits once (one fsync pair) and acknowledges every waiter.
// An operation that fails is removed, its error returned to its caller, and
// the batch re-run without it, so one bad request never rolls back
// another's event. bbolt's own db.Batch waits on a 10 ms timer and is far
// slower for a lone caller.
//
// After each commit the writer signals per-Session capacity-1 dirty channels.
// Log tails re-query the store when signalled: the rows, not the signal,
// carry the events, so coalesced signals lose nothing.
//
// # Usage
//
//	st, err := persistence.Open(filepath.Join(dir, "sessiond.db"), persistence.Options{})
//	defer st.Close()
//	s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: loc})
//	res, err := persistence.Prompt(ctx, st, persistence.PromptRequest{SessionID: s.ID, Prompt: p})
package persistence
