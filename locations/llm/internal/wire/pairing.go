package wire

import "github.com/sessiond/sessiond/locations/llm"

// MissingResult is the error output given to a tool call whose result is
// absent from history. The runner settles every call before the next step,
// so this only guards against a history the providers would reject outright.
const MissingResult = "Tool result missing: the tool call was interrupted before it produced a result."

// PairToolResults returns msgs regrouped for providers that demand each
// assistant tool call be answered right after the assistant message: every
// assistant message with tool calls is followed by one RoleTool message that
// holds exactly one result per call, in call order. Results are looked up by
// CallID among the RoleTool messages that follow, up to the next user or
// assistant message (callIDs are unique only within their step); RoleSystem
// messages found there keep their order after the results. A call without a
// result gets an error result (MissingResult); results that answer no call of
// the preceding assistant message are dropped, as are RoleTool messages
// anywhere else. Provider-hosted calls (Part.Executed) are not answered
// here: their results travel inside the assistant message. msgs is not
// modified.
func PairToolResults(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == llm.RoleTool {
			continue // answers no assistant message
		}
		out = append(out, m)
		if m.Role != llm.RoleAssistant {
			continue
		}
		var calls []llm.Part
		for _, p := range m.Parts {
			if p.Kind == llm.PartToolCall && !p.Executed {
				calls = append(calls, p)
			}
		}
		if len(calls) == 0 {
			continue
		}
		results := map[string]llm.Part{}
		var systems []llm.Message
		j := i + 1
		for ; j < len(msgs) && (msgs[j].Role == llm.RoleTool || msgs[j].Role == llm.RoleSystem); j++ {
			if msgs[j].Role == llm.RoleSystem {
				systems = append(systems, msgs[j])
				continue
			}
			for _, p := range msgs[j].Parts {
				if _, seen := results[p.CallID]; p.Kind == llm.PartToolResult && !seen {
					results[p.CallID] = p
				}
			}
		}
		paired := llm.Message{Role: llm.RoleTool, Parts: make([]llm.Part, 0, len(calls))}
		for _, c := range calls {
			r, ok := results[c.CallID]
			if !ok {
				r = llm.Part{Kind: llm.PartToolResult, CallID: c.CallID, Name: c.Name, Output: MissingResult, IsError: true}
			}
			paired.Parts = append(paired.Parts, r)
		}
		out = append(out, paired)
		out = append(out, systems...)
		i = j - 1
	}
	return out
}
