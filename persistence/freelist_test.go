package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/messages"
)

// The bbolt file layout these tests edit (bbolt's own, little-endian on
// the machines we test on): a page starts with a 16-byte header (id u64,
// flags u16, count u16, overflow u32); pages 0 and 1 hold a meta each
// right after it, of which the one with the higher transaction ID is in
// use, and a freelist page holds count page IDs (u64) after its header.
const (
	pageHeader     = 16
	metaPageSize   = pageHeader + 8  // u32
	metaFreelist   = pageHeader + 32 // u64
	metaPgid       = pageHeader + 40 // u64: the high-water mark, in pages
	metaTxid       = pageHeader + 48 // u64
	metaChecksum   = pageHeader + 56 // u64: FNV-64a of the meta before it
	flagLeaf       = 0x02
	flagFreelist   = 0x10
	noFreelistPgid = ^uint64(0)
)

// boltFreelist returns the bbolt file's page size and the page its meta
// in use names as the freelist.
func boltFreelist(t *testing.T, path string) (pageSize int64, freelist uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	pageSize = int64(le.Uint32(b[metaPageSize:]))
	meta := b[:pageSize]
	if other := b[pageSize : 2*pageSize]; le.Uint64(other[metaTxid:]) > le.Uint64(meta[metaTxid:]) {
		meta = other
	}
	return pageSize, le.Uint64(meta[metaFreelist:])
}

// editFreelistPage changes the closed store's freelist page in place.
func editFreelistPage(t *testing.T, path string, fn func(page []byte)) {
	t.Helper()
	pageSize, id := boltFreelist(t, path)
	if id == noFreelistPgid {
		t.Fatal("the file has no freelist page")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, pageSize)
	if _, err := f.ReadAt(page, int64(id)*pageSize); err != nil {
		t.Fatal(err)
	}
	if page[8] != flagFreelist {
		t.Fatalf("page %d has flags %#x, want a freelist page", id, page[8])
	}
	fn(page)
	if _, err := f.WriteAt(page, int64(id)*pageSize); err != nil {
		t.Fatal(err)
	}
}

// TestTheFreelistIsWritten: bbolt writes its freelist with every commit,
// so an Open reads it instead of walking every page of the file. A store
// that an older sessiond wrote without one opens as it is, whole, and has
// one once it is closed.
func TestTheFreelistIsWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	sids := verifiedStore(t, path)
	if _, id := boltFreelist(t, path); id == noFreelistPgid {
		t.Fatal("the store has no freelist page")
	}

	// As an older sessiond left it: a commit without the freelist.
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, id := boltFreelist(t, path); id != noFreelistPgid {
		t.Fatalf("freelist page %d, want none", id)
	}

	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(t.Context(), sids[1]); err != nil {
		t.Fatal(err)
	}
	r, err := st.Verify(t.Context(), t.TempDir())
	if err != nil || len(r.Problems) != 0 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, id := boltFreelist(t, path); id == noFreelistPgid {
		t.Fatal("the store still has no freelist page")
	}
}

// TestVerifyRunsBboltsCheck: a page the freelist has lost (neither free
// nor reachable) is only visible to bbolt's own check of the file, which
// Verify reports as a problem.
func TestVerifyRunsBboltsCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	verifiedStore(t, path)
	var lost uint64
	editFreelistPage(t, path, func(page []byte) {
		le := binary.LittleEndian
		n := le.Uint16(page[10:])
		if n == 0 || n == 0xFFFF {
			t.Fatalf("freelist of %d IDs: want some, and no count word", n)
		}
		lost = le.Uint64(page[pageHeader+8*int(n-1):])
		le.PutUint16(page[10:], n-1)
	})
	r := verify(t, path)
	want := "unreachable unfreed"
	if !strings.Contains(strings.Join(r.Problems, "\n"), want) {
		t.Fatalf("problems %q, want page %d %q", r.Problems, lost, want)
	}
	for _, p := range r.Problems {
		if !strings.HasPrefix(p, "database file: ") {
			t.Errorf("problem %q: want only the database file's", p)
		}
	}
}

// TestOpenRefusesACorruptFreelistPage: bbolt panics on a freelist page
// that is not one as it opens the file; Open returns ErrCorrupt instead,
// and leaves the store unlocked, so a second Open says the same rather
// than waiting for a lock.
func TestOpenRefusesACorruptFreelistPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	verifiedStore(t, path)
	editFreelistPage(t, path, func(page []byte) { page[8] = flagLeaf })
	for range 2 {
		st, err := Open(path, Options{})
		if !errors.Is(err, ErrCorrupt) {
			if err == nil {
				st.Close()
			}
			t.Fatalf("open: %v, want ErrCorrupt", err)
		}
	}
}

// TestOpenRefusesDamagedMetaPages: with both meta pages of the bbolt file
// damaged, bolt.Open fails with its bare "checksum error", "invalid
// database" or "version mismatch", which the caller could not tell from any
// other failure to open, so sessiond gave no advice with it. Open wraps
// ErrCorrupt into them.
func TestOpenRefusesDamagedMetaPages(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64 // offset in the page of the byte damaged
		want string
	}{
		{"checksum", metaTxid, "checksum error"},
		{"magic", pageHeader, "invalid database"},
		{"version", pageHeader + 4, "version mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			verifiedStore(t, path)
			pageSize, _ := boltFreelist(t, path)
			damage := func(page int64) {
				t.Helper()
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				b := make([]byte, 1)
				if _, err := f.ReadAt(b, page*pageSize+tc.at); err != nil {
					t.Fatal(err)
				}
				b[0] ^= 0xff
				if _, err := f.WriteAt(b, page*pageSize+tc.at); err != nil {
					t.Fatal(err)
				}
			}
			damage(0)
			damage(1)
			st, err := Open(path, Options{})
			if err == nil {
				st.Close()
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: %v, want ErrCorrupt with bbolt's %q", err, tc.want)
			}
		})
	}
}

