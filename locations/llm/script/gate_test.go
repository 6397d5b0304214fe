package script_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// streamResult is what a stream run in the background produced.
type streamResult struct {
	events []llm.Event
	err    error
}

// streamAsync runs one stream in a goroutine owned by wg and delivers its
// result on the returned channel.
func streamAsync(ctx context.Context, wg *sync.WaitGroup, p *script.Provider, req llm.Request) <-chan streamResult {
	out := make(chan streamResult, 1)
	wg.Go(func() {
		evs, err := collect(p.Stream(ctx, req))
		out <- streamResult{evs, err}
	})
	return out
}

func TestGateReachAndRelease(t *testing.T) {
	ctx := ctxT(t)
	g := script.NewGate()
	p := script.New().Reply(script.Text("before"), script.Hold(g), script.Text("after"))

	var wg sync.WaitGroup
	defer wg.Wait()
	done := streamAsync(ctx, &wg, p, userRequest("hi"))
	if err := g.Reached(ctx); err != nil {
		t.Fatal(err)
	}
	if n := g.Arrivals(); n != 1 {
		t.Errorf("arrivals = %d, want 1", n)
	}
	select {
	case r := <-done:
		t.Fatalf("stream finished while held at the gate: %v", describe(r.events))
	default:
	}
	g.Release()
	g.Release() // harmless
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []string{`text-start text_1`, `text-delta text_1 "before"`, `text-end text_1`,
		`text-start text_2`, `text-delta text_2 "after"`, `text-end text_2`, `step-finish stop`}
	if got := describe(r.events); !slices.Equal(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

func TestGateObservedMidStream(t *testing.T) {
	// The consumer sees everything before the gate while the stream is held.
	ctx := ctxT(t)
	g := script.NewGate()
	p := script.New().Reply(script.Text("partial"), script.Hold(g), script.Finish(llm.FinishStop, messages.Tokens{}))
	var kinds []llm.EventKind
	for ev, err := range p.Stream(ctx, userRequest("hi")) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == llm.TextEnd {
			// The next pull blocks at the gate; release it from the side.
			if g.Arrivals() != 0 {
				t.Fatal("gate reached before the consumer pulled past the text")
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := g.Reached(ctx); err == nil {
					g.Release()
				}
			})
			defer wg.Wait()
		}
	}
	want := []llm.EventKind{llm.TextStart, llm.TextDelta, llm.TextEnd, llm.StepFinish}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
}

func TestGateCancelWhileHeld(t *testing.T) {
	ctx := ctxT(t)
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := script.NewGate()
	p := script.New().Reply(script.Text("before"), script.Hold(g), script.Text("never"))

	var wg sync.WaitGroup
	defer wg.Wait()
	done := streamAsync(streamCtx, &wg, p, userRequest("hi"))
	if err := g.Reached(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	r := <-done
	if len(r.events) != 3 {
		t.Errorf("got %d events, want the 3 before the gate", len(r.events))
	}
	e := asLLMError(t, r.err)
	if e.Type != messages.ErrAborted || e.Message != "script: request 1 cancelled: context canceled" {
		t.Errorf("error = %+v, want aborted request 1", *e)
	}
	if e.Retryable() {
		t.Error("an aborted stream must not be retryable")
	}
}

func TestGateReleasedBeforeReached(t *testing.T) {
	g := script.NewGate()
	g.Release()
	p := script.New().Reply(script.Hold(g), script.Text("through"))
	evs, err := collect(p.Stream(ctxT(t), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 {
		t.Errorf("got %v", describe(evs))
	}
	if err := g.Reached(ctxT(t)); err != nil {
		t.Errorf("Reached after a stream passed = %v, want nil", err)
	}
}

func TestGateSharedByManyStreams(t *testing.T) {
	ctx := ctxT(t)
	var g script.Gate // the zero value is ready to use
	p := script.New().Default(script.Hold(&g), script.Text("ok"))
	const n = 8
	var wg sync.WaitGroup
	defer wg.Wait()
	results := make([]<-chan streamResult, n)
	for i := range results {
		results[i] = streamAsync(ctx, &wg, p, userRequest("hi"))
	}
	for i := 1; i <= n; i++ {
		if _, err := p.WaitRequest(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Reached(ctx); err != nil {
		t.Fatal(err)
	}
	g.Release()
	for _, ch := range results {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if got := g.Arrivals(); got != n {
		t.Errorf("arrivals = %d, want %d", got, n)
	}
}

func TestGateReachedHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	err := script.NewGate().Reached(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Reached = %v, want context.Canceled", err)
	}
}

func TestNilGate(t *testing.T) {
	p := script.New().Reply(script.Hold(nil))
	_, err := collect(p.Stream(ctxT(t), userRequest("hi")))
	if e := asLLMError(t, err); e.Type != messages.ErrProviderInvalidRequest || e.Message != "script: request 1: step 0: nil gate" {
		t.Errorf("error = %+v", *e)
	}
}
