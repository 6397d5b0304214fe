package anthropic

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

func TestText(t *testing.T) {
	body := messageStart(`{"input_tokens":400,"cache_creation_input_tokens":100,"cache_read_input_tokens":500,"output_tokens":1}`) +
		blockStart("0", `{"type":"text","text":""}`) + ping +
		blockDelta("0", `{"type":"text_delta","text":"Hello"}`) +
		blockDelta("0", `{"type":"text_delta","text":", \"w\u00f6rld\"\n"}`) +
		blockStop("0") +
		messageDelta("end_turn", `{"output_tokens":50}`) + messageStop
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "\n")})
	if err != nil {
		t.Fatal(err)
	}
	// 400*3 + 50*15 + 500*0.3 + 100*3.75 = 2475 micro-dollars.
	wantLines(t, events,
		"text-start 0",
		`text-delta 0 "Hello"`,
		`text-delta 0 ", \"wörld\"\n"`,
		"text-end 0",
		"step-finish stop in=400 out=50 reasoning=0 cache.read=500 cache.write=100 cost=0.002475",
	)
}

func TestThinking(t *testing.T) {
	body := messageStart(smallUsage) +
		blockStart("0", `{"type":"thinking","thinking":"","signature":""}`) +
		blockDelta("0", `{"type":"thinking_delta","thinking":"Let me "}`) +
		blockDelta("0", `{"type":"thinking_delta","thinking":"think."}`) +
		blockDelta("0", `{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA"}`) +
		blockStop("0") +
		blockStart("1", `{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"}`) +
		blockStop("1") +
		blockStart("2", `{"type":"text","text":""}`) +
		blockDelta("2", `{"type":"text_delta","text":"42"}`) +
		blockStop("2") +
		messageDelta("end_turn", `{"input_tokens":10,"output_tokens":300,"output_tokens_details":{"thinking_tokens":280}}`) + messageStop
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "thinking")})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, events,
		"reasoning-start 0",
		`reasoning-delta 0 "Let me "`,
		`reasoning-delta 0 "think."`,
		`reasoning-end 0 {"signature":"EqQBCgIYAhIM1gbcDa9GJwZA"}`,
		"reasoning-start 1",
		`reasoning-end 1 {"redacted":"EmwKAhgBEgy3va3pzix/LafPsn4a"}`,
		"text-start 2",
		`text-delta 2 "42"`,
		"text-end 2",
		"step-finish stop in=10 out=20 reasoning=280 cache.read=0 cache.write=0 cost=0.004530",
	)
}

func TestToolUse(t *testing.T) {
	body := messageStart(smallUsage) +
		blockStart("0", `{"type":"text","text":""}`) +
		blockDelta("0", `{"type":"text_delta","text":"Checking."}`) +
		blockStop("0") +
		blockStart("1", `{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}`) +
		blockDelta("1", `{"type":"input_json_delta","partial_json":""}`) +
		blockDelta("1", `{"type":"input_json_delta","partial_json":"{\"ci"}`) +
		blockDelta("1", `{"type":"input_json_delta","partial_json":"ty\": \"Par"}`) +
		blockDelta("1", `{"type":"input_json_delta","partial_json":"is\"}"}`) +
		blockStop("1") +
		blockStart("2", `{"type":"tool_use","id":"toolu_02","name":"bash","input":{}}`) +
		blockDelta("2", `{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}`) +
		blockStop("2") +
		blockStart("3", `{"type":"tool_use","id":"toolu_03","name":"noargs","input":{}}`) +
		blockStop("3") +
		messageDelta("tool_use", `{"output_tokens":80}`) + messageStop
	i := strings.Index(body, `{\"ci`) + 2
	j := strings.Index(body, `\"Par`) + 4
	if i < 2 || j < 4 {
		t.Fatal("split points not found")
	}
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.Split(body, i, i+1, j)})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, events,
		"text-start 0",
		`text-delta 0 "Checking."`,
		"text-end 0",
		"tool-input-start 1 toolu_01 get_weather",
		`tool-input-delta 1 "{\"ci"`,
		`tool-input-delta 1 "ty\": \"Par"`,
		`tool-input-delta 1 "is\"}"`,
		"tool-input-end 1 toolu_01 get_weather",
		`tool-call toolu_01 get_weather {"city": "Paris"}`,
		"tool-input-start 2 toolu_02 bash",
		`tool-input-delta 2 "{\"command\":\"ls\"}"`,
		"tool-input-end 2 toolu_02 bash",
		`tool-call toolu_02 bash {"command":"ls"}`,
		"tool-input-start 3 toolu_03 noargs",
		"tool-input-end 3 toolu_03 noargs",
		`tool-call toolu_03 noargs {}`,
		"step-finish tool-calls in=10 out=80 reasoning=0 cache.read=0 cache.write=0 cost=0.001230",
	)
}

