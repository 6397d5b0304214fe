package actortest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
)

// testAgentTurn is what a test of your own would hold, with t the test's
// *testing.T: one agent turn in which the scripted model calls a tool and
// then answers. (An example file cannot hold a Test function, so Example
// below runs it with a stand-in for *testing.T.)
func testAgentTurn(t testing.TB) {
	h := actortest.New(t)

	// A Go-function tool; every Location of the harness offers it.
	h.Tools.Add("weather", func(ctx context.Context, call locations.ToolCall) (string, error) {
		var in struct{ City string }
		if err := json.Unmarshal(call.Input, &in); err != nil {
			return "", err
		}
		return "sunny in " + in.City, nil
	})
	// Script the model before prompting: the first request gets a tool
	// call, the second (which carries the tool's result) a text answer.
	h.Model.
		Reply(script.ToolCall("call_1", "weather", `{"City":"Oslo"}`)).
		Reply(script.Text("It is sunny in Oslo."))

	sid := h.Session()
	h.Prompt(sid, "What is the weather in Oslo?")
	h.WaitIdle(sid)

	// The durable events of the turn, without their ".1" suffix.
	for _, typ := range h.Types(sid) {
		fmt.Println(typ)
	}
	// What the model was sent: the tool it was offered, and the
	// conversation of the second request.
	first := h.Request(1)
	fmt.Println("tools offered:", first.Tools[0].Name)
	for _, m := range h.Request(2).Messages {
		for _, p := range m.Parts {
			switch p.Kind {
			case llm.PartText:
				fmt.Printf("%s: %s\n", m.Role, p.Text)
			case llm.PartToolCall:
				fmt.Printf("%s: call %s %s\n", m.Role, p.Name, p.Input)
			case llm.PartToolResult:
				fmt.Printf("%s: result %s\n", m.Role, p.Output)
			}
		}
	}
	h.CheckReplay() // the projections are what the log makes
}

// Example tests one agent turn: the scripted model calls a tool, and the
// test reads the Session's events and the requests the model received.
func Example() {
	t := &exampleT{}
	defer t.cleanup()
	testAgentTurn(t)
	// Output:
	// session.created
	// session.prompt.admitted
	// session.execution.started
	// session.prompt.promoted
	// session.step.started
	// session.tool.input.started
	// session.tool.input.ended
	// session.tool.called
	// session.tool.success
	// session.step.ended
	// session.step.started
	// session.text.started
	// session.text.ended
	// session.step.ended
	// session.execution.succeeded
	// tools offered: weather
	// user: What is the weather in Oslo?
	// assistant: call weather {"City":"Oslo"}
	// tool: result sunny in Oslo
}

// exampleT stands in for the *testing.T an Example does not get. It
// implements the methods the harness calls; a failure panics.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()                   {}
func (t *exampleT) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (t *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (t *exampleT) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func (t *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "actortest")
	if err != nil {
		panic(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// cleanup runs the registered cleanups last first, as testing does.
func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
