package persistence_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

const crashEnv = "SESSIOND_CRASH_CHILD_DB"

// TestCrashChild is the child half of TestCrashAdmissions: it admits prompts
// from several goroutines forever, printing each acknowledged ID, until the
// parent kills it. It does nothing in a normal test run.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		return
	}
	// Small flushes, so kills also land during and between them.
	st, err := persistence.Open(path, persistence.Options{FlushBytes: 64 << 10})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ctx := context.Background()
	if _, _, err := st.CreateSession(ctx, persistence.CreateSession{ID: "ses_crash", Location: messages.Location{Directory: "/tmp"}}); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := messages.MessageID(fmt.Sprintf("msg_p%d_g%d_%d", os.Getpid(), g, i)) // new IDs each run: a retry writes nothing
				if _, _, err := st.Admit(ctx, persistence.Admission{ID: id, SessionID: "ses_crash", Prompt: messages.Prompt{Text: strings.Repeat("x", 200)}}); err != nil {
					mu.Lock()
					fmt.Fprintln(out, "error", err)
					out.Flush()
					mu.Unlock()
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(out, "ack", id)
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestCrashAdmissions kills a child process with SIGKILL in the middle of a
// stream of admissions, reopens the store, and checks that every
// acknowledged admission survived and that seqs have no holes or
// duplicates. It repeats on the same file to crash a store that has
// already been crashed.
var crashRounds = flag.Int("crash.rounds", 0, "TestCrashAdmissions: crash and recover this many times (default 3)")

func TestCrashAdmissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	rounds, acksPerRound := 3, 300
	if testing.Short() {
		rounds, acksPerRound = 1, 100
	}
	if *crashRounds > 0 {
		rounds = *crashRounds // a longer crash loop, run by hand
	}
	acked := map[messages.MessageID]bool{}
	for round := range rounds {
		n := 0
		killChild(t, "TestCrashChild", crashEnv+"="+path, filepath.Dir(path), func(line string) bool {
			if id, ok := strings.CutPrefix(line, "ack "); ok {
				acked[messages.MessageID(id)] = true
				n++
			} else if strings.HasPrefix(line, "error") {
				t.Errorf("child: %s", line)
			}
			return n >= acksPerRound
		})
		if t.Failed() {
			t.FailNow()
		}
		if n < acksPerRound {
			t.Fatalf("round %d: child stopped after %d acks", round, n)
		}
		verifyCrashStore(t, path, "ses_crash", acked)
	}
	t.Logf("%d crashes, %d acknowledged admissions all recovered", rounds, len(acked))
}

// childTest is a child process that runs test of this test binary with
// env added and its temporary files under dir.
func childTest(test, env, dir string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env, "TMPDIR="+dir)
	return cmd
}

// killChild runs test as a child process of this test binary with env
// added, its temporary files under dir (it is killed before its own
// cleanup runs, so they go under the parent's, which is removed). It
// passes each line the child prints to read, kills the child with SIGKILL
// once read returns true (or the child's output ends), and then passes
// read the lines the child wrote before it died: they count too.
func killChild(t *testing.T, test, env, dir string, read func(line string) bool) {
	t.Helper()
	cmd := childTest(test, env, dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !read(sc.Text()) {
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		read(sc.Text())
	}
	_ = cmd.Wait()
}

func verifyCrashStore(t *testing.T, path string, sid messages.SessionID, acked map[messages.MessageID]bool) {
	t.Helper()
	ctx := context.Background()
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := persistence.Check(st); err != nil {
		t.Fatalf("consistency check after crash: %v", err)
	}
	for id := range acked {
		in, err := st.Input(ctx, id)
		if err != nil {
			t.Fatalf("acknowledged %s lost: %v", id, err)
		}
		if in.SessionID != sid {
			t.Fatalf("row %s in session %s", id, in.SessionID)
		}
	}
	seen := map[messages.MessageID]bool{}
	want := int64(0)
	for item, err := range st.Log(ctx, sid, -1, false) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Event == nil {
			continue
		}
		if item.Event.Durable.Seq != want {
			t.Fatalf("seq %d where %d was expected", item.Event.Durable.Seq, want)
		}
		want++
		if p, ok := item.Event.Data.(*messages.PromptAdmitted); ok {
			if seen[p.InputID] {
				t.Fatalf("input %s admitted twice", p.InputID)
			}
			seen[p.InputID] = true
		}
	}
	rows, err := st.Pending(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(seen) {
		t.Fatalf("%d pending rows for %d admitted events", len(rows), len(seen))
	}
}
