package persistence_test

import (
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/persistence/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
