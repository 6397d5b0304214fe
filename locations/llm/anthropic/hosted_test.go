package anthropic

import (
	"bufio"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// startedBlock returns content block index of an SSE body byte for byte as
// its content_block_start carries it.
func startedBlock(t *testing.T, body string, index int) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string          `json:"type"`
			Index        int             `json:"index"`
			ContentBlock json.RawMessage `json:"content_block"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "content_block_start" && ev.Index == index {
			return string(ev.ContentBlock)
		}
	}
	t.Fatalf("no content_block_start with index %d", index)
	return ""
}

// TestHostedWebSearch streams a recorded web search turn, cut inside the
// server tool's input and inside the result block: the call streams like a
// tool call and is marked executed, the result settles it with readable
// output and the block exactly as received, and the turn finishes as stop.
func TestHostedWebSearch(t *testing.T) {
	body := fixture("web_search.sse")
	i := strings.Index(body, `go 1.26 rel`) + 5
	j := strings.Index(body, `"encrypted_content":"EpYC`) + 9
	if i < 5 || j < 9 {
		t.Fatal("split points not found")
	}
	events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: ssetest.Split(body, i, j)})
	if err != nil {
		t.Fatal(err)
	}
	// 10682*3 + 510*15 = 39696 micro-dollars.
	wantLines(t, events,
		"text-start 0",
		`text-delta 0 "I'll look up the latest Go release."`,
		"text-end 0",
		"tool-input-start 1 srvtoolu_01Xq7b2KJ web_search",
		`tool-input-delta 1 "{\"query\": \"go 1.26 rel"`,
		`tool-input-delta 1 "ease notes\"}"`,
		"tool-input-end 1 srvtoolu_01Xq7b2KJ web_search",
		`tool-call srvtoolu_01Xq7b2KJ web_search {"query": "go 1.26 release notes"} executed`,
		`tool-result srvtoolu_01Xq7b2KJ web_search "Go 1.26 Release Notes — https://go.dev/doc/go1.26\n`+
			`Go 1.26 is released - The Go Programming Language — https://go.dev/blog/go1.26" `+startedBlock(t, body, 2),
		"text-start 3",
		`text-delta 3 "Go 1.26 came out in "`,
		`text-delta 3 "February 2026."`,
		"text-end 3",
		"step-finish stop in=10682 out=510 reasoning=0 cache.read=0 cache.write=0 cost=0.039696",
	)
}

// hostedTurn is a stream in which the hosted call call (a server_tool_use
// block) is answered by the block result.
func hostedTurn(call, result string) string {
	return messageStart(smallUsage) + blockStart("0", call) + blockStop("0") +
		blockStart("1", result) + blockStop("1") + messageDelta("end_turn", `{"output_tokens":9}`) + messageStop
}

