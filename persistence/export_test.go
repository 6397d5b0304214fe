package persistence

import (
	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// Dump returns every key and value of every bucket, for byte-level
// comparisons in tests.
func Dump(s *Bolt) (map[string]map[string]string, error) { return s.Dump() }

// Check runs bbolt's consistency check.
func Check(s *Bolt) error {
	return s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
}

// MemSessionRecord returns Session sid's record in the published
// memtable: the decoded form kept beside it (nil when none) and its bytes;
// ok is false when the memtable does not hold it.
func MemSessionRecord(s *Bolt, sid messages.SessionID) (kept *Session, stored []byte, ok bool) {
	probe := new(memEntry).set(dataIndex, prefix(sid, kSession))
	for _, m := range s.snap.Load().mems {
		if e, found := m.Get(probe); found && !e.del {
			return e.session, e.v, true
		}
	}
	return nil, nil, false
}

// MemWatermark is Watermark's answer from the published memtables alone;
// ok is false when they hold none of the Session's stream rows.
func MemWatermark(s *Bolt, sid messages.SessionID) (int64, bool) {
	return memLastSeq(s.snap.Load().mems, sid)
}

// SystemMessageID is the ID of the system message an instructions update
// event projects (derivedID).
func SystemMessageID(ev messages.Event) messages.MessageID { return derivedID(ev) }
