package actors_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/anthropic"
	"github.com/sessiond/sessiond/locations/llm/openai"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// sseServer answers the n-th POST with bodies[n] as an event stream.
func sseServer(t *testing.T, bodies ...string) *httptest.Server {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1)) - 1
		if i >= len(bodies) {
			http.Error(w, `{"error":{"message":"no more responses"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, line := range strings.SplitAfter(bodies[i], "\n") {
			_, _ = w.Write([]byte(line))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func openaiChunk(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, f)
}

const openaiUsage = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\ndata: [DONE]\n\n"

func openaiBodies() []string {
	first := openaiChunk(`{"role":"assistant","content":"Hel"}`, "") + openaiChunk(`{"content":"lo"}`, "") +
		openaiChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"echo","arguments":""}}]}`, "") +
		openaiChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}`, "") +
		openaiChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`, "") +
		openaiChunk(`{}`, "tool_calls") + openaiUsage
	second := openaiChunk(`{"role":"assistant","content":"Done"}`, "") + openaiChunk(`{}`, "stop") + openaiUsage
	return []string{first, second}
}

func anthropicEvent(typ, data string) string {
	return "event: " + typ + "\ndata: " + data + "\n\n"
}

func anthropicBodies() []string {
	start := anthropicEvent("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	stop := func(reason string) string {
		return anthropicEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+reason+`","stop_sequence":null},"usage":{"output_tokens":5}}`) +
			anthropicEvent("message_stop", `{"type":"message_stop"}`)
	}
	text := func(i int, parts ...string) string {
		s := anthropicEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
		for _, p := range parts {
			s += anthropicEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%q}}`, i, p))
		}
		return s + anthropicEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	tool := anthropicEvent("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"echo","input":{}}}`) +
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}`) +
		anthropicEvent("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}`) +
		anthropicEvent("content_block_stop", `{"type":"content_block_stop","index":1}`)
	return []string{start + text(0, "Hel", "lo") + tool + stop("tool_use"), start + text(0, "Done") + stop("end_turn")}
}

// transcript runs the two-step conversation against provider p and returns
// the durable event types plus the content that must match.
func transcript(t *testing.T, p llm.Provider) ([]string, []string) {
	h := actortest.New(t)
	if p != nil {
		h.Services.Provider = func(string) (llm.Provider, error) { return p, nil }
	} else {
		h.Model.Reply(script.Text("Hello"), script.ToolCall("call_1", "echo", `{"x":1}`))
		h.Model.Reply(script.Text("Done"))
	}
	h.Tools.Add("echo", func(_ context.Context, c locations.ToolCall) (string, error) { return "echo " + string(c.Input), nil })
	sid := h.Session()
	h.Prompt(sid, "hi")
	h.WaitIdle(sid)
	var content []string
	for _, ev := range h.Events(sid) {
		switch d := ev.Data.(type) {
		case *messages.TextEnded:
			content = append(content, "text:"+d.Text)
		case *messages.ToolCalled:
			content = append(content, "call:"+d.CallID+":"+d.Name+":"+string(d.Input))
		case *messages.ToolSucceeded:
			content = append(content, "result:"+d.Output)
		case *messages.StepEnded:
			content = append(content, "finish:"+d.Finish)
		case *messages.StepFailed:
			content = append(content, "failed:"+d.Error.Message)
		}
	}
	return h.Types(sid), content
}

// TestAdaptersMatchScriptedModel runs the same conversation through the
// runner with the scripted model and with each real adapter speaking its
// provider's wire format, and checks the durable event sequences agree.
func TestAdaptersMatchScriptedModel(t *testing.T) {
	wantTypes, wantContent := transcript(t, nil)
	oa, err := openai.New(openai.Config{BaseURL: sseServer(t, openaiBodies()...).URL, APIKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	an, err := anthropic.New(anthropic.Config{BaseURL: sseServer(t, anthropicBodies()...).URL, APIKey: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]llm.Provider{"openai": oa, "anthropic": an} {
		t.Run(name, func(t *testing.T) {
			types, content := transcript(t, p)
			if !slices.Equal(types, wantTypes) {
				t.Fatalf("event types differ from the scripted model:\n got %v\nwant %v", types, wantTypes)
			}
			if !slices.Equal(content, wantContent) {
				t.Fatalf("content differs:\n got %v\nwant %v", content, wantContent)
			}
		})
	}
}
