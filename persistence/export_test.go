package persistence

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
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

// MemSessionRecords returns every Session record of the published
// memtable: the decoded form kept beside it (nil when none) and its bytes.
func MemSessionRecords(s *Bolt) (kept []*Session, stored [][]byte) {
	for _, m := range s.snap.Load().mems {
		m.Scan(func(e *memEntry) bool {
			// A record's key is sid 0x00 kSession, and IDs hold no 0x00.
			if !e.del && e.k[0] == dataIndex && kind(e.k[len(e.k)-1]) == kSession && bytes.IndexByte(e.k[1:], 0) == len(e.k)-3 {
				kept, stored = append(kept, e.session), append(stored, e.v)
			}
			return true
		})
	}
	return kept, stored
}
