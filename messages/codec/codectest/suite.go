package codectest

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Check runs the property checks on n values of each type, built from a
// fixed seed: CheckValue on each; CheckBytes on the generator's input and
// on damaged encodings (cut short, a byte changed, a byte dropped), which
// exercise the decoders' error paths; and decoding into a used value must
// give what decoding into a new one gives. It fails if the generator left
// any field without its empty or non-empty variant.
func (c Codec) Check(t *testing.T, types []reflect.Type, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	g := NewGen()
	for _, typ := range types {
		for range n {
			src := randomBytes(rng, 64+rng.IntN(256))
			v := reflect.New(typ).Interface()
			g.Fill(v, src)
			c.CheckValue(t, v)
			c.CheckBytes(t, typ, src)
			b, err := c.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range damaged(rng, b) {
				c.CheckBytes(t, typ, bad)
			}
			used := reflect.New(typ).Interface()
			g.Fill(used, randomBytes(rng, 256))
			c.checkReuse(t, used, b)
		}
	}
	if u := g.Uncovered(); len(u) > 0 {
		t.Errorf("fields the generator never set to each variant:\n%v", u)
	}
}

// checkReuse decodes b into used and into a new value: both must agree.
func (c Codec) checkReuse(t *testing.T, used any, b []byte) {
	t.Helper()
	fresh := reflect.New(reflect.TypeOf(used).Elem()).Interface()
	if err := c.Unmarshal(b, fresh); err != nil {
		t.Fatal(err)
	}
	if err := c.Unmarshal(b, used); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(used, fresh) {
		t.Fatalf("%T: decoding into a used value gives\n%#v\nnot\n%#v", used, used, fresh)
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// damaged returns b cut short, with a byte changed, and with a byte
// dropped.
func damaged(rng *rand.Rand, b []byte) [][]byte {
	if len(b) < 2 {
		return nil
	}
	i := rng.IntN(len(b))
	flip := bytes.Clone(b)
	flip[i] ^= byte(1 + rng.IntN(255))
	drop := append(bytes.Clone(b[:i]), b[i+1:]...)
	return [][]byte{b[:i], flip, drop}
}

// FuzzValues fuzzes CheckValue: the first input byte picks one of types,
// the rest builds the value.
func (c Codec) FuzzValues(f *testing.F, types []reflect.Type) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range types {
		f.Add(append([]byte{byte(i)}, randomBytes(rng, 128)...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		v := reflect.New(types[int(b[0])%len(types)]).Interface()
		NewGen().Fill(v, b[1:])
		c.CheckValue(t, v)
	})
}

// FuzzDecode fuzzes CheckBytes: the first input byte picks one of types,
// the rest is decoded. Seeds are encodings of generated values.
func (c Codec) FuzzDecode(f *testing.F, types []reflect.Type) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := NewGen()
	for i, typ := range types {
		v := reflect.New(typ).Interface()
		g.Fill(v, randomBytes(rng, 128))
		b, err := c.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append([]byte{byte(i)}, b...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		c.CheckBytes(t, types[int(b[0])%len(types)], b[1:])
	})
}

// CheckMethods fails t for each of types whose pointer lacks either codec
// method.
func CheckMethods(t *testing.T, types []reflect.Type) {
	t.Helper()
	enc := reflect.TypeFor[msgpack.CustomEncoder]()
	dec := reflect.TypeFor[msgpack.CustomDecoder]()
	for _, typ := range types {
		if p := reflect.PointerTo(typ); !p.Implements(enc) || !p.Implements(dec) {
			t.Errorf("%s lacks a codec method", typ)
		}
	}
}

// CheckResets checks that a codec resets its target before it reads: nil
// and an empty map decode to the zero value whatever the target held, as
// they do into a new value. Check decodes into used values too, but from
// full encodings, which set every field of a type without omitempty
// fields whether or not it was reset.
func (c Codec) CheckResets(t *testing.T, types []reflect.Type) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := NewGen()
	for _, typ := range types {
		for _, b := range [][]byte{{0xc0}, {0x80}} {
			used := reflect.New(typ)
			for used.Elem().IsZero() {
				g.Fill(used.Interface(), randomBytes(rng, 256))
			}
			if err := c.Unmarshal(b, used.Interface()); err != nil {
				t.Fatalf("%s from %x: %v", typ, b, err)
			}
			if !used.Elem().IsZero() {
				t.Errorf("%s from %x into a used value: %#v, want the zero value", typ, b, used.Elem())
			}
		}
	}
}
