package persistence

import (
	"context"
	"path/filepath"
	"testing"
)

// TestDumpKeepsMetaButTheWatermark checks that Dump, the oracle of the
// replay-equivalence checks, reports every meta key (the schema version)
// except the flush watermark, alongside the other buckets.
func TestDumpKeepsMetaButTheWatermark(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, st)
	if err := st.PutEntry(context.Background(), sid, "style", "brief"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	d := dump(t, openAndCheck(t, path, Options{}))
	meta := d[string(bucketMeta)]
	if _, ok := meta[string(keyApplied)]; ok {
		t.Errorf("dump holds the flush watermark: %q", meta)
	}
	if _, ok := meta[string(keySchema)]; !ok {
		t.Errorf("dump lacks the schema version: %q", meta)
	}
	if len(d[string(bucketEntries)]) != 1 {
		t.Errorf("entries in the dump: %q", d[string(bucketEntries)])
	}
}
