//go:build linux

package persistence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

const diskFullEnv = "SESSIOND_DISKFULL_CHILD"

// diskFullCase is where a full disk first refuses the store's writes.
type diskFullCase struct {
	name string
	// flush is the child's FlushBytes.
	flush int64
	// limit returns the file size limit, given the sizes of the store's
	// files once it is open.
	limit func(db, wal int64) int64
	// killed: the parent kills the child with SIGKILL while the disk is
	// still full, instead of letting it go on.
	killed bool
	// reopens: opened again after the kill with no room past bbolt's
	// file as it is, the store opens, as what its log holds fits there.
	reopens bool
}

var diskFullCases = []diskFullCase{
	// The log's next extension does not fit; nothing is flushed, so
	// bbolt's file is never written.
	{name: "log", flush: 1 << 30, limit: func(_, wal int64) int64 { return wal + 256<<10 }},
	// bbolt's file cannot grow at a flush; the log has room, until it
	// has grown to twice FlushBytes with the flush still failing.
	{name: "flush", flush: 64 << 10, limit: func(db, wal int64) int64 { return max(db, wal+16<<20) }},
	// The same, killed while the flush is still failing: recovery needs
	// the memtable that never reached bbolt from the log.
	{name: "flush-killed", flush: 64 << 10, limit: func(db, wal int64) int64 { return max(db, wal+16<<20) }, killed: true},
	// The log's other file, which has never been written, has no room
	// for the log to start over in it when the first flush is due; the
	// log goes on in its current file (its first megabyte, written as
	// the store opened), until it has grown to twice FlushBytes. (bbolt's
	// file is written only by a flush, and none starts.)
	{name: "log-start", flush: 64 << 10, limit: func(_, wal int64) int64 { return wal / 2 }},
	// The same, killed while the log's next file still has no room.
	{name: "log-start-killed", flush: 64 << 10, limit: func(_, wal int64) int64 { return wal / 2 }, killed: true, reopens: true},
}

// TestDiskFullChild is the child half of TestDiskFull: it opens the store,
// limits the size of the files it may write (RLIMIT_FSIZE, so writes past
// the limit fail with EFBIG as they would with ENOSPC on a full disk),
// admits prompts from several goroutines until enough are refused, then
// reads, closes, and reports. It does nothing in a normal test run.
func TestDiskFullChild(t *testing.T) {
	spec := os.Getenv(diskFullEnv)
	if spec == "" {
		return
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	die := func(err error) {
		say("error %v", err)
		os.Exit(2)
	}
	name, path, _ := strings.Cut(spec, ",")
	if name == "open" {
		// Open with no room past the database file as it is: recovery
		// cannot write what the log holds into it.
		if _, err := limitFileSize(fileSize(path)); err != nil {
			die(err)
		}
		st, err := persistence.Open(path, persistence.Options{})
		if err == nil {
			say("opened")
			_ = st.Close()
			return
		}
		say("open %s %s", messages.TypeOf(err), err)
		return
	}
	var c diskFullCase
	for _, cc := range diskFullCases {
		if cc.name == name {
			c = cc
		}
	}
	st, err := persistence.Open(path, persistence.Options{FlushBytes: c.flush})
	if err != nil {
		die(err)
	}
	ctx := context.Background()
	if _, _, err := st.CreateSession(ctx, persistence.CreateSession{ID: "ses_full", Location: messages.Location{Directory: "/tmp"}}); err != nil {
		die(err)
	}
	room, err := limitFileSize(c.limit(fileSize(path), max(fileSize(path+"-wal"), fileSize(path+"-wal2"))))
	if err != nil {
		die(err)
	}
	var refused sync.WaitGroup
	var fails atomic.Int32
	for g := range 8 {
		refused.Go(func() {
			for i := 0; ; i++ {
				id := messages.MessageID(fmt.Sprintf("msg_g%d_%06d", g, i))
				_, _, err := st.Admit(ctx, persistence.Admission{ID: id, SessionID: "ses_full", Prompt: messages.Prompt{Text: strings.Repeat("x", 2000)}})
				if err == nil {
					say("ack %s", id)
					continue
				}
				// The caller learns why: the system's error is in the chain,
				// or in its text where bbolt formats it with %s (its "file
				// resize error").
				why := errors.Is(err, syscall.EFBIG) || strings.Contains(err.Error(), syscall.EFBIG.Error())
				say("refused %s %v %v %s", id, why, errors.Is(err, persistence.ErrOutcomeUnknown), messages.TypeOf(err))
				if fails.Add(1) >= 50 {
					return
				}
			}
		})
	}
	refused.Wait()
	say("failed %v", st.Failed() != nil)
	if c.killed {
		say("full")
		<-time.After(time.Hour) // until the parent's SIGKILL
	}
	// Room again: a store that did not fail takes writes at once.
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &room); err != nil {
		die(err)
	}
	// (A failing flush is retried after a pause, so poll.)
	for deadline := time.Now().Add(time.Minute); ; {
		_, _, err := st.Admit(ctx, persistence.Admission{ID: "msg_room", SessionID: "ses_full", Prompt: messages.Prompt{Text: "room again"}})
		if err == nil {
			say("ack msg_room")
			break
		}
		if time.Now().After(deadline) {
			say("still %v", err)
			break
		}
		runtime.Gosched()
	}
	// Reads go on: everything acknowledged is there.
	page, err := st.History(ctx, "ses_full", persistence.Query{After: -1, Limit: 10})
	if err != nil {
		die(err)
	}
	say("read %d", len(page.Data))
	say("closed %v", st.Close())
}

