package script

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
)

// played is the outcome of playing one response.
type played struct {
	events []llm.Event
	err    error
}

// playAll plays every response of p and its default, with delays removed so
// a fuzzed script cannot stall the fuzzer.
func playAll(p *Provider) []played {
	all := make([][]Step, 0, len(p.responses)+1)
	for _, e := range p.responses {
		all = append(all, e.Steps)
	}
	if p.hasDef {
		all = append(all, p.fallback)
	}
	var out []played
	for i, steps := range all {
		steps = append([]Step(nil), steps...)
		for j := range steps {
			steps[j].delay = 0
		}
		var r played
		pl := player{ctx: context.Background(), n: i + 1, chunk: p.chunk, yield: func(ev llm.Event, err error) bool {
			if err != nil {
				r.err = err
				return false
			}
			r.events = append(r.events, ev)
			return true
		}}
		pl.play(steps)
		out = append(out, r)
	}
	return out
}

func FuzzParse(f *testing.F) {
	demo, err := os.ReadFile(filepath.Join("testdata", "demo.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(demo),
		`{"default": {"steps": []}}`,
		`{"chunkSize": 1, "loop": true, "responses": [{"match": {"round": 2, "afterTool": "*"}, "times": 3, "steps": [{"text": "é✓", "partial": true}, {"error": {"type": "provider.rate-limit", "retryAfterMs": 5}}]}]}`,
		`{"responses": [{"steps": [{"reasoning": "r", "metadata": [1, {"a": null}]}, {"toolCall": {"id": "c", "name": "n", "input": "s", "executed": true}}, {"finish": "length", "usage": {"cache": {"write": 9}}}]}]}`,
		`{"responses": [{"steps": [{"delayMs": 600000}]}]}`,
		`{"responses": [{"steps": [{"text": "a", "finish": "stop"}]}]}`,
		`{"a/b~c": null, "responses": null}`,
		`{"chunkSize": 1e300}`,
		"{\n\"responses\": [,]}",
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatal("Parse returned a provider and an error")
			}
			if _, ok := errors.AsType[*ParseError](err); !ok || err.Error() == "" {
				t.Fatalf("error %T %q is not a *ParseError", err, err)
			}
			return
		}
		again, err := Parse(data)
		if err != nil {
			t.Fatalf("second Parse failed: %v", err)
		}
		first, second := playAll(p), playAll(again)
		if !reflect.DeepEqual(first, second) {
			t.Fatal("the same script played differently twice")
		}
		for i, r := range first {
			// Every stream ends in exactly one step-finish or one error.
			finishes := 0
			for _, ev := range r.events {
				if ev.Kind == llm.StepFinish {
					finishes++
				}
			}
			last := len(r.events) - 1
			switch {
			case r.err != nil && finishes != 0:
				t.Fatalf("response %d: error after a step-finish", i)
			case r.err == nil && (finishes != 1 || r.events[last].Kind != llm.StepFinish):
				t.Fatalf("response %d: %d finishes, last event %v", i, finishes, r.events[last].Kind)
			}
			if e, ok := r.err.(*llm.Error); r.err != nil && (!ok || e.Type == "") {
				t.Fatalf("response %d: error %T %v is not a typed *llm.Error", i, r.err, r.err)
			}
		}
	})
}
