package script

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// Limits of script files. They keep a mistyped number from freezing a demo.
const (
	maxChunkSize    = 1 << 20
	maxRound        = 1 << 20
	maxTimes        = 1 << 30
	maxDelayMs      = 10 * 60 * 1000
	maxRetryAfterMs = 24 * 60 * 60 * 1000
	maxTokens       = 1 << 53
)

// ParseError reports a script file that cannot be used. Path is a JSON
// pointer (RFC 6901) to the failing value, empty for the whole document and
// for syntax errors, whose Message gives the line and column instead.
type ParseError struct {
	// File is the file name for errors from Load, else empty.
	File    string
	Path    string
	Message string
}

// Error implements error.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("script: ")
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Load reads and parses the script file at path (see Parse). Errors in the
// file are *ParseError values naming the file.
func Load(path string) (*Provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("script: load: %w", err)
	}
	p, err := Parse(data)
	if pe, ok := errors.AsType[*ParseError](err); ok {
		pe.File = path
	}
	return p, err
}

// Parse builds a Provider from a JSON script (the schema is in the package
// documentation). Errors are *ParseError values naming the failing field.
func Parse(data []byte) (*Provider, error) {
	var doc json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, syntaxError(data, err)
	}
	f, err := fields("", doc, "description", "responses", "default", "loop", "chunkSize")
	if err != nil {
		return nil, err
	}
	p := New()
	if raw, ok := f["description"]; ok {
		if _, err := str("/description", raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := f["loop"]; ok {
		if p.loop, err = boolean("/loop", raw); err != nil {
			return nil, err
		}
	}
	if raw, ok := f["chunkSize"]; ok {
		n, err := integer("/chunkSize", raw, 0, maxChunkSize)
		if err != nil {
			return nil, err
		}
		p.SetChunkSize(int(n))
	}
	_, hasResponses := f["responses"]
	_, hasDefault := f["default"]
	if !hasResponses && !hasDefault {
		return nil, &ParseError{Message: `a script needs "responses", "default" or both`}
	}
	if raw, ok := f["responses"]; ok {
		items, err := array("/responses", raw)
		if err != nil {
			return nil, err
		}
		for i, item := range items {
			r, err := response(fmt.Sprintf("/responses/%d", i), item, true)
			if err != nil {
				return nil, err
			}
			p.Add(r)
		}
	}
	if raw, ok := f["default"]; ok {
		r, err := response("/default", raw, false)
		if err != nil {
			return nil, err
		}
		p.Default(r.Steps...)
	}
	return p, nil
}

// response decodes one response object; matched says whether match and
// times are allowed.
func response(path string, raw json.RawMessage, matched bool) (Response, error) {
	known := []string{"name", "steps"}
	if matched {
		known = append(known, "match", "times")
	}
	f, err := fields(path, raw, known...)
	if err != nil {
		return Response{}, err
	}
	var r Response
	if v, ok := f["name"]; ok {
		if r.Name, err = str(path+"/name", v); err != nil {
			return Response{}, err
		}
	}
	if v, ok := f["match"]; ok {
		if r.Match, err = match(path+"/match", v); err != nil {
			return Response{}, err
		}
	}
	if v, ok := f["times"]; ok {
		n, err := integer(path+"/times", v, 0, maxTimes)
		if err != nil {
			return Response{}, err
		}
		r.Times = int(n)
	}
	v, ok := f["steps"]
	if !ok {
		return Response{}, &ParseError{Path: path, Message: `missing field "steps"`}
	}
	if r.Steps, err = steps(path+"/steps", v); err != nil {
		return Response{}, err
	}
	return r, nil
}

// match decodes a match object into a Matcher requiring every given rule.
func match(path string, raw json.RawMessage) (Matcher, error) {
	f, err := fields(path, raw, "round", "lastUserContains", "afterTool", "sessionKey", "systemContains", "model")
	if err != nil {
		return nil, err
	}
	var ms []Matcher
	if v, ok := f["round"]; ok {
		n, err := integer(path+"/round", v, 0, maxRound)
		if err != nil {
			return nil, err
		}
		ms = append(ms, OnRound(int(n)))
	}
	for _, rule := range []struct {
		key  string
		make func(string) Matcher
	}{
		{"lastUserContains", LastUserContains},
		{"afterTool", AfterTool},
		{"sessionKey", SessionKey},
		{"systemContains", SystemContains},
		{"model", ForModel},
	} {
		v, ok := f[rule.key]
		if !ok {
			continue
		}
		s, err := nonEmpty(path+"/"+rule.key, v)
		if err != nil {
			return nil, err
		}
		if rule.key == "model" {
			// A request's model is always "provider/model": another
			// string could never match.
			if _, err := llm.ParseModelRef(s); err != nil {
				return nil, &ParseError{Path: path + "/model", Message: fmt.Sprintf("%q is not a model reference: want \"provider/model\", as requests name their model", s)}
			}
		}
		ms = append(ms, rule.make(s))
	}
	return All(ms...), nil
}

// steps decodes a step array. A finish or error step must be the last one.
func steps(path string, raw json.RawMessage) ([]Step, error) {
	items, err := array(path, raw)
	if err != nil {
		return nil, err
	}
	out := make([]Step, 0, len(items))
	callIDs, hosted, settled := map[string]string{}, map[string]bool{}, map[string]bool{}
	for i, item := range items {
		p := fmt.Sprintf("%s/%d", path, i)
		if i > 0 && (out[i-1].kind == stepFinish || out[i-1].kind == stepFail) {
			return nil, &ParseError{Path: p, Message: fmt.Sprintf("unreachable: the stream already ends at %s/%d", path, i-1)}
		}
		s, err := step(p, item)
		if err != nil {
			return nil, err
		}
		switch s.kind {
		case stepToolCall:
			if prev, dup := callIDs[s.callID]; dup {
				return nil, &ParseError{Path: p + "/toolCall/id", Message: fmt.Sprintf("duplicate tool call id %q (also at %s)", s.callID, prev)}
			}
			callIDs[s.callID] = p
			if s.executed {
				hosted[s.callID] = true
			}
		case stepToolResult:
			// The runner fails a stream whose result settles no unsettled
			// hosted call of its step: every Session using the script
			// would fail there.
			prev, called := callIDs[s.callID]
			switch {
			case !called:
				return nil, &ParseError{Path: p + "/toolResult/id", Message: fmt.Sprintf("no toolCall with id %q before it in this response", s.callID)}
			case !hosted[s.callID]:
				return nil, &ParseError{Path: p + "/toolResult/id", Message: fmt.Sprintf("the toolCall %q at %s is not hosted: only a call with \"executed\": true has its result in the stream", s.callID, prev)}
			}
			if settled[s.callID] {
				return nil, &ParseError{Path: p + "/toolResult/id", Message: fmt.Sprintf("the hosted call %q already has its result", s.callID)}
			}
			settled[s.callID] = true
		}
		out = append(out, s)
	}
	return out, nil
}

// stepKinds are the fields that give a step its kind; exactly one is set.
var stepKinds = []string{"text", "reasoning", "toolCall", "toolResult", "error", "finish", "delayMs"}

// step decodes one step object.
func step(path string, raw json.RawMessage) (Step, error) {
	f, err := fields(path, raw, append([]string{"partial", "metadata", "usage"}, stepKinds...)...)
	if err != nil {
		return Step{}, err
	}
	var kinds []string
	for _, k := range stepKinds {
		if _, ok := f[k]; ok {
			kinds = append(kinds, k)
		}
	}
	switch len(kinds) {
	case 0:
		return Step{}, &ParseError{Path: path, Message: "want exactly one of " + quoteAll(stepKinds) + ", got none"}
	case 1:
	default:
		return Step{}, &ParseError{Path: path, Message: "want exactly one of " + quoteAll(stepKinds) + ", got " + quoteAll(kinds)}
	}
	kind := kinds[0]
	for _, m := range []struct {
		key     string
		allowed []string
	}{{"partial", []string{"text"}}, {"metadata", []string{"text", "reasoning"}}, {"usage", []string{"finish"}}} {
		if _, ok := f[m.key]; ok && !slices.Contains(m.allowed, kind) {
			return Step{}, &ParseError{Path: path + "/" + m.key, Message: fmt.Sprintf("not allowed in a %q step", kind)}
		}
	}
	v := f[kind]
	p := path + "/" + kind
	switch kind {
	case "text", "reasoning":
		text, err := str(p, v)
		if err != nil {
			return Step{}, err
		}
		s := Reasoning(text)
		if kind == "text" {
			s = Text(text)
			if pv, ok := f["partial"]; ok {
				if s.partial, err = boolean(path+"/partial", pv); err != nil {
					return Step{}, err
				}
			}
		}
		if mv, ok := f["metadata"]; ok {
			s.metadata = compact(mv)
		}
		return s, nil
	case "toolCall":
		return toolCall(p, v)
	case "toolResult":
		return toolResult(p, v)
	case "error":
		return failure(p, v)
	case "finish":
		reason, err := str(p, v)
		if err != nil {
			return Step{}, err
		}
		reasons := []string{llm.FinishStop, llm.FinishToolCalls, llm.FinishLength, llm.FinishContentFilter, llm.FinishOther, llm.FinishPause}
		if !slices.Contains(reasons, reason) {
			return Step{}, &ParseError{Path: p, Message: fmt.Sprintf("unknown finish reason %q (want one of %s)", reason, quoteAll(reasons))}
		}
		var u messages.Tokens
		if uv, ok := f["usage"]; ok {
			if u, err = usage(path+"/usage", uv); err != nil {
				return Step{}, err
			}
		}
		return Finish(reason, u), nil
	default: // delayMs
		ms, err := integer(p, v, 0, maxDelayMs)
		if err != nil {
			return Step{}, err
		}
		return Delay(time.Duration(ms) * time.Millisecond), nil
	}
}

// toolCall decodes a toolCall object.
func toolCall(path string, raw json.RawMessage) (Step, error) {
	f, err := fields(path, raw, "id", "name", "input", "metadata", "executed")
	if err != nil {
		return Step{}, err
	}
	id, name, err := callIdentity(path, f)
	if err != nil {
		return Step{}, err
	}
	input := json.RawMessage(`{}`)
	if v, ok := f["input"]; ok {
		input = compact(v)
	}
	s := ToolCall(id, name, string(input))
	if v, ok := f["metadata"]; ok {
		s.metadata = compact(v)
	}
	if v, ok := f["executed"]; ok {
		if s.executed, err = boolean(path+"/executed", v); err != nil {
			return Step{}, err
		}
	}
	return s, nil
}

// callIdentity reads the required, non-empty "id" and "name" of a
// toolCall or toolResult object.
func callIdentity(path string, f map[string]json.RawMessage) (id, name string, err error) {
	for _, field := range []struct {
		key string
		dst *string
	}{{"id", &id}, {"name", &name}} {
		v, ok := f[field.key]
		if !ok {
			return "", "", &ParseError{Path: path, Message: fmt.Sprintf("missing field %q", field.key)}
		}
		if *field.dst, err = nonEmpty(path+"/"+field.key, v); err != nil {
			return "", "", err
		}
	}
	return id, name, nil
}

// toolResult decodes a toolResult object: the result of a hosted call.
func toolResult(path string, raw json.RawMessage) (Step, error) {
	f, err := fields(path, raw, "id", "name", "output", "error", "metadata")
	if err != nil {
		return Step{}, err
	}
	id, name, err := callIdentity(path, f)
	if err != nil {
		return Step{}, err
	}
	s := HostedResult(id, name, "")
	if v, ok := f["output"]; ok {
		if s.text, err = str(path+"/output", v); err != nil {
			return Step{}, err
		}
	}
	if v, ok := f["error"]; ok {
		if s.failed, err = boolean(path+"/error", v); err != nil {
			return Step{}, err
		}
	}
	if v, ok := f["metadata"]; ok {
		s.metadata = compact(v)
	}
	return s, nil
}

// errorTypes are the error types a script may inject.
var errorTypes = []messages.ErrorType{
	messages.ErrProviderRateLimit, messages.ErrProviderInternal, messages.ErrProviderTransport,
	messages.ErrProviderInvalidRequest, messages.ErrProviderContextOverflow, messages.ErrProviderContentFilter,
	messages.ErrProviderAuth, messages.ErrProviderUnknown, messages.ErrAborted,
}

// failure decodes an error object.
func failure(path string, raw json.RawMessage) (Step, error) {
	f, err := fields(path, raw, "type", "message", "retryAfterMs", "statusCode")
	if err != nil {
		return Step{}, err
	}
	v, ok := f["type"]
	if !ok {
		return Step{}, &ParseError{Path: path, Message: `missing field "type"`}
	}
	t, err := str(path+"/type", v)
	if err != nil {
		return Step{}, err
	}
	if !slices.Contains(errorTypes, messages.ErrorType(t)) {
		names := make([]string, len(errorTypes))
		for i, et := range errorTypes {
			names[i] = string(et)
		}
		return Step{}, &ParseError{Path: path + "/type", Message: fmt.Sprintf("unknown error type %q (want one of %s)", t, quoteAll(names))}
	}
	e := &llm.Error{Type: messages.ErrorType(t), Message: "scripted " + t + " error"}
	if v, ok := f["message"]; ok {
		if e.Message, err = str(path+"/message", v); err != nil {
			return Step{}, err
		}
	}
	if v, ok := f["retryAfterMs"]; ok {
		ms, err := integer(path+"/retryAfterMs", v, 0, maxRetryAfterMs)
		if err != nil {
			return Step{}, err
		}
		e.RetryAfter = time.Duration(ms) * time.Millisecond
	}
	if v, ok := f["statusCode"]; ok {
		code, err := integer(path+"/statusCode", v, 100, 599)
		if err != nil {
			return Step{}, err
		}
		e.StatusCode = int(code)
	}
	return Fail(e), nil
}

// usage decodes a usage object.
func usage(path string, raw json.RawMessage) (messages.Tokens, error) {
	f, err := fields(path, raw, "input", "output", "reasoning", "cache")
	if err != nil {
		return messages.Tokens{}, err
	}
	var u messages.Tokens
	for _, field := range []struct {
		key string
		dst *int64
	}{{"input", &u.Input}, {"output", &u.Output}, {"reasoning", &u.Reasoning}} {
		if v, ok := f[field.key]; ok {
			if *field.dst, err = integer(path+"/"+field.key, v, 0, maxTokens); err != nil {
				return messages.Tokens{}, err
			}
		}
	}
	if v, ok := f["cache"]; ok {
		cp := path + "/cache"
		cf, err := fields(cp, v, "read", "write")
		if err != nil {
			return messages.Tokens{}, err
		}
		for _, field := range []struct {
			key string
			dst *int64
		}{{"read", &u.Cache.Read}, {"write", &u.Cache.Write}} {
			if v, ok := cf[field.key]; ok {
				if *field.dst, err = integer(cp+"/"+field.key, v, 0, maxTokens); err != nil {
					return messages.Tokens{}, err
				}
			}
		}
	}
	return u, nil
}

// fields decodes the JSON object raw, rejecting unknown and duplicate
// fields. Fields whose value is null count as absent.
func fields(path string, raw json.RawMessage, known ...string) (map[string]json.RawMessage, error) {
	if k := kindOf(raw); k != "object" {
		return nil, &ParseError{Path: path, Message: "want an object, got " + k}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the opening brace
		return nil, &ParseError{Path: path, Message: err.Error()}
	}
	out := map[string]json.RawMessage{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &ParseError{Path: path, Message: err.Error()}
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, &ParseError{Path: pointer(path, key), Message: err.Error()}
		}
		if !slices.Contains(known, key) {
			return nil, &ParseError{Path: pointer(path, key), Message: "unknown field (known: " + quoteAll(known) + ")"}
		}
		if seen[key] {
			return nil, &ParseError{Path: pointer(path, key), Message: "duplicate field"}
		}
		seen[key] = true
		if kindOf(v) != "null" {
			out[key] = v
		}
	}
	return out, nil
}

