package locations

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// TestGlobalUnderARegularFileIsAbsent: a global AGENTS.md path that
// runs through a regular file ($XDG_CONFIG_HOME/sessiond is a file) names
// no file, so the global file is absent and the project files still
// apply; it is not an unreadable file that would block every Session's
// first run for good.
func TestGlobalUnderARegularFileIsAbsent(t *testing.T) {
	root := instrTree(t, map[string]string{"cfg/sessiond": "not a directory", "repo/.git/": "", "repo/AGENTS.md": "project"})
	d := InstructionDiscovery{Dir: filepath.Join(root, "repo"), ConfigHome: filepath.Join(root, "cfg")}
	o, err := d.Observe(context.Background())
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	if want := instrSection(filepath.Join(root, "repo/AGENTS.md"), "project"); !o.Available() || o.Value() != want {
		t.Fatalf("value = %q, want %q", o.Value(), want)
	}
}

// TestCatalogSpecsAreCopies: the catalog is immutable once built, so
// neither the caller's hosted-tool list nor one returned by Provider is
// shared with it.
func TestCatalogSpecsAreCopies(t *testing.T) {
	hosted := []string{"web_search"}
	c, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "a", Type: llm.ProviderAnthropic, HasCredentials: true,
		Models: map[string]llm.ModelSpec{"m": {HostedTools: hosted}}}})
	if err != nil {
		t.Fatal(err)
	}
	hosted[0] = "changed by the caller"
	spec, _ := c.Provider("a")
	if got := spec.Models["m"].HostedTools; !slices.Equal(got, []string{"web_search"}) {
		t.Fatalf("after the caller changed its spec, Provider reports hosted tools %q", got)
	}
	spec.Models["m"].HostedTools[0] = "changed through Provider"
	again, _ := c.Provider("a")
	if got := again.Models["m"].HostedTools; !slices.Equal(got, []string{"web_search"}) {
		t.Fatalf("after a returned spec was changed, Provider reports hosted tools %q", got)
	}
}

// TestManagerSharesOneSetPerKey: two users of one Location key share one
// set, built once, and another workspace gets its own.
func TestManagerSharesOneSetPerKey(t *testing.T) {
	var builds atomic.Int32
	m := NewManager(func(loc messages.Location) (*Services, error) {
		builds.Add(1)
		return &Services{Location: loc}, nil
	})
	here := messages.Location{Directory: "/work/here"}
	a, err := m.Get(here)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Get(here)
	if err != nil || b != a || builds.Load() != 1 {
		t.Fatalf("two Sessions in one directory: %p and %p after %d builds (%v)", a, b, builds.Load(), err)
	}
	other, err := m.Get(messages.Location{Directory: "/work/here", WorkspaceID: "wrk_other"})
	if err != nil || other == a {
		t.Fatalf("another workspace shares the set: %v", err)
	}
}

// TestManagerBuildsLocationsIndependently: a Location whose build
// hangs (a stalled network file system) delays only Gets of that
// Location: another Location's cached set is returned at once, and
// concurrent Gets of the slow one share its single build.
func TestManagerBuildsLocationsIndependently(t *testing.T) {
	slow := messages.Location{Directory: "/mnt/stalled"}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var builds atomic.Int32
	m := NewManager(func(loc messages.Location) (*Services, error) {
		if loc == slow {
			builds.Add(1)
			close(entered) // a second build of slow panics here
			<-release
		}
		return &Services{Location: loc}, nil
	})
	fast := messages.Location{Directory: "/work/fast"}
	cached, err := m.Get(fast)
	if err != nil {
		t.Fatal(err)
	}

	type got struct {
		s   *Services
		err error
	}
	slowGets := make(chan got, 2)
	go func() { s, err := m.Get(slow); slowGets <- got{s, err} }()
	<-entered
	go func() { s, err := m.Get(slow); slowGets <- got{s, err} }()

	fastGet := make(chan got, 1)
	go func() { s, err := m.Get(fast); fastGet <- got{s, err} }()
	select {
	case g := <-fastGet:
		if g.err != nil || g.s != cached {
			t.Fatalf("Get of the cached Location = %p, %v; want %p", g.s, g.err, cached)
		}
	case <-time.After(10 * time.Second): // a watchdog, not synchronisation
		t.Fatal("Get of a cached Location waits for another Location's build")
	}

	once.Do(func() { close(release) })
	g1, g2 := <-slowGets, <-slowGets
	if g1.err != nil || g2.err != nil || g1.s == nil || g1.s != g2.s || builds.Load() != 1 {
		t.Fatalf("concurrent Gets of one Location: %p %v, %p %v after %d builds", g1.s, g1.err, g2.s, g2.err, builds.Load())
	}
	runtime.KeepAlive(cached)
}

// TestProjectLinkToTheGlobalFile: a project AGENTS.md that links to
// the global AGENTS.md resolves outside the project root, but the file is
// already part of the instructions as the global file: it is read once,
// and the link does not make the source unavailable (which would block
// every first run in that project for good).
func TestProjectLinkToTheGlobalFile(t *testing.T) {
	root := instrTree(t, map[string]string{"cfg/sessiond/AGENTS.md": "shared rules", "repo/.git/": "", "repo/sub/AGENTS.md": "sub"})
	global := filepath.Join(root, "cfg/sessiond/AGENTS.md")
	instrSymlink(t, global, filepath.Join(root, "repo/AGENTS.md"))
	d := InstructionDiscovery{Dir: filepath.Join(root, "repo/sub"), ConfigHome: filepath.Join(root, "cfg")}
	o, err := d.Observe(context.Background())
	if err != nil {
		t.Fatalf("observe: %v", err)
	}
	want := instrSection(global, "shared rules") + "\n\n" + instrSection(filepath.Join(root, "repo/sub/AGENTS.md"), "sub")
	if !o.Available() || o.Value() != want {
		t.Fatalf("value = %q\nwant    %q", o.Value(), want)
	}
	// Without the global file the link is an escape, as before.
	d.ConfigHome = filepath.Join(root, "elsewhere")
	if _, err := d.Observe(context.Background()); err == nil || !strings.Contains(err.Error(), "outside project root") {
		t.Fatalf("escape without the global file: %v", err)
	}
}
