package wire

import (
	"slices"
	"strconv"

	"github.com/sessiond/sessiond/locations/llm"
)

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

// ContinuePrompt is the user turn a request gets after a final assistant
// message that the provider would refuse to end the request with (an
// explicit run after a step that was interrupted, or that answered): a
// conversation must end with the user's turn for many servers.
const ContinuePrompt = "<system-reminder>\nContinue from where your previous response stopped.\n</system-reminder>"

// UniqueCallIDs returns paired (PairToolResults' output) with every local
// tool call ID unique across the request. A call ID is unique only within
// its step (SEED.md), and some servers start their IDs over each response
// (Kimi's "functions.read:0", the made-up IDs of servers that send none),
// while Anthropic refuses a request whose tool_use IDs repeat ("tool_use ids
// must be unique") and OpenAI one whose tool_call_id values repeat: after a
// switch from such a server every later request of the Session would be
// refused. A call whose ID an earlier call of the request took (or a
// hosted call) gets "<id>_<n>", the smallest n no call before it has, in
// its assistant message and in the RoleTool message that pairing put right
// after it: a renaming depends only on what comes before, so a request's
// prefix, and its prompt cache, stays the same from step to step. Hosted calls keep their IDs (their provider's, unique, and
// matched by the provider's own results). paired is not modified; the
// messages it shares with the result are only those left unchanged.
func UniqueCallIDs(paired []llm.Message) []llm.Message {
	// Hosted calls' IDs count as taken: no local call may take one.
	seen := map[string]bool{}
	for _, m := range paired {
		for _, p := range m.Parts {
			if p.Kind == llm.PartToolCall && p.Executed {
				seen[p.CallID] = true
			}
		}
	}
	var out []llm.Message
	for i, m := range paired {
		if m.Role != llm.RoleAssistant {
			continue
		}
		var renamed map[string]string
		for j, p := range m.Parts {
			if p.Kind != llm.PartToolCall || p.Executed {
				continue
			}
			if !seen[p.CallID] {
				seen[p.CallID] = true
				continue
			}
			id := p.CallID + "_2"
			for n := 3; seen[id]; n++ {
				id = p.CallID + "_" + strconv.Itoa(n)
			}
			seen[id] = true
			if out == nil {
				out = slices.Clone(paired)
			}
			if renamed == nil {
				renamed = map[string]string{}
				out[i].Parts = slices.Clone(m.Parts)
			}
			renamed[p.CallID] = id
			out[i].Parts[j].CallID = id
		}
		if renamed == nil || i+1 >= len(paired) || paired[i+1].Role != llm.RoleTool {
			continue
		}
		// Pairing answers each call once, in call order: a call's result is
		// the one at its own index among the message's local calls.
		results := slices.Clone(paired[i+1].Parts)
		k := 0
		for _, p := range out[i].Parts {
			if p.Kind != llm.PartToolCall || p.Executed {
				continue
			}
			if k < len(results) {
				results[k].CallID = p.CallID
			}
			k++
		}
		out[i+1].Parts = results
	}
	if out == nil {
		return paired
	}
	return out
}
