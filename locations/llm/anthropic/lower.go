package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// placeholderDescription describes a tool declared only because history uses
// it (see the package documentation).
const placeholderDescription = "Not available in this step."

// lower builds the Messages request for req.
func lower(req llm.Request, cfg Config) (sdk.MessageNewParams, error) {
	if req.Model.ID == "" {
		return sdk.MessageNewParams{}, llm.Errorf(messages.ErrProviderInvalidRequest, "anthropic: request has no model ID")
	}
	maxTokens := req.MaxOutputTokens
	if maxTokens <= 0 {
		maxTokens = cfg.MaxTokens
	}
	params := sdk.MessageNewParams{Model: req.Model.ID, MaxTokens: int64(maxTokens)}
	for _, s := range req.System {
		if s != "" {
			params.System = append(params.System, sdk.TextBlockParam{Text: s})
		}
	}
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	}

	var turns turns
	paired := wire.UniqueCallIDs(wire.PairToolResults(req.Messages))
	continued := continuedMessage(paired)
	for i, m := range paired {
		turns.continued = i == continued
		turns.add(m)
	}
	turns.goOn()
	params.Messages = turns.out
	trimFinalText(params.Messages)
	if n := len(params.Messages); n > 0 {
		markCache(params.Messages[n-1])
	}

	for _, t := range req.Tools {
		tool, err := lowerTool(t)
		if err != nil {
			return sdk.MessageNewParams{}, err
		}
		params.Tools = append(params.Tools, tool)
	}
	toolChoice := req.ToolChoice
	// Hosted calls in history are not tool_use blocks and need no
	// placeholder: only local ones count here.
	if len(params.Tools) == 0 && len(turns.toolNames) > 0 {
		for _, name := range turns.toolNames {
			if slices.Contains(req.HostedTools, name) {
				// A hosted call cut off before its input was complete
				// (the runner could not tell it from a local one): its
				// name is declared already, and the API refuses a
				// request that declares a name twice.
				continue
			}
			params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &sdk.ToolParam{
				Name:        name,
				Description: param.NewOpt(placeholderDescription),
				InputSchema: sdk.ToolInputSchemaParam{Type: "object"},
			}})
		}
		if len(req.HostedTools) == 0 {
			// Nothing may be called. With hosted tools, tool_choice none
			// would forbid them too on a step that allows them: the
			// placeholders' description says they are not available, and
			// a call to one fails as an unknown tool.
			toolChoice = llm.ToolChoiceNone
		}
	}
	hosted, err := hostedTools(req.HostedTools)
	if err != nil {
		return sdk.MessageNewParams{}, err
	}
	params.Tools = append(params.Tools, hosted...)
	if toolChoice == llm.ToolChoiceNone && len(params.Tools) > 0 {
		params.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	}

	switch {
	case !thinkingAllowed(params.Messages):
	case cfg.AdaptiveThinking:
		params.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
	case cfg.ThinkingBudget > 0 && cfg.ThinkingBudget < maxTokens:
		params.Thinking = sdk.ThinkingConfigParamUnion{OfEnabled: &sdk.ThinkingConfigEnabledParam{BudgetTokens: int64(cfg.ThinkingBudget)}}
	}
	return params, nil
}

// thinkingAllowed reports whether a request with msgs may enable thinking.
// With thinking on, the API refuses a history whose last assistant message
// called tools unless that message starts with a signed thinking block
// ("a final assistant message must start with a thinking block"). The
// runner sends no such block for a step that failed, or for another
// model's step (provider state is replayed only for the same model's
// steps that succeeded): a Session interrupted while this model's tools
// ran, or switched to it in the middle of a tool loop, would have every
// later request refused. Such a request runs without thinking instead,
// until the model's own answer ends the tool loop. The same holds for a
// request that ends with an assistant message (a paused turn).
func thinkingAllowed(msgs []sdk.MessageParam) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		a := msgs[i].OfAssistant
		if a == nil {
			continue
		}
		calls := slices.ContainsFunc(a.Content, func(b sdk.ContentBlockParamUnion) bool { return b.OfToolUse != nil })
		final := i == len(msgs)-1
		return !calls && !final || a.Content[0].OfThinking != nil || a.Content[0].OfRedactedThinking != nil
	}
	return true
}

