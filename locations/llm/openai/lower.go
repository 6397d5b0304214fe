package openai

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// options are the ways a request is lowered for what its server was seen
// to refuse (see Provider.Stream).
type options struct {
	// echo sends reasoning_content on every assistant message; it is also
	// on when the history holds reasoning this server sent in that field.
	echo bool
	// textOnly sends images as text notes.
	textOnly bool
}

// lower builds the Chat Completions request for req.
func lower(req llm.Request, legacyMaxTokens bool, opts options) (oa.ChatCompletionNewParams, error) {
	if req.Model.ID == "" {
		return oa.ChatCompletionNewParams{}, llm.Errorf(messages.ErrProviderInvalidRequest, "openai: request has no model ID")
	}
	params := oa.ChatCompletionNewParams{
		Model:         req.Model.ID,
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if sys := joinNonEmpty(req.System); sys != "" {
		params.Messages = append(params.Messages, oa.SystemMessage(sys))
	}
	opts.echo = opts.echo || slices.ContainsFunc(req.Messages, hasReasoningContent)
	for _, m := range userTurns(wire.UniqueCallIDs(wire.PairToolResults(req.Messages))) {
		params.Messages = appendMessage(params.Messages, m, opts)
	}
	for _, t := range req.Tools {
		tool, err := lowerTool(t)
		if err != nil {
			return oa.ChatCompletionNewParams{}, err
		}
		params.Tools = append(params.Tools, tool)
	}
	if req.ToolChoice == llm.ToolChoiceNone && len(params.Tools) > 0 {
		params.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(string(oa.ChatCompletionToolChoiceOptionAutoNone))}
	}
	if req.MaxOutputTokens > 0 {
		if legacyMaxTokens {
			params.MaxTokens = param.NewOpt(int64(req.MaxOutputTokens))
		} else {
			params.MaxCompletionTokens = param.NewOpt(int64(req.MaxOutputTokens))
		}
	}
	if req.CacheKey != "" {
		params.PromptCacheKey = param.NewOpt(req.CacheKey)
	}
	return params, nil
}

// userTurns rewrites history for the chat templates of open models, which
// compatible servers (vLLM, llama.cpp) apply: many refuse a system message
// anywhere but first, and some two user messages in a row. A chronological
// system message becomes user text wrapped in <system-reminder> (as the
// Anthropic adapter sends it), and consecutive user messages are merged
// into one; a user turn asking to go on (goOn) separates two assistant
// messages in a row and follows a final one.
func userTurns(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant {
			if _, ok := lowerAssistant(m.Parts, false); !ok {
				// Nothing of it is sent (a turn of this provider's own
				// reasoning only, cut off by the output limit): the user
				// turns around it merge.
				continue
			}
		}
		if m.Role == llm.RoleSystem {
			text := joinText(m.Parts)
			if text == "" {
				continue
			}
			m = llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "<system-reminder>\n" + text + "\n</system-reminder>"}}}
		}
		if n := len(out); n > 0 && m.Role == llm.RoleUser && out[n-1].Role == llm.RoleUser {
			out[n-1].Parts = append(slices.Clip(out[n-1].Parts), m.Parts...)
			continue
		}
		if n := len(out); n > 0 && m.Role == llm.RoleAssistant && out[n-1].Role == llm.RoleAssistant {
			out = append(out, goOn)
		}
		out = append(out, m)
	}
	if n := len(out); n > 0 && out[n-1].Role == llm.RoleAssistant {
		out = append(out, goOn)
	}
	return out
}

// goOn is the user turn after an assistant message that would end the
// request, or that another assistant message follows: an explicit run
// after a step that was interrupted, or that answered, sends such a
// history. Servers that complete a final assistant message as a prefix
// refuse one sent without their own flag for it (Mistral: "Expected last
// role User or Tool (or Assistant with prefix True)"), and many chat
// templates two assistant turns in a row ("Conversation roles must
// alternate"): every run, or every later request, of the Session would be
// refused. The step such a request answers follows the same turn in later
// requests, which therefore show the model what it was sent.
var goOn = llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: wire.ContinuePrompt}}}

