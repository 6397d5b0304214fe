package locations

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// instrFuncSource is a Source whose Observe is a function, for tests.
type instrFuncSource struct {
	key     string
	observe func(ctx context.Context) (Observation, error)
}

func (s instrFuncSource) Key() string { return s.key }

func (s instrFuncSource) Observe(ctx context.Context) (Observation, error) { return s.observe(ctx) }

var _ Source = instrFuncSource{}

func TestCombine(t *testing.T) {
	a, b, c := StaticSource("a", "A"), StaticSource("b", "B"), StaticSource("c", "C")
	tests := []struct {
		name     string
		sources  []Source
		wantKeys []string
		wantDup  *DuplicateKeyError
		wantErr  error
	}{
		{name: "empty", wantKeys: []string{}},
		{name: "caller order", sources: []Source{c, a, b}, wantKeys: []string{"c", "a", "b"}},
		{name: "duplicate", sources: []Source{a, b, StaticSource("a", "other")}, wantDup: &DuplicateKeyError{Key: "a", First: 0, Second: 2}},
		{name: "nil source", sources: []Source{a, nil}, wantErr: ErrInvalidSource},
		{name: "empty key", sources: []Source{StaticSource("", "x")}, wantErr: ErrInvalidSource},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := Combine(tt.sources...)
			switch {
			case tt.wantDup != nil:
				var dup *DuplicateKeyError
				if !errors.As(err, &dup) || *dup != *tt.wantDup {
					t.Fatalf("err = %v, want %+v", err, tt.wantDup)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if got := in.Keys(); !slices.Equal(got, tt.wantKeys) {
					t.Fatalf("keys = %v, want %v", got, tt.wantKeys)
				}
			}
		})
	}
}

func TestObservation(t *testing.T) {
	tests := []struct {
		name      string
		o         Observation
		available bool
		value     string
		err       error
	}{
		{name: "zero", available: true},
		{name: "available", o: Available("x"), available: true, value: "x"},
		{name: "available empty", o: Available(""), available: true},
		{name: "unavailable", o: Unavailable(context.Canceled), err: context.Canceled},
		{name: "unavailable without reason", o: Unavailable(nil), err: ErrUnobserved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.o.Available() != tt.available || tt.o.Value() != tt.value || !errors.Is(tt.o.Err(), tt.err) || (tt.err == nil) != (tt.o.Err() == nil) {
				t.Fatalf("got (%v, %q, %v), want (%v, %q, %v)", tt.o.Available(), tt.o.Value(), tt.o.Err(), tt.available, tt.value, tt.err)
			}
		})
	}
}

func TestObservedMerge(t *testing.T) {
	obs := Observed{Results: []SourceResult{
		{Key: "a", Observation: Available("new")},
		{Key: "b", Observation: Unavailable(nil)},
		{Key: "c", Observation: Unavailable(nil)},
	}}
	prev := map[string]string{"a": "old", "b": "kept", "gone": "x"}
	got := obs.Merge(prev)
	want := map[string]string{"a": "new", "b": "kept"}
	if !maps.Equal(got, want) {
		t.Fatalf("Merge = %v, want %v", got, want)
	}
	if prev["a"] != "old" {
		t.Fatal("Merge modified prev")
	}
	if !slices.Equal(obs.Unavailable(), []string{"b", "c"}) || obs.Complete() {
		t.Fatalf("Unavailable = %v", obs.Unavailable())
	}
	if o, ok := obs.Lookup("a"); !ok || o.Value() != "new" {
		t.Fatalf("Lookup(a) = %v, %v", o, ok)
	}
	if _, ok := obs.Lookup("zzz"); ok {
		t.Fatal("Lookup of an unknown key succeeded")
	}
}

