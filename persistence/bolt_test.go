package persistence_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/persistence/storetest"
)

func TestMain(m *testing.M) {
	// The 1,000,000-event store the read benchmarks share outlives any one
	// benchmark, so it is removed here, before the leak check.
	goleak.VerifyTestMain(cleanupMain{m})
}

// cleanupMain runs the tests, then removes what they shared across tests.
type cleanupMain struct{ m *testing.M }

func (c cleanupMain) Run() int {
	code := c.m.Run()
	if bigPath != "" {
		_ = os.RemoveAll(filepath.Dir(bigPath))
	}
	return code
}

func openBolt(t testing.TB, opts persistence.Options) *persistence.Bolt {
	t.Helper()
	st, err := persistence.Open(filepath.Join(t.TempDir(), "sessiond.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts persistence.Options) persistence.Store {
		return openBolt(t, opts)
	})
}

// TestCreateSessionTitle: the store itself refuses a title over
// MaxTitleBytes or not valid UTF-8, so callers of the Go API are held to
// the limit too, and a refusal writes nothing, not even on reuse of an ID.
func TestCreateSessionTitle(t *testing.T) {
	st := openBolt(t, persistence.Options{NoSync: true})
	ctx := context.Background()
	loc := messages.Location{Directory: "/tmp"}
	if _, _, err := st.CreateSession(ctx, persistence.CreateSession{ID: "ses_kept", Location: loc, Title: "kept"}); err != nil {
		t.Fatal(err)
	}
	for _, req := range []persistence.CreateSession{
		{Location: loc, Title: strings.Repeat("t", persistence.MaxTitleBytes+1)},
		{Location: loc, Title: strings.Repeat("é", persistence.MaxTitleBytes/2) + "t"},
		{Location: loc, Title: "bad \xff byte"},
		{ID: "ses_kept", Location: loc, Title: strings.Repeat("t", persistence.MaxTitleBytes+1)},
	} {
		_, _, err := st.CreateSession(ctx, req)
		if messages.TypeOf(err) != messages.ErrInvalid || !strings.HasPrefix(err.(*messages.Error).Message, "title:") {
			t.Errorf("title of %d bytes: %v", len(req.Title), err)
		}
	}
	list, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Title != "kept" || list[0].LastSeq != 0 {
		t.Fatalf("after refusals: %+v", list)
	}
	s, created, err := st.CreateSession(ctx, persistence.CreateSession{Location: loc, Title: strings.Repeat("t", persistence.MaxTitleBytes)})
	if err != nil || !created || len(s.Title) != persistence.MaxTitleBytes {
		t.Fatalf("a title at the limit: %v created=%v", err, created)
	}
}

// TestCompactionOrphanedByAStoppedProcess: a manual compaction barrier
// whose compaction was running when its process stopped does not absorb a
// request made after the store reopens (no drain will finish it: the next
// one settles it as interrupted), nor one after its events are restored
// into another store; the new barrier then coalesces as usual.
func TestCompactionOrphanedByAStoppedProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessiond.db")
	st, err := persistence.Open(path, persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := st.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: "/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	orphan, _, err := st.AdmitCompaction(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, s.ID, &messages.CompactionStarted{SessionID: s.ID, Reason: messages.CompactionManual, InputID: orphan.ID}); err != nil {
		t.Fatal(err)
	}
	evs := logEvents(t, st, s.ID)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	restored := openBolt(t, persistence.Options{NoSync: true})
	if err := restored.Restore(ctx, evs); err != nil {
		t.Fatal(err)
	}
	reopened, err := persistence.Open(path, persistence.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reopened.Close() })
	for name, st := range map[string]*persistence.Bolt{"reopened": reopened, "restored": restored} {
		in, created, err := st.AdmitCompaction(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !created || in.ID == orphan.ID {
			t.Fatalf("%s: the request joined the orphaned barrier: %+v", name, in)
		}
		// The new barrier has its queued transcript row: the operation that
		// wrote it had first read the orphan's row and left it unchanged.
		if m, err := st.Message(ctx, s.ID, in.ID); err != nil || m.Compaction == nil || m.Compaction.State != persistence.CompactionQueued {
			t.Fatalf("%s: the new barrier's row %+v (%v)", name, m, err)
		}
		again, created, err := st.AdmitCompaction(ctx, s.ID)
		if err != nil || created || again.ID != in.ID {
			t.Fatalf("%s: a second request did not join the new barrier: %+v %v %v", name, again, created, err)
		}
		pend, err := st.Pending(ctx, s.ID)
		if err != nil || len(pend) != 2 || pend[0].ID != orphan.ID || pend[1].ID != in.ID {
			t.Fatalf("%s: pending %+v (%v)", name, pend, err)
		}
	}
}
