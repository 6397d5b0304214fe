package persistence

// Hand-written msgpack codecs for the stored rows a step reads and writes:
// messages and their parts, the Session record, inbox inputs, ID entries,
// retry and compaction state, and the instruction checkpoint.
//
// Why: msgpack encodes a struct by reflection and, for one with omitempty
// fields, allocates a field list per value on every encode. An assistant
// message with a text part and a tool part took about 4 µs and 31
// allocations to encode and as long and 25 allocations to decode, and the
// writer goroutine and the runner do that on every step: about 12% of CPU,
// plus the garbage. BenchmarkCodec* measure both paths in one run.
//
// The rule is messages/codec.go's: a codec writes exactly the bytes the
// reflection encoder wrote for the same value under messages.Marshal's
// options and reads exactly what the reflection decoder read, so stored
// data does not change and old and new binaries read each other's rows.
// Fields in declaration order keyed by their msgpack tags; omitempty fields
// left out when msgpack calls them empty (zero numbers, "", false, nil
// pointers, zero-length slices and maps; Message.Model, a struct without
// omitempty fields, never is); compact integers; json.RawMessage as bin,
// nil as nil; fields tagged "-" neither written nor read. codec_test.go
// checks every type against reflection on the same value, with every field
// empty and non-empty, and fuzzes the decoders against the reflection
// decoder.

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/sessiond/sessiond/messages/codec"
)

// Field tags in declaration order, for the array form of a struct (see
// codec.DecodeFields).
var (
	messageKeys    = []string{"i", "s", "q", "r", "c", "p", "d", "t", "k", "a", "m", "n", "P", "R", "f", "T", "o", "e", "C", "O", "x"}
	partKeys       = []string{"k", "o", "t", "e", "p", "T"}
	toolPartKeys   = []string{"c", "n", "s", "x", "i", "h", "o", "m", "e", "p", "r"}
	retryKeys      = []string{"n", "a", "e"}
	compactionKeys = []string{"r", "s", "t", "c", "e", "q", "u"}
	checkpointKeys = []string{"b", "q", "a"}
	sessionKeys    = []string{"i", "l", "t", "a", "m", "c", "k", "o"}
	inputKeys      = []string{"i", "s", "k", "p", "d", "a", "q", "c"}
	idEntryKeys    = []string{"s", "k", "q", "a", "z"}
)

