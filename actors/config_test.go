package actors

import (
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/persistence"
)

// TestConfigDefaults pins the defaults Config documents for the waits it
// leaves at zero, and that a set value is kept. None of them changes what
// a test can see, only how long something waits on the wall clock.
func TestConfigDefaults(t *testing.T) {
	store, mgr := struct{ persistence.Store }{}, &locations.Manager{}
	c := Config{Store: store, Locations: mgr}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	set := Config{Store: store, Locations: mgr, IdleTimeout: time.Second, CommandTimeout: 2 * time.Second,
		LiveHold: 3 * time.Second, ToolGrace: 4 * time.Second}
	if err := set.validate(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name           string
		got, want      time.Duration
		gotSet, wanted time.Duration
	}{
		{"IdleTimeout", c.IdleTimeout, 2 * time.Minute, set.IdleTimeout, time.Second},
		{"CommandTimeout", c.CommandTimeout, 30 * time.Second, set.CommandTimeout, 2 * time.Second},
		{"LiveHold", c.LiveHold, 5 * time.Millisecond, set.LiveHold, 3 * time.Second},
		{"ToolGrace", c.ToolGrace, 10 * time.Second, set.ToolGrace, 4 * time.Second},
	} {
		if w.got != w.want || w.gotSet != w.wanted {
			t.Errorf("%s: default %v, want %v; set %v, want %v", w.name, w.got, w.want, w.gotSet, w.wanted)
		}
	}
	if c.Clock == nil || c.IDs == nil || c.Bus == nil {
		t.Errorf("a Config without them got clock %v, IDs %v, bus %v", c.Clock, c.IDs, c.Bus)
	}
}
