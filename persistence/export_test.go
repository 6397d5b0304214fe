package persistence

import bolt "go.etcd.io/bbolt"

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
