package persistence

import (
	"encoding/binary"

	"github.com/sessiond/sessiond/messages"
)

// Bucket names. The layout is flat: one top-level bucket per kind of row,
// keyed by Session ID + 0x00 + big-endian seq where rows are per Session
// (see doc.go for why not a nested bucket per Session).
var (
	bucketMeta        = []byte("meta")
	bucketSessions    = []byte("sessions")
	bucketLog         = []byte("log")
	bucketIDs         = []byte("ids")
	bucketInbox       = []byte("inbox")
	bucketPending     = []byte("pending")
	bucketMessages    = []byte("messages")
	bucketMsgIndex    = []byte("msgidx")
	bucketCheckpoints = []byte("checkpoints")
	bucketEntries     = []byte("entries")
	bucketApprovals   = []byte("approvals")

	allBuckets = [][]byte{bucketMeta, bucketSessions, bucketLog, bucketIDs, bucketInbox, bucketPending,
		bucketMessages, bucketMsgIndex, bucketCheckpoints, bucketEntries, bucketApprovals}
)

// schemaVersion is stored in meta; Open refuses a file from another version.
const schemaVersion = 1

var keySchema = []byte("schema")

// prefix returns sid + 0x00. IDs never contain 0x00, so no Session's prefix
// is a prefix of another's.
func prefix(sid messages.SessionID) []byte {
	b := make([]byte, 0, len(sid)+9)
	b = append(b, sid...)
	return append(b, 0)
}

// seqKey returns sid + 0x00 + big-endian seq, so cursor order is log order.
func seqKey(sid messages.SessionID, seq int64) []byte {
	return binary.BigEndian.AppendUint64(prefix(sid), uint64(seq))
}

// strKey returns sid + 0x00 + s.
func strKey(sid messages.SessionID, s string) []byte {
	return append(prefix(sid), s...)
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
