package persistence

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// TestAppendsPackPages: writes that append at the end of key ranges (logs,
// time-ordered IDs) leave pages nearly full rather than bbolt's default
// half-full split, so the file and the pages a commit rewrites stay small.
func TestAppendsPackPages(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "fill.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	var sids []messages.SessionID
	for range 16 {
		s, _, err := st.CreateSession(ctx, CreateSession{Location: messages.Location{Directory: "/tmp"}})
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	prompt := messages.Prompt{Text: fmt.Sprintf("%0200d", 7)}
	for i := range 2000 {
		if _, _, err := st.Admit(ctx, Admission{SessionID: sids[i%len(sids)], Prompt: prompt}); err != nil {
			t.Fatal(err)
		}
	}
	// Close flushes the memtable into bbolt, whose pages are measured.
	path := st.Path()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketData, bucketIDs} {
			s := tx.Bucket(name).Stats()
			if s.LeafPageN == 0 {
				t.Errorf("bucket %s: no leaf pages in bbolt after the flush", name)
				continue
			}
			if use := float64(s.LeafInuse) / float64(s.LeafAlloc); use < 0.75 {
				t.Errorf("bucket %s: leaf pages %.0f%% used (%d pages)", name, 100*use, s.LeafPageN)
			} else {
				t.Logf("bucket %s: leaf pages %.0f%% used (%d pages, depth %d)", name, 100*use, s.LeafPageN, s.Depth)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
