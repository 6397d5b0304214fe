package codec

// Tests written while mutation testing the codecs: each pins a behaviour
// of the helpers that no codec in messages or persistence exercised.

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// box has the pointer fields the helpers decode, and a slice.
type box struct {
	P *pair
	N *int64
	S []pair
}

var boxKeys = []string{"p", "n", "s"}

func (b *box) DecodeMsgpack(dec *msgpack.Decoder) error {
	*b = box{}
	return DecodeFields(dec, boxKeys, func(key string) error {
		switch key {
		case "p":
			return DecodePtr(dec, &b.P)
		case "n":
			return DecodeIntPtr(dec, &b.N)
		case "s":
			return DecodeSlice(dec, &b.S)
		}
		return dec.Skip()
	})
}

// EncodeMsgpack writes a pair as its reflection encoding would.
func (p *pair) EncodeMsgpack(enc *msgpack.Encoder) error {
	if p == nil {
		return enc.EncodeNil()
	}
	var f Fields
	return f.Encode(enc, func() {
		f.Int("a", p.A)
		f.Int("b", p.B)
	})
}

// TestDecodeConsumesOneValue: each decoder reads exactly its value, nil
// included, so the value after it is read whole.
func TestDecodeConsumesOneValue(t *testing.T) {
	for _, in := range []string{
		"\xc0",                            // nil
		"\x82\xa1a\x01\xa1b\x02",          // map
		"\x92\x01\x02",                    // array
		"\x83\xa1p\xc0\xa1n\xc0\xa1s\xc0", // a box of nils
		"\x83\xa1p\x81\xa1a\x01\xa1n\x03\xa1s\x91\xc0",
	} {
		dec := msgpack.NewDecoder(bytes.NewReader([]byte(in + "\x07")))
		var b box
		var p pair
		var err error
		if in[0] == 0x83 {
			err = b.DecodeMsgpack(dec)
		} else {
			err = p.DecodeMsgpack(dec)
		}
		if err != nil {
			t.Fatalf("%x: %v", in, err)
		}
		if n, err := dec.DecodeInt64(); err != nil || n != 7 {
			t.Errorf("%x: the next value reads %d, %v", in, n, err)
		}
	}
}

// TestRepeatedNilKeyWins: a repeated key's last value wins, nil too.
func TestRepeatedNilKeyWins(t *testing.T) {
	var b box
	if err := msgpack.Unmarshal([]byte("\x84\xa1n\x05\xa1p\x81\xa1a\x01\xa1n\xc0\xa1p\xc0"), &b); err != nil {
		t.Fatal(err)
	}
	if b.N != nil || b.P != nil {
		t.Errorf("decoded %+v, want the later nils", b)
	}
}

// TestEncodeSliceNil: a nil slice is written as nil, an empty one as an
// empty array, as the reflection encoder writes them.
func TestEncodeSliceNil(t *testing.T) {
	for _, s := range [][]pair{nil, {}, {{A: 1}}} {
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.UseCompactInts(true)
		var f Fields
		if err := f.Encode(enc, func() { EncodeSlice(&f, "s", s) }); err != nil {
			t.Fatal(err)
		}
		want, err := msgpack.Marshal(map[string]any{"s": s})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%#v: wrote %x, want %x", s, buf.Bytes(), want)
		}
	}
}

// failOnce fails its nth write and accepts every other.
type failOnce struct {
	n, calls int
}

var errWrite = errors.New("write failed")

func (w *failOnce) Write(p []byte) (int, error) {
	w.calls++
	if w.calls == w.n {
		return 0, errWrite
	}
	return len(p), nil
}

// TestEncodeKeepsTheFirstError: a failed write is reported even if later
// writes succeed (the first error sticks).
func TestEncodeKeepsTheFirstError(t *testing.T) {
	for n := 1; n <= 6; n++ {
		var f Fields
		err := f.Encode(msgpack.NewEncoder(&failOnce{n: n}), func() {
			f.String("a", "x")
			f.Int("b", 1)
			f.Bool("c", true)
		})
		if !errors.Is(err, errWrite) {
			t.Errorf("write %d failing: Encode returned %v", n, err)
		}
	}
}
