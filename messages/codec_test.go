package messages

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sessiond/sessiond/messages/codec/codectest"
)

var stored = codectest.Codec{Marshal: Marshal, Unmarshal: Unmarshal}

// codecTypes are the types with hand-written codecs (codec.go).
var codecTypes = []reflect.Type{
	reflect.TypeFor[Durable](), reflect.TypeFor[Tokens](), reflect.TypeFor[CacheUsage](),
	reflect.TypeFor[ModelRef](), reflect.TypeFor[Error](), reflect.TypeFor[Location](),
	reflect.TypeFor[File](), reflect.TypeFor[Prompt](),
	reflect.TypeFor[PromptAdmitted](), reflect.TypeFor[PromptPromoted](),
	reflect.TypeFor[ExecutionStarted](), reflect.TypeFor[ExecutionSucceeded](),
	reflect.TypeFor[ExecutionFailed](), reflect.TypeFor[ExecutionInterrupted](),
	reflect.TypeFor[StepStarted](), reflect.TypeFor[StepEnded](), reflect.TypeFor[StepFailed](),
	reflect.TypeFor[TextStarted](), reflect.TypeFor[TextEnded](),
	reflect.TypeFor[ReasoningStarted](), reflect.TypeFor[ReasoningEnded](),
	reflect.TypeFor[ToolInputStarted](), reflect.TypeFor[ToolInputEnded](),
	reflect.TypeFor[ToolCalled](), reflect.TypeFor[ToolSucceeded](), reflect.TypeFor[ToolFailed](),
}

// TestCodecTypes: every listed type has both codec methods, and every
// payload with a codec is listed (so the checks below cover it).
func TestCodecTypes(t *testing.T) {
	codectest.CheckMethods(t, codecTypes)
	types := append(DurableTypes(), TypeTextDelta, TypeReasoningDelta, TypeToolInputDelta,
		TypeCompactionDelta, TypeUsageUpdated, TypePermissionAsked, TypePermissionReplied)
	for _, typ := range types {
		p, _ := NewPayload(typ)
		rt := reflect.TypeOf(p)
		_, isEnc := p.(msgpack.CustomEncoder)
		_, isDec := p.(msgpack.CustomDecoder)
		if isEnc != isDec {
			t.Errorf("%s has only one of the codec methods", rt)
		}
		if isEnc && !contains(codecTypes, rt.Elem()) {
			t.Errorf("%s has a codec but is not in codecTypes", rt)
		}
	}
}

func contains(ts []reflect.Type, t reflect.Type) bool {
	for _, u := range ts {
		if u == t {
			return true
		}
	}
	return false
}

// TestCodecsMatchReflection builds values of every type with every field
// empty and non-empty (and at msgpack's size boundaries) and checks that
// each encodes to the reflection encoding and decodes as reflection
// decodes, and that damaged encodings decode as reflection decodes them.
func TestCodecsMatchReflection(t *testing.T) { stored.Check(t, codecTypes, 150) }

// plainEnvelope is storedEvent without its codec, for the reflection
// encoding of whole events.
type plainEnvelope struct {
	//lint:ignore U1000 read by msgpack through its struct tag (array encoding)
	_msgpack struct{} `msgpack:",as_array"`
	Format   uint8
	ID       EventID
	Created  int64
	Type     string
	Durable  any // shadow *Durable, or nil
	Location any // shadow *Location, or nil
	Data     msgpack.RawMessage
}

