package codec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestEncodeRefusesUnstableWrite: a write that omits a field on one pass
// and not the other would break the map header; Encode reports it.
func TestEncodeRefusesUnstableWrite(t *testing.T) {
	var buf bytes.Buffer
	calls := 0
	var f Fields
	err := f.Encode(msgpack.NewEncoder(&buf), func() {
		calls++
		f.Int("a", 1)
		if calls == 1 {
			f.Int("b", 2)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "wrote 1 fields after counting 2") {
		t.Fatalf("err = %v", err)
	}
}

// pair is a two-field struct with a codec, for the decoding forms.
type pair struct{ A, B int64 }

var pairKeys = []string{"a", "b"}

func (p *pair) DecodeMsgpack(dec *msgpack.Decoder) error {
	*p = pair{}
	return DecodeFields(dec, pairKeys, func(key string) error {
		switch key {
		case "a":
			return DecodeInt(dec, &p.A)
		case "b":
			return DecodeInt(dec, &p.B)
		}
		return dec.Skip()
	})
}

// plainPair is pair without a codec.
type plainPair struct {
	A int64 `msgpack:"a"`
	B int64 `msgpack:"b"`
}

// TestDecodeFieldsForms: the struct forms the reflection decoder accepts,
// and the ones it refuses, decode alike with DecodeFields.
func TestDecodeFieldsForms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want pair
		err  bool
	}{
		{"\xc0", pair{}, false},                                           // nil
		{"\x82\xa1a\x01\xa1b\x02", pair{1, 2}, false},                     // {a:1, b:2}
		{"\x82\xa1b\x02\xa1a\x01", pair{1, 2}, false},                     // any order
		{"\x83\xa1x\xc3\xa1a\x01\xa1b\x02", pair{1, 2}, false},            // unknown key
		{"\x82\xa1x\x92\x93\xc0\xc0\xc0\x80\xa1a\x01", pair{1, 0}, false}, // unknown nested value
		{"\x81\xc0\x01", pair{}, false},                                   // a nil key is unknown
		{"\x82\xc4\x01a\x01\xa1b\x02", pair{1, 2}, false},                 // a bin key
		{"\x82\xa1a\x01\xa1a\x05", pair{5, 0}, false},                     // a repeated key: the last wins
		{"\xde\x00\x01\xa1a\x05", pair{5, 0}, false},                      // map16
		{"\x92\x01\x02", pair{1, 2}, false},                               // array of all fields
		{"\xdc\x00\x02\xc0\xc0", pair{}, false},                           // array16, nil fields
		{"\x90", pair{}, false},                                           // empty array
		{"\x81\xa1a\xd3\xff\xff\xff\xff\xff\xff\xff\xff", pair{-1, 0}, false},
		{"\x81\xa1a\xcf\xff\xff\xff\xff\xff\xff\xff\xff", pair{-1, 0}, false},
		{"\x91\x01", pair{}, true},                                      // array of the wrong length
		{"\x93\x01\x02\x03", pair{}, true},                              // too long, too
		{"\xa1a", pair{}, true},                                         // not a struct
		{"\xd4\x01\x00", pair{}, true},                                  // an ext is not a struct
		{"\x82\xa1a", pair{}, true},                                     // cut short
		{"", pair{}, true},                                              // nothing
		{"\x81\xa1a\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00", pair{}, true}, // a float is not an int
		{"\x81\xa1a\xa1z", pair{}, true},                                // nor is a string
		{"\x81\x81\xa1a\x01\x02", pair{}, true},                         // nor a map a key
	} {
		var got pair
		err := msgpack.Unmarshal([]byte(tc.in), &got)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("%x: got %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		var ref plainPair
		refErr := msgpack.Unmarshal([]byte(tc.in), &ref)
		if (err != nil) != (refErr != nil) || (err == nil && got != pair(ref)) {
			t.Errorf("%x: got %+v, %v; reflection %+v, %v", tc.in, got, err, ref, refErr)
		}
	}
}
