package locations

import (
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// Tests in this file pin behaviour that mutation testing found unchecked.

func TestObservedOneUnavailableIsIncomplete(t *testing.T) {
	obs := instrObserved(instrAvail(SourceBuiltin, "b"), instrUnavail(SourceAgents, "unreadable"))
	if obs.Complete() {
		t.Fatal("an observation with one unavailable source reports complete")
	}
	if !instrObserved(instrAvail(SourceBuiltin, "b")).Complete() {
		t.Fatal("an observation of available sources reports incomplete")
	}
}

func TestInstructionsKeysIsACopy(t *testing.T) {
	in, err := Combine(StaticSource("a", ""), StaticSource("b", ""))
	if err != nil {
		t.Fatal(err)
	}
	in.Keys()[0] = "changed"
	if got := in.Keys(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after a caller changed a returned slice, Keys = %v", got)
	}
}

// TestLoadReportsLatency: a result's Latency covers the source's Observe.
func TestLoadReportsLatency(t *testing.T) {
	var took atomic.Int64
	slow := instrFuncSource{key: "slow", observe: func(context.Context) (Observation, error) {
		// Wait until the monotonic clock has visibly advanced.
		start := time.Now()
		for time.Since(start) <= 0 {
			runtime.Gosched()
		}
		took.Store(int64(time.Since(start)))
		return Available("v"), nil
	}}
	in, err := Combine(slow)
	if err != nil {
		t.Fatal(err)
	}
	r := in.Load(context.Background()).Results[0]
	if r.Latency < time.Duration(took.Load()) || r.Latency <= 0 {
		t.Fatalf("latency %v, but Observe took %v", r.Latency, time.Duration(took.Load()))
	}
}

func TestDecisionPayloadOwnsItsApplied(t *testing.T) {
	for _, d := range []Decision{
		{Kind: DecisionBaseline, Text: "t", Applied: map[string]string{"k": "v"}},
		{Kind: DecisionUpdate, Text: "t", UpdateKind: messages.InstructionsUpdate, Applied: map[string]string{"k": "v"}},
	} {
		var applied map[string]string
		switch p := d.Payload("ses_1").(type) {
		case *messages.InstructionsBaselined:
			applied = p.Applied
		case *messages.InstructionsUpdated:
			applied = p.Applied
		default:
			t.Fatalf("%s: payload %T", d.Kind, p)
		}
		applied["k"] = "changed"
		if d.Applied["k"] != "v" {
			t.Fatalf("%s: changing the payload changed the decision's applied record", d.Kind)
		}
	}
}

// TestReconcileTextThatLooksLikeAHeader: only the first line of a block
// that ends with ":" names a section, so dropping a paragraph or a line of
// one file's text that merely starts like a header is an update, not a
// removal that would restate every instruction.
func TestReconcileTextThatLooksLikeAHeader(t *testing.T) {
	header := instrSection("/p/AGENTS.md", "rule")
	for name, prev := range map[string]string{
		"paragraph without a colon":  header + "\n\nInstructions from the lead apply too",
		"line inside a block":        header + "\nInstructions from the lead:",
		"entry-like line in a block": header + "\nInstruction entry \"x\":",
	} {
		t.Run(name, func(t *testing.T) {
			cp := instrCheckpoint(map[string]string{SourceAgents: prev})
			d := Reconcile(cp, instrObserved(instrAvail(SourceAgents, header)))
			if d.Kind != DecisionUpdate || d.UpdateKind != messages.InstructionsUpdate {
				t.Fatalf("decision %s %q, want an update", d.Kind, d.UpdateKind)
			}
		})
	}
}

// TestInstructionBuiltinsDefaultZoneIsLocal: with no Zone the date is the
// host's local one.
func TestInstructionBuiltinsDefaultZoneIsLocal(t *testing.T) {
	old := time.Local
	t.Cleanup(func() { time.Local = old })
	time.Local = time.FixedZone("UTC+14", 14*60*60)
	dir := instrTree(t, nil)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) // already the 2nd at UTC+14
	o, err := InstructionBuiltins{Dir: dir, Clock: func() time.Time { return now }}.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(o.Value(), "Today's date: Friday, 2026-01-02") {
		t.Fatalf("value %q, want the date at UTC+14", o.Value())
	}
}

