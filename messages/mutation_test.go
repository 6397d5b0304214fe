package messages

// Tests written while mutation testing the stored encoding: each pins a
// behaviour that a changed line of codec.go, event.go, frame.go, ids.go,
// errors.go or catalog.go did not break in any other test.

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sessiond/sessiond/messages/codec/codectest"
)

// TestCheckFrameNamesTheDeclaration: an oversized length or count is
// refused at its header, and the error says how much it declared there,
// rather than failing later on a value missing or a negative remainder.
func TestCheckFrameNamesTheDeclaration(t *testing.T) {
	for name, tc := range map[string]struct{ b, want string }{
		"bin32 4 GiB": {"\xc6\xff\xff\xff\xff", "4294967295 bytes declared at offset 5, 0 left"},
		"fixstr cut":  {"\xa5abc", "5 bytes declared at offset 1, 3 left"},
		"array32":     {"\xdd\x7f\xff\xff\xf0\xc0", "2147483632 bytes declared at offset 5, 1 left"},
		"map16":       {"\xde\x00\x02\xc0\xc0\xc0", "4 bytes declared at offset 3, 3 left"},
	} {
		err := checkFrame([]byte(tc.b))
		if !errors.Is(err, errFrame) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want errFrame saying %q", name, err, tc.want)
		}
	}
}

// TestDecodeNilOrEmptyIntoUsedValue: a codec resets its target before it
// reads (codectest.Codec.CheckResets).
func TestDecodeNilOrEmptyIntoUsedValue(t *testing.T) { stored.CheckResets(t, codecTypes) }