// trimFinalText trims the trailing white space of the text that ends a
// request ending with an assistant message (a paused turn of hosted tool
// use, sent back to go on): the API refuses it there ("final assistant
// content cannot end with trailing whitespace").
func trimFinalText(msgs []sdk.MessageParam) {
	if len(msgs) == 0 || msgs[len(msgs)-1].OfAssistant == nil {
		return
	}
	content := msgs[len(msgs)-1].OfAssistant.Content
	if b := content[len(content)-1].OfText; b != nil {
		b.Text = strings.TrimRightFunc(b.Text, unicode.IsSpace)
	}
}

// hostedTools returns the server tool definitions for the names in
// HostedTools, each once.
func hostedTools(names []string) ([]sdk.ToolUnionParam, error) {
	var tools []sdk.ToolUnionParam
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			continue
		}
		seen[name] = true
		switch name {
		case "web_search":
			// The GA version; the name defaults to web_search.
			tools = append(tools, sdk.ToolUnionParam{OfWebSearchTool20250305: &sdk.WebSearchTool20250305Param{}})
		default:
			return nil, llm.Errorf(messages.ErrProviderInvalidRequest, "anthropic: unknown hosted tool %q", name)
		}
	}
	return tools, nil
}

// turns accumulates the conversation, merging consecutive same-role turns.
type turns struct {
	out       []sdk.MessageParam
	toolNames []string // tools used in history, in first-use order
	seen      map[string]bool
	// continued marks the assistant message the request continues, whose
	// unanswered hosted calls go back bare (see deferredCalls).
	continued bool
	// hosted says whether the last assistant message added sent hosted
	// blocks: a turn of hosted tool use, which the next assistant message
	// goes on with in the same turn.
	hosted bool
}

// goOn adds a user turn asking to go on after an assistant message that
// is not a turn of hosted tool use, when the request would end with it or
// another assistant message follows it: an explicit run after a step that
// was interrupted, or that answered, sends such a history. The API takes
// a final assistant message as a prefill, which recent models refuse
// ("This model does not support assistant message prefill. The
// conversation must end with a user message."), as it refuses one ending
// in white space, or with thinking on one that does not start with a
// thinking block: every run of the Session would be refused until a new
// prompt came. The step that such a request answers follows the same turn
// in later requests, which therefore show the model what it was sent.
func (t *turns) goOn() {
	if n := len(t.out); n > 0 && t.out[n-1].OfAssistant != nil && !t.hosted {
		t.out = append(t.out, sdk.NewUserMessage(sdk.NewTextBlock(wire.ContinuePrompt)))
	}
}

// continuedMessage returns the index of the assistant message a request
// continues: the last one, when only its tool results and system
// reminders follow it; -1 otherwise.
func continuedMessage(msgs []llm.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case llm.RoleAssistant:
			return i
		case llm.RoleTool, llm.RoleSystem:
		default:
			return -1
		}
	}
	return -1
}

// deferredCalls returns the hosted calls of the message a request continues
// that it left unanswered (a paused turn, or one that also called a local
// tool): the API runs them once it gets them back, and their results come
// in the response.
func deferredCalls(msgs []llm.Message) map[string]llm.Part {
	// Pairing regroups only tool results, so the continued message is the
	// same before and after it.
	i := continuedMessage(msgs)
	if i < 0 {
		return nil
	}
	var out map[string]llm.Part
	parts := msgs[i].Parts
	answered := map[string]bool{}
	for _, p := range parts {
		if hostedPart(p) && p.Kind == llm.PartToolResult {
			answered[p.CallID] = true
		}
	}
	for _, p := range parts {
		if hostedPart(p) && p.Kind == llm.PartToolCall && !answered[p.CallID] && p.CallID != "" && p.Name != "" {
			if out == nil {
				out = map[string]llm.Part{}
			}
			out[p.CallID] = p
		}
	}
	return out
}