// TestHostedResults covers each result block type the SDK lists: the
// result is named after its call, its output is rendered by kind, and an
// error content sets IsError.
func TestHostedResults(t *testing.T) {
	for _, tc := range []struct {
		name, call, content, want string
	}{
		{
			name:    "web search error",
			call:    `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}`,
			content: `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"web_search_tool_result_error","error_code":"max_uses_exceeded"}}`,
			want:    `tool-result srvtoolu_1 web_search "max_uses_exceeded" error`,
		},
		{
			name:    "web search without results",
			call:    `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}`,
			content: `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}`,
			want:    `tool-result srvtoolu_1 web_search "No results."`,
		},
		{
			name:    "web search result without a title",
			call:    `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}`,
			content: `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","title":"","url":"https://a.example","encrypted_content":"e","page_age":null}]}`,
			want:    `tool-result srvtoolu_1 web_search "https://a.example"`,
		},
		{
			name: "web fetch",
			call: `{"type":"server_tool_use","id":"srvtoolu_2","name":"web_fetch","input":{"url":"https://a.example"}}`,
			content: `{"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_2","content":{"type": "web_fetch_result", "url": "https://a.example",` +
				` "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hi"}}}}`,
			want: `tool-result srvtoolu_2 web_fetch "{\"type\":\"web_fetch_result\",\"url\":\"https://a.example\",` +
				`\"content\":{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\",\"data\":\"hi\"}}}"`,
		},
		{
			name:    "web fetch error",
			call:    `{"type":"server_tool_use","id":"srvtoolu_2","name":"web_fetch","input":{"url":"https://a.example"}}`,
			content: `{"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_2","content":{"type":"web_fetch_tool_result_error","error_code":"url_not_accessible"}}`,
			want:    `tool-result srvtoolu_2 web_fetch "url_not_accessible" error`,
		},
		{
			name:    "code execution",
			call:    `{"type":"server_tool_use","id":"srvtoolu_3","name":"code_execution","input":{"code":"print(2+2)"}}`,
			content: `{"type":"code_execution_tool_result","tool_use_id":"srvtoolu_3","content":{"type":"code_execution_result","stdout":"4\n","stderr":"","return_code":0,"content":[]}}`,
			want:    `tool-result srvtoolu_3 code_execution "{\"type\":\"code_execution_result\",\"stdout\":\"4\\n\",\"stderr\":\"\",\"return_code\":0,\"content\":[]}"`,
		},
		{
			name:    "bash code execution error",
			call:    `{"type":"server_tool_use","id":"srvtoolu_4","name":"bash_code_execution","input":{"command":"ls"}}`,
			content: `{"type":"bash_code_execution_tool_result","tool_use_id":"srvtoolu_4","content":{"type":"bash_code_execution_tool_result_error","error_code":"unavailable"}}`,
			want:    `tool-result srvtoolu_4 bash_code_execution "unavailable" error`,
		},
		{
			name: "text editor error with a message",
			call: `{"type":"server_tool_use","id":"srvtoolu_5","name":"text_editor_code_execution","input":{"command":"view","path":"a.txt"}}`,
			content: `{"type":"text_editor_code_execution_tool_result","tool_use_id":"srvtoolu_5",` +
				`"content":{"type":"text_editor_code_execution_tool_result_error","error_code":"file_not_found","error_message":"No such file"}}`,
			want: `tool-result srvtoolu_5 text_editor_code_execution "file_not_found: No such file" error`,
		},
		{
			name: "tool search",
			call: `{"type":"server_tool_use","id":"srvtoolu_6","name":"tool_search_tool_regex","input":{"pattern":"weather"}}`,
			content: `{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_6",` +
				`"content":{"type":"tool_search_tool_search_result","tool_references":[{"type":"tool_reference","tool_name":"get_weather"}]}}`,
			want: `tool-result srvtoolu_6 tool_search_tool_regex "{\"type\":\"tool_search_tool_search_result\",\"tool_references\":[{\"type\":\"tool_reference\",\"tool_name\":\"get_weather\"}]}"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{hostedTurn(tc.call, tc.content)}})
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != 5 {
				t.Fatalf("events:\n%s", strings.Join(ssetest.Lines(events), "\n"))
			}
			if got, want := ssetest.Line(events[3]), tc.want+" "+tc.content; got != want {
				t.Fatalf("result\n%s\nwant\n%s", got, want)
			}
			if last := events[4]; last.Finish != llm.FinishStop {
				t.Fatalf("finish %q, want stop", last.Finish)
			}
		})
	}
}

// TestHostedStreamEdges covers results that settle nothing the runner could
// use, a result whose call's stop never came, call metadata, and finish
// reasons of turns with hosted calls.
func TestHostedStreamEdges(t *testing.T) {
	search := func(id string) string {
		return `{"type":"server_tool_use","id":"` + id + `","name":"web_search","input":{"query":"q"}}`
	}
	result := func(id string) string {
		return `{"type":"web_search_tool_result","tool_use_id":"` + id + `","content":[{"type":"web_search_result","title":"T","url":"https://t.example","encrypted_content":"e","page_age":null}]}`
	}
	fin := func(reason string) string { return messageDelta(reason, `{"output_tokens":9}`) + messageStop }
	// answered is what a search srvtoolu_1 in block 0 and its result give.
	answered := func() []string {
		return []string{
			"tool-input-start 0 srvtoolu_1 web_search",
			"tool-input-end 0 srvtoolu_1 web_search",
			`tool-call srvtoolu_1 web_search {"query":"q"} executed`,
			`tool-result srvtoolu_1 web_search "T — https://t.example" ` + result("srvtoolu_1"),
		}
	}
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{
			name: "a result without a call of this stream is dropped",
			body: messageStart(smallUsage) + blockStart("0", result("srvtoolu_x")) + blockStop("0") + fin("end_turn"),
			want: []string{
				"step-finish stop in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165",
			},
		},
		{
			name: "results for a local call, twice for one call and without an ID are dropped",
			body: messageStart(smallUsage) +
				blockStart("0", `{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}`) + blockStop("0") +
				blockStart("1", result("toolu_1")) + blockStop("1") +
				blockStart("2", search("srvtoolu_1")) + blockStop("2") +
				blockStart("3", result("srvtoolu_1")) + blockStop("3") +
				blockStart("4", strings.Replace(result("srvtoolu_1"), `"T"`, `"T2"`, 1)) + blockStop("4") +
				blockStart("5", result("")) + blockStop("5") +
				fin("tool_use"),
			want: []string{
				"tool-input-start 0 toolu_1 bash",
				"tool-input-end 0 toolu_1 bash",
				`tool-call toolu_1 bash {"command":"ls"}`,
				"tool-input-start 2 srvtoolu_1 web_search",
				"tool-input-end 2 srvtoolu_1 web_search",
				`tool-call srvtoolu_1 web_search {"query":"q"} executed`,
				`tool-result srvtoolu_1 web_search "T — https://t.example" ` + result("srvtoolu_1"),
				"step-finish tool-calls in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165",
			},
		},
		{
			name: "a call whose stop never came completes before its result",
			body: messageStart(smallUsage) + blockStart("0", search("srvtoolu_1")) +
				blockStart("1", result("srvtoolu_1")) + blockStop("1") + fin("end_turn"),
			want: append(answered(), "step-finish stop in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165"),
		},
		{
			name: "call metadata keeps the members the event does not carry",
			body: messageStart(smallUsage) +
				blockStart("0", `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{},"caller":{"type":"code_execution_20250825","tool_id":"srvtoolu_0"}}`) +
				blockDelta("0", `{"type":"input_json_delta","partial_json":"{\"query\":\"q\"}"}`) +
				blockStop("0") + fin("pause_turn"),
			want: []string{
				"tool-input-start 0 srvtoolu_1 web_search",
				`tool-input-delta 0 "{\"query\":\"q\"}"`,
				"tool-input-end 0 srvtoolu_1 web_search",
				`tool-call srvtoolu_1 web_search {"query":"q"} executed {"caller":{"type":"code_execution_20250825","tool_id":"srvtoolu_0"}}`,
				"step-finish pause in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165",
			},
		},
		{
			name: "hosted calls alone do not finish as tool-calls",
			body: messageStart(smallUsage) + blockStart("0", search("srvtoolu_1")) + blockStop("0") +
				blockStart("1", result("srvtoolu_1")) + blockStop("1") + fin("tool_use"),
			want: append(answered(), "step-finish other in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165"),
		},
		{
			name: "a hosted call with a taken ID gets one made up",
			body: messageStart(smallUsage) +
				blockStart("0", `{"type":"tool_use","id":"dup","name":"bash","input":{}}`) + blockStop("0") +
				blockStart("1", search("dup")) + blockStop("1") + fin("tool_use"),
			want: []string{
				"tool-input-start 0 dup bash",
				"tool-input-end 0 dup bash",
				"tool-call dup bash {}",
				"tool-input-start 1 srvtoolu_sessiond_1 web_search",
				"tool-input-end 1 srvtoolu_sessiond_1 web_search",
				`tool-call srvtoolu_sessiond_1 web_search {"query":"q"} executed`,
				"step-finish tool-calls in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165",
			},
		},
		{
			// A made-up ID never takes a later call's: the result naming
			// that call settles it, not the one without an ID.
			name: "a result settles the call with its ID, not one whose ID was made up",
			body: messageStart(smallUsage) +
				blockStart("1", `{"type":"server_tool_use","id":"","name":"web_search","input":{"query":"first"}}`) + blockStop("1") +
				blockStart("2", `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"second"}}`) + blockStop("2") +
				blockStart("3", result("srvtoolu_1")) + blockStop("3") + fin("end_turn"),
			want: []string{
				"tool-input-start 1 srvtoolu_sessiond_1 web_search",
				"tool-input-end 1 srvtoolu_sessiond_1 web_search",
				`tool-call srvtoolu_sessiond_1 web_search {"query":"first"} executed`,
				"tool-input-start 2 srvtoolu_1 web_search",
				"tool-input-end 2 srvtoolu_1 web_search",
				`tool-call srvtoolu_1 web_search {"query":"second"} executed`,
				`tool-result srvtoolu_1 web_search "T — https://t.example" ` + result("srvtoolu_1"),
				"step-finish stop in=10 out=9 reasoning=0 cache.read=0 cache.write=0 cost=0.000165",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{tc.body}})
			if err != nil {
				t.Fatal(err)
			}
			wantLines(t, events, tc.want...)
		})
	}
}

// storedTurn is the assistant message the runner keeps of a stream and
// sends back to the same model: text, and each hosted call with the call's
// metadata followed by its result with the result's metadata.
func storedTurn(events []llm.Event) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant}
	var text strings.Builder
	for _, ev := range events {
		switch ev.Kind {
		case llm.TextDelta:
			text.WriteString(ev.Text)
		case llm.TextEnd:
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartText, Text: text.String(), ProviderMetadata: ev.ProviderMetadata})
			text.Reset()
		case llm.ToolCall:
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolCall, CallID: ev.CallID, Name: ev.Name, Input: ev.Input,
				Executed: ev.Executed, ProviderMetadata: ev.ProviderMetadata})
		case llm.ToolResult:
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolResult, CallID: ev.CallID, Name: ev.Name, Output: ev.Output,
				IsError: ev.IsError, Executed: true, ProviderMetadata: ev.ProviderMetadata})
		}
	}
	return m
}

// completedBlock returns content block index of body as the message holds
// it once the stream is over: the start block with the text and input that
// its text_delta, citations_delta and input_json_delta deltas streamed.
func completedBlock(t *testing.T, body string, index int) string {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal([]byte(startedBlock(t, body, index)), &members); err != nil {
		t.Fatal(err)
	}
	var text, input strings.Builder
	var citations []json.RawMessage
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Index int    `json:"index"`
			Delta struct {
				Type        string          `json:"type"`
				Text        string          `json:"text"`
				PartialJSON string          `json:"partial_json"`
				Citation    json.RawMessage `json:"citation"`
			} `json:"delta"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil || ev.Type != "content_block_delta" || ev.Index != index {
			continue
		}
		text.WriteString(ev.Delta.Text)
		input.WriteString(ev.Delta.PartialJSON)
		if ev.Delta.Citation != nil {
			citations = append(citations, ev.Delta.Citation)
		}
	}
	if len(citations) > 0 {
		members["citations"], _ = json.Marshal(citations)
	}
	if text.Len() > 0 {
		members["text"] = json.RawMessage(strconv.Quote(text.String()))
	}
	if input.Len() > 0 {
		members["input"] = json.RawMessage(input.String())
	}
	out, err := json.Marshal(members)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestHostedRoundTrip streams hosted turns, stores them as the runner does,
