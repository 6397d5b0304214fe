package persistence

import bolt "go.etcd.io/bbolt"

// Dump returns every key and value of every bucket, for byte-level
// comparisons in tests.
func Dump(s *Bolt) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			m := map[string]string{}
			out[string(name)] = m
			return b.ForEach(func(k, v []byte) error { m[string(k)] = string(v); return nil })
		})
	})
	return out, err
}

// Check runs bbolt's consistency check.
func Check(s *Bolt) error {
	return s.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
}