// hasReasoningContent reports whether m is an assistant message with
// reasoning that this server sent in reasoning_content.
func hasReasoningContent(m llm.Message) bool {
	return m.Role == llm.RoleAssistant && slices.ContainsFunc(m.Parts, func(p llm.Part) bool {
		_, ok := reasoningContent(p)
		return ok
	})
}

// reasoningContent returns the text of p when it is reasoning that came
// in reasoning_content.
func reasoningContent(p llm.Part) (string, bool) {
	var meta reasoningMeta
	if p.Kind != llm.PartReasoning || len(p.ProviderMetadata) == 0 ||
		json.Unmarshal(p.ProviderMetadata, &meta) != nil || meta.Field != "reasoning_content" {
		return "", false
	}
	return p.Text, true
}

// appendMessage lowers one (already paired) history message.
func appendMessage(out []oa.ChatCompletionMessageParamUnion, m llm.Message, opts options) []oa.ChatCompletionMessageParamUnion {
	switch m.Role {
	case llm.RoleUser:
		if u, ok := lowerUser(m.Parts, opts.textOnly); ok {
			out = append(out, u)
		}
	case llm.RoleAssistant:
		if a, ok := lowerAssistant(m.Parts, opts.echo); ok {
			out = append(out, a)
		}
	case llm.RoleTool:
		for _, p := range m.Parts {
			output := p.Output
			if p.IsError && !strings.HasPrefix(output, "Error (") && !strings.HasPrefix(output, "Error:") {
				// Chat Completions has no error flag: the text says it,
				// unless it already does (the runner's "Error (type): …").
				output = "Error: " + output
			}
			out = append(out, oa.ToolMessage(output, toolCallID(p.CallID)))
		}
	}
	return out
}

// lowerUser lowers a user message: plain string content when it is only
// text (what every compatible server accepts), content parts otherwise;
// with textOnly, images are text notes.
func lowerUser(parts []llm.Part, textOnly bool) (oa.ChatCompletionMessageParamUnion, bool) {
	hasFile := false
	for _, p := range parts {
		hasFile = hasFile || (p.Kind == llm.PartFile && p.File != nil)
	}
	if !hasFile {
		text := joinText(parts)
		return oa.UserMessage(text), text != ""
	}
	var content []oa.ChatCompletionContentPartUnionParam
	for _, p := range parts {
		switch {
		case p.Kind == llm.PartText && p.Text != "":
			content = append(content, oa.TextContentPart(p.Text))
		case p.Kind == llm.PartFile && p.File != nil && textOnly:
			content = append(content, oa.TextContentPart(wire.FileNote(*p.File)))
		case p.Kind == llm.PartFile && p.File != nil:
			content = append(content, lowerFile(*p.File))
		}
	}
	return oa.UserMessage(content), len(content) > 0
}

// lowerFile sends an image the API can fetch (a data: or http(s) URL,
// data: passed through as the API takes it) as an image_url part, and any
// other file as a text note: the API refuses other URLs (file://), and
// would refuse every later request of the Session with them.
func lowerFile(f messages.File) oa.ChatCompletionContentPartUnionParam {
	mediaType := f.Mime
	mt, _, inline := wire.DataURL(f.URL)
	if inline {
		mediaType = mt
	}
	fetchable := inline || strings.HasPrefix(f.URL, "https://") || strings.HasPrefix(f.URL, "http://")
	if wire.IsImage(mediaType) && fetchable {
		return oa.ImageContentPart(oa.ChatCompletionContentPartImageImageURLParam{URL: f.URL})
	}
	return oa.TextContentPart(wire.FileNote(f))
}