// TestInstructionBuiltinsReportTheGivenDirectory: the working directory is
// reported as configured, not with its symlinks resolved.
func TestInstructionBuiltinsReportTheGivenDirectory(t *testing.T) {
	root := instrTree(t, map[string]string{"real/": ""})
	link := filepath.Join(root, "link")
	instrSymlink(t, filepath.Join(root, "real"), link)
	o, err := InstructionBuiltins{Dir: link}.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(o.Value(), "- Working directory: "+link+"\n") {
		t.Fatalf("value %q, want working directory %s", o.Value(), link)
	}
}

// TestUnstatableGitMarkerIsUnavailable: when whether the Location is in a
// git repository cannot be told (here its ".git" cannot be named because
// the path is too long), the built-ins are unavailable rather than
// reporting "no".
func TestUnstatableGitMarkerIsUnavailable(t *testing.T) {
	// Grow the deepest directory the system can name, so that naming an
	// entry inside it fails.
	dir := instrTree(t, nil)
	for {
		next := filepath.Join(dir, strings.Repeat("d", 200))
		if os.Mkdir(next, 0o755) != nil {
			break
		}
		dir = next
	}
	for n := 199; n > 0; n-- {
		if next := filepath.Join(dir, strings.Repeat("e", n)); os.Mkdir(next, 0o755) == nil {
			dir = next
			break
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("precondition: stat of the marker = %v, want a failure other than absence", err)
	}
	if o, err := (InstructionBuiltins{Dir: dir}).Observe(context.Background()); err == nil {
		t.Fatalf("value %q, want an error", o.Value())
	}
}

// TestNewInstructionsPassesItsConfig: every field of the config reaches the
// source that uses it.
func TestNewInstructionsPassesItsConfig(t *testing.T) {
	root := instrTree(t, map[string]string{"home/.config/sessiond/AGENTS.md": "from home", "repo/.git/": ""})
	now := time.Date(2026, 5, 1, 23, 30, 0, 0, time.UTC)
	in, err := NewInstructions(InstructionsConfig{
		Dir: filepath.Join(root, "repo"), Home: filepath.Join(root, "home"),
		GOOS: "plan9", GOARCH: "mips", Zone: time.FixedZone("UTC+2", 2*60*60), Clock: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	obs := in.Load(context.Background())
	builtin, _ := obs.Lookup(SourceBuiltin)
	for _, want := range []string{"- Platform: plan9/mips\n", "- Today's date: Saturday, 2026-05-02"} {
		if !strings.Contains(builtin.Value(), want) {
			t.Errorf("built-ins %q lack %q", builtin.Value(), want)
		}
	}
	for _, slot := range []string{SourceSkills, SourceReferences, SourceMCP} {
		if o, ok := obs.Lookup(slot); !ok || !o.Available() || o.Value() != "" {
			t.Errorf("unfilled %s slot: %v %q %v, want available and empty", slot, ok, o.Value(), o.Err())
		}
	}
	agents, _ := obs.Lookup(SourceAgents)
	if want := instrSection(filepath.Join(root, "home/.config/sessiond/AGENTS.md"), "from home"); agents.Value() != want {
		t.Errorf("discovery %q, want %q", agents.Value(), want)
	}
}

// TestDiscoveryEnvironment: either name of the switch turns project files
// off, and XDG_CONFIG_HOME locates the global file. The names are spelled
// out, not taken from the constants: they are the contract (SEED.md names
// OPENCODE_DISABLE_PROJECT_CONFIG), and a renamed constant must fail here.
func TestDiscoveryEnvironment(t *testing.T) {
	for _, name := range []string{"SESSIOND_DISABLE_PROJECT_CONFIG", "OPENCODE_DISABLE_PROJECT_CONFIG"} {
		d := NewInstructionDiscovery("/x", func(k string) string {
			if k == name {
				return "1"
			}
			return ""
		}, "")
		if !d.DisableProject {
			t.Errorf("%s=1 leaves project files on", name)
		}
	}
	if d := NewInstructionDiscovery("/x", nil, ""); d.DisableProject {
		t.Error("project files off without a switch")
	}
}

// TestDiscoveryBlankFile: a file of white space only (any Unicode white
// space) contributes nothing.
func TestDiscoveryBlankFile(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": "", "repo/AGENTS.md": "\v\f\u00a0\n"})
	o, err := InstructionDiscovery{Dir: filepath.Join(root, "repo")}.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !o.Available() || o.Value() != "" {
		t.Fatalf("value %q, want nothing", o.Value())
	}
}

// TestDiscoveryFileSizeLimit: a file of exactly maxInstructionFile bytes is
// read; one byte more makes the source unavailable.
func TestDiscoveryFileSizeLimit(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": ""})
	dir := filepath.Join(root, "repo")
	agents := filepath.Join(dir, "AGENTS.md")
	text := strings.Repeat("x", maxInstructionFile)
	if err := os.WriteFile(agents, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := InstructionDiscovery{Dir: dir}.Observe(context.Background())
	if err != nil || o.Value() != instrSection(agents, text) {
		t.Fatalf("file at the limit: %d bytes, %v", len(o.Value()), err)
	}
	if err := os.WriteFile(agents, []byte(text+"x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (InstructionDiscovery{Dir: dir}).Observe(context.Background()); err == nil {
		t.Fatal("file over the limit is read")
	}
}

// TestDiscoveryLinkToTheRootsParent: a project AGENTS.md linking to the
// directory just above the project root escapes the root.
func TestDiscoveryLinkToTheRootsParent(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": ""})
	dir := filepath.Join(root, "repo")
	instrSymlink(t, root, filepath.Join(dir, "AGENTS.md"))
	_, err := InstructionDiscovery{Dir: dir}.Observe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "outside project root") {
		t.Fatalf("err = %v, want an escape", err)
	}
}

func TestServicesAgent(t *testing.T) {
	s := &Services{Agents: map[string]Agent{
		DefaultAgent: {Prompt: "build things", Steps: 7},
		"plan":       {Prompt: "plan things"},
	}}
	tests := []struct {
		name string
		want Agent
	}{
		{"", Agent{Name: DefaultAgent, Prompt: "build things", Steps: 7}},
		{"plan", Agent{Name: "plan", Prompt: "plan things", Steps: DefaultSteps}},
		{"unknown", Agent{Name: "unknown", Steps: DefaultSteps}},
	}
	for _, tt := range tests {
		if got := s.Agent(tt.name); got != tt.want {
			t.Errorf("Agent(%q) = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// mutProvider is an llm.Provider that streams nothing.
type mutProvider struct{ name string }

func (mutProvider) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(func(llm.Event, error) bool) {}
}

func TestServicesModel(t *testing.T) {
	cat, err := llm.NewCatalog([]llm.ProviderSpec{
		{ID: "script", Type: llm.ProviderScript, Models: map[string]llm.ModelSpec{"session": {}, "agent": {}, "default": {}}},
		{ID: "orphan", Type: llm.ProviderScript},
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mutProvider{name: "script"}
	s := &Services{Catalog: cat, DefaultModel: messages.ModelRef{ProviderID: "script", ID: "default"},
		Provider: func(id string) (llm.Provider, error) {
			if id == "script" {
				return client, nil
			}
			return nil, messages.Errorf(messages.ErrModelNotFound, "provider %q has no client", id)
		}}
	ref := func(id string) messages.ModelRef { return messages.ModelRef{ProviderID: "script", ID: id} }
	for _, tt := range []struct {
		session, agent messages.ModelRef
		want           string
	}{
		{ref("session"), ref("agent"), "session"},
		{messages.ModelRef{}, ref("agent"), "agent"},
		{messages.ModelRef{}, messages.ModelRef{}, "default"},
	} {
		m, p, err := s.Model(tt.session, Agent{Model: tt.agent})
		if err != nil || m.Ref != ref(tt.want) || p != client {
			t.Errorf("Model(%v, %v) = %v, %v, %v; want %s", tt.session, tt.agent, m.Ref, p, err, tt.want)
		}
	}
	if _, _, err := s.Model(ref("unknown"), Agent{}); messages.TypeOf(err) != messages.ErrModelNotFound {
		t.Errorf("unknown model: %v", err)
	}
	if _, _, err := s.Model(messages.ModelRef{ProviderID: "orphan", ID: "m"}, Agent{}); messages.TypeOf(err) != messages.ErrModelNotFound {
		t.Errorf("provider without a client: %v", err)
	}
}

// mutWaitForWaiter returns once some goroutine waits in Manager.Get for
// another Get's build.
func mutWaitForWaiter(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a watchdog, not synchronisation
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "[chan receive") && strings.Contains(g, "(*Manager).Get(") && !strings.Contains(g, "(*Manager).fill(") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no Get waits for the build")
		}
		runtime.Gosched()
	}
}

// heldFirstBuild returns a Manager whose first build waits, once entered
// is closed, until release is closed and then ends as end does (an error,
// or a panic); later builds succeed. builds counts the builds.
func heldFirstBuild(end func() error) (m *Manager, entered, release chan struct{}, builds *atomic.Int32) {
	entered, release, builds = make(chan struct{}), make(chan struct{}), new(atomic.Int32)
	m = NewManager(func(loc messages.Location) (*Services, error) {
		if builds.Add(1) == 1 {
			close(entered)
			<-release
			return nil, end()
		}
		return &Services{Location: loc}, nil
	})
	return m, entered, release, builds
}

// TestManagerSharesAFailedBuild: a Get waiting for a build that fails gets
// its error rather than starting a build of its own, and the failure is not
// cached: a later Get builds anew.
func TestManagerSharesAFailedBuild(t *testing.T) {
	m, entered, release, builds := heldFirstBuild(func() error { return errors.New("directory vanished") })
	loc := messages.Location{Directory: "/work/flaky"}
	first := make(chan error, 1)
	go func() { _, err := m.Get(loc); first <- err }()
	<-entered
	second := make(chan error, 1)
	go func() { _, err := m.Get(loc); second <- err }()
	mutWaitForWaiter(t)
	close(release)
	if err1, err2 := <-first, <-second; err1 == nil || err2 == nil || builds.Load() != 1 {
		t.Fatalf("Gets sharing a failed build: %v, %v after %d builds", err1, err2, builds.Load())
	}
	if s, err := m.Get(loc); err != nil || s == nil || builds.Load() != 2 {
		t.Fatalf("Get after a failed build: %v, %v after %d builds", s, err, builds.Load())
	}
}

// TestManagerRebuildsAfterAPanic: a Get waiting for a build that panics
// builds the set itself.
func TestManagerRebuildsAfterAPanic(t *testing.T) {
	m, entered, release, builds := heldFirstBuild(func() error { panic("build bug") })
	loc := messages.Location{Directory: "/work/buggy"}
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = m.Get(loc)
	}()
	<-entered
	type got struct {
		s   *Services
		err error
	}
	second := make(chan got, 1)
	go func() { s, err := m.Get(loc); second <- got{s, err} }()
	mutWaitForWaiter(t)
	close(release)
	if p := <-panicked; p == nil {
		t.Fatal("the panicking build's Get returned")
	}
	if g := <-second; g.err != nil || g.s == nil || builds.Load() != 2 {
		t.Fatalf("Get waiting for a panicked build: %v, %v after %d builds", g.s, g.err, builds.Load())
	}
}

// TestManagerForget: Forget drops the cached set only when it is the
// given one.
func TestManagerForget(t *testing.T) {
	var builds atomic.Int32
	m := NewManager(func(loc messages.Location) (*Services, error) {
		builds.Add(1)
		return &Services{Location: loc}, nil
	})
	loc := messages.Location{Directory: "/work/here"}
	a, err := m.Get(loc)
	if err != nil {
		t.Fatal(err)
	}
	m.Forget(loc.Key(), &Services{})
	m.Forget(loc.Key(), nil)
	if b, _ := m.Get(loc); b != a || builds.Load() != 1 {
		t.Fatalf("Forget of another set dropped the cached one (%d builds)", builds.Load())
	}
	m.Forget(loc.Key(), a)
	if b, _ := m.Get(loc); b == a || builds.Load() != 2 {
		t.Fatalf("Forget of the cached set kept it (%d builds)", builds.Load())
	}
}

func TestNewBuilder(t *testing.T) {
	root := instrTree(t, map[string]string{"allowed/loc/": "", "elsewhere/": "", "allowed/file": "x"})
	allowed := filepath.Join(root, "allowed")
	loc := filepath.Join(allowed, "loc")
	link := filepath.Join(root, "link")
	instrSymlink(t, loc, link)
	client := mutProvider{name: "script"}
	build := NewBuilder(BuildConfig{
		Providers:    map[string]llm.Provider{"script": client},
		Roots:        []string{allowed},
		Instructions: &InstructionsConfig{Home: "/home/someone"},
		Builtins:     tools.BuiltinConfig{Read: tools.DefaultReadConfig(), Bash: tools.DefaultBashConfig(), ApplyPatch: tools.DefaultApplyPatchConfig()},
	})
	svc, err := build(messages.Location{Directory: link})
	if err != nil {
		t.Fatal(err)
	}
	if ic := svc.Instructions; ic == nil || ic.Dir != loc || ic.Home != "/home/someone" {
		t.Fatalf("instructions config %+v, want Dir %s and the template's Home", ic, loc)
	}
	if p, err := svc.Provider("script"); err != nil || p != client {
		t.Fatalf("Provider(script) = %v, %v", p, err)
	}
	if _, err := svc.Provider("nope"); messages.TypeOf(err) != messages.ErrModelNotFound {
		t.Fatalf("Provider(nope) = %v", err)
	}
	for dir, want := range map[string]messages.ErrorType{
		filepath.Join(allowed, "file"):   messages.ErrInvalid,
		filepath.Join(root, "missing"):   messages.ErrInvalid,
		filepath.Join(root, "elsewhere"): messages.ErrForbidden,
		root:                             messages.ErrForbidden,
	} {
		if _, err := build(messages.Location{Directory: dir}); messages.TypeOf(err) != want {
			t.Errorf("build %s: %v, want %s", dir, err, want)
		}
	}
}

func TestAllowed(t *testing.T) {
	root := instrTree(t, map[string]string{"allowed/loc/": "", "allowedish/": ""})
	allowed := filepath.Join(root, "allowed")
	link := filepath.Join(root, "link")
	instrSymlink(t, allowed, link)
	tests := []struct {
		roots []string
		dir   string
		want  bool
	}{
		{nil, "/anywhere", true},
		{[]string{allowed}, allowed, true},
		{[]string{allowed}, filepath.Join(allowed, "loc"), true},
		{[]string{link}, filepath.Join(allowed, "loc"), true},
		{[]string{filepath.Join(allowed, "loc")}, allowed, false},
		{[]string{allowed}, filepath.Join(root, "allowedish"), false},
		{[]string{allowed}, root, false},
	}
	for _, tt := range tests {
		if got := Allowed(tt.roots, tt.dir); got != tt.want {
			t.Errorf("Allowed(%v, %s) = %v, want %v", tt.roots, tt.dir, got, tt.want)
		}
	}
}

// TestReconcileDroppedEmptyKey: a key the combination no longer names
// changes nothing the model saw when its applied value was empty.
func TestReconcileDroppedEmptyKey(t *testing.T) {
	cp := instrCheckpoint(map[string]string{SourceBuiltin: "b", "retired": ""})
	if d := Reconcile(cp, instrObserved(instrAvail(SourceBuiltin, "b"))); d.Kind != DecisionNoop {
		t.Fatalf("decision %s %q, want a no-op", d.Kind, d.Text)
	}
}

// TestInstructionEntriesSortedByKey: many entries render in key order,
// whatever the map's iteration order.
func TestInstructionEntriesSortedByKey(t *testing.T) {
	entries := map[string]string{}
	var want []string
	for c := 'a'; c <= 'z'; c++ {
		k := string(c)
		entries[k] = "text " + k
		want = append(want, "Instruction entry \""+k+"\":\ntext "+k)
	}
	o, err := InstructionEntries{Lookup: func(context.Context) (map[string]string, error) { return entries, nil }}.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Value(); got != strings.Join(want, "\n\n") {
		t.Fatalf("value %q", got)
	}
}

// TestManagerKeepsTheBuildErrorsType: a typed build failure (a forbidden
// directory) keeps its type through Get, so the API maps it to its status.
func TestManagerKeepsTheBuildErrorsType(t *testing.T) {
	m := NewManager(func(loc messages.Location) (*Services, error) {
		return nil, messages.Errorf(messages.ErrForbidden, "outside the roots")
	})
	if _, err := m.Get(messages.Location{Directory: "/etc"}); messages.TypeOf(err) != messages.ErrForbidden {
		t.Fatalf("Get = %v, want a forbidden error", err)
	}
}

// TestReconcileBaselineFollowsCombinedOrder: the baseline renders sources
// in the order they were combined, not by key.
func TestReconcileBaselineFollowsCombinedOrder(t *testing.T) {
	d := Reconcile(nil, instrObserved(instrAvail("zeta", "Z"), instrAvail("alpha", "A")))
	if d.Kind != DecisionBaseline || d.Text != "Z\n\nA" {
		t.Fatalf("decision %s %q, want baseline %q", d.Kind, d.Text, "Z\n\nA")
	}
}
