package messages

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// FuzzCheckFrame: checkFrame accepts exactly the inputs that are one whole
// msgpack value, as the msgpack decoder's Skip reads them, with nothing
// after: a stricter check would make valid stored rows unreadable, a
// looser one would let corrupt sizes reach the decoder.
func FuzzCheckFrame(f *testing.F) {
	for _, typ := range DurableTypes() {
		b, _ := MarshalEvent(sampleEvent(typ))
		f.Add(b)
	}
	for _, s := range [][]byte{{0xc0}, {0xc1}, {0x91}, {0x91, 0xc0}, {0x81, 0xa1, 'a', 0x01}, {0xc6, 0xff, 0xff, 0xff, 0xff},
		{0xd4, 1, 2}, {0xc7, 1, 5, 9}, {0xdd, 0, 0, 0, 1, 0xc3}, {0xc0, 0xc0}, {0xca, 0, 0, 0, 0}, {0xd8, 1},
		// Whole values of the ext16, ext32 and fixext16 families.
		{0xc8, 0, 2, 5, 'a', 'b'}, {0xc9, 0, 0, 0, 2, 5, 'a', 'b'}, append([]byte{0xd8, 5}, make([]byte, 16)...)} {
		f.Add(s)
	}
	// A map16 (16 members or more).
	m := map[string]int{}
	for i := range 16 {
		m[string(rune('a'+i))] = i
	}
	b, err := msgpack.Marshal(m)
	if err != nil || b[0] != 0xde {
		f.Fatalf("map16: %x, %v", b, err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<12 {
			return
		}
		err := checkFrame(b)
		if err != nil && !errors.Is(err, errFrame) {
			t.Fatalf("checkFrame(%x) error %v does not wrap errFrame", b, err)
		}
		rd := bytes.NewReader(b)
		dec := msgpack.NewDecoder(rd)
		skipErr := dec.Skip()
		whole := skipErr == nil && rd.Len() == 0 && dec.Buffered().(*bytes.Reader).Len() == 0
		if (err == nil) != whole {
			t.Fatalf("checkFrame(%x) = %v, but msgpack skips it with %v leaving %d bytes", b, err, skipErr, rd.Len())
		}
		if err == nil {
			var v any
			_ = Unmarshal(b, &v) // must not panic (unknown ext types fail)
		}
	})
}

var idBodyPattern = regexp.MustCompile(`^[0-9A-Za-z_-]{1,64}$`)

// FuzzValidateID: ValidateID accepts exactly prefix + 1..64 characters of
// [0-9A-Za-z_-], and its error is a typed invalid error whose message is
// valid UTF-8 and bounded whatever the input.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"ses_a", "ses_", "msg_01JABC", "ses_a b", "ses_é", "xses_a", "ses_" + string(make([]byte, 65))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		for _, prefix := range []string{SessionPrefix, MessagePrefix} {
			err := ValidateID("id", prefix, id)
			body, ok := bytes.CutPrefix([]byte(id), []byte(prefix))
			want := ok && idBodyPattern.Match(body)
			if (err == nil) != want {
				t.Fatalf("ValidateID(%q, %q) = %v, want ok %v", prefix, id, err, want)
			}
			if err == nil {
				continue
			}
			var e *Error
			if !errors.As(err, &e) || e.Type != ErrInvalid {
				t.Fatalf("ValidateID(%q) error %v (%T) is not typed invalid", id, err, err)
			}
			if len(e.Message) > 600 {
				t.Fatalf("ValidateID(%q) message of %d bytes", id, len(e.Message))
			}
		}
	})
}

// FuzzVersionOf: the version of a type string is the number after its
// last '.', or 0.
func FuzzVersionOf(f *testing.F) {
	for _, s := range []string{"session.created.1", "x", "a.b", "a.-1", "a.+2", "a.99999999999999999999", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, typ string) {
		v := VersionOf(typ)
		i := bytes.LastIndexByte([]byte(typ), '.')
		if i < 0 {
			if v != 0 {
				t.Fatalf("VersionOf(%q) = %d without a '.'", typ, v)
			}
			return
		}
		if n, err := strconv.Atoi(typ[i+1:]); err == nil && n != v || err != nil && v != 0 {
			t.Fatalf("VersionOf(%q) = %d", typ, v)
		}
	})
}