// and sends them back to the same model: the assistant message carries the
// server_tool_use and result blocks equal to the ones received, and no
// tool_result answers the hosted call.
func TestHostedRoundTrip(t *testing.T) {
	withCaller := messageStart(smallUsage) +
		blockStart("0", `{"type":"server_tool_use","id":"srvtoolu_7","name":"web_fetch","input":{},"caller":{"type":"direct"}}`) +
		blockDelta("0", `{"type":"input_json_delta","partial_json":"{\"url\": \"https://a.example\"}"}`) +
		blockStop("0") +
		// A member this SDK version does not model must survive too.
		blockStart("1", `{"type":"web_fetch_tool_result","tool_use_id":"srvtoolu_7","caller":{"type":"direct"},"retrieval_region":"eu",`+
			`"content":{"type":"web_fetch_tool_result_error","error_code":"url_not_accessible"}}`) +
		blockStop("1") + messageDelta("end_turn", `{"output_tokens":9}`) + messageStop
	for _, tc := range []struct {
		name   string
		body   string
		blocks []int // the blocks sent back, in order
	}{
		{"recorded web search", fixture("web_search.sse"), []int{0, 1, 2, 3}},
		{"web fetch error with caller", withCaller, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, _, err := run(t, simpleRequest(), ssetest.Reply{Chunks: []string{tc.body}})
			if err != nil {
				t.Fatal(err)
			}
			req := simpleRequest()
			req.HostedTools = []string{"web_search"}
			req.Messages = append(req.Messages, storedTurn(events), llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("more")}})
			_, srv, err := run(t, req, okReply)
			if err != nil {
				t.Fatal(err)
			}
			sent := sentMessages(t, srv.LastBody())
			if len(sent) != 3 {
				t.Fatalf("request body %s", srv.LastBody())
			}
			var got, want []string
			for _, c := range sent[1].Content {
				got = append(got, string(c))
			}
			for _, i := range tc.blocks {
				want = append(want, completedBlock(t, tc.body, i))
			}
			wantJSON(t, []byte("["+strings.Join(got, ",")+"]"), "["+strings.Join(want, ",")+"]")
			if user := sent[2].Content; len(user) != 1 || strings.Contains(string(user[0]), "tool_result") {
				t.Fatalf("user message %s", user)
			}
		})
	}
}

