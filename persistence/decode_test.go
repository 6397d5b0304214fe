package persistence_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

func TestDecodeRequests(t *testing.T) {
	for _, tc := range []struct {
		body  string
		field string // substring of the error, "" for success
	}{
		{`{"location":{"directory":"/tmp"}}`, ""},
		{`{"id":"ses_x","location":{"directory":"/tmp"},"agent":"build","model":{"providerID":"a","id":"b"}}`, ""},
		{`{"location":{"directory":"tmp"}}`, "location.directory"},
		{`{"location":{}}`, "location.directory"},
		{`{"location":{"directory":"/tmp/a\u0000b"}}`, "location.directory: contains a NUL byte"},
		{`{"id":"bad","location":{"directory":"/tmp"}}`, `id: want "ses_"`},
		{`{"location":{"directory":5}}`, "location.directory"},
		{`{"location":{"directory":"/tmp"},"extra":1}`, "unknown field"},
		{`{"location":{"directory":"/tmp"}} {}`, "after the JSON object"},
		{`{"location":`, "truncated"},
		{``, "empty"},
		{`[`, "truncated"},
		{`{"location":{"directory":"/tmp"},"title":"` + strings.Repeat("é", persistence.MaxTitleBytes/2) + `"}`, ""},
		{`{"location":{"directory":"/tmp"},"title":"` + strings.Repeat("t", persistence.MaxTitleBytes+1) + `"}`, "title"},
	} {
		_, err := persistence.DecodeCreateSession([]byte(tc.body))
		check(t, tc.body, err, tc.field)
	}
	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{"prompt":{"text":"hi"}}`, ""},
		{`{"id":"msg_1","prompt":{"text":"hi"},"delivery":"queue","resume":false}`, ""},
		{`{"prompt":{"text":""}}`, "prompt.text"},
		{`{"prompt":{"text":"hi"},"delivery":"soon"}`, "delivery"},
		{`{"id":"x","prompt":{"text":"hi"}}`, "id"},
		{`{"sessionID":"ses_x","prompt":{"text":"hi"}}`, ""},
		{`{"sessionID":"x","prompt":{"text":"hi"}}`, "sessionID"},
		{`{"prompt":{"text":"hi"},"resume":"yes"}`, "resume"},
		{`{"prompt":"hi"}`, "prompt"},
	} {
		_, err := persistence.DecodePromptRequest([]byte(tc.body))
		check(t, tc.body, err, tc.field)
	}
}

// TestDecodeErrorsDescribeJSON: a value of the wrong JSON type is named
// with its field and described in JSON terms, never by the Go type it
// would have decoded into; the decoder's "json:" prefix is dropped too.
func TestDecodeErrorsDescribeJSON(t *testing.T) {
	for body, want := range map[string]string{
		`[]`:                            "body: want a JSON object, got an array",
		`5`:                             "body: want a JSON object, got a number",
		`true`:                          "body: want a JSON object, got a boolean",
		`{"location":[]}`:               "location: want a JSON object, got an array",
		`{"location":{"directory":{}}}`: "location.directory: want a string, got an object",
		`{"id":1,"location":{}}`:        "id: want a string, got a number",
		`{"model":[],"location":{}}`:    "model: want a JSON object, got an array",
		`{"nope":1}`:                    `body: unknown field "nope"`,
		// The body's field is id, as in a prompt, not the sessionID of a route.
		`{"id":"ses_a b","location":{"directory":"/tmp"}}`: `id: character ' ' is not allowed (use 0-9, A-Z, a-z, _ and -)`,
		`{"id":"x","location":{"directory":"/tmp"}}`:       `id: want "ses_" followed by 1 to 64 characters, got "x"`,
	} {
		_, err := persistence.DecodeCreateSession([]byte(body))
		if err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want invalid %q", body, err, want)
		}
	}
	for body, want := range map[string]string{
		`[]`:                                       "body: want a JSON object, got an array",
		`{"prompt":{"text":"a","files":"f"}}`:      "prompt.files: want a JSON array, got a string",
		`{"prompt":{"text":"a","files":[[]]}}`:     "prompt.files: want a JSON object, got an array",
		`{"prompt":{"text":"a"},"resume":1}`:       "resume: want true or false, got a number",
		`{"prompt":{"text":"a"},"delivery":false}`: "delivery: want a string, got a boolean",
	} {
		_, err := persistence.DecodePromptRequest([]byte(body))
		if err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want invalid %q", body, err, want)
		}
	}
	// Every Go kind a request field can have is described in JSON terms.
	var v struct {
		N int64          `json:"n"`
		U uint8          `json:"u"`
		F float64        `json:"f"`
		B []byte         `json:"b"`
		M map[string]int `json:"m"`
		A [2]string      `json:"a"`
		P *bool          `json:"p"`
	}
	for body, want := range map[string]string{
		`{"n":1.5}`: "n: want an integer, got the number 1.5",
		`{"u":-1}`:  "u: want an integer, got the number -1",
		`{"n":0.` + strings.Repeat("5", 1000) + `}`: "n: want an integer, got the number 0." + strings.Repeat("5", 30) + "…",
		// A number of exactly the echoed length is echoed whole.
		`{"n":0.` + strings.Repeat("5", 30) + `}`: "n: want an integer, got the number 0." + strings.Repeat("5", 30),
		`{"f":"x"}`: "f: want a number, got a string",
		`{"b":1}`:   "b: want a base64 string, got a number",
		`{"m":[]}`:  "m: want a JSON object, got an array",
		`{"a":{}}`:  "a: want a JSON array, got an object",
		`{"p":"x"}`: "p: want true or false, got a string",
	} {
		err := persistence.DecodeStrict([]byte(body), &v)
		if err == nil || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

func check(t *testing.T, body string, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Errorf("%s: %v", body, err)
		}
		return
	}
	if err == nil || messages.TypeOf(err) != messages.ErrInvalid || !strings.Contains(err.Error(), field) {
		t.Errorf("%s: want invalid error naming %q, got %v", body, field, err)
	}
}

// wantNoReplacement fails when an accepted body decoded to a string with
// U+FFFD in it that the body did not send, as the character or its escape:
// the decoder put it there in place of something it could not decode.
func wantNoReplacement(t *testing.T, b []byte, decoded ...string) {
	t.Helper()
	if bytes.ContainsRune(b, unicode.ReplacementChar) || bytes.Contains(bytes.ToLower(b), []byte(`\ufffd`)) {
		return
	}
	for _, s := range decoded {
		if strings.ContainsRune(s, unicode.ReplacementChar) {
			t.Fatalf("%q decoded with U+FFFD in %q", b, s)
		}
	}
}

func FuzzDecodeCreateSession(f *testing.F) {
	f.Add([]byte(`{"id":"ses_x","location":{"directory":"/tmp","workspaceID":"wrk_1"},"title":"t"}`))
	f.Add([]byte(`{"location":{"directory":"/"}}`))
	f.Add([]byte(`{"location":{"directory":"/"},"title":"\ud83d\ude00 \ud800"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := persistence.DecodeCreateSession(b)
		if err != nil {
			if messages.TypeOf(err) != messages.ErrInvalid {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		wantNoReplacement(t, b, req.Title, req.Location.Directory)
		if req.ID != "" && req.ID.Validate() != nil || !strings.HasPrefix(req.Location.Directory, "/") || persistence.ValidateTitle(req.Title) != nil {
			t.Fatalf("accepted invalid request %+v", req)
		}
	})
}

func FuzzDecodePromptRequest(f *testing.F) {
	f.Add([]byte(`{"id":"msg_1","prompt":{"text":"hi","files":[{"mime":"text/plain","url":"file:///a"}]},"delivery":"queue","resume":true}`))
	f.Add([]byte(`{"prompt":{"text":"x"}}`))
	f.Add([]byte(`{"prompt":{"text":"\ud83d\ude00\udc00\\ud800"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := persistence.DecodePromptRequest(b)
		if err != nil {
			if messages.TypeOf(err) != messages.ErrInvalid {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		decoded := []string{req.Prompt.Text}
		for _, f := range req.Prompt.Files {
			decoded = append(decoded, f.Mime, f.URL, f.Filename)
		}
		wantNoReplacement(t, b, decoded...)
		if strings.TrimSpace(req.Prompt.Text) == "" && len(req.Prompt.Files) == 0 {
			t.Fatalf("accepted empty prompt %+v", req)
		}
		if req.Delivery != "" && !req.Delivery.Valid() {
			t.Fatalf("accepted delivery %q", req.Delivery)
		}
		// Every member it accepted is named exactly as the API names it.
		var top map[string]json.RawMessage
		var prompt map[string]json.RawMessage
		if json.Unmarshal(b, &top) != nil || json.Unmarshal(top["prompt"], &prompt) != nil {
			t.Fatalf("accepted %q, which is no object with a prompt object", b)
		}
		for k := range top {
			if !slices.Contains([]string{"id", "sessionID", "prompt", "delivery", "resume"}, k) {
				t.Fatalf("accepted member %q", k)
			}
		}
		for k := range prompt {
			if k != "text" && k != "files" {
				t.Fatalf("accepted prompt member %q", k)
			}
		}
	})
}

// TestDecodeRefusesInvalidUTF8: a body that is not UTF-8 is refused, not
// decoded with U+FFFD in place of its bad bytes, which would store a title,
// prompt, directory or instruction other than the one sent.
func TestDecodeRefusesInvalidUTF8(t *testing.T) {
	for body, want := range map[string]string{
		"{\"location\":{\"directory\":\"/tmp\"},\"title\":\"a\xffb\"}": "body: not valid UTF-8 (at offset 43)",
		"{\"location\":{\"directory\":\"/tmp/\xc3\"}}":                 "body: not valid UTF-8 (at offset 31)",
	} {
		if _, err := persistence.DecodeCreateSession([]byte(body)); err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
			t.Errorf("%q: %v, want invalid %q", body, err, want)
		}
	}
	if _, err := persistence.DecodePromptRequest([]byte("{\"prompt\":{\"text\":\"\xed\xa0\x80\"}}")); err == nil || err.(*messages.Error).Message != "body: not valid UTF-8 (at offset 19)" {
		t.Errorf("a prompt with an encoded surrogate: %v", err)
	}
	var v struct {
		Text *string `json:"text"`
	}
	if err := persistence.DecodeStrict([]byte("{\"text\":\"caf\xe9\"}"), &v); err == nil || messages.TypeOf(err) != messages.ErrInvalid {
		t.Errorf("Latin-1 text: %v", err)
	}
	// Valid UTF-8, escaped or not, decodes as sent.
	if err := persistence.DecodeStrict([]byte("{\"text\":\"caf\u00e9 \\u00e9 \xf0\x9f\x99\x82\"}"), &v); err != nil || *v.Text != "café é 🙂" {
		t.Errorf("UTF-8 text: %v, %q", err, *v.Text)
	}
}

// TestDecodeRefusesLoneSurrogates: a \u escape holding half a UTF-16
// surrogate pair that the other half does not complete is no character;
// encoding/json decoded it as U+FFFD, so the text stored was not the text
// sent. It is refused like an invalid UTF-8 byte, at its offset; an
// escaped pair is one character and decodes as sent.
func TestDecodeRefusesLoneSurrogates(t *testing.T) {
	for body, want := range map[string]string{
		`{"prompt":{"text":"a\ud800"}}`:            `body: \ud800 is half a UTF-16 surrogate pair, not a character (at offset 20)`,
		`{"prompt":{"text":"\ud800b"}}`:            `body: \ud800 is half a UTF-16 surrogate pair, not a character (at offset 19)`,
		`{"prompt":{"text":"\udc00"}}`:             `body: \udc00 is half a UTF-16 surrogate pair, not a character (at offset 19)`,
		`{"prompt":{"text":"\uDBFF\uDBFF\uDC00"}}`: `body: \uDBFF is half a UTF-16 surrogate pair, not a character (at offset 19)`,
		`{"prompt":{"text":"\ude00\ud83d"}}`:       `body: \ude00 is half a UTF-16 surrogate pair, not a character (at offset 19)`,
		`{"prompt":{"text":"\\\ud800"}}`:           `body: \ud800 is half a UTF-16 surrogate pair, not a character (at offset 21)`,
		`{"prompt":{"text":"ok"},"id":"\ud800"}`:   `body: \ud800 is half a UTF-16 surrogate pair, not a character (at offset 30)`,
	} {
		_, err := persistence.DecodePromptRequest([]byte(body))
		if err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want invalid %q", body, err, want)
		}
	}
	for body, text := range map[string]string{
		`{"prompt":{"text":"\ud83d\ude00"}}`:  "😀",
		`{"prompt":{"text":"\uD83D\uDE00!"}}`: "😀!",
		`{"prompt":{"text":"\\ud800"}}`:       `\ud800`,
		`{"prompt":{"text":"\ufffd \ud7ff"}}`: "\ufffd \ud7ff",
	} {
		req, err := persistence.DecodePromptRequest([]byte(body))
		if err != nil || req.Prompt.Text != text {
			t.Errorf("%s: %v, text %q, want %q", body, err, req.Prompt.Text, text)
		}
	}
}

// TestDecodeMemberNamesExactly: encoding/json matches member names to
// fields regardless of case; the API does not, at any depth, and says
// which field was meant. An unknown member is named by its whole path.
// A null body is no object. Inside values that decode themselves nothing
// is checked.
func TestDecodeMemberNamesExactly(t *testing.T) {
	for body, want := range map[string]string{
		`{"PROMPT":{"text":"a"}}`:                         `PROMPT: unknown field (member names are case-sensitive: the field is "prompt")`,
		`{"prompt":{"Text":"a"}}`:                         `prompt.Text: unknown field (member names are case-sensitive: the field is "text")`,
		`{"prompt":{"text":"a"},"Delivery":"queue"}`:      `Delivery: unknown field (member names are case-sensitive: the field is "delivery")`,
		`{"prompt":{"text":"a"},"resume":false,"ID":"m"}`: `ID: unknown field (member names are case-sensitive: the field is "id")`,
		`{"prompt":{"text":"a","files":[{"mime":"text/plain","url":"data:,x"},{"MIME":"a","url":"b"}]}}`: `prompt.files[1].MIME: unknown field (member names are case-sensitive: the field is "mime")`,
		`{"prompt":{"text":"a","extra":1}}`:                              `prompt: unknown field "extra"`,
		`{"prompt":{"text":"a","files":[{"mime":"a","url":"b","x":1}]}}`: `prompt.files[0]: unknown field "x"`,
		`{"prompt":{"text":"a"},"extra":1}`:                              `body: unknown field "extra"`,
		`null`:                                                           `body: want a JSON object, got null`,
		" null\n":                                                        `body: want a JSON object, got null`,
	} {
		body = strings.ReplaceAll(body, `\n`, "\n")
		_, err := persistence.DecodePromptRequest([]byte(body))
		if err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want invalid %q", body, err, want)
		}
	}
	for body, want := range map[string]string{
		`{"Location":{"directory":"/a"}}`:                                               `Location: unknown field (member names are case-sensitive: the field is "location")`,
		`{"location":{"directory":"/a"},"model":{"providerID":"p","id":"m","extra":1}}`: `model: unknown field "extra"`,
	} {
		_, err := persistence.DecodeCreateSession([]byte(body))
		if err == nil || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	// A value that decodes itself is its own judge.
	var v struct {
		E selfDecoding `json:"e"`
		A any          `json:"a"`
	}
	if err := persistence.DecodeStrict([]byte(`{"e":{"Id":[{"Z":1}]},"a":{"X":[{"Y":1}]}}`), &v); err != nil || string(v.E) != `{"Id":[{"Z":1}]}` {
		t.Fatalf("self-decoding and interface values: %v", err)
	}
}

// selfDecoding keeps the JSON it is given.
type selfDecoding []byte

func (s *selfDecoding) UnmarshalJSON(b []byte) error {
	*s = append((*s)[:0], b...)
	return nil
}

// TestDecodeRefusesDuplicateMembers: a member given twice in one object is
// refused (decoders differ on which one wins), at any depth; the same name
// in different objects is fine.
func TestDecodeRefusesDuplicateMembers(t *testing.T) {
	for body, want := range map[string]string{
		`{"prompt":{"text":"a"},"delivery":"queue","delivery":"steer"}`:                           "delivery: given twice",
		`{"prompt":{"text":"a","text":"b"}}`:                                                      "prompt.text: given twice",
		`{"prompt":{"text":"a","files":[{"mime":"text/plain","url":"data:,x","url":"data:,y"}]}}`: "prompt.files.url: given twice",
	} {
		_, err := persistence.DecodePromptRequest([]byte(body))
		if err == nil || messages.TypeOf(err) != messages.ErrInvalid || err.(*messages.Error).Message != want {
			t.Errorf("%s: %v, want invalid %q", body, err, want)
		}
	}
	ok := `{"prompt":{"text":"a","files":[{"mime":"text/plain","url":"data:,x"},{"mime":"text/plain","url":"data:,y"}]},"delivery":"steer"}`
	if _, err := persistence.DecodePromptRequest([]byte(ok)); err != nil {
		t.Fatalf("one name in two objects: %v", err)
	}
	if _, err := persistence.DecodeCreateSession([]byte(`{"location":{"directory":"/a"},"title":"t","title":"u"}`)); err == nil || err.(*messages.Error).Message != "title: given twice" {
		t.Fatalf("create with a title given twice: %v", err)
	}
	// Keys of a map are the client's: two that differ in case are two.
	var m struct {
		M map[string]string `json:"m"`
	}
	if err := persistence.DecodeStrict([]byte(`{"m":{"a":"x","A":"y"}}`), &m); err != nil || len(m.M) != 2 {
		t.Fatalf("map keys differing in case: %v %v", err, m.M)
	}
	// A string value, in an object or an array, is no member name: one
	// that spells a name of its object, or another value, repeats nothing.
	if _, err := persistence.DecodePromptRequest([]byte(`{"prompt":{"text":"text"},"delivery":"queue"}`)); err != nil {
		t.Fatalf("a value spelling its member's name: %v", err)
	}
	var v struct {
		A []string `json:"a"`
		B string   `json:"b"`
	}
	if err := persistence.DecodeStrict([]byte(`{"a":["a","b","a"],"b":"a"}`), &v); err != nil {
		t.Fatalf("strings repeated in an array: %v", err)
	}
}