// TestLoadConcurrent proves Load observes sources concurrently: each source
// waits until the other has started, which a sequential Load could only
// satisfy by timing out.
func TestLoadConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	rendezvous := func(self, other string) Source {
		return instrFuncSource{key: self, observe: func(ctx context.Context) (Observation, error) {
			close(started[self])
			select {
			case <-started[other]:
				return Available(self), nil
			case <-ctx.Done():
				return Observation{}, ctx.Err()
			}
		}}
	}
	in, err := Combine(rendezvous("a", "b"), rendezvous("b", "a"), StaticSource("c", "C"))
	if err != nil {
		t.Fatal(err)
	}
	obs := in.Load(ctx)
	if !slices.Equal(obs.Keys(), []string{"a", "b", "c"}) {
		t.Fatalf("keys = %v", obs.Keys())
	}
	for i, want := range []string{"a", "b", "C"} {
		r := obs.Results[i]
		if !r.Observation.Available() || r.Observation.Value() != want {
			t.Fatalf("result %d = %+v, want available %q", i, r, want)
		}
		if r.Latency < 0 {
			t.Fatalf("result %d latency %v", i, r.Latency)
		}
	}
}

// TestLoadCancel cancels the Load's context from inside one source while
// another waits on it: the waiting source becomes unavailable with the
// cancellation and Load still returns every result.
func TestLoadCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in, err := Combine(
		instrFuncSource{key: "waits", observe: func(ctx context.Context) (Observation, error) {
			<-ctx.Done()
			return Observation{}, ctx.Err()
		}},
		instrFuncSource{key: "cancels", observe: func(context.Context) (Observation, error) {
			cancel()
			return Available("done"), nil
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	obs := in.Load(ctx)
	if o := obs.Results[0].Observation; o.Available() || !errors.Is(o.Err(), context.Canceled) {
		t.Fatalf("waiting source = %+v, want canceled", o)
	}
	if o := obs.Results[1].Observation; !o.Available() || o.Value() != "done" {
		t.Fatalf("cancelling source = %+v", o)
	}
	if d := Reconcile(nil, obs); d.Kind != DecisionBlocked {
		t.Fatalf("Reconcile of a cancelled initial load = %v, want blocked", d.Kind)
	}
}

func TestLoadDoneContextCallsNoSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int32
	counting := func(key string) Source {
		return instrFuncSource{key: key, observe: func(context.Context) (Observation, error) {
			calls.Add(1)
			return Available(key), nil
		}}
	}
	in, err := Combine(counting("a"), counting("b"))
	if err != nil {
		t.Fatal(err)
	}
	obs := in.Load(ctx)
	if calls.Load() != 0 {
		t.Fatalf("%d sources called after cancellation", calls.Load())
	}
	if !slices.Equal(obs.Unavailable(), []string{"a", "b"}) {
		t.Fatalf("unavailable = %v", obs.Unavailable())
	}
	for _, r := range obs.Results {
		if !errors.Is(r.Observation.Err(), context.Canceled) {
			t.Fatalf("%s err = %v", r.Key, r.Observation.Err())
		}
	}
}

func TestLoadErrorAndPanicAreUnavailable(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	in, err := Combine(
		instrFuncSource{key: "fails", observe: func(context.Context) (Observation, error) {
			return Available("ignored"), boom
		}},
		instrFuncSource{key: "panics", observe: func(context.Context) (Observation, error) { panic("kaput") }},
		instrFuncSource{key: "declines", observe: func(context.Context) (Observation, error) {
			return Unavailable(boom), nil
		}},
		StaticSource("ok", "fine"),
	)
	if err != nil {
		t.Fatal(err)
	}
	obs := in.Load(context.Background())
	if o := obs.Results[0].Observation; o.Available() || !errors.Is(o.Err(), boom) || o.Value() != "" {
		t.Fatalf("failing source = %+v", o)
	}
	if o := obs.Results[1].Observation; o.Available() || !strings.Contains(o.Err().Error(), `"panics" panicked: kaput`) {
		t.Fatalf("panicking source = %+v", o)
	}
	if o := obs.Results[2].Observation; o.Available() || !errors.Is(o.Err(), boom) {
		t.Fatalf("declining source = %+v", o)
	}
	if o := obs.Results[3].Observation; !o.Available() || o.Value() != "fine" {
		t.Fatalf("static source = %+v", o)
	}
}
