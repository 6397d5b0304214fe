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
