package locations

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// instrAvail and instrUnavail build one source result for table tests.
func instrAvail(key, value string) SourceResult {
	return SourceResult{Key: key, Observation: Available(value)}
}

func instrUnavail(key, reason string) SourceResult {
	return SourceResult{Key: key, Observation: Unavailable(errors.New(reason))}
}

func instrObserved(results ...SourceResult) Observed { return Observed{Results: results} }

func instrCheckpoint(applied map[string]string) *persistence.Checkpoint {
	return &persistence.Checkpoint{Baseline: "earlier", BaselineSeq: 3, Applied: applied}
}

// instrBuiltinsAt observes the built-ins of dir at now with a fixed
// platform and zone, as the runner's injected clock would.
func instrBuiltinsAt(t *testing.T, dir string, now time.Time) SourceResult {
	t.Helper()
	b := InstructionBuiltins{Dir: dir, GOOS: "linux", GOARCH: "arm64", Zone: time.UTC, Clock: func() time.Time { return now }}
	o, err := b.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return SourceResult{Key: b.Key(), Observation: o}
}

func TestReconcile(t *testing.T) {
	dir := t.TempDir()
	day1 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	day1Later := day1.Add(14 * time.Hour)
	day2 := day1.Add(15*time.Hour + time.Minute)
	builtinDay1 := instrBuiltinsAt(t, dir, day1)
	builtinDay2 := instrBuiltinsAt(t, dir, day2)

	tests := []struct {
		name            string
		cp              *persistence.Checkpoint
		obs             Observed
		wantKind        DecisionKind
		wantText        string
		wantUpdateKind  string
		wantApplied     map[string]string
		wantUnavailable []string
		wantErrIn       []string // substrings of a blocked Decision's error
	}{
		{
			name:        "initialize from complete observation",
			obs:         instrObserved(instrAvail("builtin", "B"), instrAvail("agents", ""), instrAvail("entries", "E")),
			wantKind:    DecisionBaseline,
			wantText:    "B\n\nE",
			wantApplied: map[string]string{"builtin": "B", "agents": "", "entries": "E"},
		},
		{
			name:        "initialize with nothing to say",
			obs:         instrObserved(instrAvail("builtin", ""), instrAvail("agents", "")),
			wantKind:    DecisionBaseline,
			wantApplied: map[string]string{"builtin": "", "agents": ""},
		},
		{
			name:            "blocked on initial unavailable",
			obs:             instrObserved(instrAvail("builtin", "B"), instrUnavail("agents", "read AGENTS.md: is a directory"), instrUnavail("entries", "store closed")),
			wantKind:        DecisionBlocked,
			wantUnavailable: []string{"agents", "entries"},
			wantErrIn:       []string{"agents (read AGENTS.md: is a directory)", "entries (store closed)"},
		},
		{
			name:     "no-op when unchanged",
			cp:       instrCheckpoint(map[string]string{"builtin": "B", "agents": "A", "entries": ""}),
			obs:      instrObserved(instrAvail("builtin", "B"), instrAvail("agents", "A"), instrAvail("entries", "")),
			wantKind: DecisionNoop,
		},
		{
			name:     "no-op when an empty source was never applied",
			cp:       instrCheckpoint(map[string]string{"builtin": "B"}),
			obs:      instrObserved(instrAvail("builtin", "B"), instrAvail("mcp", "")),
			wantKind: DecisionNoop,
		},
		{
			name:            "no-op when unavailable preserves the applied value",
			cp:              instrCheckpoint(map[string]string{"builtin": "B", "agents": "A"}),
			obs:             instrObserved(instrAvail("builtin", "B"), instrUnavail("agents", "denied")),
			wantKind:        DecisionNoop,
			wantUnavailable: []string{"agents"},
		},
		{
			name:           "update of a changed source",
			cp:             instrCheckpoint(map[string]string{"builtin": "B", "agents": "A", "entries": "E"}),
			obs:            instrObserved(instrAvail("builtin", "B"), instrAvail("agents", "A"), instrAvail("entries", "E2")),
			wantKind:       DecisionUpdate,
			wantUpdateKind: messages.InstructionsUpdate,
			wantText:       updateIntro + "\n\nUpdated \"entries\" instructions:\nE2",
			wantApplied:    map[string]string{"builtin": "B", "agents": "A", "entries": "E2"},
		},
		{
			name:           "update of an added source and a changed one in source order",
			cp:             instrCheckpoint(map[string]string{"builtin": "B", "agents": "", "entries": "E"}),
			obs:            instrObserved(instrAvail("builtin", "B"), instrAvail("agents", "A"), instrAvail("entries", "E2")),
			wantKind:       DecisionUpdate,
			wantUpdateKind: messages.InstructionsUpdate,
			wantText:       updateIntro + "\n\nUpdated \"agents\" instructions:\nA\n\nUpdated \"entries\" instructions:\nE2",
			wantApplied:    map[string]string{"builtin": "B", "agents": "A", "entries": "E2"},
		},
		{
			name:            "unavailable preserves previous value within an update",
			cp:              instrCheckpoint(map[string]string{"builtin": "B", "agents": "A", "entries": "E"}),
			obs:             instrObserved(instrAvail("builtin", "B"), instrUnavail("agents", "denied"), instrAvail("entries", "E2")),
			wantKind:        DecisionUpdate,
			wantUpdateKind:  messages.InstructionsUpdate,
			wantText:        updateIntro + "\n\nUpdated \"entries\" instructions:\nE2",
			wantApplied:     map[string]string{"builtin": "B", "agents": "A", "entries": "E2"},
			wantUnavailable: []string{"agents"},
		},
		{
			name:           "partial removal restates the remaining aggregate with supersession",
			cp:             instrCheckpoint(map[string]string{"builtin": "B", "agents": "A", "entries": "E"}),
			obs:            instrObserved(instrAvail("builtin", "B"), instrAvail("agents", ""), instrAvail("entries", "E")),
			wantKind:       DecisionUpdate,
			wantUpdateKind: messages.InstructionsRemoval,
			wantText:       supersedeIntro + "\n\nB\n\nE",
			wantApplied:    map[string]string{"builtin": "B", "agents": "", "entries": "E"},
		},
		{
			name:            "partial removal restates an unavailable source's applied value",
			cp:              instrCheckpoint(map[string]string{"builtin": "B", "agents": "A", "entries": "E"}),
			obs:             instrObserved(instrAvail("builtin", "B"), instrUnavail("agents", "denied"), instrAvail("entries", "")),
			wantKind:        DecisionUpdate,
			wantUpdateKind:  messages.InstructionsRemoval,
			wantText:        supersedeIntro + "\n\nB\n\nA",
			wantApplied:     map[string]string{"builtin": "B", "agents": "A", "entries": ""},
			wantUnavailable: []string{"agents"},
		},
		{
			name:           "removal with a simultaneous change restates everything",
			cp:             instrCheckpoint(map[string]string{"builtin": "B", "agents": "A", "entries": "E"}),
			obs:            instrObserved(instrAvail("builtin", "B2"), instrAvail("agents", "A"), instrAvail("entries", "")),
			wantKind:       DecisionUpdate,
			wantUpdateKind: messages.InstructionsRemoval,
			wantText:       supersedeIntro + "\n\nB2\n\nA",
			wantApplied:    map[string]string{"builtin": "B2", "agents": "A", "entries": ""},
		},
		{
			name:           "final removal revokes",
			cp:             instrCheckpoint(map[string]string{"agents": "A", "entries": "E"}),
			obs:            instrObserved(instrAvail("agents", ""), instrAvail("entries", "")),
			wantKind:       DecisionUpdate,
			wantUpdateKind: messages.InstructionsRemoval,
			wantText:       revocationText,
			wantApplied:    map[string]string{"agents": "", "entries": ""},
		},
		{
			name:           "a source no longer combined is removed",
			cp:             instrCheckpoint(map[string]string{"builtin": "B", "legacy": "L"}),
			obs:            instrObserved(instrAvail("builtin", "B")),
			wantKind:       DecisionUpdate,
			wantUpdateKind: messages.InstructionsRemoval,
			wantText:       supersedeIntro + "\n\nB",
			wantApplied:    map[string]string{"builtin": "B"},
		},
		{
			name:     "same day later is a no-op",
			cp:       instrCheckpoint(map[string]string{"builtin": builtinDay1.Observation.Value(), "entries": "E"}),
			obs:      instrObserved(instrBuiltinsAt(t, dir, day1Later), instrAvail("entries", "E")),
			wantKind: DecisionNoop,
		},
		{
			name:           "date rollover produces one update",
			cp:             instrCheckpoint(map[string]string{"builtin": builtinDay1.Observation.Value(), "entries": "E"}),
			obs:            instrObserved(builtinDay2, instrAvail("entries", "E")),
			wantKind:       DecisionUpdate,
			wantUpdateKind: messages.InstructionsUpdate,
			wantText:       updateIntro + "\n\nUpdated \"builtin\" instructions:\n" + builtinDay2.Observation.Value(),
			wantApplied:    map[string]string{"builtin": builtinDay2.Observation.Value(), "entries": "E"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before map[string]string
			if tt.cp != nil {
				before = maps.Clone(tt.cp.Applied)
			}
			d := Reconcile(tt.cp, tt.obs)
			if d.Kind != tt.wantKind {
				t.Fatalf("kind = %v, want %v", d.Kind, tt.wantKind)
			}
			if d.Text != tt.wantText {
				t.Errorf("text = %q\nwant   %q", d.Text, tt.wantText)
			}
			if d.UpdateKind != tt.wantUpdateKind {
				t.Errorf("update kind = %q, want %q", d.UpdateKind, tt.wantUpdateKind)
			}
			if !maps.Equal(d.Applied, tt.wantApplied) || (d.Applied == nil) != (tt.wantApplied == nil) {
				t.Errorf("applied = %v, want %v", d.Applied, tt.wantApplied)
			}
			if !slices.Equal(d.Unavailable, tt.wantUnavailable) {
				t.Errorf("unavailable = %v, want %v", d.Unavailable, tt.wantUnavailable)
			}
			if tt.wantErrIn == nil {
				if d.Err != nil {
					t.Errorf("err = %v, want nil", d.Err)
				}
			} else {
				var me *messages.Error
				if !errors.As(d.Err, &me) || me.Type != messages.ErrInstructions {
					t.Fatalf("err = %v, want a %s error", d.Err, messages.ErrInstructions)
				}
				for _, s := range tt.wantErrIn {
					if !strings.Contains(me.Message, s) {
						t.Errorf("err %q does not name %q", me.Message, s)
					}
				}
			}
			if tt.cp != nil && !maps.Equal(tt.cp.Applied, before) {
				t.Errorf("Reconcile modified the checkpoint: %v", tt.cp.Applied)
			}
		})
	}
}

