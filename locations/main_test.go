package locations

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: Load
// observes its sources on goroutines of its own, and the Manager's tests
// call Get from several goroutines at once.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