// EncodeMsgpack implements msgpack.CustomEncoder.
func (m *Message) EncodeMsgpack(enc *msgpack.Encoder) error {
	if m == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("i", string(m.ID))
		f.String("s", string(m.SessionID))
		f.Int("q", m.Seq)
		f.String("r", m.Role)
		f.Int("c", m.Created)
		if m.Prompt != nil {
			f.Value("p", m.Prompt)
		}
		f.StringOmitEmpty("d", string(m.Delivery))
		f.StringOmitEmpty("t", m.Text)
		f.StringOmitEmpty("k", m.Kind)
		f.StringOmitEmpty("a", m.Agent)
		// omitempty, but msgpack never finds a struct without omitempty
		// fields empty: the zero ModelRef is written too.
		f.Value("m", &m.Model)
		f.IntOmitEmpty("n", int64(m.Attempts))
		if len(m.Parts) > 0 {
			codec.EncodeSlice(&f, "P", m.Parts)
		}
		if m.Retry != nil {
			f.Value("R", m.Retry)
		}
		f.StringOmitEmpty("f", m.Finish)
		if m.Tokens != nil {
			f.Value("T", m.Tokens)
		}
		if m.Cost != 0 {
			f.Float("o", m.Cost)
		}
		if m.Error != nil {
			f.Value("e", m.Error)
		}
		f.IntOmitEmpty("C", m.Completed)
		f.BoolOmitEmpty("O", m.Open)
		if m.Compaction != nil {
			f.Value("x", m.Compaction)
		}
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (m *Message) DecodeMsgpack(dec *msgpack.Decoder) error {
	*m = Message{}
	return codec.DecodeFields(dec, messageKeys, func(key string) (err error) {
		switch key {
		case "i":
			return codec.DecodeString(dec, &m.ID)
		case "s":
			return codec.DecodeString(dec, &m.SessionID)
		case "q":
			return codec.DecodeInt(dec, &m.Seq)
		case "r":
			return codec.DecodeString(dec, &m.Role)
		case "c":
			return codec.DecodeInt(dec, &m.Created)
		case "p":
			return codec.DecodePtr(dec, &m.Prompt)
		case "d":
			return codec.DecodeString(dec, &m.Delivery)
		case "t":
			return codec.DecodeString(dec, &m.Text)
		case "k":
			return codec.DecodeString(dec, &m.Kind)
		case "a":
			return codec.DecodeString(dec, &m.Agent)
		case "m":
			return m.Model.DecodeMsgpack(dec)
		case "n":
			return codec.DecodeInt(dec, &m.Attempts)
		case "P":
			return codec.DecodeSlice(dec, &m.Parts)
		case "R":
			return codec.DecodePtr(dec, &m.Retry)
		case "f":
			return codec.DecodeString(dec, &m.Finish)
		case "T":
			return codec.DecodePtr(dec, &m.Tokens)
		case "o":
			m.Cost, err = dec.DecodeFloat64()
			return err
		case "e":
			return codec.DecodePtr(dec, &m.Error)
		case "C":
			return codec.DecodeInt(dec, &m.Completed)
		case "O":
			m.Open, err = dec.DecodeBool()
			return err
		case "x":
			return codec.DecodePtr(dec, &m.Compaction)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *Part) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("k", p.Kind)
		f.IntOmitEmpty("o", int64(p.Ordinal))
		f.StringOmitEmpty("t", p.Text)
		f.BoolOmitEmpty("e", p.Ended)
		f.BytesOmitEmpty("p", p.ProviderMetadata)
		if p.Tool != nil {
			f.Value("T", p.Tool)
		}
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *Part) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = Part{}
	return codec.DecodeFields(dec, partKeys, func(key string) (err error) {
		switch key {
		case "k":
			return codec.DecodeString(dec, &p.Kind)
		case "o":
			return codec.DecodeInt(dec, &p.Ordinal)
		case "t":
			return codec.DecodeString(dec, &p.Text)
		case "e":
			p.Ended, err = dec.DecodeBool()
			return err
		case "p":
			return codec.DecodeBytes(dec, &p.ProviderMetadata)
		case "T":
			return codec.DecodePtr(dec, &p.Tool)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (t *ToolPart) EncodeMsgpack(enc *msgpack.Encoder) error {
	if t == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("c", t.CallID)
		f.String("n", t.Name)
		f.String("s", t.State)
		f.StringOmitEmpty("x", t.InputText)
		f.BytesOmitEmpty("i", t.Input)
		f.BoolOmitEmpty("h", t.Executed)
		f.StringOmitEmpty("o", t.Output)
		f.BytesOmitEmpty("m", t.Metadata)
		if t.Error != nil {
			f.Value("e", t.Error)
		}
		f.BytesOmitEmpty("p", t.CallMetadata)
		f.BytesOmitEmpty("r", t.ResultMetadata)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (t *ToolPart) DecodeMsgpack(dec *msgpack.Decoder) error {
	*t = ToolPart{}
	return codec.DecodeFields(dec, toolPartKeys, func(key string) (err error) {
		switch key {
		case "c":
			return codec.DecodeString(dec, &t.CallID)
		case "n":
			return codec.DecodeString(dec, &t.Name)
		case "s":
			return codec.DecodeString(dec, &t.State)
		case "x":
			return codec.DecodeString(dec, &t.InputText)
		case "i":
			return codec.DecodeBytes(dec, &t.Input)
		case "h":
			t.Executed, err = dec.DecodeBool()
			return err
		case "o":
			return codec.DecodeString(dec, &t.Output)
		case "m":
			return codec.DecodeBytes(dec, &t.Metadata)
		case "e":
			return codec.DecodePtr(dec, &t.Error)
		case "p":
			return codec.DecodeBytes(dec, &t.CallMetadata)
		case "r":
			return codec.DecodeBytes(dec, &t.ResultMetadata)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (r *Retry) EncodeMsgpack(enc *msgpack.Encoder) error {
	if r == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.Int("n", int64(r.Attempt))
		f.Int("a", r.At)
		f.Value("e", &r.Error)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (r *Retry) DecodeMsgpack(dec *msgpack.Decoder) error {
	*r = Retry{}
	return codec.DecodeFields(dec, retryKeys, func(key string) error {
		switch key {
		case "n":
			return codec.DecodeInt(dec, &r.Attempt)
		case "a":
			return codec.DecodeInt(dec, &r.At)
		case "e":
			return r.Error.DecodeMsgpack(dec)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (c *Compaction) EncodeMsgpack(enc *msgpack.Encoder) error {
	if c == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("r", c.Reason)
		f.String("s", c.State)
		f.StringOmitEmpty("t", c.Summary)
		f.StringOmitEmpty("c", c.Recent)
		if c.Error != nil {
			f.Value("e", c.Error)
		}
		f.IntOmitEmpty("q", c.StartedSeq)
		if c.Usage != nil {
			f.Value("u", c.Usage)
		}
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (c *Compaction) DecodeMsgpack(dec *msgpack.Decoder) error {
	*c = Compaction{}
	return codec.DecodeFields(dec, compactionKeys, func(key string) error {
		switch key {
		case "r":
			return codec.DecodeString(dec, &c.Reason)
		case "s":
			return codec.DecodeString(dec, &c.State)
		case "t":
			return codec.DecodeString(dec, &c.Summary)
		case "c":
			return codec.DecodeString(dec, &c.Recent)
		case "e":
			return codec.DecodePtr(dec, &c.Error)
		case "q":
			return codec.DecodeInt(dec, &c.StartedSeq)
		case "u":
			return codec.DecodePtr(dec, &c.Usage)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (c *Checkpoint) EncodeMsgpack(enc *msgpack.Encoder) error {
	if c == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("b", c.Baseline)
		f.Int("q", c.BaselineSeq)
		// The map through msgpack itself, which sorts its keys under
		// Marshal's SetSortMapKeys.
		f.Reflect("a", c.Applied)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (c *Checkpoint) DecodeMsgpack(dec *msgpack.Decoder) error {
	*c = Checkpoint{}
	return codec.DecodeFields(dec, checkpointKeys, func(key string) error {
		switch key {
		case "b":
			return codec.DecodeString(dec, &c.Baseline)
		case "q":
			return codec.DecodeInt(dec, &c.BaselineSeq)
		case "a":
			// msgpack's own decoder for map[string]string, without
			// reflection (Decode switches on the type).
			return dec.Decode(&c.Applied)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (s *Session) EncodeMsgpack(enc *msgpack.Encoder) error {
	if s == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("i", string(s.ID))
		f.Value("l", &s.Location)
		f.String("t", s.Title)
		f.String("a", s.Agent)
		f.Value("m", &s.Model)
		f.Int("c", s.Created)
		f.Value("k", &s.Tokens)
		f.Float("o", s.Cost)
		// Updated and LastSeq are tagged "-": not stored.
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (s *Session) DecodeMsgpack(dec *msgpack.Decoder) error {
	*s = Session{}
	return codec.DecodeFields(dec, sessionKeys, func(key string) (err error) {
		switch key {
		case "i":
			return codec.DecodeString(dec, &s.ID)
		case "l":
			return s.Location.DecodeMsgpack(dec)
		case "t":
			return codec.DecodeString(dec, &s.Title)
		case "a":
			return codec.DecodeString(dec, &s.Agent)
		case "m":
			return s.Model.DecodeMsgpack(dec)
		case "c":
			return codec.DecodeInt(dec, &s.Created)
		case "k":
			return s.Tokens.DecodeMsgpack(dec)
		case "o":
			s.Cost, err = dec.DecodeFloat64()
			return err
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (in *Input) EncodeMsgpack(enc *msgpack.Encoder) error {
	if in == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("i", string(in.ID))
		f.String("s", string(in.SessionID))
		f.String("k", in.Kind)
		if in.Prompt != nil {
			f.Value("p", in.Prompt)
		}
		f.StringOmitEmpty("d", string(in.Delivery))
		f.Int("a", in.AdmittedSeq)
		if in.PromotedSeq != nil {
			f.Int("q", *in.PromotedSeq)
		}
		f.Int("c", in.TimeCreated)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (in *Input) DecodeMsgpack(dec *msgpack.Decoder) error {
	*in = Input{}
	return codec.DecodeFields(dec, inputKeys, func(key string) error {
		switch key {
		case "i":
			return codec.DecodeString(dec, &in.ID)
		case "s":
			return codec.DecodeString(dec, &in.SessionID)
		case "k":
			return codec.DecodeString(dec, &in.Kind)
		case "p":
			return codec.DecodePtr(dec, &in.Prompt)
		case "d":
			return codec.DecodeString(dec, &in.Delivery)
		case "a":
			return codec.DecodeInt(dec, &in.AdmittedSeq)
		case "q":
			return codec.DecodeIntPtr(dec, &in.PromotedSeq)
		case "c":
			return codec.DecodeInt(dec, &in.TimeCreated)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (e *idEntry) EncodeMsgpack(enc *msgpack.Encoder) error {
	if e == nil {
		return enc.EncodeNil()
	}
	var f codec.Fields
	return f.Encode(enc, func() {
		f.String("s", string(e.SessionID))
		f.String("k", e.Kind)
		f.IntOmitEmpty("q", e.Seq)
		f.IntOmitEmpty("a", e.Admitted)
		f.IntOmitEmpty("z", e.Settled)
	})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (e *idEntry) DecodeMsgpack(dec *msgpack.Decoder) error {
	*e = idEntry{}
	return codec.DecodeFields(dec, idEntryKeys, func(key string) error {
		switch key {
		case "s":
			return codec.DecodeString(dec, &e.SessionID)
		case "k":
			return codec.DecodeString(dec, &e.Kind)
		case "q":
			return codec.DecodeInt(dec, &e.Seq)
		case "a":
			return codec.DecodeInt(dec, &e.Admitted)
		case "z":
			return codec.DecodeInt(dec, &e.Settled)
		}
		return dec.Skip()
	})
}
