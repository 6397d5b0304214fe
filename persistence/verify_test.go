package persistence

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// verifiedStore builds a closed store at path: two Sessions, prompts
// admitted and one promoted, an instruction entry and an approval (state
// beside the logs), and returns the Sessions.
func verifiedStore(t *testing.T, path string) []messages.SessionID {
	t.Helper()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var sids []messages.SessionID
	for i := range 2 {
		sid := newSession(t, st)
		sids = append(sids, sid)
		for j := range 3 {
			if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprintf("prompt %d.%d", i, j)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.PutEntry(ctx, sid, "style", "brief"); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := st.Pending(ctx, sids[0])
	if err != nil || len(rows) == 0 {
		t.Fatalf("pending: %v, %v", rows, err)
	}
	if _, err := st.Append(ctx, sids[0], &messages.PromptPromoted{SessionID: sids[0], InputID: rows[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveApproval(ctx, "/tmp", "bash", []string{"make *"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return sids
}

// verify opens the store at path and verifies it.
func verify(t *testing.T, path string) VerifyReport {
	t.Helper()
	st := openTemp(t, Options{})
	st.Close()
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Verify(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// editBolt changes the closed store's bbolt file directly, as a bug in a
// projector or damage to the file could have.
func editBolt(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// TestVerifySoundStore: a store that only sessiond wrote verifies without
// a problem, entries and approvals included, and the report counts its
// Sessions and events.
func TestVerifySoundStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	verifiedStore(t, path)
	r := verify(t, path)
	// Per Session: created and three admissions; one promotion.
	if len(r.Problems) != 0 || r.More != 0 || r.Sessions != 2 || r.Events != 2*4+1 {
		t.Fatalf("report %+v, want 2 Sessions, 9 events, no problem", r)
	}
}

// TestVerifyStoppedIsNoFinding: a check whose context ends while it
// rebuilds returns the context's error and no problems (it reported every
// row it had not rebuilt yet as one the logs do not make), and leaves no
// rebuilt store behind.
func TestVerifyStoppedIsNoFinding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	verifiedStore(t, path)
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := st.Verify(ctx, filepath.Dir(path))
	if !errors.Is(err, context.Canceled) || len(r.Problems) != 0 {
		t.Fatalf("stopped check: %+v, %v; want context.Canceled and no problems", r, err)
	}
	if left, _ := filepath.Glob(path + ".verify-*"); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

// TestVerifyFindsProjectionsTheLogsDoNotMake: each way a projection can
// part from its log is reported, naming the bucket and the row.
func TestVerifyFindsProjectionsTheLogsDoNotMake(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(tx *bolt.Tx, sids []messages.SessionID) error
		want string
	}{
		{"a changed Session record", func(tx *bolt.Tx, sids []messages.SessionID) error {
			k := prefix(sids[0], kSession)
			v := append([]byte(nil), tx.Bucket(bucketData).Get(k)...)
			v[len(v)-1] ^= 1
			return tx.Bucket(bucketData).Put(k, v)
		}, "differs from what the logs make"},
		{"a missing pending row", func(tx *bolt.Tx, sids []messages.SessionID) error {
			k, _ := tx.Bucket(bucketData).Cursor().Seek(prefix(sids[1], kPending))
			return tx.Bucket(bucketData).Delete(k)
		}, "\\x00\\x05\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01\": missing"},
		{"an input's ID entry without its admission", func(tx *bolt.Tx, sids []messages.SessionID) error {
			k, v := tx.Bucket(bucketData).Cursor().Seek(prefix(sids[1], kPending))
			if k == nil {
				return errors.New("no pending row")
			}
			ent := idEntry{SessionID: sids[1], Kind: idInput}
			b, err := messages.Marshal(&ent)
			if err != nil {
				return err
			}
			return tx.Bucket(bucketIDs).Put(v, b)
		}, "differs from what the logs make"},
		{"an extra message ID", func(tx *bolt.Tx, sids []messages.SessionID) error {
			return tx.Bucket(bucketIDs).Put([]byte("msg_zzzz"), []byte{0x80})
		}, `ids "msg_zzzz": not what the logs make`},
		{"an entry of no Session", func(tx *bolt.Tx, sids []messages.SessionID) error {
			return tx.Bucket(bucketEntries).Put(strKey("ses_gone", 0, "style"), []byte("x"))
		}, "its Session does not exist"},
		{"a log ending short of its Session", func(tx *bolt.Tx, sids []messages.SessionID) error {
			// The promotion's event goes; the user message it made stays.
			return tx.Bucket(bucketData).Delete(streamKey(sids[0], 4, rLog))
		}, "the log ends at seq 3, the Session's rows at 4"},
		{"a log row that does not decode", func(tx *bolt.Tx, sids []messages.SessionID) error {
			return tx.Bucket(bucketData).Put(streamKey(sids[1], 3, rLog), []byte{0xff})
		}, "data: log row"},
		{"a hole in a log", func(tx *bolt.Tx, sids []messages.SessionID) error {
			return tx.Bucket(bucketData).Delete(streamKey(sids[1], 2, rLog))
		}, "seq 3, want 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			sids := verifiedStore(t, path)
			editBolt(t, path, func(tx *bolt.Tx) error { return tc.edit(tx, sids) })
			r := verify(t, path)
			if !strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
				t.Fatalf("problems %q, want one with %q", r.Problems, tc.want)
			}
		})
	}
}

// TestVerifyReportIsBounded: past maxProblems, problems are counted, not
// listed.
func TestVerifyReportIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	verifiedStore(t, path)
	editBolt(t, path, func(tx *bolt.Tx) error {
		for i := range maxProblems + 5 {
			if err := tx.Bucket(bucketIDs).Put(fmt.Appendf(nil, "msg_zz%03d", i), []byte{0x80}); err != nil {
				return err
			}
		}
		return nil
	})
	if r := verify(t, path); len(r.Problems) != maxProblems || r.More != 5 {
		t.Fatalf("%d problems listed and %d more, want %d and 5", len(r.Problems), r.More, maxProblems)
	}
}

// TestStateRowsStopsWhenAsked: a consumer that stops inside a log row of
// several events ends the rows there, and that is not an error.
func TestStateRowsStopsWhenAsked(t *testing.T) {
	st := openTemp(t, Options{})
	sid := newSession(t, st)
	if _, err := st.Append(context.Background(), sid, &messages.ExecutionStarted{SessionID: sid}, &messages.ExecutionSucceeded{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	var seen int
	var err error
	if verr := st.view(func(v *view) error {
		for k := range stateRows(v, bucketData, everyRow, &err) {
			if isLogRow(k) {
				if seen++; seen == 2 { // session.created.1, then the first of the two
					break
				}
			}
		}
		return nil
	}); verr != nil {
		t.Fatal(verr)
	}
	if seen != 2 || err != nil {
		t.Fatalf("stopped after %d log events with %v, want 2 and no error", seen, err)
	}
}

// TestVerifyWithMessagesInsideTheLog: a message row sorts between log rows
// (the promoted prompt's user message, then a later admission), and the
// rebuilt store holds the same events in one log row, whose events'
// keys sort after that message. Verify compared the two in one walk and
// reported every event before the message as both extra and missing, on
// every Session that had taken a prompt and gone on.
func TestVerifyWithMessagesInsideTheLog(t *testing.T) {
	st := openTemp(t, Options{})
	ctx := context.Background()
	sid := newSession(t, st)
	r, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "first"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, sid, &messages.PromptPromoted{SessionID: sid, InputID: r.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, sid, &messages.ExecutionStarted{SessionID: sid}, &messages.ExecutionSucceeded{SessionID: sid}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Admit(ctx, Admission{SessionID: sid, Prompt: messages.Prompt{Text: "second"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := st.Verify(ctx, t.TempDir())
	if err != nil || len(rep.Problems) != 0 || rep.Events != 6 {
		t.Fatalf("verify: %+v, %v; want 6 events and no problem", rep, err)
	}
}
