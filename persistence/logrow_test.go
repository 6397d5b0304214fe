package persistence

import (
	"encoding/binary"
	"math"
	"reflect"
	"testing"
)

// TestUvarintLen checks uvarintLen, which sizes log rows, at every
// length boundary.
func TestUvarintLen(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		if got, want := uvarintLen(x), len(binary.AppendUvarint(nil, x)); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", x, got, want)
		}
	}
}

func TestLogRowRoundTrip(t *testing.T) {
	evs := [][]byte{[]byte("first"), {}, []byte("third event")}
	row := encodeLogRow(evs)
	var seqs []int64
	var got [][]byte
	if err := logRowEvents(row, 12, func(seq int64, ev []byte) error {
		seqs, got = append(seqs, seq), append(got, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seqs, []int64{10, 11, 12}) || !reflect.DeepEqual(got, evs) {
		t.Fatalf("seqs %v events %q", seqs, got)
	}
	for _, bad := range [][]byte{nil, {0}, row[:len(row)-1], append(row[:len(row):len(row)], 0)} {
		if err := logRowEvents(bad, 12, func(int64, []byte) error { return nil }); err == nil {
			t.Errorf("row %q accepted", bad)
		}
	}
	if err := logRowEvents(row, 1, func(int64, []byte) error { return nil }); err == nil {
		t.Error("a row of 3 events ending at seq 1 accepted")
	}
}

// FuzzLogRow: no input panics the log row reader, and the events of a row
// it accepts frame back into a row that reads the same.
func FuzzLogRow(f *testing.F) {
	f.Add(encodeLogRow([][]byte{[]byte("a"), []byte("bc")}), int64(5))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, int64(1<<62))
	read := func(row []byte, last int64) ([][]byte, error) {
		var out [][]byte
		err := logRowEvents(row, last, func(_ int64, ev []byte) error {
			out = append(out, ev)
			return nil
		})
		return out, err
	}
	f.Fuzz(func(t *testing.T, row []byte, last int64) {
		evs, err := read(row, last)
		if err != nil {
			return
		}
		framed := encodeLogRow(evs)
		if len(framed) != logRowLen(evs) {
			t.Fatalf("row of %d bytes, logRowLen says %d", len(framed), logRowLen(evs))
		}
		again, err := read(framed, last)
		if err != nil || !reflect.DeepEqual(again, evs) {
			t.Fatalf("re-framed row reads %q, %v; want %q", again, err, evs)
		}
	})
}

// TestLogRowMissingEventRefused: a row whose count claims one event more
// than it frames is refused, rather than read with an empty last event.
func TestLogRowMissingEventRefused(t *testing.T) {
	row := encodeLogRow([][]byte{[]byte("a"), []byte("b")})
	if row[0] != 2 {
		t.Fatalf("row %q does not start with its one-byte count", row)
	}
	row[0] = 3
	var got [][]byte
	err := logRowEvents(row, 12, func(_ int64, ev []byte) error {
		got = append(got, ev)
		return nil
	})
	if err == nil {
		t.Fatalf("row of 2 events counted as 3 accepted as %q", got)
	}
}
