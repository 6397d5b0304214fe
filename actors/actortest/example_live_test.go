package actortest_test

import (
	"fmt"
	"strings"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// Example_liveEvents follows a Session's live events on the runtime's Bus,
// as a user interface streaming a reply would: text deltas, which are
// never stored, between the durable events around them. (exampleT stands
// in for a test's *testing.T; see Example.)
func Example_liveEvents() {
	t := &exampleT{}
	defer t.cleanup()
	h := actortest.New(t)
	h.Model.SetChunkSize(6)
	h.Model.Reply(script.Text("It is sunny in Oslo."))
	sid := h.Session()

	// Subscribe before prompting, or the first events go by unseen. A
	// subscriber that falls more than its buffer behind is cut off.
	sub := h.Runtime.Bus().Subscribe(256, actors.SessionFilter(sid))
	defer sub.Close()
	h.Prompt(sid, "What is the weather in Oslo?")

	var text strings.Builder
	for ev := range sub.C {
		switch d := ev.Data.(type) {
		case *messages.TextDelta:
			fmt.Printf("delta %q\n", d.Delta)
			text.WriteString(d.Delta)
		case *messages.TextEnded:
			fmt.Printf("%s %q\n", ev.Type, d.Text)
		}
		// The busy period's terminal event, whichever it is, ends it.
		if t := ev.Type; t == messages.TypeExecutionSucceeded || t == messages.TypeExecutionFailed || t == messages.TypeExecutionInterrupted {
			break
		}
	}
	fmt.Println("dropped:", sub.Dropped(), "same text:", text.String() == "It is sunny in Oslo.")
	// Output:
	// delta "It is "
	// delta "sunny "
	// delta "in Osl"
	// delta "o."
	// session.text.ended.1 "It is sunny in Oslo."
	// dropped: false same text: true
}
