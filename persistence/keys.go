package persistence

import (
	"encoding/binary"

	"github.com/sessiond/sessiond/messages"
)

// Bucket names. Per-Session rows all live in one bucket, "data", clustered
// by Session (see doc.go); the other buckets are global indexes.
var (
	bucketMeta      = []byte("meta")
	bucketData      = []byte("data")
	bucketSessions  = []byte("sessions")
	bucketIDs       = []byte("ids")
	bucketInbox     = []byte("inbox")
	bucketEntries   = []byte("entries")
	bucketApprovals = []byte("approvals")

	allBuckets = [][]byte{bucketMeta, bucketData, bucketSessions, bucketIDs, bucketInbox, bucketEntries, bucketApprovals}
)

// kind is the row kind byte that follows a Session's prefix in the data
// bucket. The order is deliberate: the log comes after the small kinds and
// right before the pending index, so an admission's log append and pending
// insert usually dirty the same leaf page.
type kind byte

const (
	kSession    kind = 1 // the Session record
	kCheckpoint kind = 2 // the instruction checkpoint
	kMsgIndex   kind = 3 // messageID -> message key
	kMessage    kind = 4 // source seq -> message
	kLog        kind = 5 // seq -> event
	kPending    kind = 6 // admitted seq -> message ID of an unsettled input
	kOpen       kind = 7 // messageID of an assistant message whose step is open
)

// schemaVersion is stored in meta; Open refuses a file from another version.
const schemaVersion = 2

var keySchema = []byte("schema")

// prefix returns sid + 0x00 + kind. IDs never contain 0x00, so no Session's
// rows interleave with another's.
func prefix(sid messages.SessionID, k kind) []byte {
	b := make([]byte, 0, len(sid)+10)
	b = append(b, sid...)
	return append(b, 0, byte(k))
}

// seqKey returns prefix + big-endian seq, so cursor order is log order.
func seqKey(sid messages.SessionID, k kind, seq int64) []byte {
	return binary.BigEndian.AppendUint64(prefix(sid, k), uint64(seq))
}

// strKey returns prefix + s.
func strKey(sid messages.SessionID, k kind, s string) []byte {
	return append(prefix(sid, k), s...)
}

// seqOf decodes the seq of a seqKey.
func seqOf(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[len(k)-8:]))
}

// idEntry is the value of the global ids bucket: the owning Session and the
// kind of message the ID names.
type idEntry struct {
	SessionID messages.SessionID `msgpack:"s"`
	Kind      string             `msgpack:"k"`
}

// ID kinds in the global index.
const (
	idInput     = "input"
	idAssistant = "assistant"
	idSystem    = "system"
	idRow       = "compaction"
)