// TestEventsMatchReflection: a whole stored event, envelope and payload
// of every type (codec or not), encodes as reflection encodes it, and
// decodes to what reflection decodes.
func TestEventsMatchReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := codectest.NewGen()
	types := DurableTypes()
	sort.Strings(types)
	for _, typ := range types {
		for range 100 {
			src := make([]byte, 512)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			var head struct {
				ID       EventID
				Created  int64
				Durable  *Durable
				Location *Location
			}
			g.Fill(&head, src[:256])
			if head.Durable == nil {
				// A durable type always carries its section (checkDurability).
				head.Durable = &Durable{AggregateID: "ses_x", Seq: 1, Version: 1}
			}
			head.Durable.Version = VersionOf(typ) // and its type's version
			p, _ := NewPayload(typ)
			g.Fill(p, src[256:])
			ev := Event{ID: head.ID, Created: head.Created, Type: typ, Durable: head.Durable, Location: head.Location, Data: p}
			got, err := MarshalEvent(ev)
			if err != nil {
				t.Fatal(err)
			}
			data, err := Marshal(codectest.ToShadow(p))
			if err != nil {
				t.Fatal(err)
			}
			plain := plainEnvelope{Format: storedFormat, ID: ev.ID, Created: ev.Created, Type: typ, Data: data}
			if ev.Durable != nil {
				plain.Durable = codectest.ToShadow(ev.Durable)
			}
			if ev.Location != nil {
				plain.Location = codectest.ToShadow(ev.Location)
			}
			want, err := Marshal(&plain)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: codec wrote\n%x\nreflection wrote\n%x", typ, got, want)
			}
			back, err := UnmarshalEvent(got)
			if err != nil {
				t.Fatal(err)
			}
			ref := reflect.New(codectest.Shadow(reflect.TypeOf(p).Elem())).Interface()
			if err := Unmarshal(data, ref); err != nil {
				t.Fatal(err)
			}
			wantData, _ := NewPayload(typ)
			codectest.FromShadow(wantData, ref)
			if !codectest.Identical(back.Data, wantData) || !reflect.DeepEqual(back.Durable, ev.Durable) ||
				!reflect.DeepEqual(back.Location, ev.Location) || back.ID != ev.ID || back.Created != ev.Created {
				t.Fatalf("%s: decoded %#v\nwant data %#v", typ, back, wantData)
			}
		}
	}
}

// FuzzCodecValues builds a value of a codec type from the input and checks
// its encoding and decoding against reflection.
func FuzzCodecValues(f *testing.F) { stored.FuzzValues(f, codecTypes) }

// FuzzCodecDecode decodes arbitrary input into a codec type with the codec
// and with reflection: it must not panic, and both must agree.
func FuzzCodecDecode(f *testing.F) { stored.FuzzDecode(f, codecTypes) }

// benchToolCalled is a typical tool call as a step records it.
var benchToolCalled = &ToolCalled{SessionID: "ses_01JABCDEFGHJKMNPQRSTVWXYZ0", AssistantMessageID: "msg_01JABCDEFGHJKMNPQRSTVWXYZ1",
	CallID: "toolu_01A09q90qw90lq917835lq9", Name: "read", Input: json.RawMessage(`{"path":"/tmp/project/main.go"}`)}

// BenchmarkCodecToolCalled compares the ToolCalled codec with reflection.
func BenchmarkCodecToolCalled(b *testing.B) { stored.Bench(b, benchToolCalled) }

// BenchmarkCodecEvent compares encoding a whole stored ToolCalled event
// (payload and envelope) with codecs and with reflection.
func BenchmarkCodecEvent(b *testing.B) {
	ev := Event{ID: "evt_01JABCDEFGHJKMNPQRSTVWXYZ2", Created: 1_767_225_600_000, Type: TypeToolCalled,
		Durable: &Durable{AggregateID: benchToolCalled.SessionID, Seq: 1234, Version: 1}, Data: benchToolCalled}
	shadowData, shadowDurable := codectest.ToShadow(ev.Data), codectest.ToShadow(ev.Durable)
	reflection := func() error {
		data, err := Marshal(shadowData)
		if err != nil {
			return err
		}
		_, err = Marshal(&plainEnvelope{Format: storedFormat, ID: ev.ID, Created: ev.Created, Type: ev.Type,
			Durable: shadowDurable, Data: data})
		return err
	}
	codec := func() error { _, err := MarshalEvent(ev); return err }
	codectest.Compare(b, "encode", codec, reflection)
}
