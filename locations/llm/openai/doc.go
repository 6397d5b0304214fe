// Package openai is the llm.Provider for OpenAI-compatible Chat Completions
// endpoints (OpenAI, Ollama, vLLM, llama.cpp, LiteLLM and others), built on
// the official SDK github.com/openai/openai-go/v3.
//
// Every request streams with stream_options.include_usage. The SDK's own
// retries are off: the runner's retry policy is the only retry layer, and
// this package only classifies failures into typed *llm.Error values.
//
// # Events
//
// Content deltas become text blocks; the reasoning_content or reasoning
// delta field that OpenAI-compatible servers add (DeepSeek, vLLM, llama.cpp,
// Ollama, OpenRouter; the SDK has no typed field for it, so it is read from
// the chunk's raw JSON) becomes reasoning blocks. A block of one kind is
// closed before a block of the other kind or a tool input starts. Tool calls
// stream as tool inputs keyed by their index (parallel calls may interleave;
// at a reused index, another ID or a name after complete arguments starts a
// new call, a call that started without an ID keeps its made-up one, a
// call's complete arguments sent again are dropped as a repeat, and a
// fragment that resends the arguments so far brings only what follows them);
// all of them end, each followed by its complete ToolCall, once the stream
// of a response that came with a finish reason is over. A finish reason does
// not end the response by itself (some proxies send one on chunks before the
// last): deltas after it go on, and the last one counts. Exactly one
// StepFinish ends a successful stream, after the usage chunk. Refusal deltas
// are shown as text and finish the step as content-filter, like an Anthropic
// refusal. DeepSeek's finish reason insufficient_system_resource (its
// servers cut the answer short) ends the stream with a provider.internal
// error instead, after what was streamed.
//
// Usage: Input is prompt_tokens minus cached and cache-write tokens, Output
// is completion_tokens minus reasoning_tokens (so that llm.Prices.Cost does
// not count reasoning twice), Cache.Read is cached_tokens.
//
// # Errors
//
// HTTP 429 is provider.rate-limit with RetryAfter from retry-after-ms or
// retry-after; 5xx is provider.internal; 401 and 403 are provider.auth; the
// error code context_length_exceeded (and llama.cpp's error type
// exceed_context_size_error, and a 400 without a specific code whose
// message says "maximum context length is", as vLLM, DeepSeek and
// OpenRouter put it, or names LiteLLM's ContextWindowExceededError) is
// provider.context-overflow; the code
// content_filter (Azure) is provider.content-filter; insufficient_quota
// (a 429 of an account without credit, which no retry fixes) is
// provider.auth; other 4xx are
// provider.invalid-request. An error object inside the stream is classified
// from its type and code (a numeric code, which vLLM and llama.cpp send, is
// read as an HTTP status). A stream that ends before any finish reason, a
// reset connection or a timeout is provider.transport; cancellation of the
// context is aborted. Some servers never send a finish reason: a response
// that streamed something and whose calls' arguments are complete, ended
// by [DONE], finishes as other.
//
// # Request lowering
//
// System parts become one leading system message. A RoleSystem message in
// history becomes user text wrapped in <system-reminder>…</system-reminder>,
// and consecutive user messages are merged: the chat templates of open
// models, which compatible servers apply, refuse a system message anywhere
// but first, and some refuse two user turns in a row. User file parts
// become image_url parts for images the API can fetch (data: and http(s)
// URLs) and text notes otherwise. Assistant tool calls become
// tool_calls followed by one tool message per call (paired by call ID, see
// wire.PairToolResults, and made unique across the request, which the API
// requires, by wire.UniqueCallIDs), their arguments always a JSON object
// (wire.ObjectInput: chat templates decode them); an error result not already starting with
// "Error (" or "Error:" is prefixed with "Error: " since the API has no
// error flag. Chat Completions has no input field for reasoning:
// reasoning this adapter produced (it carries ProviderMetadata, which the
// runner keeps only for the same model) is dropped on replay, except that
// reasoning read from reasoning_content goes back in that field on its
// assistant message (DeepSeek's thinking mode refuses a turn that called
// tools without it on each of its messages); reasoning from another model
// (no ProviderMetadata) is replayed as ordinary assistant text. A history
// holding such reasoning is the server's thinking mode, and every other
// assistant message sends reasoning_content empty. When a server refuses a
// request for lacking the field (a 400 naming reasoning_content: a step
// that failed kept no metadata, or the history is another model's), the
// request is sent once more with it on every assistant message, and the
// model's later requests send it from the start.
// Likewise a server refusing a request for its image parts (a model that
// reads none, such as DeepSeek's: "unknown variant `image_url`") gets it
// once more with each image as a text note, as the model's later requests:
// the prompt that brought the image stays in history.
// A request that would end with an assistant message (an explicit run
// after a step that was interrupted, or that answered) gets a user turn
// asking to go on, and keeps it between that message and the step
// answering it in later requests: servers that complete a final assistant
// message as a prefix refuse one without their flag for it, and many chat
// templates two assistant turns in a row.
// Request.CacheKey is sent as prompt_cache_key. tool_choice none is sent
// only alongside tools, since OpenAI rejects it without them. A tool's
// object schema without properties is sent with empty ones, which OpenAI
// requires.
//
// # Usage
//
//	p, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:11434/v1", APIKey: "none"})
//	for ev, err := range p.Stream(ctx, req) {
//		...
//	}
package openai
