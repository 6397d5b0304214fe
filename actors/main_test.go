package actors_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/actors"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(mirrorChecked{m}) }

// mirrorChecked fails the run when any boundary a runner served from its
// mirror differed from a read of the store (actors.MirrorChecks).
type mirrorChecked struct{ m *testing.M }

func (c mirrorChecked) Run() int {
	code := c.m.Run()
	if n, diff := actors.MirrorChecks(); diff != "" {
		fmt.Fprintf(os.Stderr, "a boundary served from the mirror (of %d checked) differs from a read:\n%s\n", n, diff)
		return 1
	}
	return code
}
