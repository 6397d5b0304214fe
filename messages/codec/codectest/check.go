package codectest

import (
	"bytes"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Codec is the stored encoding the codecs plug into: messages.Marshal and
// messages.Unmarshal. It is passed in so that package messages can test
// itself with this package.
type Codec struct {
	Marshal   func(any) ([]byte, error)
	Unmarshal func([]byte, any) error
}

// CheckValue checks the codecs of the struct type v points to on the value
// v: the codec's encoding equals the reflection encoding of the shadow
// value, and decoding those bytes gives what the reflection decoder gives
// (reflect.DeepEqual, and floats bit for bit). Decoding is also checked
// on the array form of the value, which the reflection decoder accepts.
func (c Codec) CheckValue(t testing.TB, v any) {
	t.Helper()
	typ := reflect.TypeOf(v).Elem()
	want := c.sameEncoding(t, typ, v, "")
	c.checkDecode(t, typ, want, "map form")
	c.checkDecode(t, typ, arrayForm(t, ToShadow(v)), "array form")
}

// checkDecode decodes b with the codec and with reflection and compares.
func (c Codec) checkDecode(t testing.TB, typ reflect.Type, b []byte, form string) {
	t.Helper()
	got := reflect.New(typ).Interface()
	ref := reflect.New(Shadow(typ)).Interface()
	if err := c.Unmarshal(b, got); err != nil {
		t.Fatalf("%s (%s): codec cannot decode %x: %v", typ, form, b, err)
	}
	if err := c.Unmarshal(b, ref); err != nil {
		t.Fatalf("%s (%s): reflection cannot decode %x: %v", typ, form, b, err)
	}
	want := reflect.New(typ).Interface()
	FromShadow(want, ref)
	if !reflect.DeepEqual(got, want) || !Identical(got, want) {
		t.Fatalf("%s (%s): from %x\ncodec decoded      %#v\nreflection decoded %#v", typ, form, b, got, want)
	}
}

// arrayForm encodes a shadow value with every struct as an array.
func arrayForm(t testing.TB, shadow any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	enc.UseArrayEncodedStructs(true)
	if err := enc.Encode(shadow); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// CheckBytes decodes arbitrary bytes into a new value of typ with the
// codec and with reflection: both fail, or both succeed with the same
// value unless a map in b repeats a key (the reflection decoder merges a
// repeated struct field into the earlier one, a codec replaces it). What
// decodes must encode as reflection encodes it.
func (c Codec) CheckBytes(t testing.TB, typ reflect.Type, b []byte) {
	t.Helper()
	got := reflect.New(typ).Interface()
	ref := reflect.New(Shadow(typ)).Interface()
	err := c.Unmarshal(b, got)
	refErr := c.Unmarshal(b, ref)
	if (err == nil) != (refErr == nil) {
		t.Fatalf("%s: from %x: codec says %v, reflection says %v", typ, b, err, refErr)
	}
	if err != nil {
		return
	}
	if !DuplicateKeys(b) {
		want := reflect.New(typ).Interface()
		FromShadow(want, ref)
		if !Identical(got, want) {
			t.Fatalf("%s: from %x\ncodec decoded      %#v\nreflection decoded %#v", typ, b, got, want)
		}
	}
	c.sameEncoding(t, typ, got, "decoded value: ")
}

// sameEncoding fails t unless the codec encodes v as reflection encodes
// its shadow, and returns the encoding.
func (c Codec) sameEncoding(t testing.TB, typ reflect.Type, v any, what string) []byte {
	t.Helper()
	got, err := c.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %scodec: %v", typ, what, err)
	}
	want, err := c.Marshal(ToShadow(v))
	if err != nil {
		t.Fatalf("%s: %sreflection: %v", typ, what, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %scodec wrote\n%x\nreflection wrote\n%x\nfor %#v", typ, what, got, want, v)
	}
	return want
}

// Identical reports whether a and b are deeply equal as reflect.DeepEqual
// says, except that floats compare by their bits: NaN equals NaN, and -0
// differs from 0.
func Identical(a, b any) bool {
	return identical(reflect.ValueOf(a), reflect.ValueOf(b))
}

func identical(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return identical(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !identical(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		if a.Type().Elem().Kind() == reflect.Uint8 {
			return bytes.Equal(a.Bytes(), b.Bytes())
		}
		for i := range a.Len() {
			if !identical(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			e := b.MapIndex(it.Key())
			if !e.IsValid() || !identical(it.Value(), e) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return a.Uint() == b.Uint()
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// DuplicateKeys reports whether a map anywhere in the msgpack value b has
// a string (or bin, or nil) key twice, as struct decoders read keys. It
// reports false for malformed input.
func DuplicateKeys(b []byte) bool {
	dup, _ := duplicateKeys(msgpack.NewDecoder(bytes.NewReader(b)))
	return dup
}

func duplicateKeys(dec *msgpack.Decoder) (bool, error) {
	c, err := dec.PeekCode()
	if err != nil {
		return false, err
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		found := false
		for range n {
			kc, err := dec.PeekCode()
			if err != nil {
				return false, err
			}
			if kc == msgpcode.Nil || msgpcode.IsString(kc) || msgpcode.IsBin(kc) {
				k, err := dec.DecodeString()
				if err != nil {
					return false, err
				}
				found = found || seen[k]
				seen[k] = true
			} else if dup, err := duplicateKeys(dec); err != nil {
				return false, err
			} else {
				found = found || dup
			}
			dup, err := duplicateKeys(dec)
			if err != nil {
				return false, err
			}
			found = found || dup
		}
		return found, nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return false, err
		}
		found := false
		for range n {
			dup, err := duplicateKeys(dec)
			if err != nil {
				return false, err
			}
			found = found || dup
		}
		return found, nil
	}
	return false, dec.Skip()
}

// Bench measures encoding and decoding the value v points to with its
// codec and, through its shadow, with reflection (see Compare).
func (c Codec) Bench(b *testing.B, v any) {
	typ := reflect.TypeOf(v).Elem()
	shadow := ToShadow(v)
	data, err := c.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	encode := func(v any) func() error {
		return func() error { _, err := c.Marshal(v); return err }
	}
	decode := func(t reflect.Type) func() error {
		return func() error { return c.Unmarshal(data, reflect.New(t).Interface()) }
	}
	Compare(b, "encode", encode(v), encode(shadow))
	Compare(b, "decode", decode(typ), decode(Shadow(typ)))
}

// Compare runs the sub-benchmarks name/codec and name/reflection. The
// codec one also reports "x-faster": reflection's time over the codec's,
// timed in alternating blocks in the same run, so that the drift of a
// shared machine falls on both alike.
func Compare(b *testing.B, name string, codec, ref func() error) {
	run := func(op func() error) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run(name+"/codec", func(b *testing.B) {
		run(codec)(b)
		b.ReportMetric(ratio(b, codec, ref), "x-faster")
	})
	b.Run(name+"/reflection", run(ref))
}

// ratio times b.N runs of each of codec and ref in ten alternating blocks
// and returns ref's time over codec's.
func ratio(b *testing.B, codec, ref func() error) float64 {
	const blocks = 10
	per := max(b.N/blocks, 1)
	var times [2]time.Duration
	for range blocks {
		for i, op := range []func() error{codec, ref} {
			start := time.Now()
			for range per {
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
			times[i] += time.Since(start)
		}
	}
	return float64(times[1]) / float64(times[0])
}
