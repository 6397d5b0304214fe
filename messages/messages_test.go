package messages

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sample fills every field of a payload with a deterministic non-zero
// value, so golden files pin every tag.
func sample(p Payload) Payload {
	fill(reflect.ValueOf(p).Elem(), 1)
	return p
}

func fill(v reflect.Value, n int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.Type().Name() + "-" + string(rune('a'+n%26)))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(1000 * n))
	case reflect.Float64:
		v.SetFloat(float64(n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n+i)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage
			v.SetBytes([]byte(`{"k":` + string(rune('0'+n%10)) + `}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(s.Index(0), n)
		fill(s.Index(1), n+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 3 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n+i)
			fill(e, n+i+7)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), n)
		v.Set(p)
	}
}

func sampleEvent(typ string) Event {
	p, _ := NewPayload(typ)
	return Event{ID: "evt_01J00000000000000000000000", Created: 1_767_225_600_000, Type: typ,
		Durable: &Durable{AggregateID: "ses_golden", Seq: 42, Version: VersionOf(typ)}, Data: sample(p)}
}

func TestGoldenEncoding(t *testing.T) {
	types := DurableTypes()
	sort.Strings(types)
	for _, typ := range types {
		ev := sampleEvent(typ)
		b, err := MarshalEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", typ+".hex")
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(hex.EncodeToString(b)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go test ./messages -update to create it)", typ, err)
		}
		if got := hex.EncodeToString(b); got != strings.TrimSpace(string(want)) {
			t.Errorf("%s: stored encoding changed:\n got %s\nwant %s", typ, got, want)
		}
		// Golden bytes decode back to the same event.
		raw, _ := hex.DecodeString(strings.TrimSpace(string(want)))
		back, err := UnmarshalEvent(raw)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if !reflect.DeepEqual(back, ev) {
			t.Errorf("%s: round trip differs:\n%#v\n%#v", typ, back.Data, ev.Data)
		}
		// Encoding is deterministic (maps are sorted).
		again, _ := MarshalEvent(back)
		if !bytes.Equal(again, b) {
			t.Errorf("%s: re-encoding differs", typ)
		}
	}
}

func TestCatalogComplete(t *testing.T) {
	if n := len(DurableTypes()); n != 29 {
		t.Fatalf("%d durable types, DESIGN.md §4 lists 29", n)
	}
	for _, typ := range DurableTypes() {
		if VersionOf(typ) != 1 || IsLive(typ) {
			t.Errorf("%s: version %d live %v", typ, VersionOf(typ), IsLive(typ))
		}
		p, _ := NewPayload(typ)
		if p.Type() != typ {
			t.Errorf("%s constructs %s", typ, p.Type())
		}
	}
	for _, typ := range []string{TypeTextDelta, TypeReasoningDelta, TypeToolInputDelta, TypeCompactionDelta,
		TypeUsageUpdated, TypePermissionAsked, TypePermissionReplied} {
		if !IsLive(typ) || IsDurable(typ) {
			t.Errorf("%s must be live-only", typ)
		}
	}
}

func TestEventJSONShape(t *testing.T) {
	ev := Event{ID: "evt_1", Created: 5, Type: TypeStepStarted,
		Durable: &Durable{AggregateID: "ses_1", Seq: 3, Version: 1},
		Data:    &StepStarted{SessionID: "ses_1", AssistantMessageID: "msg_a", Agent: "build", Model: ModelRef{ProviderID: "p", ID: "m"}, Attempt: 1}}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"evt_1","created":5,"type":"session.step.started.1","durable":{"aggregateID":"ses_1","seq":3,"version":1},` +
		`"data":{"sessionID":"ses_1","assistantMessageID":"msg_a","agent":"build","model":{"providerID":"p","id":"m"},"attempt":1}}`
	if string(b) != want {
		t.Fatalf("json:\n got %s\nwant %s", b, want)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ev) {
		t.Fatalf("json round trip: %+v", back)
	}
	live := Event{ID: "evt_2", Created: 6, Type: TypeTextDelta, Data: &TextDelta{SessionID: "ses_1", Delta: "hi"}}
	b, _ = json.Marshal(live)
	if strings.Contains(string(b), "durable") {
		t.Fatalf("live event carries durable: %s", b)
	}
	seq := int64(9)
	b, _ = json.Marshal(Synced{Type: TypeLogSynced, AggregateID: "ses_1", Seq: &seq})
	if string(b) != `{"type":"log.synced","aggregateID":"ses_1","seq":9}` {
		t.Fatalf("synced: %s", b)
	}
	b, _ = json.Marshal(Synced{Type: TypeLogSynced, AggregateID: "ses_1"})
	if string(b) != `{"type":"log.synced","aggregateID":"ses_1"}` {
		t.Fatalf("empty synced: %s", b)
	}
}

func TestUnmarshalEventRejects(t *testing.T) {
	good, _ := MarshalEvent(sampleEvent(TypeStepEnded))
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)/2],
		"garbage":   []byte("\xc1\xc1"),
	} {
		if _, err := UnmarshalEvent(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	bad := sampleEvent(TypeStepEnded)
	bad.Type = "session.nope.1"
	if _, err := MarshalEvent(bad); err == nil {
		t.Error("marshal with mismatched type succeeded")
	}
	for _, j := range []string{`{"type":"nope","data":{}}`, `{"type":"session.step.ended.1"}`, `{"type":"session.step.ended.1","data":[1]}`} {
		var ev Event
		if err := json.Unmarshal([]byte(j), &ev); err == nil {
			t.Errorf("%s decoded", j)
		}
	}
}

func TestIDs(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	g := NewIDs(func() time.Time { return now }, nil)
	var ids []string
	for range 1000 {
		ids = append(ids, string(g.Message()))
	}
	if !slices.IsSorted(ids) {
		t.Fatal("IDs within one millisecond are not sorted")
	}
	later := NewIDs(func() time.Time { return now.Add(time.Millisecond) }, nil).Message()
	if string(later) <= ids[len(ids)-1] {
		t.Fatal("a later millisecond does not sort after")
	}
	for id, prefix := range map[string]string{string(g.Session()): SessionPrefix, string(g.Message()): MessagePrefix,
		string(g.Event()): EventPrefix, g.Request(): RequestPrefix} {
		if !strings.HasPrefix(id, prefix) || len(id) != len(prefix)+ulid.EncodedSize {
			t.Errorf("%q: want %q and a ULID", id, prefix)
		}
		if err := ValidateID("x", prefix, id); err != nil {
			t.Error(err)
		}
	}
	// The same IDs as ulid.New on the same clock and entropy, one
	// allocation each (the string).
	seeded := func() io.Reader { return mrand.NewChaCha8([32]byte{1}) }
	mine, ref := NewIDs(func() time.Time { return now }, seeded()), ulid.Monotonic(seeded(), 0)
	for range 100 {
		if got, want := string(mine.Event()), "evt_"+ulid.MustNew(ulid.Timestamp(now), ref).String(); got != want {
			t.Fatalf("generated %s, ulid.New gives %s", got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = g.Event() }); n != 1 {
		t.Errorf("%v allocations per ID, want 1", n)
	}
	for _, bad := range []string{"", "ses_", "msg_x", "ses_a/b", "ses_\x00", "ses_" + strings.Repeat("a", 65)} {
		if SessionID(bad).Validate() == nil {
			t.Errorf("%q validated", bad)
		}
	}
}

func TestErrorTable(t *testing.T) {
	for typ, status := range map[ErrorType]int{ErrInvalid: 400, ErrUnauthorized: 401, ErrForbidden: 403,
		ErrSessionNotFound: 404, ErrPromptConflict: 409, ErrTooLarge: 413, ErrInboxFull: 429, ErrInternal: 500, ErrToolExecution: 500} {
		if got := typ.HTTPStatus(); got != status {
			t.Errorf("%s -> %d, want %d", typ, got, status)
		}
	}
	err := Errorf(ErrPromptConflict, "x")
	if TypeOf(err) != ErrPromptConflict || TypeOf(os.ErrNotExist) != ErrUnknown {
		t.Fatal("TypeOf")
	}
}

func FuzzUnmarshalEvent(f *testing.F) {
	for _, typ := range DurableTypes() {
		b, _ := MarshalEvent(sampleEvent(typ))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		created, headErr := EventCreated(b)
		ev, err := UnmarshalEvent(b)
		if err != nil {
			return
		}
		// The head decoder agrees with the full one on every valid event.
		if headErr != nil || created != ev.Created {
			t.Fatalf("EventCreated = %d, %v; full decode says %d", created, headErr, ev.Created)
		}
		// Whatever decodes must encode again and decode to the same event.
		again, err := MarshalEvent(ev)
		if err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
		back, err := UnmarshalEvent(again)
		if err != nil || !reflect.DeepEqual(normalize(back), normalize(ev)) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// normalize maps empty containers to nil, which msgpack does not
// distinguish.
func normalize(ev Event) string {
	b, _ := json.Marshal(ev)
	return strings.NewReplacer(`"files":[],`, ``, `"applied":{}`, `"applied":null`).Replace(string(b))
}

func FuzzEventJSON(f *testing.F) {
	for _, typ := range DurableTypes() {
		b, _ := json.Marshal(sampleEvent(typ))
		f.Add(b)
	}
	f.Add([]byte(`{"type":"session.text.delta","data":{"delta":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev Event
		if err := json.Unmarshal(b, &ev); err != nil {
			return
		}
		if ev.Data == nil || ev.Data.Type() != ev.Type {
			t.Fatalf("decoded event has data %T for %s", ev.Data, ev.Type)
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDecodersCheckDurability checks that both decoders refuse, with a
// typed error, an event whose durable section disagrees with its type:
// readers of the log take a durable event's seq from it.
func TestDecodersCheckDurability(t *testing.T) {
	// Such rows are written here by hand: MarshalEvent refuses to write
	// them (below), so that what it writes UnmarshalEvent reads back.
	row := func(e Event) []byte {
		t.Helper()
		data, err := Marshal(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		b, err := msgpack.Marshal(&storedEvent{Format: storedFormat, ID: e.ID, Created: e.Created, Type: e.Type, Durable: e.Durable, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := map[string]Event{
		"durable type without its section": {ID: "evt_1", Created: 1, Type: TypeStepFailed,
			Data: &StepFailed{SessionID: "ses_a", AssistantMessageID: "msg_a"}},
		"live type with one": {ID: "evt_2", Created: 1, Type: TypeTextDelta,
			Durable: &Durable{AggregateID: "ses_a", Seq: 7}, Data: &TextDelta{SessionID: "ses_a", Delta: "x"}},
	}
	rows := map[string][]byte{}
	for name, e := range bad {
		if _, err := MarshalEvent(e); err == nil {
			t.Errorf("MarshalEvent wrote a %s", name)
		}
		rows[name] = row(e)
	}
	for name, b := range rows {
		// A stored row is this program's own: unreadable is internal (500).
		if _, err := UnmarshalEvent(b); TypeOf(err) != ErrInternal {
			t.Errorf("stored %s: %v", name, err)
		}
	}
	for name, j := range map[string]string{
		"durable type without its section": `{"id":"evt_3","created":1,"type":"session.step.failed.1","data":{"sessionID":"ses_a","assistantMessageID":"msg_a","error":{"type":"unknown","message":"x"}}}`,
		"live type with one":               `{"id":"evt_4","type":"session.text.delta","durable":{"aggregateID":"ses_a","seq":1,"version":1},"data":{"sessionID":"ses_a"}}`,
	} {
		var ev Event
		if err := json.Unmarshal([]byte(j), &ev); TypeOf(err) != ErrInvalid {
			t.Errorf("JSON %s: %v", name, err)
		}
	}
}

// TestCompactionSettlementsWithoutUsageDecode: the stored bytes of
// compaction.ended and compaction.failed from before they carried usage
// (the golden encodings of then) decode as they did, with no usage.
func TestCompactionSettlementsWithoutUsageDecode(t *testing.T) {
	for typ, old := range map[string]string{
		TypeCompactionEnded:  "9701be6576745f30314a3030303030303030303030303030303030303030303030cf0000019b76daa800ba73657373696f6e2e636f6d70616374696f6e2e656e6465642e3183a161aa7365735f676f6c64656ea1732aa17601c085a173ab53657373696f6e49442d62a172a8737472696e672d63a169ab4d65737361676549442d64a174a8737472696e672d65a163a8737472696e672d66",
		TypeCompactionFailed: "9701be6576745f30314a3030303030303030303030303030303030303030303030cf0000019b76daa800bb73657373696f6e2e636f6d70616374696f6e2e6661696c65642e3183a161aa7365735f676f6c64656ea1732aa17601c084a173ab53657373696f6e49442d62a172a8737472696e672d63a169ab4d65737361676549442d64a16582a174ab4572726f72547970652d65a16da8737472696e672d66",
	} {
		raw, err := hex.DecodeString(old)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := UnmarshalEvent(raw)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		want := sampleEvent(typ)
		switch p := want.Data.(type) {
		case *CompactionEnded:
			p.Usage = nil
		case *CompactionFailed:
			p.Usage = nil
		}
		if !reflect.DeepEqual(ev, want) {
			t.Fatalf("%s: %#v, want %#v", typ, ev.Data, want.Data)
		}
		if again, _ := MarshalEvent(ev); hex.EncodeToString(again) != old {
			t.Fatalf("%s: re-encoded differently", typ)
		}
	}
}
