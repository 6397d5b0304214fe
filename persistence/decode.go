package persistence

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
)

// DecodeCreateSession decodes a sessions.create request body strictly:
// one JSON object, no unknown fields, typed errors naming the field.
func DecodeCreateSession(b []byte) (CreateSession, error) {
	var req CreateSession
	if err := DecodeStrict(b, &req); err != nil {
		return req, err
	}
	if req.ID != "" {
		// The body's field is "id", whatever SessionID.Validate calls it.
		if err := messages.ValidateID("id", messages.SessionPrefix, string(req.ID)); err != nil {
			return req, err
		}
	}
	if err := ValidateLocation(req.Location); err != nil {
		return req, err
	}
	return req, ValidateTitle(req.Title)
}

// DecodePromptRequest decodes a sessions.prompt request body strictly. The
// Session ID usually comes from the route, so it may be absent here.
func DecodePromptRequest(b []byte) (PromptRequest, error) {
	var req PromptRequest
	if err := DecodeStrict(b, &req); err != nil {
		return req, err
	}
	if req.ID != "" {
		if err := req.ID.Validate(); err != nil {
			return req, err
		}
	}
	if req.SessionID != "" {
		if err := req.SessionID.Validate(); err != nil {
			return req, err
		}
	}
	d := req.Delivery
	if d == "" {
		d = messages.DefaultDelivery
	}
	// The size limit is the store's; here only shape is checked.
	return req, ValidatePrompt(req.Prompt, d, int(^uint(0)>>1))
}

// DecodeStrict decodes exactly one JSON object with no unknown fields into
// v. Its errors are typed invalid errors that name the field and describe
// what was wanted in JSON terms, never by a Go type: a client knows its
// JSON, not this program's types. The HTTP adapter decodes every request
// body through it, so that all bodies are refused alike.
func DecodeStrict(b []byte, v any) error {
	if !utf8.Valid(b) {
		// JSON text is UTF-8 (RFC 8259). encoding/json would turn each
		// bad byte into U+FFFD and store a title, prompt or path other
		// than the one sent, which another decoder may refuse instead.
		return messages.Errorf(messages.ErrInvalid, "body: not valid UTF-8 (at offset %d)", invalidUTF8At(b))
	}
	if string(bytes.TrimSpace(b)) == "null" {
		// encoding/json takes a null for "leave v as it is", which would
		// read as an empty object and report its first required field.
		return messages.Errorf(messages.ErrInvalid, "body: want a JSON object, got null")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if _, unknown := strings.CutPrefix(err.Error(), "json: unknown field "); unknown {
			// Name the member by its whole path, which encoding/json's
			// message leaves out.
			if merr := checkMembers(b, reflect.TypeOf(v)); merr != nil {
				return merr
			}
		}
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return messages.Errorf(messages.ErrInvalid, "body: unexpected data after the JSON object")
	}
	if at, ok := loneSurrogateAt(b); ok {
		// encoding/json decodes an escaped half of a UTF-16 surrogate
		// pair that the other half does not follow as U+FFFD, storing
		// other text than was sent, as it would an invalid UTF-8 byte.
		return messages.Errorf(messages.ErrInvalid, "body: %s is half a UTF-16 surrogate pair, not a character (at offset %d)", b[at:at+6], at)
	}
	if err := checkMembers(b, reflect.TypeOf(v)); err != nil {
		return err
	}
	if field, ok := duplicateMember(b); ok {
		// encoding/json keeps the last of two members with one name; a
		// proxy or client library may keep the first, so the two would
		// read different requests from the same bytes. (Names that differ
		// only in case checkMembers has refused already.)
		return messages.Errorf(messages.ErrInvalid, "%s: given twice", field)
	}
	return nil
}

// checkMembers walks b, one valid JSON document, beside the type t it
// decodes into, and refuses a member of an object that names no field of
// its struct exactly: encoding/json matches names regardless of case, so
// "Delivery" would be taken for "delivery" here while a client library or
// proxy that reads the same bytes exactly sees another request. Its errors
// name the member by its path ("model.extra", "prompt.files[0].Mime").
// Values that decode themselves (json.Unmarshaler, encoding.TextUnmarshaler)
// or into an interface are not looked into.
func checkMembers(b []byte, t reflect.Type) error {
	w := memberWalk{dec: json.NewDecoder(bytes.NewReader(b))}
	return w.value(t, "")
}

