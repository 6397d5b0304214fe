package main

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// damagedStore leaves in a new data directory the store a crash leaves
// after a Session was created and ten prompts admitted to it, one log
// record each, with the record of the sixth admission damaged on the disk
// since. It returns the directory and the Session.
func damagedStore(t *testing.T) (string, messages.SessionID) {
	t.Helper()
	var sid messages.SessionID
	data := crashedStore(t, sessionWithPrompts(t, 10, &sid), func(suffix string, b []byte) {
		if suffix == "-wal2" { // the log's first file (persistence/wal.go)
			offs := recordOffsets(b)
			if len(offs) != 11 {
				t.Fatalf("%d records in the log, want 11", len(offs))
			}
			b[offs[6]+16] ^= 1 // the sixth admission's first payload byte
		}
	})
	return data, sid
}

// sessionWithPrompts returns a fill for crashedStore that creates a
// Session, sets *sid to it and admits n prompts to it, one log record
// each.
func sessionWithPrompts(t *testing.T, n int, sid *messages.SessionID) func(st *persistence.Bolt) {
	return func(st *persistence.Bolt) {
		ctx := context.Background()
		s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		*sid = s.ID
		for i := range n {
			if _, _, err := st.Admit(ctx, persistence.Admission{SessionID: s.ID, Prompt: messages.Prompt{Text: fmt.Sprint("prompt ", i)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// crashedStore runs fill on a store that never flushes, and returns a new
// data directory holding a copy of its files taken while it is open, as
// a crash leaves them; change, when set, edits each file's copy first.
func crashedStore(t *testing.T, fill func(st *persistence.Bolt), change func(suffix string, b []byte)) string {
	t.Helper()
	live := t.TempDir()
	st, err := persistence.Open(filepath.Join(live, StoreFileName), persistence.Options{FlushBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fill(st)
	data := t.TempDir()
	for _, suffix := range []string{"", "-wal", "-wal2"} {
		b, err := os.ReadFile(filepath.Join(live, StoreFileName+suffix))
		if err != nil {
			t.Fatal(err)
		}
		if change != nil {
			change(suffix, b)
		}
		if err := os.WriteFile(filepath.Join(data, StoreFileName+suffix), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// recordOffsets walks the heads of a log file's records (persistence/wal.go:
// length u32, checksum u32, number u64, then the payload, from offset 4096)
// while their numbers follow on, and returns their offsets.
func recordOffsets(b []byte) []int {
	var offs []int
	for off, want := 4096, uint64(0); off+16 <= len(b); off += 16 + int(bin.LittleEndian.Uint32(b[off:])) {
		num := bin.LittleEndian.Uint64(b[off+8:])
		if want != 0 && num != want || num == 0 {
			break
		}
		offs, want = append(offs, off), num+1
	}
	return offs
}

// TestRepair: a store whose log has a damaged record with whole records
// after it does not open; run says to use repair; repair without --force
// only reports; with --force it keeps a copy of the log and recovers the
// commits before the damaged one; after that the store opens cleanly.
func TestRepair(t *testing.T) {
	data, sid := damagedStore(t)
	env := map[string]string{"SESSIOND_DATA": data}
	wal := filepath.Join(data, StoreFileName+"-wal2")
	damaged, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}

	code, _, errOut := runApp(t, env, "run", "--yes", "--dir", t.TempDir(), "hi")
	if code != exitFailed || !strings.Contains(errOut, "damaged write-ahead log") || !strings.Contains(errOut, "sessiond repair --data "+data) {
		t.Fatalf("run on a damaged store: exit %d, stderr %q", code, errOut)
	}

	// What the dropped commits wrote: the four admissions after the
	// damaged sixth, each an event and two other rows (the Session record
	// and the input's ID entry).
	drops := "\nwhat repairing drops (record 7 itself cannot be read):\n  " + string(sid) + ": events 7 to 10 (4 events)\n  8 other rows\n"
	code, out, errOut := runApp(t, env, "repair")
	if code != exitFailed || errOut != "" || !strings.Contains(out, wal+": record 7 at offset") ||
		!strings.Contains(out, "4 whole records follow it"+drops+"repairing drops it") || !strings.Contains(out, "sessiond repair --data "+data+" --force") {
		t.Fatalf("repair: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(wal); !bytes.Equal(b, damaged) {
		t.Fatal("repair without --force changed the log")
	}

	code, out, errOut = runApp(t, env, "repair", "--force")
	if code != exitOK || !strings.Contains(out, "4 whole records follow it"+drops+"kept a copy") ||
		!strings.Contains(out, "repaired "+filepath.Join(data, StoreFileName)+": dropped record 7 and the 4 commits after it") {
		t.Fatalf("repair --force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	copies, _ := filepath.Glob(wal + ".damaged-*")
	if len(copies) != 1 || !strings.Contains(out, "kept a copy of "+wal+" at "+copies[0]) {
		t.Fatalf("copies of the log %q; stdout %q", copies, out)
	}
	if b, _ := os.ReadFile(copies[0]); !bytes.Equal(b, damaged) {
		t.Error("the kept copy is not the damaged log")
	}

	code, out, _ = runApp(t, env, "repair")
	if code != exitOK || !strings.Contains(out, "opens cleanly: nothing to repair") {
		t.Fatalf("repair of the repaired store: exit %d, stdout %q", code, out)
	}
	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.History(context.Background(), sid, persistence.Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Data); n != 5 || page.Data[n-1].Durable.Seq != 5 { // after session.created.1: the five admissions before the damaged one
		t.Errorf("%d events after the repair, want the 5 admitted before the damaged record", n)
	}
}

// TestRepairOfADamagedLogHeader: a bit flipped in the header of the log
// file that holds every commit since the store was opened. repair said the
// store opened cleanly, and in opening it started that file over: every
// commit in it was gone. Now repair reports the header, changes nothing
// without --force, and with it drops the file's commits and says so.
func TestRepairOfADamagedLogHeader(t *testing.T) {
	var sid messages.SessionID
	data := crashedStore(t, sessionWithPrompts(t, 3, &sid), func(suffix string, b []byte) {
		if suffix == "-wal2" { // the log's first file (persistence/wal.go)
			b[9] ^= 1 // a bit of its header's generation
		}
	})
	env := map[string]string{"SESSIOND_DATA": data}
	wal := filepath.Join(data, StoreFileName+"-wal2")
	damaged, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runApp(t, env, "repair")
	if code != exitFailed || !strings.Contains(out, wal+": its header is damaged; it holds record 1") ||
		!strings.Contains(out, "and 3 records follow it\nwhat repairing drops:\n  "+string(sid)+": events 0 to 3 (4 events), created in the dropped commits\n  8 other rows\n") ||
		!strings.Contains(out, "sessiond repair --data "+data+" --force") {
		t.Fatalf("repair: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if b, _ := os.ReadFile(wal); !bytes.Equal(b, damaged) {
		t.Fatal("repair without --force changed the log")
	}
	if code, _, errOut := runApp(t, env, "check"); code != exitFailed || !strings.Contains(errOut, "header is damaged") {
		t.Fatalf("check: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut = runApp(t, env, "repair", "--force")
	if code != exitOK || !strings.Contains(out, "dropped record 1 and the 3 commits after it") {
		t.Fatalf("repair --force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runApp(t, env, "check"); code != exitOK || !strings.Contains(out, "(Sessions: 0, events: 0)") {
		t.Fatalf("check after the repair: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRepairRefusals: repair needs a store, and one no other process has
// open.
func TestRepairRefusals(t *testing.T) {
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": t.TempDir()}, "repair")
	if code != exitFailed || !strings.Contains(errOut, "no store to repair") {
		t.Errorf("repair of an empty data dir: exit %d, stderr %q", code, errOut)
	}
	data := t.TempDir()
	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	code, _, errOut = runApp(t, map[string]string{"SESSIOND_DATA": data}, "repair", "--force")
	if code != exitFailed || !strings.Contains(errOut, "in use by another sessiond") {
		t.Errorf("repair of an open store: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runApp(t, nil, "repair", "extra"); code != exitUsage || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("repair extra: exit %d, stderr %q", code, errOut)
	}
}

// TestCheck: check reports a sound store as such, lists what it finds
// wrong in one that is not (here an ID index row no log made), and sends a
// store with a damaged log to repair.
func TestCheck(t *testing.T) {
	data, _ := damagedStore(t)
	env := map[string]string{"SESSIOND_DATA": data}
	code, _, errOut := runApp(t, env, "check")
	if code != exitFailed || !strings.Contains(errOut, "damaged write-ahead log") || !strings.Contains(errOut, "sessiond repair --data "+data) {
		t.Fatalf("check of a damaged log: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runApp(t, env, "repair", "--force"); code != exitOK {
		t.Fatalf("repair --force: exit %d", code)
	}
	path := filepath.Join(data, StoreFileName)
	missing := filepath.Join(t.TempDir(), "missing")
	if code, _, errOut := runApp(t, env, "check", "--tmp", missing); code != exitFailed || !strings.Contains(errOut, "--tmp "+missing+" does not exist") {
		t.Fatalf("check --tmp of a missing directory: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runApp(t, env, "check", "--tmp", t.TempDir())
	if code != exitOK || !strings.Contains(out, path+" is sound (Sessions: 1, events: 6)") {
		t.Fatalf("check: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("ids")).Put([]byte("msg_stray"), []byte{0x80}) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = runApp(t, env, "check")
	if code != exitFailed || !strings.Contains(out, "has problems:\n  ids \"msg_stray\": not what the logs make") || strings.Contains(out, "more") {
		t.Fatalf("check of a stray ID: exit %d, stdout %q", code, out)
	}
	if entries, _ := os.ReadDir(data); len(entries) != 5 { // the store, its two logs and their damaged copies
		t.Errorf("check left %d files in the data dir, want 5", len(entries))
	}
}

// TestRepairKeepsEveryCopy: a copy of the log that is already there (here
// one for each of the next ten seconds, as a repair run twice in one
// second would find) is never overwritten: repair fails before changing
// anything.
func TestRepairKeepsEveryCopy(t *testing.T) {
	data, _ := damagedStore(t)
	wal := filepath.Join(data, StoreFileName+"-wal")
	now := time.Now().UTC()
	for i := range 10 {
		writeFile(t, data, StoreFileName+"-wal.damaged-"+now.Add(time.Duration(i)*time.Second).Format("20060102T150405Z"), "an earlier copy")
	}
	before, err := os.ReadFile(wal + "2")
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data}, "repair", "--force")
	if code != exitFailed || !strings.Contains(errOut, "keeping a copy of the log: ") || !strings.Contains(errOut, "file exists") {
		t.Fatalf("repair over an earlier copy: exit %d, stderr %q", code, errOut)
	}
	copies, _ := filepath.Glob(wal + ".damaged-*")
	for _, c := range copies {
		if b, _ := os.ReadFile(c); string(b) != "an earlier copy" {
			t.Errorf("%s was overwritten", c)
		}
	}
	if b, _ := os.ReadFile(wal + "2"); !bytes.Equal(b, before) {
		t.Error("the damaged log changed")
	}
}

// TestCheckOfBothMetaPagesDamaged: a database file whose two meta pages
// bbolt cannot read failed to open with bbolt's bare "checksum error" and
// no advice; the store now reports it as ErrCorrupt, so the user is told
// what is left to do.
func TestCheckOfBothMetaPagesDamaged(t *testing.T) {
	data := t.TempDir()
	path := filepath.Join(data, StoreFileName)
	st, err := persistence.Open(path, persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A page starts with a 16-byte header; the meta after it holds magic
	// and version (u32 each), then the page size (u32). The byte damaged
	// is in the meta's transaction ID, 48 bytes in: its checksum fails.
	pageSize := int(bin.LittleEndian.Uint32(b[16+8:]))
	for page := range 2 {
		b[page*pageSize+16+48] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data}, "check")
	if code != exitFailed || !strings.Contains(errOut, "checksum error") ||
		!strings.Contains(errOut, "bbolt cannot read the database file: restore the data directory from a copy") {
		t.Fatalf("check: exit %d, stderr %q", code, errOut)
	}
}

// TestRepairHints: an open refused for a damaged log names repair; one
// refused for a database file bbolt cannot read says what is left; any
// other error goes out as it came.
func TestRepairHints(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("open: %w", persistence.ErrWALDamaged), "'sessiond repair --data /d' reports the damage"},
		{fmt.Errorf("open: %w", persistence.ErrCorrupt), "bbolt cannot read the database file: restore the data directory from a copy"},
		{errors.New("open: no room"), ""},
	} {
		got := withRepairHint(tc.err, "/d")
		if !errors.Is(got, tc.err) {
			t.Errorf("%v: hint %v does not wrap it", tc.err, got)
		}
		if extra := strings.TrimPrefix(got.Error(), tc.err.Error()); tc.want == "" && extra != "" || !strings.Contains(extra, tc.want) {
			t.Errorf("%v: added %q, want %q", tc.err, extra, tc.want)
		}
	}
}

// TestRepairOfAMissingLog: a store that did not stop cleanly, copied
// without its log files, does not open; repair says which file is missing
// and from which record, and with --force opens the store without it.
func TestRepairOfAMissingLog(t *testing.T) {
	data := crashedStore(t, sessionWithPrompts(t, 1, new(messages.SessionID)), nil)
	for _, suffix := range []string{"-wal", "-wal2"} {
		if err := os.Remove(filepath.Join(data, StoreFileName+suffix)); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"SESSIOND_DATA": data}
	if code, _, errOut := runApp(t, env, "check"); code != exitFailed || !strings.Contains(errOut, "did not stop cleanly") ||
		!strings.Contains(errOut, "put the missing file back if there is a copy of it; 'sessiond repair --data "+data+" --force' opens the store without it") {
		t.Fatalf("check: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runApp(t, env, "repair")
	if code != exitFailed || !strings.Contains(out, "the log file that holds the commits from record 1 on (generation 1) is missing") ||
		!strings.HasSuffix(out, "'sessiond repair --data "+data+" --force' opens the store without it\n") || strings.Contains(out, "what repairing drops") {
		t.Fatalf("repair: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runApp(t, env, "repair", "--force")
	if code != exitOK || !strings.Contains(out, "opened without the missing log file; commits from record 1 on") {
		t.Fatalf("repair --force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runApp(t, env, "check"); code != exitOK || !strings.Contains(out, "(Sessions: 0, events: 0)") {
		t.Fatalf("check after the repair: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestPrintDropped: what a repair drops is listed a Session a line, up to
// droppedListed of them, and says which records could not be read.
func TestPrintDropped(t *testing.T) {
	many := make([]persistence.DroppedSession, droppedListed+2)
	var listed strings.Builder
	for i := range many {
		many[i] = persistence.DroppedSession{ID: messages.SessionID(fmt.Sprintf("ses_%02d", i)), FirstSeq: 4, LastSeq: 4, Events: 1}
		if i < droppedListed {
			fmt.Fprintf(&listed, "  ses_%02d: event 4 (1 event)\n", i)
		}
	}
	for _, tc := range []struct {
		name string
		d    persistence.WALDamage
		dr   persistence.Dropped
		want string
	}{
		{"a record", persistence.WALDamage{Record: 7, Intact: 4}, persistence.Dropped{Sessions: []persistence.DroppedSession{
			{ID: "ses_a", FirstSeq: 3, LastSeq: 9, Events: 5},
			{ID: "ses_b", FirstSeq: 0, LastSeq: 0, Events: 1, Created: true},
		}, Other: 1, Read: 4, Unread: 1}, "what repairing drops (record 7 itself cannot be read):\n" +
			"  ses_a: events 3 to 9 (5 events)\n  ses_b: event 0 (1 event), created in the dropped commits\n  1 other row\n"},
		{"a lost sector", persistence.WALDamage{Record: 7, Intact: 5}, persistence.Dropped{Read: 0, Unread: 6},
			"what repairing drops (record 7 itself cannot be read, nor 5 of the records after it):\n  nothing that can be read\n"},
		{"a header", persistence.WALDamage{Record: 1, Intact: 3, Header: true}, persistence.Dropped{Other: 2, Read: 3, Unread: 1},
			"what repairing drops (1 of them cannot be read):\n  2 other rows\n"},
		{"many Sessions", persistence.WALDamage{Record: 1, Intact: 3, Header: true}, persistence.Dropped{Sessions: many, Read: 4},
			"what repairing drops:\n" + listed.String() + "  and 2 more Sessions\n"},
	} {
		var b strings.Builder
		printDropped(&b, &tc.d, tc.dr)
		if b.String() != tc.want {
			t.Errorf("%s: printed\n%s\nwant\n%s", tc.name, b.String(), tc.want)
		}
	}
}

// TestRepairOfACutShortLog: a store that did not stop cleanly, whose newest
// log file was cut short since, is refused by check and serve, and repair
// names the file, its size and the first record that may be lost, and
// with --force recovers the records before the cut. Before, all three
// called it sound and the commits in the lost end were gone.
func TestRepairOfACutShortLog(t *testing.T) {
	data := crashedStore(t, sessionWithPrompts(t, 3, new(messages.SessionID)), nil)
	env := map[string]string{"SESSIOND_DATA": data}
	var newest string
	var size int64 = -1
	for _, suffix := range []string{"-wal", "-wal2"} {
		info, err := os.Stat(filepath.Join(data, StoreFileName+suffix))
		if err == nil && info.Size() > size {
			newest, size = filepath.Join(data, StoreFileName+suffix), info.Size()
		}
	}
	if err := os.Truncate(newest, 4096); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runApp(t, env, "check"); code != exitFailed || !strings.Contains(errOut, newest+" is 4096 bytes") ||
		!strings.Contains(errOut, "cut short") || !strings.Contains(errOut, "'sessiond repair --data "+data+" --force' opens the store with the records it still holds") {
		t.Fatalf("check: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runApp(t, env, "repair")
	if code != exitFailed || !strings.Contains(out, newest+": it is 4096 bytes") ||
		!strings.Contains(out, "'sessiond repair --data "+data+" --force' opens the store with the records it still holds (a copy of the log is kept)") {
		t.Fatalf("repair: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runApp(t, env, "repair", "--force")
	if code != exitOK || !strings.Contains(out, "recovered the records before record") {
		t.Fatalf("repair --force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runApp(t, env, "check"); code != exitOK || !strings.Contains(out, "is sound") {
		t.Fatalf("check after the repair: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
