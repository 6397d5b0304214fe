// Package codectest checks hand-written msgpack codecs against msgpack's
// reflection encoding of the same values.
//
// The reference for a type is its shadow: a struct type built with
// reflect.StructOf from the same fields and tags, with every struct type
// inside it, at any depth, replaced by its own shadow. Shadows have no
// methods, so msgpack encodes and decodes them by reflection all the way
// down, as it did before the codecs existed; a check therefore does not
// rely on the codecs of nested types being right.
//
// Gen builds values from bytes (fuzz input or a seeded random source),
// choosing for every field between its empty and non-empty variants and
// the sizes where msgpack switches format, and records which variants it
// produced so a test can insist that every field was covered.
//
// # Usage
//
//	c := codectest.Codec{Marshal: messages.Marshal, Unmarshal: messages.Unmarshal}
//	f.Fuzz(func(t *testing.T, b []byte) {
//		v := new(persistence.Message)
//		codectest.NewGen().Fill(v, b)
//		c.CheckValue(t, v) // encoding and decoding of a built value
//		c.CheckBytes(t, reflect.TypeFor[persistence.Message](), b) // arbitrary input
//	})
package codectest