// TestEnvelopeWithoutDataEncodesNil: the envelope codec writes missing
// data as nil, as the reflection encoder does, so the row is framed and
// the decoder refuses it for having no data rather than for its framing.
func TestEnvelopeWithoutDataEncodesNil(t *testing.T) {
	se := auditStepStarted(t)
	se.Data = nil
	got := auditStored(t, se)
	want, err := Marshal(&plainEnvelope{Format: se.Format, ID: se.ID, Created: se.Created, Type: se.Type,
		Durable: codectest.ToShadow(se.Durable)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("codec wrote\n%x\nreflection wrote\n%x", got, want)
	}
	if err := checkFrame(got); err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalEvent(got); err == nil || errors.Is(err, errFrame) || !strings.Contains(err.Error(), "has no data") {
		t.Fatalf("UnmarshalEvent: %v, want a refusal for having no data", err)
	}
}

// TestMarshalNilPointers: a nil pointer to a type with a codec is written
// as nil, as the reflection encoder writes it.
func TestMarshalNilPointers(t *testing.T) {
	for _, typ := range codecTypes {
		b, err := Marshal(reflect.Zero(reflect.PointerTo(typ)).Interface())
		if err != nil || !bytes.Equal(b, []byte{0xc0}) {
			t.Errorf("nil *%s: %x, %v", typ, b, err)
		}
	}
}

func TestEventSeq(t *testing.T) {
	if s := (Event{Type: TypeTextDelta}).Seq(); s != -1 {
		t.Errorf("live event seq %d, want -1", s)
	}
	if s := (Event{Durable: &Durable{Seq: 0}}).Seq(); s != 0 {
		t.Errorf("durable seq 0 reads %d", s)
	}
	if s := (Event{Durable: &Durable{Seq: 7}}).Seq(); s != 7 {
		t.Errorf("durable seq 7 reads %d", s)
	}
}

func TestVersionOf(t *testing.T) {
	for typ, want := range map[string]int{
		"session.created.1": 1, "a.9": 9, ".5": 5, ".10": 10, "a.10": 10, "x.0": 0, "a12": 0, "1": 0, "": 0, "a.": 0, "a.b": 0,
	} {
		if got := VersionOf(typ); got != want {
			t.Errorf("VersionOf(%q) = %d, want %d", typ, got, want)
		}
	}
}

func TestIsDurableAndIsLive(t *testing.T) {
	for _, typ := range []string{"session.nope.1", "", TypeLogSynced} {
		if IsDurable(typ) || IsLive(typ) {
			t.Errorf("%q: durable %v live %v, want neither", typ, IsDurable(typ), IsLive(typ))
		}
	}
	if _, ok := NewPayload("session.nope.1"); ok {
		t.Error("NewPayload made an unknown type")
	}
	if p, ok := NewPayload(TypePermissionReplied); !ok || p.Type() != TypePermissionReplied {
		t.Errorf("NewPayload(%s) = %T, %v", TypePermissionReplied, p, ok)
	}
}

// TestMarshalEventChecks: the type defaults to the payload's, an event
// without data is an error (not a panic), and AppendEventData appends.
func TestMarshalEventChecks(t *testing.T) {
	ev := sampleEvent(TypeStepEnded)
	want, err := MarshalEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	untyped := ev
	untyped.Type = ""
	if got, err := MarshalEvent(untyped); err != nil || !bytes.Equal(got, want) {
		t.Errorf("event without a type: %v, or bytes differ from the typed one", err)
	}
	for _, typ := range []string{"", TypeStepEnded} {
		if _, err := MarshalEvent(Event{ID: "evt_a", Type: typ, Durable: ev.Durable}); err == nil {
			t.Errorf("event of type %q without data marshalled", typ)
		}
	}
	prefix := []byte("prefix")
	got, err := AppendEventData(slices.Clone(prefix), ev, nil)
	if err != nil || !bytes.Equal(got, append(prefix, want...)) {
		t.Errorf("AppendEventData dropped or changed its destination: %q, %v", got, err)
	}
}

// TestEnvelopeShapeChecks: the envelope reader refuses an envelope of
// other than seven fields, an unknown format, an ID that is not a string
// and members it cannot decode; the head reader (EventCreated) refuses
// what the full one does in the head.
func TestEnvelopeShapeChecks(t *testing.T) {
	durable := map[string]any{"a": "ses_a", "s": 1, "v": 1}
	valid := []any{1, "evt_a", 5, TypeExecutionStarted, durable, nil,
		msgpack.RawMessage(mustMarshal(t, &ExecutionStarted{SessionID: "ses_a"}))}
	with := func(i int, v any) []any {
		f := slices.Clone(valid)
		f[i] = v
		return f
	}
	if ev, err := UnmarshalEvent(mustMarshal(t, valid)); err != nil || ev.Created != 5 {
		t.Fatalf("valid envelope: %v", err)
	}
	if c, err := EventCreated(mustMarshal(t, valid)); err != nil || c != 5 {
		t.Fatalf("valid envelope head: %d, %v", c, err)
	}
	for name, tc := range map[string]struct {
		fields []any
		head   bool // the head is bad, not only the rest
	}{
		"six fields":       {valid[:6], true},
		"eight fields":     {append(slices.Clone(valid), 1), true},
		"format 2":         {with(0, 2), true},
		"format 0":         {with(0, 0), true},
		"integer ID":       {with(1, 12), true},
		"map ID":           {with(1, map[string]any{}), true},
		"string created":   {with(2, "5"), true},
		"integer durable":  {with(4, 5), false},
		"integer location": {with(5, 5), false},
		"live, integer durable": {[]any{1, "evt_a", 5, TypeTextDelta, 5, nil,
			msgpack.RawMessage(mustMarshal(t, &TextDelta{SessionID: "ses_a"}))}, false},
		// A member that fails part way leaves bytes that read as the rest
		// of a valid envelope. The durable {"a":"ses_a","v":1,"s":"\xc0"}
		// fails at s, leaving the string's byte, a nil, to read as the
		// location, and the location member (a payload) as the data; the
		// location {"d":uint16(0x80c0)} fails at d, leaving an empty map
		// to read as the data.
		"undecodable durable": {[]any{1, "evt_a", 5, TypeExecutionStarted,
			msgpack.RawMessage("\x83\xa1a\xa5ses_a\xa1v\x01\xa1s\xa1\xc0"), valid[6], valid[6]}, false},
		"undecodable location": {with(5, msgpack.RawMessage("\x81\xa1d\xcd\x80\xc0")), false},
	} {
		b := mustMarshal(t, tc.fields)
		if _, err := UnmarshalEvent(b); TypeOf(err) != ErrInternal {
			t.Errorf("UnmarshalEvent %s: %v", name, err)
		}
		if _, err := EventCreated(b); tc.head && TypeOf(err) != ErrInternal {
			t.Errorf("EventCreated %s: %v", name, err)
		}
	}
}

// TestLiveEventRoundTrip: a live-only event has a stored form too (the
// envelope codec is the same), without its durable section.
func TestLiveEventRoundTrip(t *testing.T) {
	ev := Event{ID: "evt_a", Created: 3, Type: TypeTextDelta,
		Data: &TextDelta{SessionID: "ses_a", AssistantMessageID: "msg_a", Ordinal: 2, Delta: "hi"}}
	b, err := MarshalEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ev) {
		t.Fatalf("round trip: %#v, want %#v", back, ev)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEventJSONRoundTrip: every envelope member of the served form reads
// back, the location too.
func TestEventJSONRoundTrip(t *testing.T) {
	ev := sampleEvent(TypeTextEnded)
	ev.Location = &Location{Directory: "/a", WorkspaceID: "wrk_1"}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ev) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", back, ev)
	}
}

