// Package wire holds the building blocks of the hand-written msgpack
// codecs of stored types (messages/codec.go, persistence/codec.go).
//
// msgpack's reflection encoder and decoder cost several microseconds and
// dozens of allocations per stored message; the codecs built from this
// package write and read the very same bytes without reflection.
//
// # Invariants
//
//   - Fields.Encode writes what msgpack's reflection encoder writes for a struct
//     under messages.Marshal's options (compact integers, sorted map keys,
//     nothing else): a map of the fields that are not omitted, keyed by
//     their tags, in declaration order. A codec built on it does not follow
//     other encoder options (UseArrayEncodedStructs, SetOmitEmpty,
//     UseCompactInts(false)); nothing in sessiond sets them.
//   - DecodeFields accepts exactly what the reflection decoder accepts for
//     a struct: nil (the zero value), a map of fields in any order with
//     unknown keys skipped, or an array of all its fields in order.
//   - Decoding never aliases the input: strings and byte slices are copies.
//
// # Usage
//
//	func (r *Retry) EncodeMsgpack(enc *msgpack.Encoder) error {
//		if r == nil {
//			return enc.EncodeNil()
//		}
//		var f wire.Fields
//		return f.Encode(enc, func() {
//			f.Int("n", int64(r.Attempt))
//			if r.At != 0 { // omitempty
//				f.Int("a", r.At)
//			}
//			f.Value("e", &r.Error)
//		})
//	}
//
//	func (r *Retry) DecodeMsgpack(dec *msgpack.Decoder) error {
//		*r = Retry{}
//		return wire.DecodeFields(dec, retryKeys, func(key string) error {
//			switch key {
//			case "n":
//				return wire.DecodeInt(dec, &r.Attempt)
//			case "e":
//				return r.Error.DecodeMsgpack(dec)
//			}
//			return dec.Skip()
//		})
//	}
package wire
