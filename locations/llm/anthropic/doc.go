// Package anthropic is the llm.Provider for the Anthropic Messages API, built
// on the official SDK github.com/anthropics/anthropic-sdk-go/v2.
//
// The SDK's own retries are off (the runner's retry policy is the only retry
// layer) and the client reads no ANTHROPIC_* environment variables:
// configuration comes only from Config.
//
// # Events
//
// Content blocks map one to one: text blocks to text events, thinking blocks
// to reasoning events whose ReasoningEnd carries the block's signature as
// ProviderMetadata ({"signature": ...}), redacted_thinking blocks to an empty
// reasoning block whose metadata keeps the encrypted data ({"redacted": ...}),
// tool_use blocks to tool input events followed, at the block's end, by the
// complete ToolCall; server tool blocks map as described under Hosted tools,
// and other block types are ignored. Exactly one StepFinish ends a
// successful stream, at message_stop. A stream cut after message_delta
// (which carries the stop reason and the final usage) with every block
// closed lost only message_stop, which carries nothing, and finishes too;
// any other stream that ends without message_stop failed. An event sent
// as a data line without its event line (some compatible proxies do) is
// read by the type in its data.
//
// Finish reasons: end_turn and stop_sequence are stop, tool_use is
// tool-calls (but other when the step made hosted calls and no local one),
// max_tokens is length, refusal is content-filter, pause_turn (the API
// paused a long server-tool turn; sending the response back resumes it) is
// pause, and anything unknown is other. The stop reason model_context_window_exceeded ends the
// stream with a provider.context-overflow error instead.
//
// Usage: Input is input_tokens (which excludes cache reads and writes),
// Cache.Read is cache_read_input_tokens, Cache.Write is
// cache_creation_input_tokens, Reasoning is output_tokens_details
// .thinking_tokens and Output the rest of output_tokens.
//
// # Hosted tools
//
// HostedTools may name web_search (the server tool web_search_20250305; any
// other name is provider.invalid-request). A server_tool_use block streams
// like tool_use and ends in a ToolCall with Executed set; each
// *_tool_result block becomes a ToolResult (Output: "title — url" lines, an
// error's code, or compact JSON) whose ProviderMetadata is the block as
// received. In history the call and that block go back unchanged inside the
// assistant message; a hosted call without its result, or the reverse, is
// left out, except in the message a request continues (one followed only
// by its tool results): there a hosted call without its result goes back
// bare. The API leaves one unanswered when the same turn also calls a local
// tool, or pauses the turn, and runs it when it gets the call back; its
// result block then comes in the response, and the adapter emits the call
// again (same ID, from the request) before its ToolResult, so that the
// result settles a call of the stream.
//
// # Errors
//
// rate_limit_error and HTTP 429 are provider.rate-limit with RetryAfter from
// retry-after-ms or retry-after; overloaded_error, api_error, 5xx and 529 are
// provider.internal, also when they arrive as an in-stream error event after
// a 200; authentication_error, permission_error, billing_error, 401 and 403 are
// provider.auth; timeout_error, a cut stream, a reset connection and a
// timeout are provider.transport; a prompt that is too long is
// provider.context-overflow; "Output blocked by content filtering policy"
// (an invalid_request_error, before or inside the stream) is
// provider.content-filter; other 4xx, and other invalid_request_errors
// inside the stream, are provider.invalid-request; an in-stream error of a
// type not named here is provider.internal; cancellation of the context is
// aborted.
//
// # Request lowering
//
// System parts become system blocks. Anthropic has no system role inside the
// conversation, so a chronological RoleSystem message becomes a user-role
// text block wrapped in <system-reminder>…</system-reminder>, merged into the
// adjacent user turn. Consecutive user turns are merged, and an assistant
// message into a turn of hosted tool use before it (see below for others). Images
// and PDFs become image and document blocks (from data: URLs or http(s)
// URLs); other files become text notes. Tool calls become tool_use blocks and
// their results tool_result blocks at the start of the following user turn,
// paired by call ID (see wire.PairToolResults); a call ID an earlier call
// of the request has (IDs are unique only within a step) gets a suffix, as
// the API refuses repeated tool_use IDs (wire.UniqueCallIDs). Reasoning
// replays as a thinking (or redacted_thinking) block only when its
// ProviderMetadata holds a signature (or redacted data), which the runner
// keeps only for the same model; reasoning without it (another model's) is
// replayed as ordinary assistant text, so that what the user saw stays in
// context. The API refuses thinking on a request whose last assistant
// message called tools without starting with a thinking block (a step that
// failed or another model's step, whose signatures the runner does not
// replay): such a request is sent without thinking until the tool loop
// ends. A request never ends with an assistant message, which the API
// takes as a prefill (refused by recent models, and with trailing white
// space or thinking): one that would (an explicit run after a step that was
// interrupted, or that answered) gets a user turn asking to go on, which
// later requests keep between that message and the step answering it;
// but a paused turn of hosted tool use goes back last, as the API asks,
// its final text trimmed (and without thinking unless it starts with a
// thinking block). Tool definitions keep their JSON schema; when a request
// has no tools but its history has tool_use blocks (the final step of an
// agent's allowance), the tools named in history are declared with an
// empty schema and tool_choice none, because the API rejects tool blocks
// without tool definitions (except a hosted tool's name, declared already:
// a hosted call cut off mid-input reaches history as a local one). Prompt
// caching uses cache_control breakpoints on the last system block and on the
// last block of the last message; Request.CacheKey is not needed.
//
// # Usage
//
//	p, err := anthropic.New(anthropic.Config{APIKey: key})
//	for ev, err := range p.Stream(ctx, req) {
//		...
//	}
package anthropic