func TestJSONEventWithoutDataSaysSo(t *testing.T) {
	for _, j := range []string{
		`{"id":"evt_a","type":"session.text.delta"}`,
		`{"id":"evt_a","type":"session.text.delta","data":null}`,
	} {
		var ev Event
		if err := json.Unmarshal([]byte(j), &ev); TypeOf(err) != ErrInvalid || !strings.Contains(err.Error(), "event evt_a has no data") {
			t.Errorf("%s: %v", j, err)
		}
	}
}

// TestZeroPayloadMembers pins the msgpack members a payload with every
// field empty writes: the stored form leaves out exactly the omitempty
// ones. The golden files fill every field, so they cannot see an
// omitempty tag added or dropped.
func TestZeroPayloadMembers(t *testing.T) {
	want := map[string]string{
		TypeSessionCreated:        "a l m s t",
		TypeAgentSelected:         "a s",
		TypeModelSelected:         "m s",
		TypeSessionMoved:          "l s",
		TypePromptAdmitted:        "d i p s",
		TypePromptPromoted:        "i s",
		TypeCompactionAdmitted:    "i s",
		TypeCompactionStarted:     "r s",
		TypeCompactionEnded:       "c r s t",
		TypeCompactionFailed:      "e r s",
		TypeInstructionsBaselined: "a s t",
		TypeInstructionsUpdated:   "a k s t",
		TypeExecutionStarted:      "s",
		TypeExecutionSucceeded:    "s",
		TypeExecutionFailed:       "e s",
		TypeExecutionInterrupted:  "r s",
		TypeStepStarted:           "a m n o s",
		TypeStepEnded:             "c f m s t",
		TypeStepFailed:            "e m s",
		TypeTextStarted:           "m o s",
		TypeTextEnded:             "m o s t",
		TypeReasoningStarted:      "m o s",
		TypeReasoningEnded:        "m o s t",
		TypeToolInputStarted:      "c m n s",
		TypeToolInputEnded:        "c m n s t",
		TypeToolCalled:            "c i m n s x",
		TypeToolSucceeded:         "c m o s",
		TypeToolFailed:            "c e m s",
		TypeRetryScheduled:        "a e m n s",
	}
	if len(want) != len(DurableTypes()) {
		t.Fatalf("%d types pinned, %d durable types", len(want), len(DurableTypes()))
	}
	for typ, keys := range want {
		p, ok := NewPayload(typ)
		if !ok {
			t.Fatalf("%s: no payload", typ)
		}
		b, err := Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]msgpack.RawMessage
		if err := msgpack.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		var got []string
		for k := range m {
			got = append(got, k)
		}
		sort.Strings(got)
		if strings.Join(got, " ") != keys {
			t.Errorf("%s with every field empty writes %q, want %q", typ, strings.Join(got, " "), keys)
		}
	}
}

// TestIDPrefixes pins the prefixes: stored and served IDs carry them, so
// a changed one would refuse every existing ID.
func TestIDPrefixes(t *testing.T) {
	for got, want := range map[string]string{SessionPrefix: "ses_", MessagePrefix: "msg_", EventPrefix: "evt_", RequestPrefix: "per_"} {
		if got != want {
			t.Errorf("prefix %q, want %q", got, want)
		}
	}
}

// TestValidateIDBoundaries: the body is 1 to 64 characters, each of
// 0-9, A-Z, a-z, _ and -; the neighbours of each range are refused.
func TestValidateIDBoundaries(t *testing.T) {
	for _, body := range []string{"0", "9", "A", "Z", "a", "z", "_", "-", "a-b_C9", strings.Repeat("x", 64)} {
		if err := ValidateID("id", "ses_", "ses_"+body); err != nil {
			t.Errorf("body %q: %v", body, err)
		}
	}
	for _, body := range []string{"", "/", ":", "@", "[", "`", "{", ".", " ", strings.Repeat("x", 65)} {
		if err := ValidateID("id", "ses_", "ses_"+body); TypeOf(err) != ErrInvalid {
			t.Errorf("body %q: %v, want invalid", body, err)
		}
	}
	if err := ValidateID("id", "ses_", "msg_a"); TypeOf(err) != ErrInvalid {
		t.Errorf("another prefix: %v", err)
	}
	// The field is named, and an ID is echoed whole up to 80 bytes.
	id80 := "msg_" + strings.Repeat("é", 38)
	if err := SessionID(id80).Validate(); err == nil || !strings.HasPrefix(err.Error(), "invalid: sessionID: ") || !strings.Contains(err.Error(), id80+`"`) {
		t.Errorf("80-byte session ID: %v", err)
	}
	if err := SessionID(id80 + "x").Validate(); err == nil || !strings.Contains(err.Error(), id80+`…"`) {
		t.Errorf("81-byte session ID: %v", err)
	}
	if err := MessageID("msg_a").Validate(); err != nil {
		t.Errorf("message ID: %v", err)
	}
	if err := MessageID("ses_a").Validate(); err == nil || !strings.HasPrefix(err.Error(), "invalid: id: ") {
		t.Errorf("message ID with the session prefix: %v", err)
	}
}

