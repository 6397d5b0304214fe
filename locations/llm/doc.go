// Package llm is the one streaming interface every model provider sits
// behind, with normalized stream events and typed errors. Adapters live in
// sub-packages (script, openai, anthropic); the runner only sees this
// package.
//
// # Contract
//
// Provider.Stream returns an iterator over normalized events. A stream ends
// in one of three ways: a StepFinish event (and then the iterator stops), an
// error yielded as the final pair (Event{}, err) where err is an *Error, or
// the context being cancelled (final pair carries an *Error of type aborted,
// or the iterator just stops). Adapters never retry: the runner's retry
// policy is the only retry layer.
//
// Provider block IDs (Event.ID) are internal to adapters and the runner's
// fragment bookkeeping; they are never stored. At most one text and one
// reasoning block are open at a time in a well-formed stream; the runner
// enforces it. A block's start event is optional (its first delta opens
// it), its end closes it (a block still open when the stream ends is closed
// then); a tool call is one ToolCall event, its input events optional.
// StepFinish carries the usage; its Cost may stay 0, and the runner then
// prices the usage at the catalog's prices.
//
// # Usage
//
//	for ev, err := range provider.Stream(ctx, req) {
//		if err != nil { ... } // *llm.Error
//		switch ev.Kind { case llm.TextDelta: ... }
//	}
package llm
