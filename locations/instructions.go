package locations

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Namespaced keys of the instruction sources, in the fixed order in which
// NewInstructions combines them. The keys are stored in every checkpoint's
// applied record, so they never change meaning once shipped.
const (
	SourceBuiltin    = "builtin"
	SourceAgents     = "agents"
	SourceSkills     = "skills"
	SourceReferences = "references"
	SourceMCP        = "mcp"
	SourceEntries    = "entries"
)

// ErrInvalidSource is returned by Combine for a nil source or one with an
// empty key.
var ErrInvalidSource = errors.New("locations: invalid instruction source")

// ErrUnobserved is the reason of an unavailable Observation built without
// one.
var ErrUnobserved = errors.New("locations: instruction source not observed")

// DuplicateKeyError is returned by Combine when two sources share a key.
// Positions are zero-based indexes into Combine's arguments.
type DuplicateKeyError struct {
	Key    string
	First  int
	Second int
}

// Error implements error.
func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("locations: duplicate instruction source key %q at positions %d and %d", e.Key, e.First, e.Second)
}

// Source is one producer of privileged instructions.
//
// Key returns the source's namespaced key; it must be constant for the
// source's lifetime. Observe renders the source's current contribution. A
// returned error means the source could not be observed right now (an
// unreadable file, a failing lookup): Load records it as an unavailable
// Observation, exactly as if Observe had returned Unavailable(err).
//
// Concurrency: Load calls Observe of every source concurrently, each from
// its own goroutine, and concurrent Loads may call one source's Observe
// concurrently, so implementations must be safe for concurrent use. Observe
// must return promptly once ctx is done, because Load waits for it.
type Source interface {
	Key() string
	Observe(ctx context.Context) (Observation, error)
}

// Observation is what one source contributed to one Load: either an
// available rendered value, possibly empty when the source currently
// contributes nothing, or unavailable with the reason. The zero Observation
// is available and empty.
type Observation struct {
	value string
	err   error
}

// Available returns an available Observation rendering value.
func Available(value string) Observation { return Observation{value: value} }

// Unavailable returns an Observation of a source that could not be observed
// because of err. A nil err is recorded as ErrUnobserved, so the result is
// always unavailable.
func Unavailable(err error) Observation {
	if err == nil {
		err = ErrUnobserved
	}
	return Observation{err: err}
}

// Available reports whether the source was observed.
func (o Observation) Available() bool { return o.err == nil }

// Value returns the rendered value of an available Observation, and "" for
// an unavailable one.
func (o Observation) Value() string { return o.value }

// Err returns why the source was unavailable, or nil.
func (o Observation) Err() error { return o.err }

// SourceResult is one source's Observation within an Observed, with how
// long observing it took.
type SourceResult struct {
	Key         string
	Observation Observation
	Latency     time.Duration
}

// Observed is the outcome of one Load: one result per source, in the
// combined order. Tests and callers that already hold observations may build
// it directly.
type Observed struct {
	Results []SourceResult
}

// Keys returns the source keys in combined order.
func (o Observed) Keys() []string {
	keys := make([]string, len(o.Results))
	for i, r := range o.Results {
		keys[i] = r.Key
	}
	return keys
}

// Complete reports whether every source was available.
func (o Observed) Complete() bool { return len(o.Unavailable()) == 0 }

// Unavailable returns the keys of the unavailable sources in combined order,
// or nil when the observation is complete.
func (o Observed) Unavailable() []string {
	var keys []string
	for _, r := range o.Results {
		if !r.Observation.Available() {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// Lookup returns the Observation of key and whether key was observed at all.
func (o Observed) Lookup(key string) (Observation, bool) {
	for _, r := range o.Results {
		if r.Key == key {
			return r.Observation, true
		}
	}
	return Observation{}, false
}

// Merge returns the applied record this observation implies given the
// previously applied record prev: the value of every available source, and
// for an unavailable source its value in prev when it had one. Keys of prev
// that this observation does not name are dropped. prev is not modified.
func (o Observed) Merge(prev map[string]string) map[string]string {
	applied := make(map[string]string, len(o.Results))
	for _, r := range o.Results {
		if r.Observation.Available() {
			applied[r.Key] = r.Observation.Value()
		} else if v, ok := prev[r.Key]; ok {
			applied[r.Key] = v
		}
	}
	return applied
}

// Instructions is an ordered combination of sources with unique keys. It is
// immutable and safe for concurrent use.
type Instructions struct {
	sources []Source
	keys    []string
}

// Combine returns the combination of sources in the given order. It fails
// with ErrInvalidSource for a nil source or an empty key, and with a
// *DuplicateKeyError when two sources share a key.
func Combine(sources ...Source) (*Instructions, error) {
	in := &Instructions{sources: make([]Source, len(sources)), keys: make([]string, len(sources))}
	seen := make(map[string]int, len(sources))
	for i, s := range sources {
		if s == nil {
			return nil, fmt.Errorf("%w: nil source at position %d", ErrInvalidSource, i)
		}
		k := s.Key()
		if k == "" {
			return nil, fmt.Errorf("%w: empty key at position %d", ErrInvalidSource, i)
		}
		if j, ok := seen[k]; ok {
			return nil, &DuplicateKeyError{Key: k, First: j, Second: i}
		}
		seen[k] = i
		in.sources[i], in.keys[i] = s, k
	}
	return in, nil
}

// Keys returns the source keys in combined order.
func (in *Instructions) Keys() []string { return append([]string(nil), in.keys...) }

// Load observes every source concurrently, each in its own goroutine, and
// returns when all have returned. Results follow the combined order. A
// source that returns an error or panics is recorded as unavailable. When
// ctx is already done no source is called and every source is unavailable
// with ctx's error; a cancellation during the Load reaches each source
// through ctx.
func (in *Instructions) Load(ctx context.Context) Observed {
	results := make([]SourceResult, len(in.sources))
	if err := ctx.Err(); err != nil {
		for i, k := range in.keys {
			results[i] = SourceResult{Key: k, Observation: Unavailable(err)}
		}
		return Observed{Results: results}
	}
	var wg sync.WaitGroup
	for i, s := range in.sources {
		// Each goroutine writes only its own slot; wg.Wait orders the writes
		// before the return.
		wg.Go(func() { results[i] = observeSource(ctx, in.keys[i], s) })
	}
	wg.Wait()
	return Observed{Results: results}
}

// observeSource observes one source, turning an error or a panic into an
// unavailable Observation.
func observeSource(ctx context.Context, key string, s Source) (r SourceResult) {
	r.Key = key
	// Latency feeds metrics only, never a decision, so it reads the wall
	// clock directly instead of an injected one.
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			r.Observation = Unavailable(fmt.Errorf("locations: instruction source %q panicked: %v", key, p))
		}
		r.Latency = time.Since(start)
	}()
	o, err := s.Observe(ctx)
	if err != nil {
		o = Unavailable(err)
	}
	r.Observation = o
	return r
}

// staticInstructionSource is the Source StaticSource returns.
type staticInstructionSource struct {
	key, value string
}

// StaticSource returns a source that is always available with value. The
// skill, reference and MCP guidance slots use it with an empty value until
// they have producers.
func StaticSource(key, value string) Source { return staticInstructionSource{key: key, value: value} }

// Key implements Source.
func (s staticInstructionSource) Key() string { return s.key }

// Observe implements Source.
func (s staticInstructionSource) Observe(context.Context) (Observation, error) {
	return Available(s.value), nil
}
