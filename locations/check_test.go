package locations

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/sessiond/sessiond/messages"
)

// TestCheckSharesTheCachedSet: Check hands out the set a Get cached rather
// than building another, and builds one for itself, uncached, for a
// Location no Get holds.
func TestCheckSharesTheCachedSet(t *testing.T) {
	var builds atomic.Int32
	m := NewManager(func(loc messages.Location) (*Services, error) {
		builds.Add(1)
		return &Services{Location: loc}, nil
	})
	run := messages.Location{Directory: t.TempDir()}
	got, err := m.Get(run)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.Check(run); err != nil || s != got || builds.Load() != 1 {
		t.Fatalf("Check of a cached Location: %p, %v after %d builds; want the cached %p, one build", s, err, builds.Load(), got)
	}
	other := messages.Location{Directory: t.TempDir()}
	s1, err1 := m.Check(other)
	s2, err2 := m.Check(other)
	if err1 != nil || err2 != nil || s1 == nil || s1 == s2 || builds.Load() != 3 || m.Cached() != 1 {
		t.Fatalf("Checks of an uncached Location: %p, %p (%v, %v) after %d builds, %d cached; want two sets built, none kept",
			s1, s2, err1, err2, builds.Load(), m.Cached())
	}
}

// TestCheckWaitsForTheBuildInFlight: a Check that finds a Get's build in
// flight waits for it and takes its set; when that build fails, the Check
// builds one of its own rather than returning the Get's error or no set.
func TestCheckWaitsForTheBuildInFlight(t *testing.T) {
	for _, fails := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			release := make(chan struct{})
			var builds atomic.Int32
			m := NewManager(func(loc messages.Location) (*Services, error) {
				if builds.Add(1) == 1 {
					<-release
					if fails {
						return nil, errors.New("stalled mount")
					}
				}
				return &Services{Location: loc}, nil
			})
			loc := messages.Location{Directory: "/work/x"}
			var got *Services
			go func() { got, _ = m.Get(loc) }()
			synctest.Wait() // the Get's build holds
			var checked *Services
			var err error
			go func() { checked, err = m.Check(loc) }()
			synctest.Wait() // the Check waits for it
			if n := builds.Load(); n != 1 {
				t.Fatalf("%d builds while one was in flight, want the Check to wait for it", n)
			}
			close(release)
			synctest.Wait()
			if err != nil || checked == nil {
				t.Fatalf("fails=%v: Check = %p, %v; want a set", fails, checked, err)
			}
			if !fails && (checked != got || builds.Load() != 1) {
				t.Fatalf("Check = %p after %d builds, want the Get's %p", checked, builds.Load(), got)
			}
			if fails && builds.Load() != 2 {
				t.Fatalf("%d builds, want the Check's own after the Get's failed", builds.Load())
			}
		})
	}
}

// TestManagerRefusesNoServices: a Builder that returns no services and no
// error, or no Builder at all, is an internal error for the caller (Get
// and Check alike), not a nil set a runner would stop on without a word.
func TestManagerRefusesNoServices(t *testing.T) {
	loc := messages.Location{Directory: t.TempDir()}
	for name, m := range map[string]*Manager{
		"nil services": NewManager(func(messages.Location) (*Services, error) { return nil, nil }),
		"no builder":   NewManager(nil),
	} {
		if s, err := m.Get(loc); s != nil || messages.TypeOf(err) != messages.ErrInternal {
			t.Errorf("%s: Get = %v, %v; want an internal error", name, s, err)
		}
		if s, err := m.Check(loc); s != nil || messages.TypeOf(err) != messages.ErrInternal {
			t.Errorf("%s: Check = %v, %v; want an internal error", name, s, err)
		}
	}
}
