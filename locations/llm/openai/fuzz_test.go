package openai

import (
	"net/http"
	"testing"

	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
)

// fuzzSeeds are complete response bodies covering every event kind and the
// error paths; the fuzzers cut and mutate them.
var fuzzSeeds = []string{
	sse(
		chunk(`{"role":"assistant","content":""}`, ""),
		chunk(`{"content":"Hel"}`, ""),
		chunk(`{"content":"lo \u00e9\ud83d\ude00"}`, ""),
		chunk(`{}`, "stop"),
		usageChunk(`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4}}`),
		done,
	),
	sse(
		chunk(`{"role":"assistant","reasoning_content":"Think"}`, ""),
		chunk(`{"reasoning_content":"ing."}`, ""),
		chunk(`{"content":"Hi"}`, ""),
		chunk(`{"reasoning":"more"}`, ""),
		chunk(`{"content":"!"}`, "stop"),
		usageChunk(`{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10,"completion_tokens_details":{"reasoning_tokens":7}}`),
		done,
	),
	sse(
		chunk(`{"content":"Calling."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"bash","arguments":"{\"command\":"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":\"a\\\"b.go\"}"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"ls -la\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		usageChunk(`{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`),
		done,
	),
	sse(
		chunk(`{"content":"part"}`, ""),
		`{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`,
	),
	sse(chunk(`{"content":"cut"}`, ""), chunk(`{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}`, "")),
	": keep-alive comment\n\n" + sse(chunk(`{"refusal":"No."}`, ""), chunk(`{}`, "stop"), done),
}

// fuzzStream runs one stream whose body arrives in exactly the given chunks,
// in memory, and checks the stream contract.
func fuzzStream(t *testing.T, chunks []string) ([]string, string) {
	t.Helper()
	p, err := New(Config{
		BaseURL:    "http://fuzz.invalid/v1",
		HTTPClient: &http.Client{Transport: &ssetest.Transport{Chunks: chunks}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ssetest.Outcome(t, p, simpleRequest())
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
