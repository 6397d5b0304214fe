package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeProvider is a model API that answers every streaming request with a
// fixed SSE body and records what it was sent.
type fakeProvider struct {
	path string // the only path it serves
	body string // the SSE response
	mu   sync.Mutex
	auth []string // the Authorization header of each request
	reqs []map[string]any
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != f.path {
		http.Error(w, `{"error":{"message":"no route `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(b, &req)
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, f.body)
}

// openAIStream is a Chat Completions stream that says hello and stops.
const openAIStream = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello from "},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"the fake API."},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}

data: [DONE]

`

// anthropicStream is a Messages stream that says hello and stops.
const anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello from the fake API."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

`

// TestRunProviders: run talks to OpenAI-compatible and Anthropic endpoints
// configured by file or environment, with their keys, and prices the step
// from the configured model.
func TestRunProviders(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fake   *fakeProvider
		config string   // with %s for the base URL
		env    []string // with %s for the base URL
		auth   string
		model  string
	}{
		{
			name:   "openai file",
			fake:   &fakeProvider{path: "/v1/chat/completions", body: openAIStream},
			config: `{"providers": {"local": {"type": "openai", "baseURL": "%s/v1", "apiKey": "{env:LOCAL_KEY}", "models": {"qwen3": {"context": 32768, "output": 4096, "prices": {"input": 1000000, "output": 1000000}}}}}}`,
			env:    []string{"LOCAL_KEY", "sk-local"},
			auth:   "Bearer sk-local",
			model:  "qwen3",
		},
		{
			name:   "openai environment",
			fake:   &fakeProvider{path: "/v1/chat/completions", body: openAIStream},
			config: `{"providers": {"openai": {"type": "openai", "models": {"gpt-x": {"prices": {"input": 1000000, "output": 1000000}}}}}}`,
			env:    []string{"OPENAI_BASE_URL", "%s/v1", "OPENAI_API_KEY", "sk-env"},
			auth:   "Bearer sk-env",
			model:  "gpt-x",
		},
		{
			name:   "anthropic",
			fake:   &fakeProvider{path: "/v1/messages", body: anthropicStream},
			config: `{"providers": {"claude": {"type": "anthropic", "baseURL": "%s", "models": {"claude-x": {"prices": {"input": 1000000, "output": 1000000}}}}}}`,
			env:    []string{"ANTHROPIC_API_KEY", "sk-ant"},
			auth:   "Bearer sk-ant",
			model:  "claude-x",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.fake)
			defer srv.Close()
			cfg := writeFile(t, t.TempDir(), "sessiond.json", strings.ReplaceAll(tt.config, "%s", srv.URL))
			kv := []string{"SESSIOND_DATA", t.TempDir()}
			for i := 0; i+1 < len(tt.env); i += 2 {
				kv = append(kv, tt.env[i], strings.ReplaceAll(tt.env[i+1], "%s", srv.URL))
			}
			r := sessiond(t, testEnv(t, kv...), nil, "run", "--json", "--config", cfg, "--dir", t.TempDir(), "hello?")
			if r.code != 0 || !strings.Contains(r.stderr, "succeeded: 1 step(s), 12 tokens in, 5 out\n") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, `"text":"Hello from the fake API."`) ||
				!strings.Contains(r.stdout, `"tokens":{"input":12,"output":5`) || !strings.Contains(r.stdout, `"cost":17`) {
				t.Fatalf("stdout:\n%s", r.stdout)
			}
			tt.fake.mu.Lock()
			defer tt.fake.mu.Unlock()
			if len(tt.fake.reqs) != 1 || tt.fake.auth[0] != tt.auth || tt.fake.reqs[0]["model"] != tt.model || tt.fake.reqs[0]["stream"] != true {
				t.Fatalf("requests %v, auth %q", tt.fake.reqs, tt.fake.auth)
			}
		})
	}
}
