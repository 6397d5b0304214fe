package persistence_test

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/persistence"
)

const modelCrashEnv = "SESSIOND_MODEL_CRASH_CHILD"

var modelCrashRounds = flag.Int("modelcrash.rounds", 3, "TestStoreModelCrash: kill a child this many times (seeds modelcrash.seed, +1, ...)")
var modelCrashSeed = flag.Uint64("modelcrash.seed", 7, "TestStoreModelCrash: first seed")

// modelStart is the clock of a model run; every run of a seed starts there.
var modelStart = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

// TestStoreModelCrashChild is the child half of TestStoreModelCrash: with
// fsync on, it runs the model's random operations of one seed, printing
// "begin N" before operation N and "ack N" once it returned, until the
// parent kills it. It does nothing in a normal test run.
func TestStoreModelCrashChild(t *testing.T) {
	env := os.Getenv(modelCrashEnv)
	if env == "" {
		return
	}
	path, seedText, _ := strings.Cut(env, ",")
	seed, err := strconv.ParseUint(seedText, 10, 64)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	m := modelRun(t, path, seed, false)
	m.fail = func(msg string) {
		fmt.Fprintln(out, "error", msg)
		out.Flush()
		os.Exit(2)
	}
	m.create()
	for m.op = 0; ; m.op++ {
		fmt.Fprintln(out, "begin", m.op)
		out.Flush()
		m.do()
		fmt.Fprintln(out, "ack", m.op)
		out.Flush()
	}
}

// modelRun opens a store at path for one model worker whose IDs and times
// depend on seed alone, so that two runs of a seed make the same
// operations with the same answers.
func modelRun(t *testing.T, path string, seed uint64, noSync bool) *model {
	ms := &modelStore{t: t, path: path, noSync: noSync, ids: &seed}
	ms.now.Store(modelStart.UnixMilli())
	failFlushes(t, seed)
	ms.open()
	return newWorker(ms, 0, seed)
}

// TestStoreModelCrash kills a child running the store model (fsync on)
// with SIGKILL at a random operation, reopens its store, and checks it
// against the model of the same seed run again in this process up to the
// last acknowledged operation, or the one after it when the child had
// begun it: every acknowledged operation survived whole, with its
// projections, and an operation in flight either did or left no trace.
func TestStoreModelCrash(t *testing.T) {
	for r := range *modelCrashRounds {
		seed := *modelCrashSeed + uint64(r)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { crashModel(t, seed) })
	}
}

func crashModel(t *testing.T, seed uint64) {
	dir := t.TempDir()
	path := filepath.Join(dir, "crash.db")
	// Kill somewhere in the first few hundred operations: the log flushes
	// every 4 KB, so kills land before, during and after flushes.
	killAt := 20 + rand.New(rand.NewPCG(seed, 99)).IntN(400)
	acked, begun := -1, -1
	killChild(t, "TestStoreModelCrashChild", modelCrashEnv+"="+path+","+strconv.FormatUint(seed, 10), dir, func(line string) bool {
		verb, n, _ := strings.Cut(line, " ")
		i, _ := strconv.Atoi(n)
		switch verb {
		case "ack":
			acked = i
		case "begin":
			begun = i
		default:
			t.Errorf("child: %s", line)
		}
		return acked >= killAt
	})
	if t.Failed() || acked < killAt {
		t.Fatalf("child stopped after %d acknowledged operations", acked+1)
	}
	st, err := persistence.Open(path, persistence.Options{})
	if err != nil {
		t.Fatalf("reopen after the kill: %v", err)
	}
	defer st.Close()
	if err := persistence.Check(st); err != nil {
		t.Fatalf("consistency check after the kill: %v", err)
	}
	// The store holds operations 0..acked, and maybe the one begun after.
	var failures []string
	for _, n := range []int{acked + 1, begun + 1} {
		if msg := matchModel(t, filepath.Join(dir, fmt.Sprint("replay", n, ".db")), seed, n, st); msg == "" {
			t.Logf("killed after %d acknowledged operations; the store holds %d", acked+1, n)
			return
		} else {
			failures = append(failures, fmt.Sprintf("after %d operations: %s", n, msg))
		}
		if begun == acked {
			break
		}
	}
	t.Fatalf("the store after the kill matches no model run:\n%s", strings.Join(failures, "\n"))
}

// matchModel runs the model of seed for n operations on a store of its own
// at path, then checks the store st against it, returning the first
// difference ("" when none).
func matchModel(t *testing.T, path string, seed uint64, n int, st *persistence.Bolt) (msg string) {
	m := modelRun(t, path, seed, true)
	defer func() { _ = m.st.Close() }()
	m.create()
	for m.op = 0; m.op < n; m.op++ {
		m.do()
	}
	if t.Failed() {
		t.FailNow()
	}
	replayed := m.st
	m.st = st
	defer func() {
		m.st = replayed
		if r := recover(); r != nil {
			if f, ok := r.(modelMismatch); ok {
				msg = string(f)
				return
			}
			panic(r)
		}
	}()
	m.fail = func(s string) { panic(modelMismatch(s)) }
	for _, ms := range m.sessions {
		ms.stale = ms.running != "" // the store was reopened
	}
	m.checkAll()
	return ""
}

// modelMismatch carries a failed check out of matchModel.
type modelMismatch string
