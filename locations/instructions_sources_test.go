package locations

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// instrTree creates a canonical temporary directory holding files (relative
// path to content; a trailing "/" makes a directory) and returns it.
func instrTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if strings.HasSuffix(rel, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func instrSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// instrSection renders one discovered file as InstructionDiscovery does.
func instrSection(path, text string) string { return "Instructions from " + path + ":\n" + text }

func TestInstructionDiscovery(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		// setup runs after the files exist and may add symlinks.
		setup func(t *testing.T, root string)
		// discovery builds the source from the tree's root.
		discovery func(root string) InstructionDiscovery
		// want returns the expected value, or wantErr a substring of the error.
		want    func(root string) string
		wantErr string
	}{
		{
			name:  "global only",
			files: map[string]string{"cfg/sessiond/AGENTS.md": "be global\n\n", "proj/.git/": ""},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "proj"), ConfigHome: filepath.Join(root, "cfg")}
			},
			want: func(root string) string {
				return instrSection(filepath.Join(root, "cfg/sessiond/AGENTS.md"), "be global")
			},
		},
		{
			name:  "global falls back to the home directory",
			files: map[string]string{"home/.config/sessiond/AGENTS.md": "from home", "proj/.git/": ""},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "proj"), ConfigHome: "relative/ignored", Home: filepath.Join(root, "home")}
			},
			want: func(root string) string {
				return instrSection(filepath.Join(root, "home/.config/sessiond/AGENTS.md"), "from home")
			},
		},
		{
			name: "global then project files outermost first",
			files: map[string]string{
				"cfg/sessiond/AGENTS.md": "global",
				"repo/.git/":             "",
				"repo/AGENTS.md":         "root",
				"repo/a/AGENTS.md":       "middle",
				"repo/a/b/AGENTS.md":     "inner",
			},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "repo/a/b"), ConfigHome: filepath.Join(root, "cfg")}
			},
			want: func(root string) string {
				return strings.Join([]string{
					instrSection(filepath.Join(root, "cfg/sessiond/AGENTS.md"), "global"),
					instrSection(filepath.Join(root, "repo/AGENTS.md"), "root"),
					instrSection(filepath.Join(root, "repo/a/AGENTS.md"), "middle"),
					instrSection(filepath.Join(root, "repo/a/b/AGENTS.md"), "inner"),
				}, "\n\n")
			},
		},
		{
			name: "stops at the nearest .git root",
			files: map[string]string{
				"outer/.git/":           "",
				"outer/AGENTS.md":       "outside the project",
				"outer/repo/.git":       "gitdir: elsewhere", // a worktree's .git file also marks a root
				"outer/repo/AGENTS.md":  "project",
				"outer/repo/sub/x.txt":  "",
				"outer/repo/sub/y/z.md": "",
			},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "outer/repo/sub")}
			},
			want: func(root string) string {
				return instrSection(filepath.Join(root, "outer/repo/AGENTS.md"), "project")
			},
		},
		{
			name:  "without .git the directory is its own root",
			files: map[string]string{"AGENTS.md": "above", "dir/AGENTS.md": "here"},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "dir")}
			},
			want: func(root string) string { return instrSection(filepath.Join(root, "dir/AGENTS.md"), "here") },
		},
		{
			name:  "symlinked directory is canonicalized",
			files: map[string]string{"real/.git/": "", "real/AGENTS.md": "root", "real/sub/AGENTS.md": "sub"},
			setup: func(t *testing.T, root string) {
				instrSymlink(t, filepath.Join(root, "real/sub"), filepath.Join(root, "link"))
			},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "link")}
			},
			want: func(root string) string {
				return instrSection(filepath.Join(root, "real/AGENTS.md"), "root") + "\n\n" +
					instrSection(filepath.Join(root, "real/sub/AGENTS.md"), "sub")
			},
		},
		{
			name:  "symlinked file within the root is read",
			files: map[string]string{"repo/.git/": "", "repo/CLAUDE.md": "shared"},
			setup: func(t *testing.T, root string) {
				instrSymlink(t, "CLAUDE.md", filepath.Join(root, "repo/AGENTS.md"))
			},
			discovery: func(root string) InstructionDiscovery { return InstructionDiscovery{Dir: filepath.Join(root, "repo")} },
			want:      func(root string) string { return instrSection(filepath.Join(root, "repo/AGENTS.md"), "shared") },
		},
		{
			name:  "disable flag keeps only the global file",
			files: map[string]string{"cfg/sessiond/AGENTS.md": "global", "repo/.git/": "", "repo/AGENTS.md": "project"},
			discovery: func(root string) InstructionDiscovery {
				env := map[string]string{EnvConfigHome: filepath.Join(root, "cfg"), EnvDisableProjectConfig: "1"}
				return NewInstructionDiscovery(filepath.Join(root, "repo"), func(k string) string { return env[k] }, "")
			},
			want: func(root string) string { return instrSection(filepath.Join(root, "cfg/sessiond/AGENTS.md"), "global") },
		},
		{
			name:  "SEED's name for the disable flag works too",
			files: map[string]string{"cfg/sessiond/AGENTS.md": "global", "repo/.git/": "", "repo/AGENTS.md": "project"},
			discovery: func(root string) InstructionDiscovery {
				env := map[string]string{EnvConfigHome: filepath.Join(root, "cfg"), EnvDisableProjectConfigSEED: "1"}
				return NewInstructionDiscovery(filepath.Join(root, "repo"), func(k string) string { return env[k] }, "")
			},
			want: func(root string) string { return instrSection(filepath.Join(root, "cfg/sessiond/AGENTS.md"), "global") },
		},
		{
			name:  "environment read through getenv",
			files: map[string]string{"cfg/sessiond/AGENTS.md": "global", "repo/.git/": "", "repo/AGENTS.md": "project"},
			discovery: func(root string) InstructionDiscovery {
				env := map[string]string{EnvConfigHome: filepath.Join(root, "cfg"), EnvDisableProjectConfig: "0"}
				return NewInstructionDiscovery(filepath.Join(root, "repo"), func(k string) string { return env[k] }, "")
			},
			want: func(root string) string {
				return instrSection(filepath.Join(root, "cfg/sessiond/AGENTS.md"), "global") + "\n\n" +
					instrSection(filepath.Join(root, "repo/AGENTS.md"), "project")
			},
		},
		{
			name:  "blank files and the same file twice contribute once or not at all",
			files: map[string]string{"cfg/sessiond/.git/": "", "cfg/sessiond/AGENTS.md": "once", "cfg/sessiond/sub/AGENTS.md": " \n\t\n"},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "cfg/sessiond/sub"), ConfigHome: filepath.Join(root, "cfg")}
			},
			want: func(root string) string { return instrSection(filepath.Join(root, "cfg/sessiond/AGENTS.md"), "once") },
		},
		{
			name:  "nothing found is available and empty",
			files: map[string]string{"repo/.git/": ""},
			discovery: func(root string) InstructionDiscovery {
				return NewInstructionDiscovery(filepath.Join(root, "repo"), nil, "")
			},
			want: func(string) string { return "" },
		},
		{
			name:      "AGENTS.md that is a directory is unavailable",
			files:     map[string]string{"repo/.git/": "", "repo/AGENTS.md/": ""},
			discovery: func(root string) InstructionDiscovery { return InstructionDiscovery{Dir: filepath.Join(root, "repo")} },
			wantErr:   "read ",
		},
		{
			name:  "dangling AGENTS.md symlink is unavailable",
			files: map[string]string{"repo/.git/": ""},
			setup: func(t *testing.T, root string) {
				instrSymlink(t, "missing.md", filepath.Join(root, "repo/AGENTS.md"))
			},
			discovery: func(root string) InstructionDiscovery { return InstructionDiscovery{Dir: filepath.Join(root, "repo")} },
			wantErr:   "resolve ",
		},
		{
			name:  "dangling global symlink is unavailable",
			files: map[string]string{"cfg/sessiond/": "", "repo/.git/": ""},
			setup: func(t *testing.T, root string) {
				instrSymlink(t, "gone.md", filepath.Join(root, "cfg/sessiond/AGENTS.md"))
			},
			discovery: func(root string) InstructionDiscovery {
				return InstructionDiscovery{Dir: filepath.Join(root, "repo"), ConfigHome: filepath.Join(root, "cfg"), DisableProject: true}
			},
			wantErr: "resolve ",
		},
		{
			name:  "project symlink escaping the root is unavailable",
			files: map[string]string{"secret.txt": "do not read", "repo/.git/": ""},
			setup: func(t *testing.T, root string) {
				instrSymlink(t, filepath.Join(root, "secret.txt"), filepath.Join(root, "repo/AGENTS.md"))
			},
			discovery: func(root string) InstructionDiscovery { return InstructionDiscovery{Dir: filepath.Join(root, "repo")} },
			wantErr:   "outside project root",
		},
		{
			name:      "missing Location directory is unavailable",
			discovery: func(root string) InstructionDiscovery { return InstructionDiscovery{Dir: filepath.Join(root, "nope")} },
			wantErr:   "resolve ",
		},
		{
			name:      "empty Location directory is unavailable",
			discovery: func(string) InstructionDiscovery { return InstructionDiscovery{} },
			wantErr:   "no Location directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := instrTree(t, tt.files)
			if tt.setup != nil {
				tt.setup(t, root)
			}
			d := tt.discovery(root)
			if d.Key() != SourceAgents {
				t.Fatalf("key = %q", d.Key())
			}
			o, err := d.Observe(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q (value %q)", err, tt.wantErr, o.Value())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(root); !o.Available() || o.Value() != want {
				t.Fatalf("value = %q\nwant    %q", o.Value(), want)
			}
		})
	}
}