// array decodes the JSON array raw.
func array(path string, raw json.RawMessage) ([]json.RawMessage, error) {
	if k := kindOf(raw); k != "array" {
		return nil, &ParseError{Path: path, Message: "want an array, got " + k}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &ParseError{Path: path, Message: err.Error()}
	}
	return items, nil
}

// str decodes a JSON string.
func str(path string, raw json.RawMessage) (string, error) {
	if k := kindOf(raw); k != "string" {
		return "", &ParseError{Path: path, Message: "want a string, got " + k}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &ParseError{Path: path, Message: err.Error()}
	}
	return s, nil
}

// nonEmpty decodes a JSON string that must not be empty.
func nonEmpty(path string, raw json.RawMessage) (string, error) {
	s, err := str(path, raw)
	if err == nil && s == "" {
		err = &ParseError{Path: path, Message: "must not be empty"}
	}
	return s, err
}

// boolean decodes a JSON boolean.
func boolean(path string, raw json.RawMessage) (bool, error) {
	if k := kindOf(raw); k != "boolean" {
		return false, &ParseError{Path: path, Message: "want a boolean, got " + k}
	}
	return bytes.Equal(bytes.TrimSpace(raw), []byte("true")), nil
}

// integer decodes a JSON number that must be an integer in [lo, hi].
func integer(path string, raw json.RawMessage, lo, hi int64) (int64, error) {
	if k := kindOf(raw); k != "number" {
		return 0, &ParseError{Path: path, Message: "want an integer, got " + k}
	}
	text := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		// Accept integral values written with a fraction or exponent (2.0,
		// 1e3), as JSON does not tell them apart.
		f, ferr := strconv.ParseFloat(text, 64)
		if ferr != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, &ParseError{Path: path, Message: "want an integer, got " + text}
		}
		n = int64(f)
	}
	if n < lo || n > hi {
		return 0, &ParseError{Path: path, Message: fmt.Sprintf("%d is out of range [%d, %d]", n, lo, hi)}
	}
	return n, nil
}

// compact returns raw without insignificant white space.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		// raw came out of the decoder, so it is valid JSON.
		return cloneRaw(raw)
	}
	return json.RawMessage(b.Bytes())
}

// kindOf names the JSON type of the valid JSON value raw.
func kindOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// pointer appends key to the JSON pointer path, escaped per RFC 6901.
func pointer(path, key string) string {
	return path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// quoteAll quotes and joins names.
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// syntaxError turns a decoding error of the whole document into a
// *ParseError with a line and column when the decoder gives an offset.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return &ParseError{Message: "invalid JSON: " + err.Error()}
	}
	// Offset counts the bytes read including the offending one.
	off := min(max(se.Offset-1, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return &ParseError{Message: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se)}
}
