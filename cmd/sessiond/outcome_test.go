package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// outcomeRig is a stack with one Session that never ran a prompt, and an
// app whose stderr a test reads.
type outcomeRig struct {
	a      *app
	stderr bytes.Buffer
	st     *stack
	sid    messages.SessionID
}

func newOutcomeRig(t *testing.T) *outcomeRig {
	t.Helper()
	st, err := openStack(testConfig(t, t.TempDir()), zerolog.Nop(), stackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.close(context.Background()) })
	sess, _, err := st.runtime.Create(context.Background(), persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	r := &outcomeRig{st: st, sid: sess.ID}
	r.a = &app{stderr: &r.stderr}
	return r
}

// noEvents is a seq past every event of the rig's Session.
const noEvents = 1 << 40

// TestOutcomeWithoutATerminalEvent: a busy period with no recorded outcome
// is reported by what is known: a signal's exit status when one stopped
// run, the error of waiting when there was one, and otherwise whether
// anything was recorded after the prompt at all.
func TestOutcomeWithoutATerminalEvent(t *testing.T) {
	t.Run("signal", func(t *testing.T) {
		r := newOutcomeRig(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(signalCause{syscall.SIGTERM})
		if code := r.a.outcome(ctx, runCommand, r.st, r.sid, noEvents, errors.New("wait failed")); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d, want %d\nstderr:\n%s", code, 128+int(syscall.SIGTERM), r.stderr.String())
		}
	})
	t.Run("wait error", func(t *testing.T) {
		r := newOutcomeRig(t)
		code := r.a.outcome(context.Background(), runCommand, r.st, r.sid, noEvents, errors.New("wait failed"))
		if errOut := r.stderr.String(); code != exitFailed || errOut != "sessiond run: wait failed\n" {
			t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
		}
	})
	t.Run("events", func(t *testing.T) {
		// From its start the log holds the Session's creation, and nothing
		// that ended a busy period.
		r := newOutcomeRig(t)
		code := r.a.outcome(context.Background(), runCommand, r.st, r.sid, -1, nil)
		if errOut := r.stderr.String(); code != exitFailed || !strings.Contains(errOut, "the busy period ended without a recorded outcome") {
			t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		r := newOutcomeRig(t)
		code := r.a.outcome(context.Background(), runCommand, r.st, r.sid, noEvents, nil)
		if errOut := r.stderr.String(); code != exitFailed || !strings.Contains(errOut, "the prompt did not run and stays pending") {
			t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
		}
	})
}

// TestAgentsOfConvertsTheConfiguredAgents: agentsOf carries each agent's
// prompt, steps, model and permission rules over unchanged, and refuses
// a model or a rule that does not parse, naming the agent's field.
func TestAgentsOfConvertsTheConfiguredAgents(t *testing.T) {
	agents, rules, err := agentsOf(Config{Agents: map[string]AgentConfig{
		"plan": {Prompt: "think first", Steps: 7, Model: "p/m", Permission: []Rule{
			{Permission: "bash", Pattern: "git *", Action: "allow"},
			{Permission: "edit", Pattern: "*.md", Action: "deny"},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := locations.Agent{Name: "plan", Prompt: "think first", Steps: 7, Model: messages.ModelRef{ProviderID: "p", ID: "m"}}
	if agents["plan"] != want {
		t.Errorf("agent %+v, want %+v", agents["plan"], want)
	}
	wantRules := tools.Ruleset{{Permission: "bash", Pattern: "git *", Action: "allow"}, {Permission: "edit", Pattern: "*.md", Action: "deny"}}
	if got := rules["plan"]; len(got) != len(wantRules) || got[0] != wantRules[0] || got[1] != wantRules[1] {
		t.Errorf("rules %+v, want %+v", got, wantRules)
	}

	for _, tt := range []struct {
		name string
		ac   AgentConfig
		want string
	}{
		{"model", AgentConfig{Model: "no-slash"}, "agents.x.model: "},
		{"permission", AgentConfig{Permission: []Rule{{Permission: "bash", Pattern: "*", Action: "maybe"}}}, "agents.x.permission: "},
	} {
		if _, _, err := agentsOf(Config{Agents: map[string]AgentConfig{"x": tt.ac}}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one starting %q", tt.name, err, tt.want)
		}
	}
}
