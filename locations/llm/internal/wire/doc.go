// Package wire holds the HTTP-level pieces the provider adapters (openai,
// anthropic) share: Retry-After parsing, the HTTP status table, the
// classification of failures that carry no API error, tool-argument
// normalization, tool names the APIs accept, data: URL handling for
// attachments, and the pairing of tool calls with their results before a
// request is lowered.
//
// Everything here is pure except for what it is handed: time is a parameter,
// and nothing reads the environment or starts goroutines, but for IdleBody's
// timer, which closes a stalled response body.
//
// # Invariants
//
//   - Every function returns an *llm.Error whose Type is one of the provider.*
//     types or aborted; untyped errors never escape.
//   - ToolInput always returns valid JSON.
//   - PairToolResults never modifies its input and always returns a history in
//     which each assistant tool call is answered exactly once, in call order.
//   - UniqueCallIDs never modifies its input and returns a history in which
//     no two local tool calls share an ID, each result with its call's.
//   - ToolName always returns a name both APIs accept, the given one when
//     they accept it, and distinct names for distinct ones.
//
// # Usage
//
//	delay := wire.RetryAfter(res.Header, now)
//	t := wire.StatusType(res.StatusCode)
//	lerr := wire.Failure(ctx, err, responded)
//	msgs := wire.PairToolResults(req.Messages)
package wire
