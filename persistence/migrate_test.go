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
	// An ID entry of another Session than its inbox row's.
	path = schema4(t)
	editBolt(t, path, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketInbox).Cursor().First()
		b, err := messages.Marshal(&idEntry{SessionID: "ses_other", Kind: idInput})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketIDs).Put(k, b)
	})
	if st, err := Open(path, Options{}); err == nil {
		st.Close()
		t.Fatal("Open migrated an inbox row whose ID entry names another Session")
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

// TestInputsReadBack: an input reads back as admitted, through every way
// there is to it (the admission's answer, Input, Pending), a message ID
// that names no input is not one, and a settlement of the wrong kind is
// refused.
func TestInputsReadBack(t *testing.T) {
	st := openTemp(t, Options{})
	ctx := context.Background()
	sid := newSession(t, st)
	r, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "one"}, Delivery: messages.Steer})
	if err != nil {
		t.Fatal(err)
	}
	barrier, created, err := st.AdmitCompaction(ctx, sid)
	if err != nil || !created {
		t.Fatalf("compaction: %+v, %v, %v", barrier, created, err)
	}
	if barrier.AdmittedSeq != 2 || barrier.TimeCreated == 0 || barrier.Kind != InputCompaction {
		t.Fatalf("compaction barrier %+v, want admitted at 2, with its time", barrier)
	}
	prompt, err := st.Input(ctx, r.ID)
	if err != nil || !reflect.DeepEqual(prompt.Receipt(), r) || prompt.Kind != InputPrompt {
		t.Fatalf("Input(%s) = %+v, %v; want the receipt's %+v", r.ID, prompt, err, r)
	}
	if in, err := st.Input(ctx, barrier.ID); err != nil || !reflect.DeepEqual(in, barrier) {
		t.Fatalf("Input(%s) = %+v, %v; want %+v", barrier.ID, in, err, barrier)
	}
	if rows, err := st.Pending(ctx, sid); err != nil || !reflect.DeepEqual(rows, []Input{prompt, barrier}) {
		t.Fatalf("Pending = %+v, %v", rows, err)
	}
	// Each settles only as its own kind.
	if _, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: barrier.ID}); messages.TypeOf(err) != messages.ErrNotFound {
		t.Fatalf("a compaction barrier promoted as a prompt: %v", err)
	}
	evs, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	// The promoted prompt's ID now names its user message as well.
	m, err := st.Message(ctx, sid, r.ID)
	if err != nil || m.Seq != evs[0].Durable.Seq || m.Prompt == nil || m.Prompt.Text != "one" {
		t.Fatalf("user message %+v, %v", m, err)
	}
	// An assistant message's ID is no input.
	asst := messages.MessageID("msg_01KB0000000000000000000001")
	if _, err := st.Append(ctx, sid, &messages.StepStarted{SessionID: sid, AssistantMessageID: asst, Agent: "build"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Input(ctx, asst); messages.TypeOf(err) != messages.ErrNotFound {
		t.Fatalf("Input of an assistant message: %v, want not found", err)
	}
}

// TestRestoreOfTwoSessionsInOneCall: a Restore whose events interleave two
// Sessions settles each Session's input from that Session's events, though
// the other's, at the same seqs, wait in the same operation.
func TestRestoreOfTwoSessionsInOneCall(t *testing.T) {
	src := openTemp(t, Options{})
	ctx := context.Background()
	var evs [][]messages.Event
	for range 2 {
		sid := newSession(t, src)
		r, _, err := src.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: string(sid)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: r.ID}); err != nil {
			t.Fatal(err)
		}
		page, err := src.History(ctx, sid, Query{After: -1})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, page.Data)
	}
	var mixed []messages.Event
	for i := range evs[0] {
		mixed = append(mixed, evs[0][i], evs[1][i])
	}
	dst := openTemp(t, Options{})
	if err := dst.Restore(ctx, mixed); err != nil {
		t.Fatal(err)
	}
	want, got := dump(t, src), dump(t, dst)
	delete(want, "entries")
	delete(got, "entries")
	sameState(t, "restored", got, want)
}

// TestPendingRowsThatDisagree: a pending row naming another Session's input,
// or an input already settled, is the store's fault.
func TestPendingRowsThatDisagree(t *testing.T) {
	for _, tc := range []string{"another Session's", "settled"} {
		t.Run(tc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			st, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			a, b := newSession(t, st), newSession(t, st)
			r, _, err := st.Admit(ctx, Admission{SessionID: a, Prompt: messages.Prompt{Text: "a"}})
			if err != nil {
				t.Fatal(err)
			}
			sid := b
			if tc == "settled" {
				sid = a
				if _, err := st.Append(ctx, a, &messages.PromptPromoted{SessionID: a, InputID: r.ID}); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			editBolt(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket(bucketData).Put(seqKey(sid, kPending, 1), []byte(r.ID))
			})
			st = openAndCheck(t, path, Options{})
			if _, err := st.Pending(ctx, sid); messages.TypeOf(err) != messages.ErrInternal {
				t.Fatalf("Pending: %v, want an internal error", err)
			}
		})
	}
}
