package persistence_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

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