// lowerAssistant lowers an assistant message: text (with reasoning from
// another model as text) and tool calls. Reasoning with ProviderMetadata is
// this adapter's own and has no input field, so it is dropped, except
// reasoning that came in reasoning_content, which goes back there. With
// echo, a message without such reasoning sends reasoning_content empty.
func lowerAssistant(parts []llm.Part, echo bool) (oa.ChatCompletionMessageParamUnion, bool) {
	var (
		texts     []string
		calls     []oa.ChatCompletionMessageToolCallUnionParam
		reasoning []string // this provider's, in reasoning_content
	)
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			texts = append(texts, p.Text)
		case llm.PartReasoning:
			if r, ok := reasoningContent(p); ok {
				reasoning = append(reasoning, r)
			} else if len(p.ProviderMetadata) == 0 {
				texts = append(texts, p.Text)
			}
		case llm.PartToolCall:
			if p.Executed {
				// Chat Completions hosts no tools; the runner sends a hosted
				// call only to the provider that ran it.
				continue
			}
			calls = append(calls, oa.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID: toolCallID(p.CallID),
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      wire.ToolName(p.Name),
						Arguments: string(wire.ObjectInput(p.Input)),
					},
				},
			})
		}
	}
	text := joinNonEmpty(texts)
	if text == "" && len(calls) == 0 {
		return oa.ChatCompletionMessageParamUnion{}, false
	}
	a := oa.ChatCompletionAssistantMessageParam{ToolCalls: calls}
	if text != "" {
		a.Content.OfString = param.NewOpt(text)
	}
	if len(reasoning) > 0 || echo {
		// Servers that stream reasoning_content (DeepSeek in thinking mode,
		// vLLM and others for Qwen3 and kin) take it back on the assistant
		// message. DeepSeek refuses a request without it on every
		// assistant message of a turn that called tools, the answer that
		// ends the loop included (the message without tool calls), and
		// ignores it elsewhere: it goes back on every message that has it.
		// Chat Completions has no such field, so only reasoning that came
		// in it goes back, to the same model (the runner keeps
		// ProviderMetadata only for that). With echo (this server's
		// thinking mode) a message without it, from a step that failed or
		// from another model, sends it empty, which DeepSeek accepts:
		// without the field it refuses the request, and every later one.
		a.SetExtraFields(map[string]any{"reasoning_content": joinNonEmpty(reasoning)})
	}
	return oa.ChatCompletionMessageParamUnion{OfAssistant: &a}, true
}

// lowerTool lowers a tool definition. The schema's members are kept as raw
// JSON so that they reach the wire byte for byte.
func lowerTool(t llm.ToolDefinition) (oa.ChatCompletionToolUnionParam, error) {
	schema := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
	if len(t.InputSchema) > 0 {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(t.InputSchema, &members); err != nil {
			return oa.ChatCompletionToolUnionParam{}, llm.Errorf(messages.ErrProviderInvalidRequest,
				"openai: tool %q: input schema is not a JSON object: %v", t.Name, err)
		}
		schema = make(shared.FunctionParameters, len(members)+1)
		for k, v := range members {
			schema[k] = v
		}
		if _, ok := members["properties"]; !ok && bytes.Equal(bytes.TrimSpace(members["type"]), []byte(`"object"`)) {
			// OpenAI refuses an object schema without properties ("object
			// schema missing properties"), which a tool without parameters
			// (an MCP tool, say) often has.
			schema["properties"] = map[string]any{}
		}
	}
	def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
	if t.Description != "" {
		def.Description = param.NewOpt(t.Description)
	}
	return oa.ChatCompletionFunctionTool(def), nil
}

// joinText joins the text parts of a message with blank lines.
func joinText(parts []llm.Part) string {
	var texts []string
	for _, p := range parts {
		if p.Kind == llm.PartText {
			texts = append(texts, p.Text)
		}
	}
	return joinNonEmpty(texts)
}

// joinNonEmpty joins the non-empty strings with blank lines.
func joinNonEmpty(ss []string) string {
	var b strings.Builder
	for _, s := range ss {
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(s)
	}
	return b.String()
}

// maxCallID is the longest tool call ID the Chat Completions API accepts
// ("string too long. Expected a string with maximum length 40").
const maxCallID = 40

// toolCallID returns a call ID as tool_calls[].id and tool_call_id accept
// it: unchanged when it fits, otherwise (another provider's, made before a
// model switch) its start and a hash of the whole ID, so that distinct IDs
// stay distinct and a call and its result agree.
func toolCallID(id string) string {
	if len(id) <= maxCallID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	tag := "_" + hex.EncodeToString(sum[:8])
	n := maxCallID - len(tag)
	for n > 0 && !utf8.RuneStart(id[n]) {
		n-- // never cut a character in two
	}
	return id[:n] + tag
}