type memberWalk struct{ dec *json.Decoder }

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// value checks the next value of the document, which decodes into t.
func (w memberWalk) value(t reflect.Type, path string) error {
	tok, err := w.dec.Token()
	if err != nil {
		return nil // b was decoded already: this does not happen
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	opaque := t == nil || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
	switch {
	case d == '{' && !opaque && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		for w.dec.More() {
			tok, err := w.dec.Token()
			if err != nil {
				return nil
			}
			name, _ := tok.(string)
			ft, ok := fields[name]
			if !ok {
				for field := range fields {
					if strings.EqualFold(field, name) {
						return messages.Errorf(messages.ErrInvalid, "%s: unknown field (member names are case-sensitive: the field is %q)", member(path, name), field)
					}
				}
				at := path
				if at == "" {
					at = "body"
				}
				return messages.Errorf(messages.ErrInvalid, "%s: unknown field %q", at, clipName(name))
			}
			if err := w.value(ft, member(path, name)); err != nil {
				return err
			}
		}
	case d == '{' && !opaque && t.Kind() == reflect.Map:
		for w.dec.More() {
			tok, err := w.dec.Token()
			if err != nil {
				return nil
			}
			name, _ := tok.(string)
			if err := w.value(t.Elem(), member(path, name)); err != nil {
				return err
			}
		}
	case d == '[' && !opaque && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	default:
		// Not looked into: skip to the matching close.
		for depth := 1; depth > 0; {
			tok, err := w.dec.Token()
			if err != nil {
				return nil
			}
			if d, ok := tok.(json.Delim); ok {
				if d == '{' || d == '[' {
					depth++
				} else {
					depth--
				}
			}
		}
		return nil
	}
	_, _ = w.dec.Token() // the close
	return nil
}

// member is the path of member name inside path.
func member(path, name string) string {
	name = clipName(name)
	if path == "" {
		return name
	}
	return path + "." + name
}

// clipName shortens a member name, the client's and of any length, for
// an error message.
func clipName(s string) string {
	const max = 64
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

// fieldsOf caches jsonFields per struct type: every request body is walked
// against one of a few types, and their fields never change.
var fieldsOf sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields returns the fields of struct type t by their JSON names, as
// encoding/json names them: the tag's name, else the Go name; "-" and
// unexported fields left out; the fields of an untagged embedded struct
// promoted.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsOf.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for n, t := range jsonFields(et) {
					if _, ok := out[n]; !ok {
						out[n] = t
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	fieldsOf.Store(t, out)
	return out
}

// invalidUTF8At returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence, or len(b) when there is none.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// loneSurrogateAt returns the offset of the first \u escape in a string of
// b, one valid JSON document, that holds a UTF-16 surrogate outside a pair:
// a high surrogate (D800 to DBFF) not followed by an escaped low one (DC00
// to DFFF), or a low one without a high one before it. A pair is one
// character and fine.
func loneSurrogateAt(b []byte) (int, bool) {
	inString := false
	for i := 0; i < len(b); i++ {
		if !inString {
			inString = b[i] == '"'
			continue
		}
		switch b[i] {
		case '"':
			inString = false
		case '\\':
			// b is valid JSON, so an escape is complete: one character,
			// or u and four hex digits.
			if b[i+1] != 'u' {
				i++
				continue
			}
			r := escapedRune(b[i+2 : i+6])
			if !utf16.IsSurrogate(r) {
				i += 5
				continue
			}
			if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' &&
				utf16.DecodeRune(r, escapedRune(b[i+8:i+12])) != unicode.ReplacementChar {
				i += 11
				continue
			}
			return i, true
		}
	}
	return 0, false
}

// escapedRune returns the code unit of the four hex digits of a \u escape,
// or -1 when they are not four hex digits.
func escapedRune(hex []byte) rune {
	n, err := strconv.ParseUint(string(hex), 16, 16)
	if err != nil {
		return -1
	}
	return rune(n)
}

// duplicateMember returns the path of the first member whose name appears
// twice in one object of b, a valid JSON document, names that differ only
// in case counting as one (as encoding/json matches them to fields; every
// body decoded here is a struct, none a map whose keys case could tell
// apart).
func duplicateMember(b []byte) (string, bool) {
	type frame struct {
		names   map[string]bool // nil in an array
		name    string          // the current member's name
		wantKey bool
	}
	var stack []frame
	path := func(last string) string {
		var parts []string
		for _, f := range stack[:len(stack)-1] {
			if f.names != nil {
				parts = append(parts, f.name)
			}
		}
		return strings.Join(append(parts, last), ".")
	}
	// valueDone marks the enclosing object ready for its next name.
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].names != nil {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{names: map[string]bool{}, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if n := len(stack); n > 0 && stack[n-1].names != nil && stack[n-1].wantKey {
				f := &stack[n-1]
				if f.names[t] {
					return path(t), true
				}
				f.names[t], f.name, f.wantKey = true, t, false
				continue
			}
		}
		valueDone()
	}
}

// jsonError turns a decoding error into a typed invalid error naming the
// field when the decoder knows it.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return messages.Errorf(messages.ErrInvalid, "body: malformed JSON at offset %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return messages.Errorf(messages.ErrInvalid, "%s: want %s, got %s", field, wantJSON(typ.Type), gotJSON(typ.Value))
	case errors.Is(err, io.EOF):
		return messages.Errorf(messages.ErrInvalid, "body: empty, want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return messages.Errorf(messages.ErrInvalid, "body: truncated JSON")
	}
	// What is left is an unknown field, whose message names it after the
	// package's "json: " prefix, which means nothing to a client.
	return messages.Errorf(messages.ErrInvalid, "body: %s", strings.TrimPrefix(fmt.Sprint(err), "json: "))
}

// textUnmarshaler is encoding.TextUnmarshaler, whose implementations take
// a JSON string.
var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// wantJSON describes the JSON that decodes into t, for error messages.
func wantJSON(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a JSON array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another JSON value"
}

// gotJSON describes the JSON value the decoder found: the decoder reports
// its kind ("array", "bool") and, for a number that does not fit, the
// number itself ("number 1.5").
func gotJSON(value string) string {
	switch value {
	case "object", "array":
		return "an " + value
	case "string", "number":
		return "a " + value
	case "bool":
		return "a boolean"
	}
	if n, ok := strings.CutPrefix(value, "number "); ok {
		// The number is the client's, of any length: echo its start only.
		const max = 32
		if len(n) > max {
			n = n[:max] + "…"
		}
		return "the number " + n
	}
	return value
}
