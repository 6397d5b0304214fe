// Package codec holds the building blocks of the hand-written msgpack
// codecs of stored types (messages/codec.go, persistence/codec.go).
//
// msgpack's reflection encoder and decoder cost several microseconds and
// dozens of allocations per stored message; the codecs built from this
// package write and read the very same bytes without reflection.
//
// # Invariants
//
//   - Fields.Encode writes what msgpack's reflection encoder writes for a
//     struct under messages.Marshal's options (compact integers, sorted map
//     keys, nothing else): a map of the fields that are not omitted, keyed
//     by their tags, in declaration order. Codecs built on it ignore other
//     encoder options (UseArrayEncodedStructs, SetOmitEmpty,
//     UseCompactInts(false)); nothing in sessiond sets them.
//   - DecodeFields accepts exactly what the reflection decoder accepts for
//     a struct: nil (the zero value), a map of fields in any order with
//     unknown keys skipped, or an array of all its fields in order.
//   - Codecs reset their target before decoding, so a reused value keeps
//     nothing of its past. A key that appears twice therefore replaces the
//     earlier value wholesale, where the reflection decoder merged a
//     repeated struct, pointer or slice field into the earlier one; no
//     encoder writes a key twice.
//   - Decoding never aliases the input: strings and byte slices are copies.
//   - Codec methods have pointer receivers (a value receiver would copy the
//     struct into an interface, an allocation per nested value), so msgpack
//     finds them only on addressable values: encode through a pointer, as
//     every caller does. A codec type held by value in a struct passed to
//     Marshal by value fails with msgpack's "non-addressable" error; it is
//     never silently encoded another way.
//
// # Usage
//
//	type Mark struct {
//		At   int64  `msgpack:"a"`
//		Note string `msgpack:"n,omitempty"`
//	}
//
//	var markKeys = []string{"a", "n"}
//
//	func (m *Mark) EncodeMsgpack(enc *msgpack.Encoder) error {
//		if m == nil {
//			return enc.EncodeNil()
//		}
//		var f codec.Fields
//		return f.Encode(enc, func() {
//			f.Int("a", m.At)
//			if m.Note != "" {
//				f.String("n", m.Note)
//			}
//		})
//	}
//
//	func (m *Mark) DecodeMsgpack(dec *msgpack.Decoder) error {
//		*m = Mark{}
//		return codec.DecodeFields(dec, markKeys, func(key string) error {
//			switch key {
//			case "a":
//				return codec.DecodeInt(dec, &m.At)
//			case "n":
//				return codec.DecodeString(dec, &m.Note)
//			}
//			return dec.Skip()
//		})
//	}
package codec