// add lowers one (already paired) history message.
func (t *turns) add(m llm.Message) {
	var blocks []sdk.ContentBlockParamUnion
	assistant := false
	switch m.Role {
	case llm.RoleSystem:
		if text := joinText(m.Parts); hasText(text) {
			blocks = append(blocks, sdk.NewTextBlock("<system-reminder>\n"+text+"\n</system-reminder>"))
		}
	case llm.RoleUser:
		for _, p := range m.Parts {
			switch {
			case p.Kind == llm.PartText && hasText(p.Text):
				blocks = append(blocks, sdk.NewTextBlock(p.Text))
			case p.Kind == llm.PartFile && p.File != nil:
				blocks = append(blocks, lowerFile(*p.File))
			}
		}
	case llm.RoleTool:
		for _, p := range m.Parts {
			r := sdk.ToolResultBlockParam{ToolUseID: toolUseID(p.CallID)}
			if hasText(p.Output) { // the API rejects empty and blank text blocks
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: p.Output}}}
			}
			if p.IsError {
				r.IsError = param.NewOpt(true)
			}
			blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &r})
		}
	case llm.RoleAssistant:
		assistant = true
		pairs := hostedPairs(m.Parts, t.continued)
		defer func() {
			if len(blocks) > 0 {
				t.hosted = len(pairs) > 0
			}
		}()
		for i, p := range m.Parts {
			if hostedPart(p) {
				if b, ok := pairs[i]; ok {
					blocks = append(blocks, b)
				}
				continue
			}
			if b, ok := t.assistantBlock(p); ok {
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) == 0 {
		return
	}
	if assistant {
		t.goOn()
	}
	if n := len(t.out); n > 0 {
		last := t.out[n-1]
		switch {
		case assistant && last.OfAssistant != nil:
			last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
			return
		case !assistant && last.OfUser != nil:
			last.OfUser.Content = append(last.OfUser.Content, blocks...)
			return
		}
	}
	if assistant {
		t.out = append(t.out, sdk.NewAssistantMessage(blocks...))
	} else {
		t.out = append(t.out, sdk.NewUserMessage(blocks...))
	}
}

// assistantBlock lowers one assistant part.
func (t *turns) assistantBlock(p llm.Part) (sdk.ContentBlockParamUnion, bool) {
	switch p.Kind {
	case llm.PartText:
		if !hasText(p.Text) {
			return sdk.ContentBlockParamUnion{}, false
		}
		b := sdk.TextBlockParam{Text: p.Text, Citations: webCitations(p.ProviderMetadata)}
		return sdk.ContentBlockParamUnion{OfText: &b}, true
	case llm.PartReasoning:
		var meta metadata
		if len(p.ProviderMetadata) > 0 && json.Unmarshal(p.ProviderMetadata, &meta) == nil {
			switch {
			case meta.Redacted != "":
				return sdk.NewRedactedThinkingBlock(meta.Redacted), true
			case meta.Signature != "":
				return sdk.NewThinkingBlock(meta.Signature, p.Text), true
			}
		}
		// Another model's reasoning (or unsigned): plain text.
		return sdk.NewTextBlock(p.Text), hasText(p.Text)
	case llm.PartToolCall:
		if t.seen == nil {
			t.seen = map[string]bool{}
		}
		name := wire.ToolName(p.Name)
		if !t.seen[name] {
			t.seen[name] = true
			t.toolNames = append(t.toolNames, name)
		}
		return sdk.NewToolUseBlock(toolUseID(p.CallID), wire.ObjectInput(p.Input), name), true
	}
	return sdk.ContentBlockParamUnion{}, false
}

// webCitations returns the web search citations a text part's metadata
// kept (see metadata), which go back with their text: the API asks for
// their encrypted_index in later turns. Citations of other kinds point
// into documents or search results this adapter never sends with
// citations enabled, so they stay in the log only.
func webCitations(raw json.RawMessage) []sdk.TextCitationParamUnion {
	var meta metadata
	if len(raw) == 0 || json.Unmarshal(raw, &meta) != nil {
		return nil
	}
	var out []sdk.TextCitationParamUnion
	for _, c := range meta.Citations {
		var w struct {
			Type           string  `json:"type"`
			CitedText      string  `json:"cited_text"`
			EncryptedIndex string  `json:"encrypted_index"`
			Title          *string `json:"title"`
			URL            string  `json:"url"`
		}
		if json.Unmarshal(c, &w) != nil || w.Type != "web_search_result_location" || w.EncryptedIndex == "" || w.URL == "" {
			continue
		}
		title := param.Null[string]()
		if w.Title != nil {
			title = param.NewOpt(*w.Title)
		}
		out = append(out, sdk.TextCitationParamUnion{OfWebSearchResultLocation: &sdk.CitationWebSearchResultLocationParam{
			Title: title, CitedText: w.CitedText, EncryptedIndex: w.EncryptedIndex, URL: w.URL}})
	}
	return out
}

