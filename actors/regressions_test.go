package actors_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// selectAfterWatermark commits a model selection, as another writer
// would, right after the runner's next Watermark read once armed.
type selectAfterWatermark struct {
	persistence.Store
	armed, fired atomic.Bool
}

func (s *selectAfterWatermark) Watermark(ctx context.Context, sid messages.SessionID) (int64, error) {
	w, err := s.Store.Watermark(ctx, sid)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		if _, aerr := s.Store.Append(ctx, sid, &messages.ModelSelected{SessionID: sid,
			Model: messages.ModelRef{ProviderID: "script", ID: "other"}}); aerr == nil {
			s.fired.Store(true)
		}
	}
	return w, err
}

// TestMirrorCheckAfterAnOutsideCommit (found by TestSoak, seed 1035): a
// boundary served from the runner's mirror is what a read at the watermark
// it was served at returns. A selection or admission another writer
// commits after that watermark is read, and before the package's tests
// check the mirror against a second read, is not a difference: that read
// is of a later log. The check recorded it as one, failing every test of
// the package at exit (TestMain) for a correct mirror.
func TestMirrorCheckAfterAnOutsideCommit(t *testing.T) {
	if _, diff := actors.MirrorChecks(); diff != "" {
		t.Fatalf("an earlier test recorded a mirror difference, so this one cannot tell:\n%s", diff)
	}
	h, st := withStore(t, func(s persistence.Store) *selectAfterWatermark { return &selectAfterWatermark{Store: s} })
	h.Tools.Add("arm", func(context.Context, locations.ToolCall) (string, error) {
		st.armed.Store(true) // the next boundary, after this step, is served from the mirror
		return "armed", nil
	})
	h.Model.Reply(script.ToolCall("c1", "arm", `{}`))
	h.Model.Default(script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	h.WaitIdle(sid)
	if !st.fired.Load() {
		t.Fatalf("the outside commit never happened: %v", h.Types(sid))
	}
	if _, diff := actors.MirrorChecks(); diff != "" {
		t.Fatalf("a correct mirror was reported as different:\n%s", diff)
	}
	h.CheckReplay()
}

// TestWaitDeadlineIsTheContexts (found by TestSoak, seeds 1 and 40032): a
// Wait (or Interrupt) whose context's deadline passes while the Session is
// busy fails with the context's error, and gives the command up without a
// data race. The command's future was bounded by the same deadline, and
// whichever timer fired first decided:
//   - the future's: the caller got "actors: *messages.Wait: future:
//     timeout", of type unknown, instead of context.DeadlineExceeded;
//   - the context's: request abandoned the future by sending it a message,
//     which protoactor's future writes to its result without a lock, while
//     the helper goroutine read the result its timer had just completed
//     (-race reports it in a few hundred iterations).
func TestWaitDeadlineIsTheContexts(t *testing.T) {
	h := actortest.New(t)
	g := script.NewGate()
	h.Model.Reply(script.Hold(g), script.Text("done"))
	sid := h.Session()
	h.Prompt(sid, "go")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		err := h.Runtime.Wait(ctx, sid)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait %d past its deadline: %v, want %v", i, err, context.DeadlineExceeded)
		}
	}
	g.Release()
	h.WaitIdle(sid)
}

// TestWaitsGivenUpAsTheyAreAnswered: Waits on an idle Session whose
// deadlines pass about when the answer comes, so that replies race the
// caller giving up. A protoactor future written by a late reply while the
// caller read it was a data race (-race reports it); every Wait must
// answer nil or the context's error.
func TestWaitsGivenUpAsTheyAreAnswered(t *testing.T) {
	h := actortest.New(t)
	sid := h.Session()
	for i := range 3000 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%60)*time.Microsecond)
		err := h.Runtime.Wait(ctx, sid)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
}
