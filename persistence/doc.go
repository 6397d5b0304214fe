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
// One bbolt file with flat top-level buckets: data (every per-Session row,
// clustered by Session), sessions (the list index), ids (message ID ->
// owner and the seq of its message row: also the message index), inbox
// (message ID -> row), entries, approvals, meta. Within data a Session's
// rows are sid\x00 + a kind byte (keys.go), in this order:
//
//	checkpoint                           written rarely
//	stream: seq + row byte               log events and messages interleaved
//	open steps, pending inputs, record   small, rewritten often
//
// Keys embed big-endian seqs so cursor order is log order.
//
// Why flat and not a bucket per Session: a nested bucket is its own B+tree
// whose root is inlined in, or pointed to by, its parent; a commit that
// touches a Session's sub-bucket rewrites that bucket's leaf and every
// ancestor page up to the root bucket, and a probe measured about 11 KB
// written per event that way. With flat buckets an event costs the leaves
// it touches plus their branch path, and admissions of many Sessions in
// one group commit share branch pages.
//
// Why the stream interleaves events and messages: a step appends events,
// creates or rewrites its assistant message, marks the step open or closed
// and updates the Session record. With the log, the messages and the record
// in three separate ranges each step dirtied three leaves per Session; with
// the message beside the event that created it and the small rows right
// after the stream, it usually dirties one. A new message's ID entry, which
// also indexes it, lands in the ids leaf that every commit shares (IDs are
// time-ordered). A step of the benchmark (100 Sessions) writes 5.3 pages
// instead of 8.
// Reads pay little for it: History and Messages skip the other row kind
// by its last key byte, without decoding it.
//
// # Durability
//
// bbolt runs without its own fsyncs. Each write transaction's key/value
// writes go to the write-ahead log (path-wal) before bbolt commits, and a
// caller is answered only after the log is fdatasynced; checkpoints sync
// bbolt and restart the log. Recovery rolls bbolt back to the last
// checkpoint and replays the log, so neither a killed process nor a power
// loss can lose an acknowledged commit or leave a torn B+tree. wal.go has
// the protocol; TestRecoveryAfterPowerLoss models a power loss page by page.
// Readers may see a commit up to one fdatasync before it is durable (as
// with bbolt's own commit, whose meta page is visible before its second
// sync); only a power loss in that window can take such a commit back.
//
// # Group commit
//
// All writes go through one writer goroutine that takes everything queued
// (no timer, capped batch), runs each operation in order inside one bbolt
// transaction and commits it without syncing; a syncer goroutine makes the
// batch durable with one fdatasync of the write-ahead log (wal.go) and
// acknowledges every waiter, while the writer runs the next batch.
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