// TestHTTPStatuses pins the whole status table.
func TestHTTPStatuses(t *testing.T) {
	want := map[ErrorType]int{
		ErrInvalid: 400, ErrProviderInvalidRequest: 400, ErrModelNotFound: 400, ErrUnauthorized: 401,
		ErrForbidden: 403, ErrSessionNotFound: 404, ErrNotFound: 404, ErrPromptConflict: 409,
		ErrInputPromoted: 409, ErrAlreadyPublished: 409, ErrTooLarge: 413, ErrInboxFull: 429,
		ErrShuttingDown: 503, ErrInternal: 500, ErrUnknown: 500, ErrProviderRateLimit: 500, "nope": 500,
	}
	for typ, status := range want {
		if got := typ.HTTPStatus(); got != status {
			t.Errorf("%s -> %d, want %d", typ, got, status)
		}
	}
}

func TestErrorMatching(t *testing.T) {
	err := Errorf(ErrPromptConflict, "input %s", "msg_a")
	if err.Error() != "prompt.conflict: input msg_a" {
		t.Errorf("Error() = %q", err.Error())
	}
	for target, want := range map[*Error]bool{
		{Type: ErrPromptConflict}:                         true,
		{Type: ErrPromptConflict, Message: "input msg_a"}: true,
		{Type: ErrPromptConflict, Message: "input msg_b"}: false,
		{Type: ErrInboxFull}:                              false,
	} {
		if got := errors.Is(err, target); got != want {
			t.Errorf("Is(%v) = %v, want %v", target, got, want)
		}
	}
	wrapped := errors.Join(errors.New("context"), err)
	if got := AsError(wrapped, ErrInternal); got != err {
		t.Errorf("AsError of a wrapped typed error: %#v", got)
	}
	if got := AsError(errors.New("boom"), ErrInternal); got.Type != ErrInternal || got.Message != "boom" {
		t.Errorf("AsError of a plain error: %#v", got)
	}
	// No error is no *Error (it panicked reading the nil error's message).
	if got := AsError(nil, ErrInternal); got != nil {
		t.Errorf("AsError(nil) = %#v, want nil", got)
	}
}

func TestCatalogHelpers(t *testing.T) {
	if !Steer.Valid() || !Queue.Valid() || Delivery("").Valid() || Delivery("soon").Valid() {
		t.Error("Delivery.Valid")
	}
	if DefaultDelivery != Steer {
		t.Errorf("a prompt without delivery is %s; docs/api.md says it defaults to steer", DefaultDelivery)
	}
	if got := (Location{}).Clean(); got != (Location{}) {
		t.Errorf("empty location cleans to %+v", got)
	}
	if got := (Location{Directory: "/a/b/../c/"}).Clean().Directory; got != "/a/c" {
		t.Errorf("Clean: %q", got)
	}
	if (Location{WorkspaceID: "a", Directory: "/b"}).Key() == (Location{WorkspaceID: "a/", Directory: "b"}).Key() {
		t.Error("two locations share a key")
	}
	for m, want := range map[ModelRef]string{{}: "", {ProviderID: "p"}: "p/", {ID: "m"}: "/m", {ProviderID: "p", ID: "m"}: "p/m"} {
		if got := m.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", m, got, want)
		}
	}
	a := Tokens{Input: 1, Output: 2, Reasoning: 3, Cache: CacheUsage{Read: 4, Write: 5}}
	b := Tokens{Input: 10, Output: 20, Reasoning: 30, Cache: CacheUsage{Read: 40, Write: 50}}
	if got := a.Add(b); got != (Tokens{Input: 11, Output: 22, Reasoning: 33, Cache: CacheUsage{Read: 44, Write: 55}}) {
		t.Errorf("Add: %+v", got)
	}
}
