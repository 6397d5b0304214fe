package persistence

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/messages/codec/codectest"
)

var stored = codectest.Codec{Marshal: messages.Marshal, Unmarshal: messages.Unmarshal}

// codecTypes are the types with hand-written codecs (codec.go).
var codecTypes = []reflect.Type{
	reflect.TypeFor[Message](), reflect.TypeFor[Part](), reflect.TypeFor[ToolPart](),
	reflect.TypeFor[Retry](), reflect.TypeFor[Compaction](), reflect.TypeFor[Checkpoint](),
	reflect.TypeFor[Session](), reflect.TypeFor[Input](), reflect.TypeFor[idEntry](),
}

func TestCodecTypes(t *testing.T) {
	codectest.CheckMethods(t, codecTypes)
}

// TestCodecsMatchReflection builds values of every type with every field
// empty and non-empty (and at msgpack's size boundaries) and checks that
// each encodes to the reflection encoding and decodes as reflection
// decodes, and that damaged encodings decode as reflection decodes them.
// The reference is reflection all the way down (codectest's shadows), so
// it does not lean on the nested types' codecs.
func TestCodecsMatchReflection(t *testing.T) { stored.Check(t, codecTypes, 150) }

// TestDecodeNilOrEmptyIntoUsedValue: a codec resets its target before it
// reads (codectest.Codec.CheckResets).
func TestDecodeNilOrEmptyIntoUsedValue(t *testing.T) { stored.CheckResets(t, codecTypes) }

// FuzzCodecValues builds a value of a codec type from the input and checks
// its encoding and decoding against reflection.
func FuzzCodecValues(f *testing.F) { stored.FuzzValues(f, codecTypes) }

// FuzzCodecDecode decodes arbitrary input into a codec type with the codec
// and with reflection: it must not panic, and both must agree.
func FuzzCodecDecode(f *testing.F) { stored.FuzzDecode(f, codecTypes) }

// benchMessage is an assistant message after a step that wrote some text
// and ran one tool.
var benchMessage = &Message{ID: "msg_01JABCDEFGHJKMNPQRSTVWXYZ0", SessionID: "ses_01JABCDEFGHJKMNPQRSTVWXYZ0",
	Seq: 1234, Role: RoleAssistant, Created: 1_767_225_600_000, Agent: "build",
	Model: messages.ModelRef{ProviderID: "anthropic", ID: "claude-sonnet-4-5"}, Attempts: 1,
	Parts: []Part{
		{Kind: PartText, Ordinal: 1, Text: "Let me read the file first.", Ended: true},
		{Kind: PartTool, Tool: &ToolPart{CallID: "toolu_01A09q90qw90lq917835lq9", Name: "read", State: ToolCompleted,
			Input: json.RawMessage(`{"path":"/tmp/project/main.go"}`), Output: "package main\n\nfunc main() {}\n",
			Metadata: json.RawMessage(`{"lines":3}`)}},
	},
	Finish: "tool-calls", Tokens: &messages.Tokens{Input: 12000, Output: 180, Cache: messages.CacheUsage{Read: 11000}},
	Cost: 0.0042, Completed: 1_767_225_601_000}

// benchSession is a Session record after a few steps.
var benchSession = &Session{ID: "ses_01JABCDEFGHJKMNPQRSTVWXYZ0", Location: messages.Location{Directory: "/tmp/project"},
	Title: "Fix the build", Agent: "build", Model: messages.ModelRef{ProviderID: "anthropic", ID: "claude-sonnet-4-5"},
	Created: 1_767_225_600_000, Tokens: messages.Tokens{Input: 48000, Output: 900, Cache: messages.CacheUsage{Read: 44000, Write: 2000}},
	Cost: 0.0312}

// BenchmarkCodecMessage compares the Message codec with reflection.
func BenchmarkCodecMessage(b *testing.B) { stored.Bench(b, benchMessage) }

// BenchmarkCodecSession compares the Session codec with reflection.
func BenchmarkCodecSession(b *testing.B) { stored.Bench(b, benchSession) }
