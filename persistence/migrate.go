package persistence

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// schemaInbox is the last schema with an inbox row of its own per input
// (the inbox bucket: message ID -> Input). Schema 5 keeps an input's
// admitted and settled seqs in its ID entry instead and reads the rest
// from the admission event (inputOf). Open migrates such a file in the
// transaction that recovers its log, once every record of the log is in
// bbolt: the records were written by the older schema and name the inbox
// bucket.
const schemaInbox = 4

// migrateInbox moves each inbox row's seqs into its ID entry, empties the
// inbox bucket and records schemaVersion.
func migrateInbox(tx *bolt.Tx) error {
	inbox, ids := tx.Bucket(bucketInbox), tx.Bucket(bucketIDs)
	c := inbox.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var in Input
		if err := decode(bucketInbox, k, v, &in); err != nil {
			return err
		}
		var ent idEntry
		raw := ids.Get(k)
		if raw == nil {
			return fmt.Errorf("%w: inbox row %q has no ID entry", ErrCorrupt, k)
		}
		if err := decode(bucketIDs, k, raw, &ent); err != nil {
			return err
		}
		if ent.Kind != idInput || ent.SessionID != in.SessionID {
			return fmt.Errorf("%w: inbox row %q disagrees with its ID entry", ErrCorrupt, k)
		}
		ent.Admitted = in.AdmittedSeq
		if in.PromotedSeq != nil {
			ent.Settled = *in.PromotedSeq
		}
		b, err := messages.Marshal(&ent)
		if err != nil {
			return err
		}
		if err := ids.Put(k, b); err != nil {
			return err
		}
	}
	if err := tx.DeleteBucket(bucketInbox); err != nil {
		return err
	}
	if _, err := tx.CreateBucket(bucketInbox); err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keySchema, []byte{schemaVersion})
}
