package persistence

import (
	"encoding/binary"

	"github.com/sessiond/sessiond/messages"
)

// Bucket names. Per-Session rows all live in one bucket, "data", clustered
// by Session (see doc.go); the other buckets are global indexes.
var (
	bucketMeta     = []byte("meta")
	bucketData     = []byte("data")
	bucketSessions = []byte("sessions")
	bucketIDs      = []byte("ids")
	// bucketInbox held schema 4's inbox rows; since schema 5 it is always
	// empty (an input's row is its ID entry and its admission event, see
	// idEntry), and stays so that the bucket indexes in log records
	// written before the migration still name their buckets (migrate.go).
	bucketInbox     = []byte("inbox")
	bucketEntries   = []byte("entries")
	bucketApprovals = []byte("approvals")

	allBuckets = [...][]byte{bucketMeta, bucketData, bucketSessions, bucketIDs, bucketInbox, bucketEntries, bucketApprovals}
)

// kind is the row kind byte that follows a Session's prefix in the data
// bucket. The order puts everything a step or an admission writes next to
// each other at the end of the Session's rows, so a commit usually dirties
// one leaf page per Session (see doc.go):
//
//	head:   checkpoint (rarely written)
//	stream: log events and messages interleaved by seq; the newest events
//	        and the open assistant message are at its end
//	tail:   open steps, pending inputs, the Session record
type kind byte

const (
	kCheckpoint kind = 1 // the instruction checkpoint
	kStream     kind = 3 // seq + row -> event or message (streamKey)
	kOpen       kind = 4 // messageID of an assistant message whose step is open
	kPending    kind = 5 // admitted seq -> message ID of an unsettled input, in admission order
	kSession    kind = 6 // the Session record
	kRetry      kind = 7 // message ID whose projected retry is live
)

// row tells the stream's two kinds of rows apart; it follows the seq, so a
// message sorts right after the event that created it.
type row byte

const (
	rLog     row = 1 // last seq -> the events of one operation (logrow.go)
	rMessage row = 2 // source seq -> message
)

// schemaVersion is stored in meta; Open refuses a file from another version.
const schemaVersion = 5

var keySchema = []byte("schema")

// keyBuf is room for a key built where it is used: a lookup's key never
// escapes, so a buffer on the caller's stack saves the allocation each
// key would otherwise cost. Keys longer than it (no generated or valid ID
// makes one) spill to the heap and stay correct.
type keyBuf [64]byte

// prefix returns sid + 0x00 + kind. IDs never contain 0x00, so no Session's
// rows interleave with another's.
func (b *keyBuf) prefix(sid messages.SessionID, k kind) []byte {
	return append(append(b[:0], sid...), 0, byte(k))
}

// seq returns prefix + big-endian seq, so cursor order is log order.
func (b *keyBuf) seq(sid messages.SessionID, k kind, seq int64) []byte {
	return binary.BigEndian.AppendUint64(b.prefix(sid, k), uint64(seq))
}

// stream returns the key of a stream row at seq.
func (b *keyBuf) stream(sid messages.SessionID, seq int64, r row) []byte {
	return append(b.seq(sid, kStream, seq), byte(r))
}

// str returns prefix + s.
func (b *keyBuf) str(sid messages.SessionID, k kind, s string) []byte {
	return append(b.prefix(sid, k), s...)
}

// prefix, seqKey, streamKey and strKey return the keyBuf keys in a buffer
// of their own.
func prefix(sid messages.SessionID, k kind) []byte { return new(keyBuf).prefix(sid, k) }

func seqKey(sid messages.SessionID, k kind, seq int64) []byte {
	return new(keyBuf).seq(sid, k, seq)
}

func streamKey(sid messages.SessionID, seq int64, r row) []byte {
	return new(keyBuf).stream(sid, seq, r)
}

func strKey(sid messages.SessionID, k kind, s string) []byte { return new(keyBuf).str(sid, k, s) }

// isLogRow reports whether a data key is a log row's.
func isLogRow(k []byte) bool {
	return len(k) > 11 && k[len(k)-11] == 0 && kind(k[len(k)-10]) == kStream && row(k[len(k)-1]) == rLog
}

// streamSeq decodes the seq of a streamKey.
func streamSeq(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[len(k)-9 : len(k)-1]))
}

// idEntry is the value of the global ids bucket: the owning Session, the
// kind of message the ID names, and the source seq of its message row once
// it has one (0 until then: seq 0 is session.created.1, which creates no
// message). The ids bucket is thereby also the message index: a step's new
// message touches the ids leaf every commit shares instead of a leaf of
// its own Session.
//
// An input's entry is also its inbox row, together with the event that
// admitted it (inputOf): Admitted is that event's seq and Settled the seq
// of the event that promoted or settled it (0 while pending).
type idEntry struct {
	SessionID messages.SessionID `msgpack:"s"`
	Kind      string             `msgpack:"k"`
	Seq       int64              `msgpack:"q,omitempty"`
	Admitted  int64              `msgpack:"a,omitempty"`
	Settled   int64              `msgpack:"z,omitempty"`
}

// ID kinds in the global index.
const (
	idInput     = "input"
	idAssistant = "assistant"
	idSystem    = "system"
	idRow       = "compaction"
)