// admittedStore returns the path of a closed store with one Session and
// 200 admissions: enough rows for leaf pages of plain rows and for a
// branch page at the data bucket's root.
func admittedStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, st)
	for i := range 200 {
		if _, _, err := st.Admit(t.Context(), Admission{SessionID: sid, Prompt: messages.Prompt{Text: fmt.Sprintf("prompt %d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVerifyReportsKeysOutOfOrder: a leaf page whose keys are out of
// order (damage no write through bbolt makes) is reported by Verify,
// which goes on to the logs, rather than crashing the process: an Open no
// longer walks the file's pages, which is where bbolt used to panic.
func TestVerifyReportsKeysOutOfOrder(t *testing.T) {
	path := admittedStore(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize, _ := boltFreelist(t, path)
	le := binary.LittleEndian
	// The first leaf page of plain rows (no bucket among them): its first
	// key made greater than its second.
	at := int64(-1)
	for off := 2 * pageSize; off+pageSize <= int64(len(b)) && at < 0; off += pageSize {
		p := b[off : off+pageSize]
		if le.Uint16(p[8:]) != flagLeaf || le.Uint16(p[10:]) < 2 {
			continue
		}
		plain := true
		for i := range int(le.Uint16(p[10:])) {
			plain = plain && le.Uint32(p[pageHeader+16*i:]) == 0
		}
		if plain {
			at = off + pageHeader + int64(le.Uint32(p[pageHeader+4:])) // element 0's key
		}
	}
	if at < 0 {
		t.Fatal("no leaf page of plain rows")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := verify(t, path)
	want := "database file: key[1]="
	if len(r.Problems) < 2 || !strings.HasPrefix(r.Problems[1], want) || !strings.Contains(r.Problems[1], "needs to be > (found <) than previous element") {
		t.Fatalf("problems %q, want second bbolt's of key 1 out of order", r.Problems)
	}
}

// TestOpenRefusesAFileCutShort: a bbolt file shorter than its pages reach
// (a copy cut short, a full disk) is refused as corrupt, never a crash:
// whether Open reads past its end (here its freelist page is the last
// one, and reading it faults the mapping) or not (its meta moved to name
// a freelist early in the file, so that only later reads would fault).
func TestOpenRefusesAFileCutShort(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		early      bool
	}{
		{"the freelist cut off", "faulted", false},
		{"only pages Open does not read", "cut short", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			verifiedStore(t, path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			le := binary.LittleEndian
			pageSize, freelist := boltFreelist(t, path)
			m := b[:pageSize] // the meta page in use
			if le.Uint64(b[pageSize+metaTxid:]) > le.Uint64(m[metaTxid:]) {
				m = b[pageSize : 2*pageSize]
			}
			hwm := le.Uint64(m[metaPgid:])
			if freelist != hwm-1 {
				t.Fatalf("freelist page %d of %d: the test wants it last", freelist, hwm)
			}
			if tc.early {
				// The freelist copied to page 2 and the meta pointed there.
				copy(b[2*pageSize:3*pageSize], b[int64(freelist)*pageSize:int64(freelist+1)*pageSize])
				le.PutUint64(b[2*pageSize:], 2)
				le.PutUint64(m[metaFreelist:], 2)
				h := fnv.New64a()
				h.Write(m[pageHeader:metaChecksum])
				le.PutUint64(m[metaChecksum:], h.Sum64())
			}
			if err := os.WriteFile(path, b[:int64(hwm-1)*pageSize], 0o600); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the first refusal leaves the file unlocked
				st, err := Open(path, Options{})
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
					if err == nil {
						st.Close()
					}
					t.Fatalf("open: %v, want ErrCorrupt saying %q", err, tc.want)
				}
			}
		})
	}
}

// TestVerifyReportsAPagePointerPastTheEnd: a branch page whose child
// pointer leads past the end of the file (within bbolt's mapping, or
// beyond it) is reported by Verify, which stops there, instead of ending
// the process: every read of that child faults, and bbolt's own check
// reads in a goroutine of its own.
func TestVerifyReportsAPagePointerPastTheEnd(t *testing.T) {
	for _, far := range []string{"past the file", "past the mapping"} {
		t.Run(far, func(t *testing.T) {
			path := admittedStore(t)
			// The data bucket's root, a branch page with 200 admissions.
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			var root int64
			err = db.View(func(tx *bolt.Tx) error {
				root = int64(tx.Bucket(bucketData).RootPage())
				info, err := tx.Page(int(root))
				if err == nil && info.Type != "branch" {
					err = fmt.Errorf("the data bucket's root is a %s page", info.Type)
				}
				return err
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			pageSize, _ := boltFreelist(t, path)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			child := uint64(fi.Size()/pageSize + 16) // inside the 1 GiB mapping
			if far == "past the mapping" {
				child = 1 << 40
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Element 0 of the branch page: pos u32, ksize u32, pgid u64.
			if _, err := f.WriteAt(binary.LittleEndian.AppendUint64(nil, child), root*pageSize+pageHeader+8); err != nil {
				t.Fatal(err)
			}
			f.Close()
			r := verify(t, path)
			if len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0], "database file: reading its pages: ") {
				t.Fatalf("problems %q, want one: the database file's pages cannot be read", r.Problems)
			}
		})
	}
}
