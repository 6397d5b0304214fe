package codec

import (
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Fields writes the fields of one struct. Its methods write a key and a
// value the way the reflection encoder writes a field of that kind; the
// caller leaves out the fields that omitempty would omit. The first error
// sticks and makes later writes no-ops.
type Fields struct {
	enc      *msgpack.Encoder
	n        int  // fields counted, then fields written
	counting bool // the first pass of Encode
	err      error
}

// Encode writes a struct as a map of the fields write writes with f's
// methods. write runs twice, first only to count the fields (the map
// header comes first), so it must decide every omission from the value
// alone. write is a closure over f rather than taking it as an argument:
// an argument passed to a func value escapes, and f would cost an
// allocation per struct, the very thing the codecs exist to avoid.
func (f *Fields) Encode(enc *msgpack.Encoder, write func()) error {
	*f = Fields{counting: true}
	write()
	n := f.n
	*f = Fields{enc: enc, err: enc.EncodeMapLen(n)}
	write()
	if f.err == nil && f.n != n {
		// write looked at something besides the value, and the map
		// header already promised n fields.
		return fmt.Errorf("codec: wrote %d fields after counting %d", f.n, n)
	}
	return f.err
}

// key writes a field's key and reports whether to write its value.
func (f *Fields) key(k string) bool {
	f.n++
	if f.counting || f.err != nil {
		return false
	}
	f.err = f.enc.EncodeString(k)
	return f.err == nil
}

// String writes a string field (also of a named string type).
func (f *Fields) String(key, v string) {
	if f.key(key) {
		f.err = f.enc.EncodeString(v)
	}
}

// Int writes an integer field in its most compact form. The reflection
// encoder does so for int always and for int64 under UseCompactInts,
// which Marshal sets.
func (f *Fields) Int(key string, v int64) {
	if f.key(key) {
		f.err = f.enc.EncodeInt(v)
	}
}

// Float writes a float64 field.
func (f *Fields) Float(key string, v float64) {
	if f.key(key) {
		f.err = f.enc.EncodeFloat64(v)
	}
}

// Bool writes a bool field.
func (f *Fields) Bool(key string, v bool) {
	if f.key(key) {
		f.err = f.enc.EncodeBool(v)
	}
}

// Bytes writes a []byte field (json.RawMessage too) as bin, or nil when
// v is nil, as the reflection encoder does.
func (f *Fields) Bytes(key string, v []byte) {
	if f.key(key) {
		f.err = f.enc.EncodeBytes(v)
	}
}

// StringOmitEmpty writes a string field unless it is empty, as
// omitempty does.
func (f *Fields) StringOmitEmpty(key, v string) {
	if v != "" {
		f.String(key, v)
	}
}

// BoolOmitEmpty writes a bool field unless it is false, as omitempty
// does.
func (f *Fields) BoolOmitEmpty(key string, v bool) {
	if v {
		f.Bool(key, v)
	}
}

// IntOmitEmpty writes an integer field unless it is zero, as omitempty
// does.
func (f *Fields) IntOmitEmpty(key string, v int64) {
	if v != 0 {
		f.Int(key, v)
	}
}

// BytesOmitEmpty writes a []byte field unless it is empty, as omitempty
// does.
func (f *Fields) BytesOmitEmpty(key string, v []byte) {
	if len(v) > 0 {
		f.Bytes(key, v)
	}
}

// Value writes a field whose type has its own codec. Codecs write a nil
// pointer as nil, as the reflection encoder does.
func (f *Fields) Value(key string, v msgpack.CustomEncoder) {
	if f.key(key) {
		f.err = v.EncodeMsgpack(f.enc)
	}
}

// Reflect writes a field with msgpack's reflection encoder, for kinds
// without a codec here (maps: the encoder's SetSortMapKeys applies).
func (f *Fields) Reflect(key string, v any) {
	if f.key(key) {
		f.err = f.enc.Encode(v)
	}
}

// EncodeSlice writes a slice field whose elements have their own codec:
// nil as nil, otherwise an array, as the reflection encoder does.
func EncodeSlice[T any, P interface {
	*T
	msgpack.CustomEncoder
}](f *Fields, key string, s []T) {
	if !f.key(key) {
		return
	}
	if s == nil {
		f.err = f.enc.EncodeNil()
		return
	}
	if f.err = f.enc.EncodeArrayLen(len(s)); f.err != nil {
		return
	}
	for i := range s {
		if f.err = P(&s[i]).EncodeMsgpack(f.enc); f.err != nil {
			return
		}
	}
}

// errArrayStruct is the reflection decoder's complaint, kept so old and
// new decoders fail alike.
var errArrayStruct = errors.New("msgpack: number of fields in array-encoded struct has changed")

// DecodeFields reads a struct: nil leaves the target as it is (codecs
// reset it first, so nil decodes to the zero value); a map calls field
// with each key, the decoder positioned at its value, which field must
// consume (dec.Skip() for keys it does not know). keys lists the field
// tags in declaration order, for the array form the reflection decoder
// also accepts: all fields in order, or an empty array for the zero value.
func DecodeFields(dec *msgpack.Decoder, keys []string, field func(key string) error) error {
	c, err := dec.PeekCode()
	if err != nil {
		return err
	}
	switch {
	case c == msgpcode.Nil:
		return dec.DecodeNil()
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return err
		}
		for range n {
			// A one-byte key (every tag here) converts to a string
			// without allocating.
			k, err := dec.DecodeString()
			if err != nil {
				return err
			}
			if err := field(k); err != nil {
				return err
			}
		}
		return nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil || n == 0 {
			return err
		}
		if n != len(keys) {
			return errArrayStruct
		}
		for _, k := range keys {
			if err := field(k); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("msgpack: unexpected code=%x decoding struct", c)
}

// DecodeString decodes a string field (str, bin or nil) into a string
// type.
func DecodeString[S ~string](dec *msgpack.Decoder, p *S) error {
	s, err := dec.DecodeString()
	*p = S(s)
	return err
}

// DecodeBytes decodes a []byte field (bin, str or nil) into a byte slice
// type such as json.RawMessage.
func DecodeBytes[B ~[]byte](dec *msgpack.Decoder, p *B) error {
	b, err := dec.DecodeBytes()
	*p = B(b)
	return err
}

// DecodeInt decodes an integer field (any msgpack integer, or nil for 0).
func DecodeInt[I ~int | ~int64](dec *msgpack.Decoder, p *I) error {
	n, err := dec.DecodeInt64()
	*p = I(n)
	return err
}

// DecodeIntPtr decodes a *int64 field: nil or an integer.
func DecodeIntPtr(dec *msgpack.Decoder, p **int64) error {
	if null, err := isNil(dec); err != nil || null {
		*p = nil
		return err
	}
	n, err := dec.DecodeInt64()
	*p = &n
	return err
}

// DecodePtr decodes a pointer field whose element has its own codec: nil,
// or a new element.
func DecodePtr[T any, P interface {
	*T
	msgpack.CustomDecoder
}](dec *msgpack.Decoder, p **T) error {
	if null, err := isNil(dec); err != nil || null {
		*p = nil
		return err
	}
	v := new(T)
	*p = v
	return P(v).DecodeMsgpack(dec)
}

// maxPrealloc bounds the elements allocated ahead of reading them, so a
// corrupt count fails on missing bytes rather than on memory (Unmarshal
// refuses such counts before decoding, but codecs do not rely on it).
const maxPrealloc = 1024

// DecodeSlice decodes a slice field whose elements have their own codec:
// nil, or an array (an empty one to an empty, non-nil slice, as the
// reflection decoder does).
func DecodeSlice[T any, P interface {
	*T
	msgpack.CustomDecoder
}](dec *msgpack.Decoder, p *[]T) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*p = nil
		return nil
	}
	s := make([]T, 0, min(n, maxPrealloc))
	for range n {
		s = append(s, *new(T))
		if err := P(&s[len(s)-1]).DecodeMsgpack(dec); err != nil {
			return err
		}
	}
	*p = s
	return nil
}

// isNil consumes a nil and reports true, or reports false and consumes
// nothing.
func isNil(dec *msgpack.Decoder) (bool, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return false, err
	}
	if c != msgpcode.Nil {
		return false, nil
	}
	return true, dec.DecodeNil()
}
