package messages

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// TestCheckFrameAcceptsEncoderOutput: every shape the encoder writes passes,
// at each width boundary of each format family.
func TestCheckFrameAcceptsEncoderOutput(t *testing.T) {
	many := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	bigMap := map[string]int{}
	for i := range 70000 {
		bigMap[strings.Repeat("k", i%7)+string(rune('a'+i%26))+time.Duration(i).String()] = i
	}
	values := []any{
		nil, true, false, 0, 127, 128, 255, 256, 65535, 65536, int64(1) << 40, -1, -32, -33, -129, -40000, int64(-1) << 40,
		uint64(1) << 63, float32(1.5), 2.25,
		"", strings.Repeat("x", 31), strings.Repeat("x", 32), strings.Repeat("x", 255), strings.Repeat("x", 256), strings.Repeat("x", 70000),
		[]byte{}, []byte("ab"), make([]byte, 300), make([]byte, 70000),
		many(15), many(16), many(70000), map[string]int{"a": 1}, bigMap,
		time.Unix(1, 0), time.Unix(1<<40, 5), map[string]any{"nested": []any{map[string]any{"x": []byte("y")}, nil, 1.5}},
	}
	for i, v := range values {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkFrame(b); err != nil {
			t.Errorf("value %d (%T): %v", i, v, err)
		}
	}
	files, _ := filepath.Glob("testdata/golden/*.hex")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		b := readGolden(t, f)
		if err := checkFrame(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestCheckFrameRefusesOversizedDeclarations: the headers fuzzing turned up
// (a length or count far past the end) and other truncations fail fast.
func TestCheckFrameRefusesOversizedDeclarations(t *testing.T) {
	for name, b := range map[string]string{
		"empty":           "",
		"bin32 4 GiB":     "\xc6\xff\xff\xff\xff",
		"str32":           "\xdb\x7f\xff\xff\xf0abc",
		"ext32":           "\xc9\x7f\xff\xff\xf0\x01",
		"array32":         "\xdd\x7f\xff\xff\xf0\xc0",
		"map32":           "\xdf\x7f\xff\xff\xf0\xc0\xc0",
		"map16 too short": "\xde\x00\x02\xc0\xc0\xc0",
		"fixstr cut":      "\xa5abc",
		"uint64 cut":      "\xcf\x00\x00",
		"fixext16 cut":    "\xd8\x01abc",
		"never used":      "\xc1",
		"envelope":        "\x97\x01\xc6\xc6\xc6\xc61",
		"nested cut":      "\x92\x91\x93\xc0",
		"trailing byte":   "\x91\xc0\xc0",
		"two values":      "\xa1a\xa1b",
	} {
		if err := checkFrame([]byte(b)); !errors.Is(err, errFrame) {
			t.Errorf("%s: %v, want errFrame", name, err)
		}
	}
	if _, err := UnmarshalEvent([]byte("\x97\x01\xc6\xc6\xc6\xc61")); !errors.Is(err, errFrame) {
		t.Errorf("UnmarshalEvent of a 3 GiB bin header: %v", err)
	}
	// A stored event with a byte appended is corrupt, not the event.
	golden := readGolden(t, "testdata/golden/session.created.1.hex")
	if _, err := UnmarshalEvent(golden); err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalEvent(append(golden, 0xc0)); !errors.Is(err, errFrame) {
		t.Errorf("UnmarshalEvent with a trailing byte: %v, want errFrame", err)
	}
	var v any
	if err := Unmarshal([]byte("\xa1a\xa1b"), &v); !errors.Is(err, errFrame) {
		t.Errorf("Unmarshal of two values: %v, want errFrame", err)
	}
}

func readGolden(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