// TestIgnoredBlocks covers block types and citations, which this adapter
// does not surface, a tool_use block without a name (ignored), without an ID
// (one is made up, which a later call's real ID keeps clear of), and blocks
// whose stop never comes.
func TestIgnoredBlocks(t *testing.T) {
	body := messageStart(smallUsage) +
		blockStart("0", `{"type":"container_upload","file_id":"file_01"}`) +
		blockStop("0") +
		blockStart("1", `{"type":"some_future_block","id":"x_1","content":[]}`) +
		blockDelta("1", `{"type":"text_delta","text":"not text"}`) +
		blockStop("1") +
		blockStart("2", `{"type":"text","text":"Per"}`) +
		blockDelta("2", `{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x","document_index":0,"document_title":null,"start_char_index":0,"end_char_index":1}}`) +
		blockDelta("2", `{"type":"text_delta","text":" docs"}`) +
		blockStart("3", `{"type":"tool_use","id":"toolu_x","name":"","input":{}}`) + blockStop("3") +
		blockStart("4", `{"type":"tool_use","name":"f","input":{"a":1}}`) + blockStop("4") +
		blockStart("5", `{"type":"tool_use","id":"toolu_4","name":"g","input":{}}`) +
		messageDelta("tool_use", `{"output_tokens":9}`) + messageStop
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, events,
		"text-start 2",
		`text-delta 2 "Per"`,
		`text-delta 2 " docs"`,
		"text-end 2",
		"tool-input-start 4 toolu_sessiond_4 f",
		"tool-input-end 4 toolu_sessiond_4 f",
		`tool-call toolu_sessiond_4 f {"a":1}`,
		"tool-input-start 5 toolu_4 g",
		"tool-input-end 5 toolu_4 g",
		`tool-call toolu_4 g {}`,
		"step-finish tool-calls in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165",
	)
}

func TestStopReasons(t *testing.T) {
	for _, tc := range []struct{ reason, want string }{
		{"max_tokens", llm.FinishLength},
		{"stop_sequence", llm.FinishStop},
		{"refusal", llm.FinishContentFilter},
		{"pause_turn", llm.FinishPause},
		{"something_new", llm.FinishOther},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			body := messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) +
				blockDelta("0", `{"type":"text_delta","text":"par"}`) + blockStop("0") +
				messageDelta(tc.reason, `{"output_tokens":3}`) + messageStop
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
			if err != nil {
				t.Fatal(err)
			}
			if last := events[len(events)-1]; last.Kind != llm.StepFinish || last.Finish != tc.want {
				t.Fatalf("last event %s, want step-finish %s", ssetest.Line(last), tc.want)
			}
		})
	}
}

// TestStopEarly stops iterating after the first event; the response must be
// closed (goleak checks the connection's goroutines).
func TestStopEarly(t *testing.T) {
	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: []string{textStream("a")}, Hang: true})
	n := 0
	for _, err := range newTestProvider(t, srv).Stream(context.Background(), simpleRequest()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Fatalf("got %d events", n)
	}
}

// TestStopsAtMessageStop does not wait for the connection to close after
// message_stop.
func TestStopsAtMessageStop(t *testing.T) {
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{textStream("ok")}, Hang: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 {
		t.Fatalf("events %v", ssetest.Lines(events))
	}
}

// TestEventsWithoutEventLines covers compatible proxies that send each
// event as a data line only, without the event line naming its type: the
// type is read from the data, as the event line would have given it, for
// events and errors alike. The SDK skips an event without an event line,
// so every event was lost and the stream failed as cut off.
func TestEventsWithoutEventLines(t *testing.T) {
	dataOnly := func(body string) string {
		var kept []string
		for line := range strings.SplitAfterSeq(body, "\n") {
			if !strings.HasPrefix(line, "event:") {
				kept = append(kept, strings.Replace(line, "\n", "\r\n", 1))
			}
		}
		return strings.Join(kept, "")
	}
	body := dataOnly(ping + textStream("Hi") + "data: [DONE]\n\n")
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.SplitAfter(body, "\r\n")})
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, events,
		"text-start 0",
		`text-delta 0 "Hi"`,
		"text-end 0",
		"step-finish stop in=10 out=5 reasoning=0 cache.read=0 cache.write=0 cost=0.000105",
	)

	body = dataOnly(messageStart(smallUsage) + ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	_, _, err = run(t, simpleRequest(), ssetest.Reply{Chunks: []string{body}})
	wantError(t, err, messages.ErrProviderInternal, 0, 0)
}