// limitFileSize sets this process's soft file size limit (RLIMIT_FSIZE)
// to size, leaving the hard one, so that the disk can have room again,
// and returns the limits as they were.
func limitFileSize(size int64) (was syscall.Rlimit, err error) {
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		return was, err
	}
	return was, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(size), Max: was.Max})
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// TestDiskFull runs a store in a child process whose writes past a file
// size stop fitting, at the log's extension or at bbolt's growth during a
// flush, and checks that every refused write says why (never a panic or a
// hang) and is typed storage.full, that the store does not fail, that reads go on, that writes
// succeed again once there is room, without a reopen, and that the store
// reopened then is consistent and holds every acknowledged admission; or,
// killed with SIGKILL while its flush still fails, that the store reopened
// after the kill does, once it is opened with room (opened without, it
// refuses with storage.full and changes nothing).
func TestDiskFull(t *testing.T) {
	for _, c := range diskFullCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "full.db")
			env := diskFullEnv + "=" + c.name + "," + path
			var lines []string
			if c.killed {
				killChild(t, "TestDiskFullChild", env, dir, func(line string) bool {
					lines = append(lines, line)
					return line == "full"
				})
				// Opened again while the disk is still full, the store
				// says so and changes nothing.
				b, _ := childTest("TestDiskFullChild", diskFullEnv+"=open,"+path, dir).Output()
				if out := string(b); c.reopens {
					if !strings.HasPrefix(out, "opened\n") {
						t.Errorf("open with room in bbolt's file for the log: %s", out)
					}
				} else if !strings.Contains(out, "open "+string(messages.ErrStorageFull)+" ") || !strings.Contains(out, "opens once there is room") {
					t.Errorf("open on a full disk: %s", out)
				} else {
					t.Logf("%s", strings.SplitN(out, "\n", 2)[0])
				}
			} else {
				b, err := childTest("TestDiskFullChild", env, dir).Output()
				lines = strings.Split(strings.TrimSpace(string(b)), "\n")
				if err != nil {
					t.Fatalf("child: %v\n%s", err, strings.Join(lines[max(len(lines)-20, 0):], "\n"))
				}
			}
			acked := map[messages.MessageID]bool{}
			refused, unknown := 0, 0
			var failed, closed string
			for _, line := range lines {
				verb, rest, _ := strings.Cut(line, " ")
				switch verb {
				case "ack":
					acked[messages.MessageID(rest)] = true
				case "refused":
					refused++
					f := strings.Fields(rest)
					if len(f) != 4 || f[1] != "true" || f[3] != string(messages.ErrStorageFull) {
						t.Errorf("refused write without the system's error (EFBIG) in its chain, or not typed %s: %s", messages.ErrStorageFull, rest)
					}
					if f[2] == "true" {
						unknown++
					}
				case "still":
					t.Errorf("the store refuses writes once there is room: %s", rest)
				case "failed":
					failed = rest
				case "closed":
					closed = rest
				case "read", "PASS", "full":
				default:
					t.Errorf("child: %s", line)
				}
			}
			if refused == 0 || len(acked) == 0 {
				t.Fatalf("%d admissions acknowledged, %d refused: the limit was not reached", len(acked), refused)
			}
			if failed != "false" {
				t.Errorf("store failed: %s", failed)
			}
			if unknown > 0 {
				t.Errorf("%d refused writes of unknown outcome, though the store did not fail", unknown)
			}
			// Close writes the memtable into bbolt, which may not fit either.
			t.Logf("%d admissions acknowledged, %d refused (%d of unknown outcome); close: %s", len(acked), refused, unknown, closed)
			verifyFullStore(t, path, acked)
		})
	}
}

// verifyFullStore checks the store at path reopened with room to write as
// one a crash left (every acknowledged admission there once, the log whole),
// then admits one more.
func verifyFullStore(t *testing.T, path string, acked map[messages.MessageID]bool) {
	t.Helper()
	verifyCrashStore(t, path, "ses_full", acked)
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Admit(context.Background(), persistence.Admission{ID: "msg_after", SessionID: "ses_full", Prompt: messages.Prompt{Text: "room again"}}); err != nil {
		t.Fatalf("admission once there is room: %v", err)
	}
}