// TestHostedLowering covers hosted parts that cannot go back whole, which
// are dropped with their partner, and the hosted tool definitions.
func TestHostedLowering(t *testing.T) {
	const (
		meta    = `{"type":"web_search_tool_result","tool_use_id":"s1","content":[]}`
		s1Block = `{"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"q"}}`
	)
	call := func(id string) llm.Part {
		return llm.Part{Kind: llm.PartToolCall, CallID: id, Name: "web_search", Input: json.RawMessage(`{"query":"q"}`), Executed: true}
	}
	result := func(id, meta string) llm.Part {
		return llm.Part{Kind: llm.PartToolResult, CallID: id, Name: "web_search", Output: "No results.", Executed: true,
			ProviderMetadata: json.RawMessage(meta)}
	}
	request := func(parts ...llm.Part) llm.Request {
		req := simpleRequest()
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: append([]llm.Part{text("a")}, parts...)},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("b")}})
		return req
	}
	// dropped is the body of request() when every hosted part is left out.
	const dropped = `{"model":"claude-test","max_tokens":8192,"stream":true,"messages":[
	  {"role":"user","content":[{"type":"text","text":"hi"}]},
	  {"role":"assistant","content":[{"type":"text","text":"a"}]},
	  {"role":"user","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}]}`
	for _, tc := range []struct {
		name string
		req  llm.Request
		want string
	}{
		{name: "call without a result", req: request(call("s1")), want: dropped},
		{name: "result without a call", req: request(result("s1", meta)), want: dropped},
		{name: "result before its call", req: request(result("s1", meta), call("s1")), want: dropped},
		{name: "result without metadata", req: request(call("s1"), result("s1", "")), want: dropped},
		{name: "result metadata not JSON", req: request(call("s1"), result("s1", `{"type":`)), want: dropped},
		{name: "result metadata not a result block", req: request(call("s1"),
			result("s1", `{"type":"tool_result","tool_use_id":"s1","content":[]}`)), want: dropped},
		{name: "result metadata answering another call", req: request(call("s1"),
			result("s1", `{"type":"web_search_tool_result","tool_use_id":"s2","content":[]}`)), want: dropped},
		{name: "result metadata without content", req: request(call("s1"),
			result("s1", `{"type":"web_search_tool_result","tool_use_id":"s1"}`)), want: dropped},
		{name: "call and result in different messages", req: func() llm.Request {
			req := request(call("s1"))
			req.Messages = append(req.Messages[:2], llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{result("s1", meta)}}, req.Messages[2])
			return req
		}(), want: dropped},
		{
			name: "a repeated call ID: only the first pair",
			req:  request(call("s1"), result("s1", meta), call("s1"), result("s1", meta)),
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,"messages":[
			  {"role":"user","content":[{"type":"text","text":"hi"}]},
			  {"role":"assistant","content":[{"type":"text","text":"a"},` + s1Block + `,` + meta + `]},
			  {"role":"user","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}]}`,
		},
		{
			name: "pair beside a local call: only the local call gets a tool_result",
			req: func() llm.Request {
				req := request(call("s1"), result("s1", meta), call("s9"),
					llm.Part{Kind: llm.PartToolCall, CallID: "t1", Name: "bash", Input: json.RawMessage(`{}`)})
				req.Messages = append(req.Messages[:2], llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
					{Kind: llm.PartToolResult, CallID: "t1", Name: "bash", Output: "ok"},
					{Kind: llm.PartToolResult, CallID: "s1", Name: "web_search", Output: "No results.", Executed: true, ProviderMetadata: json.RawMessage(meta)},
				}}, req.Messages[2])
				req.Tools = []llm.ToolDefinition{{Name: "bash"}}
				return req
			}(),
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,"messages":[
			  {"role":"user","content":[{"type":"text","text":"hi"}]},
			  {"role":"assistant","content":[{"type":"text","text":"a"},` + s1Block + `,` + meta + `,
			    {"type":"tool_use","id":"t1","name":"bash","input":{}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]},
			    {"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}],
			  "tools":[{"name":"bash","input_schema":{"type":"object"}}]}`,
		},
		{
			name: "hosted tools, each once, after the local ones",
			req: func() llm.Request {
				req := simpleRequest()
				req.Tools = []llm.ToolDefinition{{Name: "bash"}}
				req.HostedTools = []string{"web_search", "web_search"}
				return req
			}(),
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,
			  "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],
			  "tools":[{"name":"bash","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"}]}`,
		},
		{
			name: "hosted tools with tool choice none",
			req: func() llm.Request {
				req := simpleRequest()
				req.HostedTools = []string{"web_search"}
				req.ToolChoice = llm.ToolChoiceNone
				return req
			}(),
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,
			  "messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],
			  "tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"none"}}`,
		},
		{
			// The step allows tools: tool_choice none would forbid the
			// hosted ones too.
			name: "hosted tools beside placeholders for the tools of history",
			req: func() llm.Request {
				req := request(call("s1"), result("s1", meta), llm.Part{Kind: llm.PartToolCall, CallID: "t1", Name: "bash", Input: json.RawMessage(`{}`)})
				req.HostedTools = []string{"web_search"}
				return req
			}(),
			want: `{"model":"claude-test","max_tokens":8192,"stream":true,"messages":[
			  {"role":"user","content":[{"type":"text","text":"hi"}]},
			  {"role":"assistant","content":[{"type":"text","text":"a"},` + s1Block + `,` + meta + `,
			    {"type":"tool_use","id":"t1","name":"bash","input":{}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"` + wire.MissingResult + `"}],"is_error":true},
			    {"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}],
			  "tools":[{"name":"bash","description":"Not available in this step.","input_schema":{"type":"object"}},
			    {"type":"web_search_20250305","name":"web_search"}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv, err := run(t, tc.req, okReply)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON(t, srv.LastBody(), tc.want)
		})
	}
	t.Run("unknown hosted tool", func(t *testing.T) {
		req := simpleRequest()
		req.HostedTools = []string{"web_search", "file_search"}
		_, srv, err := run(t, req, okReply)
		wantError(t, err, messages.ErrProviderInvalidRequest, 0, 0)
		if n := len(srv.Requests()); n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
}

// TestDeferredHostedCall: a turn that also called a local tool (or paused)
// leaves its hosted call unanswered. Continuing it sends the call back bare
// in the continued message (the API then runs it), and the result that
// comes in the response settles the call again in this stream; a hosted
// call left unanswered in an older message is not sent.
func TestDeferredHostedCall(t *testing.T) {
	deferred := llm.Part{Kind: llm.PartToolCall, CallID: "srvtoolu_1", Name: "web_search", Input: json.RawMessage(`{"query":"go"}`), Executed: true}
	local := llm.Part{Kind: llm.PartToolCall, CallID: "toolu_1", Name: "read", Input: json.RawMessage(`{"path":"a"}`)}
	req := simpleRequest()
	req.HostedTools = []string{"web_search"}
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{text("Looking."), deferred, local}},
		llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult, CallID: "toolu_1", Name: "read", Output: "a's text"}}})
	answer := messageStart(smallUsage) +
		blockStart("0", `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","title":"Go","url":"https://go.dev","encrypted_content":"e"}]}`) +
		blockStop("0") + blockStart("1", `{"type":"text","text":"Found it."}`) + blockStop("1") +
		messageDelta("end_turn", `{"output_tokens":9}`) + messageStop
	events, srv, err := run(t, req, ssetest.Reply{Chunks: []string{answer}})
	if err != nil {
		t.Fatal(err)
	}
	sent := sentMessages(t, srv.LastBody())
	if len(sent) != 3 || len(sent[1].Content) != 3 {
		t.Fatalf("request body %s", srv.LastBody())
	}
	wantJSON(t, sent[1].Content[1], `{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go"}}`)
	got := ssetest.Lines(events)
	want := []string{
		"tool-input-start deferred_srvtoolu_1 srvtoolu_1 web_search",
		"tool-input-end deferred_srvtoolu_1 srvtoolu_1 web_search",
		`tool-call srvtoolu_1 web_search {"query":"go"} executed`,
	}
	if len(got) < 4 || !slices.Equal(got[:3], want) || !strings.HasPrefix(got[3], `tool-result srvtoolu_1 web_search "Go — https://go.dev"`) {
		t.Fatalf("events:\n%s", strings.Join(got, "\n"))
	}

	// A step whose only calls are hosted (here the deferred one) did not
	// stop for tools, even when the API says tool_use: the runner has no
	// call to run.
	answer = messageStart(smallUsage) +
		blockStart("0", `{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}`) + blockStop("0") +
		messageDelta("tool_use", `{"output_tokens":9}`) + messageStop
	events, _, err = run(t, req, ssetest.Reply{Chunks: []string{answer}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ssetest.Lines(events); !strings.HasPrefix(got[len(got)-1], "step-finish other ") {
		t.Fatalf("a step of a deferred hosted call only:\n%s", strings.Join(got, "\n"))
	}

	// Once a user turn follows, the unanswered call is history: not sent.
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{text("Done.")}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{text("more")}})
	_, srv, err = run(t, req, okReply)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(srv.LastBody()), "server_tool_use") {
		t.Fatalf("an old unanswered hosted call was sent: %s", srv.LastBody())
	}
}

// sentTurn is one message of a request body as sent.
type sentTurn struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

// sentMessages returns the messages of a Messages API request body.
func sentMessages(t *testing.T, body []byte) []sentTurn {
	t.Helper()
	var sent struct {
		Messages []sentTurn `json:"messages"`
	}
	if err := json.Unmarshal(body, &sent); err != nil {
		t.Fatal(err)
	}
	return sent.Messages
}
