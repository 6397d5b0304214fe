package persistence_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/persistence/storetest"
)

// TestFdatasyncRatesMeasureTheDisk: both raw loops the benchmarks divide
// by or report measure a positive rate in the directory they are given,
// and the busy one stops every goroutine it spun up before it returns.
func TestFdatasyncRatesMeasureTheDisk(t *testing.T) {
	dir := t.TempDir()
	if r := storetest.FdatasyncRate(t, dir, 300); r <= 0 {
		t.Errorf("FdatasyncRate = %v", r)
	}
	if r := storetest.FdatasyncRateBusy(t, dir, 300); r <= 0 {
		t.Errorf("FdatasyncRateBusy = %v", r)
	}
	goleak.VerifyNone(t)
}
