package messages

// Hand-written msgpack codecs for the stored types that every step encodes
// and decodes: the event envelope and its Durable, the hot payloads, and
// the values they share with the persistence projections.
//
// Why: msgpack encodes a struct by reflection and, for one with omitempty
// fields, allocates a field list per value on every encode. An assistant
// message (persistence.Message) took about 4 µs and 31 allocations to
// encode and as long and 25 allocations to decode, and the store's single
// writer and the runner do that on every step: about 12% of CPU, plus the
// garbage. These codecs and persistence/codec.go do the same without
// reflection; BenchmarkCodec* measure both paths in one run.
//
// The rule: a codec writes exactly the bytes the reflection encoder wrote
// for the same value under Marshal's options, and reads exactly what the
// reflection decoder read, so stored data and golden files do not change
// and old and new binaries read each other's values. That is: fields in
// declaration order keyed by their msgpack tags; omitempty fields left out
// when msgpack calls them empty (zero numbers, "", false, nil pointers,
// zero-length slices and maps, and a struct value only when all its fields
// are omitempty and empty, so a ModelRef never is); compact integers;
// json.RawMessage as bin and nil as nil. codec_test.go checks every type
// against reflection on the same value, with every field empty and
// non-empty, and fuzzes the decoders against the reflection decoder. A new
// field needs a line in the encoder, the decoder and the keys list; the
// tests fail until it has them.
//
// Payloads written rarely (session, compaction, instruction and retry
// events) stay on reflection: they cost nothing per step.

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/sessiond/sessiond/messages/codec"
)

// Field tags in declaration order, for the array form of a struct (see
// codec.DecodeFields).
var (
	durableKeys    = []string{"a", "s", "v"}
	tokensKeys     = []string{"i", "o", "r", "c"}
	usageKeys      = []string{"t", "c"}
	cacheKeys      = []string{"r", "w"}
	modelRefKeys   = []string{"p", "i"}
	errorKeys      = []string{"t", "m"}
	locationKeys   = []string{"d", "w"}
	fileKeys       = []string{"m", "n", "u"}
	promptKeys     = []string{"t", "f"}
	admittedKeys   = []string{"s", "i", "p", "d"}
	promotedKeys   = []string{"s", "i"}
	sessionKeys    = []string{"s"}
	execFailedKeys = []string{"s", "e"}
	interruptKeys  = []string{"s", "r"}
	stepKeys       = []string{"s", "m", "a", "o", "n"}
	stepEndedKeys  = []string{"s", "m", "f", "t", "c"}
	stepFailedKeys = []string{"s", "m", "e"}
	fragStartKeys  = []string{"s", "m", "o", "p"}
	fragEndKeys    = []string{"s", "m", "o", "t", "p"}
	inputStartKeys = []string{"s", "m", "c", "n"}
	inputEndKeys   = []string{"s", "m", "c", "n", "t"}
	calledKeys     = []string{"s", "m", "c", "n", "i", "x", "p"}
	succeededKeys  = []string{"s", "m", "c", "o", "d", "p"}
	toolFailedKeys = []string{"s", "m", "c", "e", "p"}
)