func TestRenderBaseline(t *testing.T) {
	tests := []struct {
		name    string
		order   []string
		applied map[string]string
		want    string
	}{
		{name: "empty"},
		{name: "order wins over map", order: []string{"b", "a"}, applied: map[string]string{"a": "A", "b": "B"}, want: "B\n\nA"},
		{name: "empty and missing values skipped", order: []string{"a", "b", "c"}, applied: map[string]string{"a": "A", "b": ""}, want: "A"},
		{name: "keys outside the order ignored", order: []string{"a"}, applied: map[string]string{"a": "A", "z": "Z"}, want: "A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RenderBaseline(tt.order, tt.applied); got != tt.want {
				t.Fatalf("RenderBaseline = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecisionPayload(t *testing.T) {
	const sid = messages.SessionID("ses_1")
	applied := map[string]string{"a": "A"}
	tests := []struct {
		name string
		d    Decision
		want messages.Payload
	}{
		{name: "noop", d: Decision{Kind: DecisionNoop}},
		{name: "blocked", d: Decision{Kind: DecisionBlocked, Err: messages.Errorf(messages.ErrInstructions, "x")}},
		{
			name: "baseline",
			d:    Decision{Kind: DecisionBaseline, Text: "A", Applied: applied},
			want: &messages.InstructionsBaselined{SessionID: sid, Text: "A", Applied: applied},
		},
		{
			name: "update",
			d:    Decision{Kind: DecisionUpdate, Text: "T", UpdateKind: messages.InstructionsRemoval, Applied: applied},
			want: &messages.InstructionsUpdated{SessionID: sid, Text: "T", Kind: messages.InstructionsRemoval, Applied: applied},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.d.Payload(sid)
			switch want := tt.want.(type) {
			case nil:
				if got != nil {
					t.Fatalf("payload = %#v, want nil", got)
				}
			case *messages.InstructionsBaselined:
				g, ok := got.(*messages.InstructionsBaselined)
				if !ok || g.SessionID != want.SessionID || g.Text != want.Text || !maps.Equal(g.Applied, want.Applied) {
					t.Fatalf("payload = %#v, want %#v", got, want)
				}
			case *messages.InstructionsUpdated:
				g, ok := got.(*messages.InstructionsUpdated)
				if !ok || g.SessionID != want.SessionID || g.Text != want.Text || g.Kind != want.Kind || !maps.Equal(g.Applied, want.Applied) {
					t.Fatalf("payload = %#v, want %#v", got, want)
				}
			}
		})
	}
}

func TestDecisionKindString(t *testing.T) {
	for k, want := range map[DecisionKind]string{
		DecisionNoop: "noop", DecisionBaseline: "baseline", DecisionUpdate: "update", DecisionBlocked: "blocked", 9: "DecisionKind(9)",
	} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
}

// TestReconcilePartialRemovalWithinASource checks that removing one
// AGENTS.md of two, or one instruction entry of two, is a confirmed
// removal although the source still contributes: the update restates the
// complete remaining instructions, superseding everything earlier, while
// an edit that keeps every section stays an update of that source.
func TestReconcilePartialRemovalWithinASource(t *testing.T) {
	root := instrTree(t, map[string]string{"repo/.git/": "", "repo/AGENTS.md": "root rule", "repo/sub/AGENTS.md": "never use tabs"})
	sub := filepath.Join(root, "repo", "sub")
	discovery := InstructionDiscovery{Dir: sub}
	observe := func() SourceResult {
		t.Helper()
		o, err := discovery.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return SourceResult{Key: SourceAgents, Observation: o}
	}
	entries := func(m map[string]string) SourceResult {
		t.Helper()
		o, err := InstructionEntries{Lookup: func(context.Context) (map[string]string, error) { return m, nil }}.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return SourceResult{Key: SourceEntries, Observation: o}
	}
	before := instrObserved(observe(), entries(map[string]string{"a": "be brief", "b": "use go"}))
	cp := instrCheckpoint(before.Merge(nil))

	if err := os.Remove(filepath.Join(sub, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	d := Reconcile(cp, instrObserved(observe(), entries(map[string]string{"a": "be brief", "b": "use go"})))
	if d.UpdateKind != messages.InstructionsRemoval || !strings.HasPrefix(d.Text, supersedeIntro) ||
		!strings.Contains(d.Text, "root rule") || !strings.Contains(d.Text, "be brief") || strings.Contains(d.Text, "never use tabs") {
		t.Fatalf("one AGENTS.md of two removed: %s %q", d.UpdateKind, d.Text)
	}

	d = Reconcile(cp, instrObserved(before.Results[0], entries(map[string]string{"a": "be brief"})))
	if d.UpdateKind != messages.InstructionsRemoval || strings.Contains(d.Text, "use go") || !strings.Contains(d.Text, "never use tabs") {
		t.Fatalf("one entry of two removed: %s %q", d.UpdateKind, d.Text)
	}

	d = Reconcile(cp, instrObserved(before.Results[0], entries(map[string]string{"a": "be very brief", "b": "use go"})))
	if d.UpdateKind != messages.InstructionsUpdate || !strings.HasPrefix(d.Text, updateIntro) {
		t.Fatalf("an entry edited: %s %q", d.UpdateKind, d.Text)
	}
}
