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
//     event type). Two buckets are not projections but state kept beside the
//     logs, written by their own operations, and a store rebuilt from its
//     logs must copy them: instruction entries (an instruction source, like
//     AGENTS.md files on disk; their changes reach the log as
//     session.instructions.updated.1 when observed) and saved approvals
//     (per project, not per Session, so no Session's log could hold them).
//     DESIGN.md §4 lists both among the projections; no event carries them.
//   - Message IDs are unique across all Sessions (the global ids bucket),
//     whether they name inbox inputs, assistant, system or compaction rows.
//   - Values returned by the store are copies; bbolt and memtable memory
//     never escapes a read.
//
// # Layout
//
// One bbolt file with flat top-level buckets: data (every per-Session row,
// clustered by Session), sessions (the list index), ids (message ID ->
// owner and the seq of its message row: also the message index),
// entries, approvals, meta, and inbox (empty since schema 5, see
// migrate.go). Within data a Session's rows are sid\x00 + a kind byte
// (keys.go), in this order:
//
//	checkpoint                           written rarely
//	stream: seq + row byte               log rows and messages interleaved
//	open steps, pending inputs, record   small, rewritten often
//
// Keys embed big-endian seqs so cursor order is log order. A log row holds
// the events one operation appended to the Session, under its last seq
// (logrow.go): a step is two rows, not six.
//
// An inbox row (DESIGN.md §4) is not stored as one. Its fields are the
// admission event's, plus the seqs that admitted and settled it, which
// the input's ID entry holds; the pending index (admitted seq -> ID) keeps
// the order. An admission thus writes its event, its ID entry and its
// pending row; with a row of its own as well, a fourth holding the prompt
// a second time, 256 admitters ran 10-40% slower without fsync
// (docs/performance-log.md, twenty-second sitting). Reading a row back costs a
// seek into the log: a retry, a promotion, a step boundary with inputs
// pending.
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
// time-ordered). The layout was measured when every group commit wrote
// bbolt; with the memtable (below) it decides how many pages a flush
// rewrites, and it keeps a Session's reads one contiguous scan.
// Reads pay little for it: History and Messages skip the other row kind
// by its last key byte, without decoding it.
//
// # Durability
//
// A commit is durable once its record is in the write-ahead log (wal.go)
// and fdatasynced: one fdatasync per group commit, for all its callers.
// bbolt is not written per commit. The writer applies each batch's writes
// to the memtable (mem.go), an ordered copy-on-write tree of everything
// committed since the last flush; when the log has grown past FlushBytes,
// the memtable is flushed into bbolt in one bbolt transaction with bbolt's
// own fsyncs (its page writes are pushed to the disk as they happen, so
// its fdatasync does not stall the log's; see paceWriteback), which also
// stores the number of the last record it holds, and the log starts over.
// Recovery opens bbolt, which is consistent at its last flush whatever
// happened after, and re-applies the records after that number (gathered
// in a memtable first, and written in key order as a flush writes): neither
// a killed process nor a power loss can lose an acknowledged commit or
// leave a torn B+tree, and no record is applied twice. bbolt keeps its
// freelist in the file, so an Open reads one page for it rather than
// walking the whole file.
//
// A flush that fails leaving bbolt as it was (bbolt's file could not grow
// on a full disk, a page write failed) is tried again after a pause while
// the store goes on: the memtable stays readable and the log holds its
// records. Writes go on into the log until it has grown to twice
// FlushBytes, and are then refused with the flush's error until an
// attempt succeeds, bounding the memtable. So too when a flush cannot
// start because the log's other file, where it would start over, has no
// room to grow into (only a file the log has never filled that far): the
// log goes on in its current file and the start is tried again after a
// pause. A write the log cannot take (its file could not be extended) is
// refused alone. Only failures that leave the disk's state unknown fail
// the store until it is reopened: a log write whose invalidation also
// failed, a failed fdatasync of the log, or a flush that failed after
// bbolt's meta page was written. A full disk is one of the first kind only
// on a copy-on-write filesystem (btrfs, ZFS), where overwriting the room
// the log set aside needs free space as well; ext4 and xfs overwrite in
// place.
//
// The log ends at the first record that is missing, torn or fails its
// checksum: a crash can tear only records not yet synced, and the writer
// never gets more than walInFlight records ahead of the syncer. A bad
// record with that many whole records after it (they chain from the
// checksum its head still holds) was therefore synced, and acknowledged,
// before it went bad: recovery refuses to drop it and every commit after
// it as the end of the log, and Open fails with ErrWALDamaged unless
// Options.RepairWAL is set (`sessiond repair`, which first reads from
// the records after the damaged one what such a repair drops:
// WALDamage.Dropped). Each flush also stores the generation of the log
// file the records after it go to (as does a note in the file the log
// leaves for it), and a clean Close clears it: a store that did not stop
// cleanly and lacks that file (deleted, emptied, or its database file
// copied alone) is refused the same way, where the log would otherwise
// seem to end early. bbolt's pages carry no checksums, so damage there
// goes unseen until Verify runs bbolt's check of the file (`sessiond
// check`); the log's is checked because recovery would otherwise turn it
// into silent loss.
//
// Why a memtable rather than a bbolt commit per group: a bbolt commit
// rewrites every page it touches, one pwrite each, with the branch pages
// above them, and re-reads each touched page into a node first. With many
// active Sessions a group commit touched one leaf per Session and about
// thirty pages in all; a step of the benchmark cost two such commits. The
// memtable absorbs those writes in memory, where rewriting a message or
// the Session record costs a tree insert, and a flush writes each page
// once for thousands of commits. It also keeps bbolt's file format and
// fsync protocol untouched: the store never writes bbolt's meta pages
// itself.
//
// Readers see a snapshot: the memtable as of the last durable batch and a
// bbolt read transaction on exactly the state beneath it (view in bolt.go
// retakes both if a flush lands between them). The syncer publishes a
// batch's memtable only after its fdatasync and before answering its
// callers, so a reader never sees a commit that a power loss could still
// take back, and a caller always sees its own commit.
//
// # Group commit
//
// All writes go through one writer goroutine that keeps a batch open: it
// runs each operation, as it arrives, on a copy of the memtable (no timer,
// capped batch), and once the syncer goroutine is ready for it, appends
// the batch's writes to the log as one record and hands it over. The
// syncer makes the batch durable with one fdatasync and acknowledges every
// waiter, while the writer runs the operations that arrive meanwhile into
// the next batch. An operation that fails is removed, its error returned
// to its caller (after what it read is durable), and the batch re-run
// without it on a fresh copy, so one bad request never rolls back
// another's event. bbolt's own db.Batch waits on a 10 ms timer and is far
// slower for a lone caller.
//
// After each publication the syncer signals per-Session capacity-1 dirty
// channels. Log tails re-query the store when signalled: the rows, not the
// signal, carry the events, so coalesced signals lose nothing.
//
// # Usage
//
//	st, err := persistence.Open(filepath.Join(dir, "sessiond.db"), persistence.Options{})
//	defer st.Close()
//	s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: loc})
//	res, err := persistence.Prompt(ctx, st, persistence.PromptRequest{SessionID: s.ID, Prompt: p})
package persistence