func TestInstructionDiscoveryHonoursContext(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": "", "repo/AGENTS.md": "x"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := InstructionDiscovery{Dir: filepath.Join(root, "repo")}.Observe(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestInstructionDiscoveryReadsOnlyRegularFiles checks that an AGENTS.md
// that is not a regular file (a named pipe, whose read would block the
// step boundary beyond cancellation) or is too large makes the source
// unavailable instead of hanging or flooding every request.
func TestInstructionDiscoveryReadsOnlyRegularFiles(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": "", "big/.git/": ""})
	if err := syscall.Mkfifo(filepath.Join(root, "repo", "AGENTS.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "big", "AGENTS.md"), make([]byte, maxInstructionFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{"repo": "not a regular file", "big": "more than the"} {
		_, err := InstructionDiscovery{Dir: filepath.Join(root, dir)}.Observe(context.Background())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", dir, err)
		}
	}
}

// TestInstructionDiscoveryIsText: a file in another encoding is observed
// as UTF-8 text (invalid bytes replaced), since events store text.
func TestInstructionDiscoveryIsText(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": "", "repo/AGENTS.md": "caf\xe9 rules"})
	obs, err := InstructionDiscovery{Dir: filepath.Join(root, "repo")}.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v := obs.Value(); !utf8.ValidString(v) || !strings.Contains(v, "caf\uFFFD rules") {
		t.Fatalf("observed %q", v)
	}
}

func TestInstructionDiscoveryGlobalPath(t *testing.T) {
	tests := []struct {
		name string
		d    InstructionDiscovery
		want string
	}{
		{name: "config home", d: InstructionDiscovery{ConfigHome: "/cfg", Home: "/home/u"}, want: "/cfg/sessiond/AGENTS.md"},
		{name: "relative config home ignored", d: InstructionDiscovery{ConfigHome: "cfg", Home: "/home/u"}, want: "/home/u/.config/sessiond/AGENTS.md"},
		{name: "home fallback", d: InstructionDiscovery{Home: "/home/u"}, want: "/home/u/.config/sessiond/AGENTS.md"},
		{name: "none", d: InstructionDiscovery{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.GlobalPath(); got != filepath.FromSlash(tt.want) {
				t.Fatalf("GlobalPath = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestInstructionBuiltins(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": "", "repo/sub/": "", "plain/": ""})
	// 23:30 on the 1st in UTC is already the 2nd at UTC+2: the date is
	// taken in Zone.
	now := time.Date(2026, 5, 1, 23, 30, 0, 0, time.UTC)
	plus2 := time.FixedZone("UTC+2", 2*60*60)
	tests := []struct {
		name    string
		b       InstructionBuiltins
		want    string
		wantErr bool
	}{
		{
			name: "git repository",
			b:    InstructionBuiltins{Dir: filepath.Join(root, "repo/sub"), GOOS: "linux", GOARCH: "amd64", Zone: time.UTC, Clock: func() time.Time { return now }},
			want: "Environment:\n- Working directory: " + filepath.Join(root, "repo/sub") +
				"\n- Platform: linux/amd64\n- Git repository: yes\n- Today's date: Friday, 2026-05-01",
		},
		{
			name: "plain directory in another zone",
			b:    InstructionBuiltins{Dir: filepath.Join(root, "plain") + "/", GOOS: "darwin", GOARCH: "arm64", Zone: plus2, Clock: func() time.Time { return now }},
			want: "Environment:\n- Working directory: " + filepath.Join(root, "plain") +
				"\n- Platform: darwin/arm64\n- Git repository: no\n- Today's date: Saturday, 2026-05-02",
		},
		{name: "missing directory", b: InstructionBuiltins{Dir: filepath.Join(root, "nope")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := tt.b.Observe(context.Background())
			if tt.wantErr {
				if err == nil {
					t.Fatalf("value %q, want an error", o.Value())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Value() != tt.want {
				t.Fatalf("value = %q\nwant    %q", o.Value(), tt.want)
			}
		})
	}
}

func TestInstructionEntries(t *testing.T) {
	boom := errors.New("store closed")
	tests := []struct {
		name    string
		lookup  func(context.Context) (map[string]string, error)
		want    string
		wantErr error
	}{
		{name: "nil lookup"},
		{name: "no entries", lookup: func(context.Context) (map[string]string, error) { return nil, nil }},
		{
			name: "sorted by key, blanks skipped",
			lookup: func(context.Context) (map[string]string, error) {
				return map[string]string{"zeta": "last\n", "alpha": "first", "blank": "  "}, nil
			},
			want: "Instruction entry \"alpha\":\nfirst\n\nInstruction entry \"zeta\":\nlast",
		},
		{name: "lookup failure", lookup: func(context.Context) (map[string]string, error) { return nil, boom }, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := InstructionEntries{Lookup: tt.lookup}
			if e.Key() != SourceEntries {
				t.Fatalf("key = %q", e.Key())
			}
			o, err := e.Observe(context.Background())
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (!o.Available() || o.Value() != tt.want) {
				t.Fatalf("value = %q, want %q", o.Value(), tt.want)
			}
		})
	}
}

func TestNewInstructionsConfig(t *testing.T) {
	tests := []struct {
		name     string
		cfg      InstructionsConfig
		wantKeys []string
		wantErr  error
	}{
		{
			name:     "fixed order",
			cfg:      InstructionsConfig{Dir: "/somewhere"},
			wantKeys: []string{SourceBuiltin, SourceAgents, SourceSkills, SourceReferences, SourceMCP, SourceEntries},
		},
		{
			name:     "slot filled by its own key",
			cfg:      InstructionsConfig{Dir: "/somewhere", MCP: StaticSource(SourceMCP, "use the tools")},
			wantKeys: []string{SourceBuiltin, SourceAgents, SourceSkills, SourceReferences, SourceMCP, SourceEntries},
		},
		{name: "relative directory", cfg: InstructionsConfig{Dir: "rel"}, wantErr: ErrInvalidInstructionsConfig},
		{name: "no directory", cfg: InstructionsConfig{}, wantErr: ErrInvalidInstructionsConfig},
		{name: "slot with a foreign key", cfg: InstructionsConfig{Dir: "/x", Skills: StaticSource("other", "")}, wantErr: ErrInvalidInstructionsConfig},
		{name: "slot with another slot's key", cfg: InstructionsConfig{Dir: "/x", Skills: StaticSource(SourceMCP, "")}, wantErr: ErrInvalidInstructionsConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := NewInstructions(tt.cfg)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && !slices.Equal(in.Keys(), tt.wantKeys) {
				t.Fatalf("keys = %v, want %v", in.Keys(), tt.wantKeys)
			}
		})
	}
}

// TestInstructionsLifecycle drives the real sources through Load and
// Reconcile the way the runner does, committing each decision into the
// checkpoint: initialize, no-op, AGENTS.md edit, entry added, date rollover,
// unreadable file, partial removal, and a move reset that reinitializes.
func TestInstructionsLifecycle(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": "", "repo/AGENTS.md": "v1"})
	dir := filepath.Join(root, "repo")
	agents := filepath.Join(dir, "AGENTS.md")
	now := time.Date(2026, 7, 4, 10, 0, 0, 0, time.UTC)
	entries := map[string]string{}
	in, err := NewInstructions(InstructionsConfig{
		Dir: dir, GOOS: "linux", GOARCH: "amd64", Zone: time.UTC,
		Clock:   func() time.Time { return now },
		Entries: func(context.Context) (map[string]string, error) { return entries, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	var cp *persistence.Checkpoint
	step := func(wantKind DecisionKind, wantUpdate string, wantIn ...string) Decision {
		t.Helper()
		d := Reconcile(cp, in.Load(context.Background()))
		if d.Kind != wantKind || d.UpdateKind != wantUpdate {
			t.Fatalf("decision = %v/%q, want %v/%q (text %q)", d.Kind, d.UpdateKind, wantKind, wantUpdate, d.Text)
		}
		for _, s := range wantIn {
			if !strings.Contains(d.Text, s) {
				t.Fatalf("text %q lacks %q", d.Text, s)
			}
		}
		switch p := d.Payload("ses_lifecycle").(type) {
		case *messages.InstructionsBaselined:
			cp = &persistence.Checkpoint{Baseline: p.Text, Applied: p.Applied}
		case *messages.InstructionsUpdated:
			cp.Applied = p.Applied
		}
		return d
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(agents, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	step(DecisionBaseline, "", "Today's date: Saturday, 2026-07-04", "Instructions from "+agents+":\nv1")
	now = now.Add(time.Hour)
	step(DecisionNoop, "")
	write("v2")
	step(DecisionUpdate, messages.InstructionsUpdate, "Instructions from "+agents+":\nv2")
	entries["style"] = "be terse"
	step(DecisionUpdate, messages.InstructionsUpdate, "Instruction entry \"style\":\nbe terse")
	now = now.Add(24 * time.Hour)
	d := step(DecisionUpdate, messages.InstructionsUpdate, "Today's date: Sunday, 2026-07-05")
	if strings.Contains(d.Text, "v2") {
		t.Fatalf("date rollover restated unchanged sources: %q", d.Text)
	}

	// An unreadable AGENTS.md keeps the applied value: no update, no removal.
	if err := os.Remove(agents); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	if d := step(DecisionNoop, ""); !slices.Equal(d.Unavailable, []string{SourceAgents}) {
		t.Fatalf("unavailable = %v", d.Unavailable)
	}
	// Confirmed removal restates what remains and supersedes the rest.
	if err := os.Remove(agents); err != nil {
		t.Fatal(err)
	}
	d = step(DecisionUpdate, messages.InstructionsRemoval, supersedeIntro, "Today's date", "be terse")
	if strings.Contains(d.Text, "v2") {
		t.Fatalf("removal restated the removed file: %q", d.Text)
	}

	// A move or committed revert resets the checkpoint; an unavailable
	// source then blocks until a complete observation reinitializes.
	cp = nil
	if err := os.Mkdir(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	d = step(DecisionBlocked, "")
	if messages.TypeOf(d.Err) != messages.ErrInstructions || !strings.Contains(d.Err.Error(), SourceAgents) {
		t.Fatalf("blocked err = %v", d.Err)
	}
	if err := os.Remove(agents); err != nil {
		t.Fatal(err)
	}
	step(DecisionBaseline, "", "be terse")
	if RenderBaseline(in.Keys(), cp.Applied) != cp.Baseline {
		t.Fatal("RenderBaseline of the applied record differs from the committed baseline")
	}
}
