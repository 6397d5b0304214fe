package tools

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: bash
// runs copy and wait goroutines, and Pending parks askers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