// EncodeMsgpack implements msgpack.CustomEncoder.
func (d *Durable) EncodeMsgpack(enc *msgpack.Encoder) error {
	if d == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("a", string(d.AggregateID))
		f.Int("s", d.Seq)
		f.Int("v", int64(d.Version))
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (d *Durable) DecodeMsgpack(dec *msgpack.Decoder) error {
	*d = Durable{}
	return codec.DecodeFields(dec, durableKeys, func(key string) error {
		switch key {
		case "a":
			return codec.DecodeString(dec, &d.AggregateID)
		case "s":
			return codec.DecodeInt(dec, &d.Seq)
		case "v":
			return codec.DecodeInt(dec, &d.Version)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (t *Tokens) EncodeMsgpack(enc *msgpack.Encoder) error {
	if t == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.Int("i", t.Input)
		f.Int("o", t.Output)
		f.Int("r", t.Reasoning)
		f.Value("c", &t.Cache)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (t *Tokens) DecodeMsgpack(dec *msgpack.Decoder) error {
	*t = Tokens{}
	return codec.DecodeFields(dec, tokensKeys, func(key string) error {
		switch key {
		case "i":
			return codec.DecodeInt(dec, &t.Input)
		case "o":
			return codec.DecodeInt(dec, &t.Output)
		case "r":
			return codec.DecodeInt(dec, &t.Reasoning)
		case "c":
			return t.Cache.DecodeMsgpack(dec)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (u *Usage) EncodeMsgpack(enc *msgpack.Encoder) error {
	if u == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.Value("t", &u.Tokens)
		f.Float("c", u.Cost)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (u *Usage) DecodeMsgpack(dec *msgpack.Decoder) error {
	*u = Usage{}
	return codec.DecodeFields(dec, usageKeys, func(key string) error {
		switch key {
		case "t":
			return u.Tokens.DecodeMsgpack(dec)
		case "c":
			var err error
			u.Cost, err = dec.DecodeFloat64()
			return err
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (c *CacheUsage) EncodeMsgpack(enc *msgpack.Encoder) error {
	if c == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.Int("r", c.Read)
		f.Int("w", c.Write)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (c *CacheUsage) DecodeMsgpack(dec *msgpack.Decoder) error {
	*c = CacheUsage{}
	return codec.DecodeFields(dec, cacheKeys, func(key string) error {
		switch key {
		case "r":
			return codec.DecodeInt(dec, &c.Read)
		case "w":
			return codec.DecodeInt(dec, &c.Write)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (m *ModelRef) EncodeMsgpack(enc *msgpack.Encoder) error {
	if m == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("p", m.ProviderID)
		f.String("i", m.ID)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (m *ModelRef) DecodeMsgpack(dec *msgpack.Decoder) error {
	*m = ModelRef{}
	return codec.DecodeFields(dec, modelRefKeys, func(key string) error {
		switch key {
		case "p":
			return codec.DecodeString(dec, &m.ProviderID)
		case "i":
			return codec.DecodeString(dec, &m.ID)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (e *Error) EncodeMsgpack(enc *msgpack.Encoder) error {
	if e == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("t", string(e.Type))
		f.String("m", e.Message)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (e *Error) DecodeMsgpack(dec *msgpack.Decoder) error {
	*e = Error{}
	return codec.DecodeFields(dec, errorKeys, func(key string) error {
		switch key {
		case "t":
			return codec.DecodeString(dec, &e.Type)
		case "m":
			return codec.DecodeString(dec, &e.Message)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (l *Location) EncodeMsgpack(enc *msgpack.Encoder) error {
	if l == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("d", l.Directory)
		f.StringOmitEmpty("w", l.WorkspaceID)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (l *Location) DecodeMsgpack(dec *msgpack.Decoder) error {
	*l = Location{}
	return codec.DecodeFields(dec, locationKeys, func(key string) error {
		switch key {
		case "d":
			return codec.DecodeString(dec, &l.Directory)
		case "w":
			return codec.DecodeString(dec, &l.WorkspaceID)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *File) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("m", p.Mime)
		f.StringOmitEmpty("n", p.Filename)
		f.String("u", p.URL)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *File) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = File{}
	return codec.DecodeFields(dec, fileKeys, func(key string) error {
		switch key {
		case "m":
			return codec.DecodeString(dec, &p.Mime)
		case "n":
			return codec.DecodeString(dec, &p.Filename)
		case "u":
			return codec.DecodeString(dec, &p.URL)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *Prompt) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("t", p.Text)
		if len(p.Files) > 0 {
			codec.EncodeSlice(&f, "f", p.Files)
		}
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *Prompt) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = Prompt{}
	return codec.DecodeFields(dec, promptKeys, func(key string) error {
		switch key {
		case "t":
			return codec.DecodeString(dec, &p.Text)
		case "f":
			return codec.DecodeSlice(dec, &p.Files)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *PromptAdmitted) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("i", string(p.InputID))
		f.Value("p", &p.Prompt)
		f.String("d", string(p.Delivery))
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *PromptAdmitted) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = PromptAdmitted{}
	return codec.DecodeFields(dec, admittedKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "i":
			return codec.DecodeString(dec, &p.InputID)
		case "p":
			return p.Prompt.DecodeMsgpack(dec)
		case "d":
			return codec.DecodeString(dec, &p.Delivery)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *PromptPromoted) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("i", string(p.InputID))
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *PromptPromoted) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = PromptPromoted{}
	return codec.DecodeFields(dec, promotedKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "i":
			return codec.DecodeString(dec, &p.InputID)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ExecutionStarted) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeSessionOnly(enc, p, &p.SessionID)
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ExecutionStarted) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ExecutionStarted{}
	return decodeSessionOnly(dec, &p.SessionID)
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ExecutionSucceeded) EncodeMsgpack(enc *msgpack.Encoder) error {
	return encodeSessionOnly(enc, p, &p.SessionID)
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ExecutionSucceeded) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ExecutionSucceeded{}
	return decodeSessionOnly(dec, &p.SessionID)
}

// encodeSessionOnly writes a payload whose one field is its Session.
func encodeSessionOnly[T any](enc *msgpack.Encoder, p *T, sid *SessionID) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(*sid))
	})
}

// decodeSessionOnly reads a payload whose one field is its Session.
func decodeSessionOnly(dec *msgpack.Decoder, sid *SessionID) error {
	return codec.DecodeFields(dec, sessionKeys, func(key string) error {
		if key == "s" {
			return codec.DecodeString(dec, sid)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ExecutionFailed) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.Value("e", &p.Error)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ExecutionFailed) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ExecutionFailed{}
	return codec.DecodeFields(dec, execFailedKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "e":
			return p.Error.DecodeMsgpack(dec)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ExecutionInterrupted) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("r", p.Reason)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ExecutionInterrupted) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ExecutionInterrupted{}
	return codec.DecodeFields(dec, interruptKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "r":
			return codec.DecodeString(dec, &p.Reason)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *StepStarted) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.String("a", p.Agent)
		f.Value("o", &p.Model)
		f.Int("n", int64(p.Attempt))
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *StepStarted) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = StepStarted{}
	return codec.DecodeFields(dec, stepKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "a":
			return codec.DecodeString(dec, &p.Agent)
		case "o":
			return p.Model.DecodeMsgpack(dec)
		case "n":
			return codec.DecodeInt(dec, &p.Attempt)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *StepEnded) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.String("f", p.Finish)
		f.Value("t", &p.Tokens)
		f.Float("c", p.Cost)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *StepEnded) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = StepEnded{}
	return codec.DecodeFields(dec, stepEndedKeys, func(key string) (err error) {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "f":
			return codec.DecodeString(dec, &p.Finish)
		case "t":
			return p.Tokens.DecodeMsgpack(dec)
		case "c":
			p.Cost, err = dec.DecodeFloat64()
			return err
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *StepFailed) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.Value("e", &p.Error)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *StepFailed) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = StepFailed{}
	return codec.DecodeFields(dec, stepFailedKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "e":
			return p.Error.DecodeMsgpack(dec)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *TextStarted) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.Int("o", int64(p.Ordinal))
		f.BytesOmitEmpty("p", p.ProviderMetadata)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *TextStarted) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = TextStarted{}
	return codec.DecodeFields(dec, fragStartKeys, func(key string) (err error) {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "o":
			return codec.DecodeInt(dec, &p.Ordinal)
		case "p":
			return codec.DecodeBytes(dec, &p.ProviderMetadata)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *TextEnded) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.Int("o", int64(p.Ordinal))
		f.String("t", p.Text)
		f.BytesOmitEmpty("p", p.ProviderMetadata)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *TextEnded) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = TextEnded{}
	return codec.DecodeFields(dec, fragEndKeys, func(key string) (err error) {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "o":
			return codec.DecodeInt(dec, &p.Ordinal)
		case "t":
			return codec.DecodeString(dec, &p.Text)
		case "p":
			return codec.DecodeBytes(dec, &p.ProviderMetadata)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder. A ReasoningStarted has the
// fields of a TextStarted, so it shares its codec.
func (p *ReasoningStarted) EncodeMsgpack(enc *msgpack.Encoder) error {
	return (*TextStarted)(p).EncodeMsgpack(enc)
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ReasoningStarted) DecodeMsgpack(dec *msgpack.Decoder) error {
	return (*TextStarted)(p).DecodeMsgpack(dec)
}

// EncodeMsgpack implements msgpack.CustomEncoder. A ReasoningEnded has the
// fields of a TextEnded, so it shares its codec.
func (p *ReasoningEnded) EncodeMsgpack(enc *msgpack.Encoder) error {
	return (*TextEnded)(p).EncodeMsgpack(enc)
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ReasoningEnded) DecodeMsgpack(dec *msgpack.Decoder) error {
	return (*TextEnded)(p).DecodeMsgpack(dec)
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ToolInputStarted) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.String("c", p.CallID)
		f.String("n", p.Name)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ToolInputStarted) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ToolInputStarted{}
	return codec.DecodeFields(dec, inputStartKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "c":
			return codec.DecodeString(dec, &p.CallID)
		case "n":
			return codec.DecodeString(dec, &p.Name)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ToolInputEnded) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.String("c", p.CallID)
		f.String("n", p.Name)
		f.String("t", p.Text)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ToolInputEnded) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ToolInputEnded{}
	return codec.DecodeFields(dec, inputEndKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "c":
			return codec.DecodeString(dec, &p.CallID)
		case "n":
			return codec.DecodeString(dec, &p.Name)
		case "t":
			return codec.DecodeString(dec, &p.Text)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ToolCalled) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.String("c", p.CallID)
		f.String("n", p.Name)
		f.Bytes("i", p.Input)
		f.Bool("x", p.Executed)
		f.BytesOmitEmpty("p", p.ProviderMetadata)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ToolCalled) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ToolCalled{}
	return codec.DecodeFields(dec, calledKeys, func(key string) (err error) {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "c":
			return codec.DecodeString(dec, &p.CallID)
		case "n":
			return codec.DecodeString(dec, &p.Name)
		case "i":
			return codec.DecodeBytes(dec, &p.Input)
		case "x":
			p.Executed, err = dec.DecodeBool()
			return err
		case "p":
			return codec.DecodeBytes(dec, &p.ProviderMetadata)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ToolSucceeded) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.String("c", p.CallID)
		f.String("o", p.Output)
		f.BytesOmitEmpty("d", p.Metadata)
		f.BytesOmitEmpty("p", p.ProviderMetadata)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ToolSucceeded) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ToolSucceeded{}
	return codec.DecodeFields(dec, succeededKeys, func(key string) (err error) {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "c":
			return codec.DecodeString(dec, &p.CallID)
		case "o":
			return codec.DecodeString(dec, &p.Output)
		case "d":
			return codec.DecodeBytes(dec, &p.Metadata)
		case "p":
			return codec.DecodeBytes(dec, &p.ProviderMetadata)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *ToolFailed) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(p.SessionID))
		f.String("m", string(p.AssistantMessageID))
		f.String("c", p.CallID)
		f.Value("e", &p.Error)
		f.BytesOmitEmpty("p", p.ProviderMetadata)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *ToolFailed) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = ToolFailed{}
	return codec.DecodeFields(dec, toolFailedKeys, func(key string) (err error) {
		switch key {
		case "s":
			return codec.DecodeString(dec, &p.SessionID)
		case "m":
			return codec.DecodeString(dec, &p.AssistantMessageID)
		case "c":
			return codec.DecodeString(dec, &p.CallID)
		case "e":
			return p.Error.DecodeMsgpack(dec)
		case "p":
			return codec.DecodeBytes(dec, &p.ProviderMetadata)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder. The envelope is an array
// (as_array), so it needs no field list; the codec saves the reflection
// walk over its seven fields for every event appended.
func (e *storedEvent) EncodeMsgpack(enc *msgpack.Encoder) error {
	if e == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(7); err != nil {
		return err
	}
	if err := enc.EncodeUint(uint64(e.Format)); err != nil {
		return err
	}
	if err := enc.EncodeString(string(e.ID)); err != nil {
		return err
	}
	if err := enc.EncodeInt(e.Created); err != nil {
		return err
	}
	if err := enc.EncodeString(e.Type); err != nil {
		return err
	}
	if err := e.Durable.EncodeMsgpack(enc); err != nil {
		return err
	}
	if err := e.Location.EncodeMsgpack(enc); err != nil {
		return err
	}
	if e.Data == nil {
		return enc.EncodeNil()
	}
	return e.Data.EncodeMsgpack(enc) // the bytes as they are
}