// hasText reports whether s has a character other than white space: the
// API refuses a text block without one ("text content blocks must contain
// non-whitespace text"), which a model's turn may hold (a "\n\n" before
// its tool calls), and every later request would carry it.
func hasText(s string) bool { return strings.TrimSpace(s) != "" }

// toolUseID returns a call ID as tool_use.id and tool_result.tool_use_id
// accept it (^[a-zA-Z0-9_-]+$): unchanged when it does, otherwise (another
// provider's, such as "functions.read:0" or "call|abc") with each other
// byte replaced by "_" and a hash of the whole ID appended, so that
// distinct IDs stay distinct and a call and its result agree.
func toolUseID(id string) string {
	if id != "" && strings.IndexFunc(id, func(r rune) bool { return !idRune(r) }) < 0 {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !idRune(rune(c)) {
			b[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(id))
	return "toolu_" + string(b) + "_" + hex.EncodeToString(sum[:6])
}

// idRune reports whether r may appear in a tool_use ID.
func idRune(r rune) bool {
	return r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// hostedPart reports whether p is a provider-hosted call or result.
func hostedPart(p llm.Part) bool {
	return p.Executed && (p.Kind == llm.PartToolCall || p.Kind == llm.PartToolResult)
}

// hostedPairs lowers the hosted calls of an assistant message that a
// later hosted result of the same message answers, each call to a
// server_tool_use block and its result to the block the model sent, keyed
// by part index. Every other hosted part is left out: the API rejects a
// server_tool_use without its result, and a result without its call.
func hostedPairs(parts []llm.Part, continued bool) map[int]sdk.ContentBlockParamUnion {
	out := map[int]sdk.ContentBlockParamUnion{}
	open := map[string]int{} // unanswered call ID -> part index
	seen := map[string]bool{}
	for i, p := range parts {
		switch {
		case !hostedPart(p):
		case p.Kind == llm.PartToolCall:
			// A repeated ID would make the pairing ambiguous, and the API
			// refuses it anyway: only its first call counts.
			if !seen[p.CallID] && p.CallID != "" && p.Name != "" {
				seen[p.CallID] = true
				open[p.CallID] = i
			}
		case p.Kind == llm.PartToolResult:
			j, ok := open[p.CallID]
			if !ok {
				continue
			}
			delete(open, p.CallID) // answered, even by a result that is not sent
			if res, ok := hostedResult(p); ok {
				out[j], out[i] = serverToolUse(parts[j]), res
			}
		}
	}
	if continued {
		// Calls the provider left for its next turn go back bare: it runs
		// them now, and their results come in its response.
		for _, j := range open {
			out[j] = serverToolUse(parts[j])
		}
	}
	return out
}

// serverToolUse lowers a hosted call: the call's own fields, plus the other
// members of the block as it arrived (its ProviderMetadata, see
// callMetadata). Metadata that does not decode is left out rather than
// losing the call, which is whole without it.
func serverToolUse(p llm.Part) sdk.ContentBlockParamUnion {
	var members map[string]json.RawMessage
	if len(p.ProviderMetadata) == 0 || json.Unmarshal(p.ProviderMetadata, &members) != nil || members == nil {
		members = map[string]json.RawMessage{}
	}
	id, _ := json.Marshal(p.CallID)
	name, _ := json.Marshal(p.Name)
	members["type"] = json.RawMessage(`"server_tool_use"`)
	members["id"], members["name"], members["input"] = id, name, wire.ObjectInput(p.Input)
	raw, _ := json.Marshal(members) // raw JSON values always marshal
	return param.Override[sdk.ContentBlockParamUnion](json.RawMessage(raw))
}

// hostedResult lowers a hosted result to the block the model sent, which
// its ProviderMetadata holds as received. It must decode as one of the
// result blocks and answer the part's call, or the result is not sent. The
// block goes out as raw JSON rather than through the SDK's ToParam, which
// rebuilds it from the fields this SDK version models and would drop any
// others (the SDK sends blocks it does not model the same way).
func hostedResult(p llm.Part) (sdk.ContentBlockParamUnion, bool) {
	var b sdk.ContentBlockUnion
	if len(p.ProviderMetadata) == 0 || json.Unmarshal(p.ProviderMetadata, &b) != nil ||
		!resultTypes[b.Type] || b.ToolUseID != p.CallID || !b.JSON.Content.Valid() {
		return sdk.ContentBlockParamUnion{}, false
	}
	return param.Override[sdk.ContentBlockParamUnion](p.ProviderMetadata), true
}

// lowerFile lowers an attachment: images and PDFs natively, from a data: URL
// or an http(s) URL; anything else as a text note.
func lowerFile(f messages.File) sdk.ContentBlockParamUnion {
	mediaType, data, isData := wire.DataURL(f.URL)
	if !isData {
		mediaType = f.Mime
	}
	remote := strings.HasPrefix(f.URL, "https://") || strings.HasPrefix(f.URL, "http://")
	switch {
	case wire.IsImage(mediaType) && isData:
		return sdk.NewImageBlockBase64(mediaType, data)
	case wire.IsImage(mediaType) && remote:
		return sdk.NewImageBlock(sdk.URLImageSourceParam{URL: f.URL})
	case mediaType == "application/pdf" && isData:
		return sdk.NewDocumentBlock(sdk.Base64PDFSourceParam{Data: data})
	case mediaType == "application/pdf" && remote:
		return sdk.NewDocumentBlock(sdk.URLPDFSourceParam{URL: f.URL})
	}
	return sdk.NewTextBlock(wire.FileNote(f))
}

// cacheable reports whether a block may carry cache_control (thinking blocks
// may not).
func cacheable(b sdk.ContentBlockParamUnion) bool {
	return b.OfThinking == nil && b.OfRedactedThinking == nil && b.GetCacheControl() != nil
}

// markCache sets a cache breakpoint on the last cacheable block of m.
func markCache(m sdk.MessageParam) {
	var content []sdk.ContentBlockParamUnion
	switch {
	case m.OfUser != nil:
		content = m.OfUser.Content
	case m.OfAssistant != nil:
		content = m.OfAssistant.Content
	}
	for i := len(content) - 1; i >= 0; i-- {
		if cacheable(content[i]) {
			*content[i].GetCacheControl() = sdk.NewCacheControlEphemeralParam()
			return
		}
	}
}

// lowerTool lowers a tool definition; the schema's members are kept as raw
// JSON so that they reach the wire byte for byte.
func lowerTool(t llm.ToolDefinition) (sdk.ToolUnionParam, error) {
	// An explicit type keeps input_schema on the wire (the API requires it)
	// even for a tool without parameters.
	tool := &sdk.ToolParam{Name: t.Name, InputSchema: sdk.ToolInputSchemaParam{Type: "object"}}
	if t.Description != "" {
		tool.Description = param.NewOpt(t.Description)
	}
	if len(t.InputSchema) > 0 {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(t.InputSchema, &members); err != nil {
			return sdk.ToolUnionParam{}, llm.Errorf(messages.ErrProviderInvalidRequest,
				"anthropic: tool %q: input schema is not a JSON object: %v", t.Name, err)
		}
		for k, v := range members {
			switch k {
			case "type": // always "object"
			case "properties":
				tool.InputSchema.Properties = v
			case "required":
				if err := json.Unmarshal(v, &tool.InputSchema.Required); err != nil {
					return sdk.ToolUnionParam{}, llm.Errorf(messages.ErrProviderInvalidRequest,
						"anthropic: tool %q: required is not a list of names: %v", t.Name, err)
				}
			default:
				if tool.InputSchema.ExtraFields == nil {
					tool.InputSchema.ExtraFields = map[string]any{}
				}
				tool.InputSchema.ExtraFields[k] = v
			}
		}
	}
	return sdk.ToolUnionParam{OfTool: tool}, nil
}

// joinText joins the text parts of a message with blank lines.
func joinText(parts []llm.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Kind != llm.PartText || p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}
