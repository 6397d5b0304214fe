// Package script is a deterministic scripted model: an llm.Provider that
// answers requests from a script instead of a network, and records every
// request it receives. The runner's tests, the actortest harness and the
// offline demo use it; the script comes from Go code or from a JSON file.
//
// # Behaviour
//
// A script is an ordered list of responses plus an optional default. Each
// iteration of a Stream sequence is one request; it is recorded (a deep
// copy, numbered from 1) and answered by:
//
//  1. the first response, in the order added, that is not used up and whose
//     matcher fits the request (no matcher fits every request);
//  2. if none fits but the script loops (SetLoop, or "loop": true in a file)
//     and some response has been used, every use count is reset and step 1
//     is tried once more;
//  3. the default response;
//  4. otherwise the stream fails with a provider.invalid-request *llm.Error
//     "script: no scripted response left for request N". It never hangs.
//
// A response plays its steps in order. Text, reasoning and tool-call steps
// emit well-formed blocks (start, deltas of at most the chunk size in runes,
// end; tool calls then emit the complete ToolCall). The chunk size is
// DefaultChunkSize unless SetChunkSize or a file's "chunkSize" changes it. Block IDs are "text_1", "reasoning_2",
// "tool_3"... numbered per stream, so the same script yields the identical
// event sequence on every run. Finish and Fail end the stream; a response
// without them finishes with tool-calls when it scripted a local tool call,
// else stop, with zero usage. A context that ends while a stream runs, or
// while it is held at a Gate or in a Delay, ends the stream with an aborted
// *llm.Error; a context that has ended before the stream starts does not
// record the request or use up a response.
//
// The Provider is safe for concurrent use. Matchers run under its lock, so
// they must not call it.
//
// # Matching
//
// Matchers are pure functions of the request, which keeps a script
// deterministic however many Sessions share it and however they interleave:
//
//   - Round(req) is the number of assistant messages after the last user
//     message (the last user-role message carrying text or a file). The first
//     request after a prompt is round 0; every tool round trip adds one.
//   - LastUserContains matches the text of that last user message.
//   - AfterTool matches a request whose last message holds a result of the
//     named tool ("*" for any tool).
//   - SessionKey matches the request's CacheKey, which the runner keeps
//     stable per Session; ForModel and SystemContains match the model and
//     the system text.
//
// # JSON scripts
//
// Parse and Load read this schema (the comments below annotate it; files
// are plain JSON). Unknown and duplicate fields are errors,
// null counts as absent, and every error is a *ParseError whose Path is a
// JSON pointer to the failing value, such as
// "/responses/2/steps/1/toolCall/id".
//
//	{
//	  "description": "free text, ignored",
//	  "chunkSize": 8,        // runes per delta; 0 or absent means DefaultChunkSize
//	  "loop": false,         // start over when no response fits (see above)
//	  "responses": [         // tried in order; "responses", "default" or both
//	    {
//	      "name": "read the notes",          // optional label
//	      "match": {                         // optional; all given rules must hold
//	        "round": 0,                      // Round(req) == 0
//	        "lastUserContains": "notes",     // substring of the last user text
//	        "afterTool": "read",             // last message has a read result; "*" any
//	        "sessionKey": "ses_...",         // Request.CacheKey
//	        "systemContains": "summary",     // substring of a system part
//	        "model": "demo/scripted"         // "provider/model"
//	      },
//	      "times": 1,                        // answers at most 1 request; absent or 0: unlimited
//	      "steps": [                         // required; each has exactly one kind field
//	        {"reasoning": "thinking...", "metadata": {"signature": "x"}},
//	        {"text": "Let me look.", "metadata": {...}},
//	        {"text": "cut off", "partial": true},   // no end event
//	        {"toolCall": {"id": "call_1", "name": "read", "input": {"path": "notes.txt"},
//	                      "metadata": {...}, "executed": false}},
//	        {"toolResult": {"id": "srv_1", "name": "web_search", "output": "2 results",
//	                        "error": false, "metadata": {...}}},   // settles a hosted call
//	        {"delayMs": 50},                 // pause, honouring cancellation
//	        {"error": {"type": "provider.rate-limit", "message": "slow down",
//	                   "retryAfterMs": 100, "statusCode": 429}},
//	        {"finish": "stop", "usage": {"input": 10, "output": 5, "reasoning": 0,
//	                                     "cache": {"read": 0, "write": 0}}}
//	      ]
//	    }
//	  ],
//	  "default": {"name": "...", "steps": [...]}   // no match or times
//	}
//
// Step kinds: "text" and "reasoning" (strings; "metadata" is any JSON value
// attached to the end event; "partial" only on text), "toolCall" ("id" and
// "name" required and non-empty, ids unique within a response; "input" any
// JSON value, default {}; "executed": true makes it a provider-hosted
// call), "toolResult" (the result of a hosted call: "id" and "name"
// required, "output" a string, "error" a boolean, "metadata" any JSON
// value), "delayMs" (0 to 600000), "error" ("type" one of
// the provider.* error types or "aborted"; "message" defaults to "scripted
// <type> error"; "retryAfterMs" 0 to 86400000; "statusCode" 100 to 599) and
// "finish" ("stop", "tool-calls", "length", "content-filter", "other" or "pause";
// optional "usage" with non-negative integers). "error" and "finish" end the
// stream, so they must be the last step. Gates exist only in Go: a file has
// nobody to release them.
//
// # Usage
//
//	p := script.New().
//		Reply(script.ToolCall("call_1", "read", `{"path":"a.txt"}`)).
//		Reply(script.Text("done"), script.Finish("stop", messages.Tokens{Input: 12, Output: 3}))
//	g := script.NewGate()
//	p.ReplyFor(script.SessionKey("ses_b"), script.Text("partial answer"), script.Hold(g), script.Text("rest"))
//	p.Default(script.Text("nothing scripted for this"))
//
//	req, err := p.WaitRequest(ctx, 2) // the second request, once it arrives
//	err = g.Reached(ctx)             // a stream is held at g
//	g.Release()
//
//	p, err := script.Load("demo.json")
package script
