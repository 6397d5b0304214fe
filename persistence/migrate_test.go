package persistence

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// testdata/schema4 is a store written by sessiond at schema 4 (commit
// a4dd3e4), as a SIGKILL left it: two Sessions, with a prompt promoted, a
// steer pending and a manual compaction settled in bbolt, then, in the
// write-ahead log only, a prompt admitted, the steer promoted and a
// compaction barrier admitted in the second Session. The log files are cut
// at their last record and the bbolt file compacted, to keep it small.
func schema4(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	for _, suffix := range []string{"", "-wal", "-wal2"} {
		copyFile(t, filepath.Join("testdata", "schema4", "s.db"+suffix), path+suffix)
	}
	return path
}

// TestOpenMigratesSchema4: the inbox rows of a schema 4 store, those in
// bbolt and those only its log holds, become ID entries, and every input
// reads back as its row did: pending ones in order, promoted and settled
// ones with their seqs, exact retries with their receipts.
func TestOpenMigratesSchema4(t *testing.T) {
	path := schema4(t)
	// The rows as schema 4 kept them, log records included.
	want := map[messages.MessageID]Input{}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keySchema); !reflect.DeepEqual(v, []byte{schemaInbox}) {
			t.Fatalf("fixture schema %v", v)
		}
		return tx.Bucket(bucketInbox).ForEach(func(k, v []byte) error {
			var in Input
			err := decode(bucketInbox, k, v, &in)
			want[in.ID] = in
			return err
		})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 4 {
		t.Fatalf("fixture: %d inbox rows in bbolt, want 4 (3 more are in its log)", len(want))
	}

	st := openAndCheck(t, path, Options{})
	ctx := context.Background()
	sessions, err := st.List(ctx)
	if err != nil || len(sessions) != 2 {
		t.Fatalf("sessions %v, %v", sessions, err)
	}
	// Every input the logs admitted, as the log says, settled where the
	// log settles it.
	got, pending := 0, 0
	for _, s := range sessions {
		page, err := st.History(ctx, s.ID, Query{After: -1, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		settled := map[messages.MessageID]int64{}
		var inputs []Input
		for _, ev := range page.Data {
			switch p := ev.Data.(type) {
			case *messages.PromptAdmitted:
				inputs = append(inputs, admittedInput(ev, p))
			case *messages.CompactionAdmitted:
				inputs = append(inputs, compactionInput(ev, p))
			case *messages.PromptPromoted:
				settled[p.InputID] = ev.Durable.Seq
			case *messages.CompactionEnded:
				settled[p.InputID] = ev.Durable.Seq
			}
		}
		var wantPending []Input
		for _, in := range inputs {
			if seq, ok := settled[in.ID]; ok {
				in.PromotedSeq = &seq
			} else {
				wantPending = append(wantPending, in)
			}
			// A row in bbolt misses what the log did to it after.
			if old, ok := want[in.ID]; ok && (old.PromotedSeq == nil || *old.PromotedSeq == *cmp.Or(in.PromotedSeq, new(int64))) {
				old.PromotedSeq = in.PromotedSeq
				if !reflect.DeepEqual(old, in) {
					t.Errorf("schema 4 row %+v, log makes %+v", old, in)
				}
			} else if ok {
				t.Errorf("schema 4 row %+v settled at %d, log makes %+v", old, *old.PromotedSeq, in)
			}
			have, err := st.Input(ctx, in.ID)
			if err != nil || !reflect.DeepEqual(have, in) {
				t.Errorf("Input(%s) = %+v, %v; want %+v", in.ID, have, err, in)
			}
			if in.Kind == InputPrompt {
				r, wake, err := st.Admit(ctx, Admission{SessionID: s.ID, ID: in.ID, Prompt: *in.Prompt, Delivery: in.Delivery})
				if err != nil || !reflect.DeepEqual(r, in.Receipt()) || wake {
					t.Errorf("retry of %s: %+v, %v, %v; want %+v", in.ID, r, wake, err, in.Receipt())
				}
			}
			got++
		}
		have, err := st.Pending(ctx, s.ID)
		if err != nil || !reflect.DeepEqual(have, wantPending) {
			t.Errorf("Pending(%s) = %+v, %v; want %+v", s.ID, have, err, wantPending)
		}
		pending += len(wantPending)
	}
	if got != 6 || pending != 3 {
		t.Fatalf("%d inputs, %d pending; want 6 and 3 (the fixture's)", got, pending)
	}
	for _, s := range sessions {
		// The retries above wrote nothing.
		after, err := st.Get(ctx, s.ID)
		if err != nil || after.LastSeq != s.LastSeq {
			t.Fatalf("%s: last seq %d after retries, %d before (%v)", s.ID, after.LastSeq, s.LastSeq, err)
		}
	}
	r, err := st.Verify(ctx, t.TempDir())
	if err != nil || len(r.Problems) != 0 || r.Sessions != 2 {
		t.Fatalf("verify after migration: %+v, %v", r, err)
	}
	err = st.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keySchema); !reflect.DeepEqual(v, []byte{schemaVersion}) {
			t.Errorf("schema %v after migration", v)
		}
		if k, _ := tx.Bucket(bucketInbox).Cursor().First(); k != nil {
			t.Errorf("inbox row %q left after migration", k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before := dump(t, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Opened again, it finds the current schema and changes nothing.
	sameState(t, "reopened", dump(t, openAndCheck(t, path, Options{})), before)
}

// TestMigrationRefusesAnInboxRowWithoutItsEntry: a schema 4 file whose
// inbox row has no ID entry is refused as corrupt, and left as it was.
func TestMigrationRefusesAnInboxRowWithoutItsEntry(t *testing.T) {
	path := schema4(t)
	editBolt(t, path, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketInbox).Cursor().First()
		return tx.Bucket(bucketIDs).Delete(k)
	})
	if st, err := Open(path, Options{}); err == nil {
		st.Close()
		t.Fatal("Open migrated an inbox row without its ID entry")
	} else if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keySchema); !reflect.DeepEqual(v, []byte{schemaInbox}) {
			t.Errorf("schema %v after a refused migration", v)
		}
		return nil
	})
}

// TestAnInputEntryPointingElsewhere: an input's ID entry whose admitted seq
// names an event that admits another input (or none) is reported as the
// store's fault, not read as that other input.
func TestAnInputEntryPointingElsewhere(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sid := newSession(t, st)
	var ids []messages.MessageID
	for _, text := range []string{"one", "two"} {
		r, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: text}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{0, 2, 9} { // session.created.1, the other input's, none
		editBolt(t, path, func(tx *bolt.Tx) error {
			b, err := messages.Marshal(&idEntry{SessionID: sid, Kind: idInput, Admitted: at})
			if err != nil {
				return err
			}
			return tx.Bucket(bucketIDs).Put([]byte(ids[0]), b)
		})
		st, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if in, err := st.Input(ctx, ids[0]); messages.TypeOf(err) != messages.ErrInternal {
			t.Errorf("admitted at %d: Input = %+v, %v; want an internal error", at, in, err)
		}
		if _, err := st.Pending(ctx, sid); messages.TypeOf(err) != messages.ErrInternal {
			t.Errorf("admitted at %d: Pending: %v; want an internal error", at, err)
		}
		st.Close()
	}
}
