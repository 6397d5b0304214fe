package anthropic

import (
	"net/http"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
)

// fuzzSeeds are complete response bodies covering every event kind and the
// error paths; the fuzzers cut and mutate them.
var fuzzSeeds = []string{
	textStream(`Hel\u00e9lo \ud83d\ude00`),
	messageStart(`{"input_tokens":5,"cache_creation_input_tokens":7,"cache_read_input_tokens":9,"output_tokens":1}`) +
		blockStart("0", `{"type":"thinking","thinking":"","signature":""}`) +
		blockDelta("0", `{"type":"thinking_delta","thinking":"Hmm."}`) +
		blockDelta("0", `{"type":"signature_delta","signature":"c2lnbmF0dXJl"}`) +
		blockStop("0") + ping +
		blockStart("1", `{"type":"redacted_thinking","data":"ZW5j"}`) + blockStop("1") +
		blockStart("2", `{"type":"text","text":""}`) + blockDelta("2", `{"type":"text_delta","text":"Hi"}`) + blockStop("2") +
		messageDelta("end_turn", `{"output_tokens":40,"output_tokens_details":{"thinking_tokens":30}}`) + messageStop,
	messageStart(smallUsage) +
		blockStart("0", `{"type":"tool_use","id":"toolu_1","name":"read","input":{}}`) +
		blockDelta("0", `{"type":"input_json_delta","partial_json":"{\"path\":"}`) +
		blockDelta("0", `{"type":"input_json_delta","partial_json":"\"a\\\"b.go\"}"}`) +
		blockStop("0") +
		blockStart("1", `{"type":"tool_use","id":"toolu_2","name":"bash","input":{}}`) +
		blockDelta("1", `{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}`) +
		blockStop("1") +
		messageDelta("tool_use", `{"output_tokens":12}`) + messageStop,
	messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) +
		blockDelta("0", `{"type":"text_delta","text":"part"}`) + ev("error", apiErr("overloaded_error", "Overloaded")),
	messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) + blockDelta("0", `{"type":"text_delta","text":"cut"}`),
	": comment\n\n" + messageStart(smallUsage) + blockStart("0", `{"type":"text","text":"No."}`) + blockStop("0") +
		messageDelta("refusal", `{"output_tokens":2}`) + messageStop,
	fixture("web_search.sse"),
	messageStart(smallUsage) +
		blockStart("0", `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_fetch","input":{"url":"https://example.com"},"caller":{"type":"direct"}}`) +
		blockStop("0") +
		blockStart("1", `{"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"web_fetch_tool_result_error","error_code":"url_not_accessible"}}`) +
		blockStop("1") +
		blockStart("2", `{"type":"code_execution_tool_result","tool_use_id":"srvtoolu_9","content":{"type":"code_execution_result","stdout":"4\n","stderr":"","return_code":0,"content":[]}}`) +
		blockStop("2") + messageDelta("pause_turn", `{"output_tokens":7}`) + messageStop,
}

// fuzzStream runs one stream whose body arrives in exactly the given chunks,
// in memory, and checks the stream contract.
func fuzzStream(t *testing.T, chunks []string) ([]string, string) {
	t.Helper()
	p, err := New(Config{
		BaseURL:    "http://fuzz.invalid",
		HTTPClient: &http.Client{Transport: &ssetest.Transport{Chunks: chunks}},
	})
	if err != nil {
		t.Fatal(err)
	}
	events, err := ssetest.MustStream(t, p, simpleRequest())
	errText := ""
	if err != nil {
		le := err.(*llm.Error)
		errText = string(le.Type) + ": " + le.Message
	}
	return ssetest.Lines(events), errText
}

// FuzzChunkSplits cuts a seed stream at arbitrary points (each byte of cuts
// is the length of the next chunk, minus one) and asserts the normalized
// event sequence and final error are identical to the uncut stream's.
func FuzzChunkSplits(f *testing.F) {
	for i := range fuzzSeeds {
		f.Add(uint8(i), []byte{0})
		f.Add(uint8(i), []byte{6, 0, 40, 1, 200, 3})
		f.Add(uint8(i), []byte{17, 17, 17, 17, 17, 17, 17, 17})
	}
	f.Fuzz(func(t *testing.T, seed uint8, cuts []byte) {
		ssetest.CheckSplits(t, fuzzSeeds[int(seed)%len(fuzzSeeds)], cuts, fuzzStream)
	})
}

// FuzzStream feeds arbitrary bodies (mutated from the seeds) and asserts the
// adapter never panics and always honours the stream contract.
func FuzzStream(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fuzzStream(t, []string{body})
	})
}
