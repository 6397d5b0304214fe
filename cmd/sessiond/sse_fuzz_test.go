package main

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"unicode"
	"unicode/utf8"
)

// chunkReader returns the bytes of its data in reads of the given sizes,
// in turn, so that line ends fall across reads in every way.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := max(1, r.sizes[r.i%len(r.sizes)])
	r.i++
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func parseAll(t *testing.T, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	var got []sseEvent
	err := readSSE(r, func(ev sseEvent) error {
		got = append(got, ev)
		return nil
	})
	return got, err
}

// FuzzReadSSE parses arbitrary streams whole, a byte at a time and in
// uneven reads: the events must not depend on where reads split the stream
// (the line splitter carries a CR across reads), and no field keeps a line
// end.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		": ping\n\nid: 3\ndata: {\"a\":1}\n\ndata: line one\ndata: line two\n\n",
		"\uFEFFid: 1\rdata: a\r\rdata: b\r\ndata: c\r\n\r\nevent: e\ndata: d\n\n",
		"data\n\ndata:\n\ndata: x\r", "\r\n\r\n", "id:\xff\n\n", "\uFEFF\uFEFFdata: x\n\n",
	} {
		f.Add([]byte(s), []byte{1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		whole, err := parseAll(t, bytes.NewReader(stream))
		if err != nil {
			t.Fatalf("whole stream: %v", err)
		}
		for _, ev := range whole {
			if strings.ContainsAny(ev.ID+ev.Event, "\r\n") || strings.Contains(ev.Data, "\r") {
				t.Fatalf("a field keeps a line end: %+v", ev)
			}
		}
		bytewise, err := parseAll(t, iotest.OneByteReader(bytes.NewReader(stream)))
		if err != nil || !reflect.DeepEqual(bytewise, whole) {
			t.Fatalf("a byte at a time: %+v, %v; whole: %+v", bytewise, err, whole)
		}
		if len(sizes) == 0 {
			return
		}
		ns := make([]int, len(sizes))
		for i, s := range sizes {
			ns[i] = int(s)
		}
		chunked, err := parseAll(t, &chunkReader{data: stream, sizes: ns})
		if err != nil || !reflect.DeepEqual(chunked, whole) {
			t.Fatalf("in reads of %v: %+v, %v; whole: %+v", ns, chunked, err, whole)
		}
	})
}

// FuzzSSERoundTrip writes one event as a server may (any of the three line
// ends, chosen per line by ends) and reads it back.
func FuzzSSERoundTrip(f *testing.F) {
	f.Add("12", "log", "{\"seq\":12}\nsecond", uint8(0))
	f.Add("", "", "", uint8(5))
	f.Add("evt_1", "x", "a\r\nb\rc", uint8(0xaa))
	f.Fuzz(func(t *testing.T, id, event, data string, ends uint8) {
		if strings.ContainsAny(id+event, "\r\n") {
			return // not representable in one field line
		}
		eol := func(i int) string {
			return []string{"\n", "\r", "\r\n", "\n"}[(int(ends)>>(2*(i%4)))&3]
		}
		var b strings.Builder
		b.WriteString("id: " + id + eol(0))
		b.WriteString("event: " + event + eol(1))
		split := strings.Split(strings.ReplaceAll(strings.ReplaceAll(data, "\r\n", "\n"), "\r", "\n"), "\n")
		for i, l := range split {
			b.WriteString("data: " + l + eol(i+2))
		}
		// The blank line ends as the last line did: an LF after a CR
		// would only complete that line's CRLF.
		b.WriteString(eol(len(split) + 1))
		got, err := parseAll(t, strings.NewReader(b.String()))
		want := []sseEvent{{ID: id, Event: event, Data: strings.Join(split, "\n")}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("stream %q: %+v, %v; want %+v", b.String(), got, err, want)
		}
	})
}

// FuzzTerminalSafe checks what the transcript prints of text it does not
// control: valid UTF-8 without a control or bidi character (tabs, and
// newlines when multiline, excepted), and the same string when there was
// nothing to escape.
func FuzzTerminalSafe(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[2J", "a\u202eb", "\x9b31m", "tab\tnew\nline", "\xff\xfe", "é\u0085"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, multiline bool) {
		out := terminalSafe(s, multiline)
		if !utf8.ValidString(out) {
			t.Fatalf("terminalSafe(%q) = %q: not valid UTF-8", s, out)
		}
		for _, r := range out {
			if r == '\t' || multiline && r == '\n' {
				continue
			}
			if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
				t.Fatalf("terminalSafe(%q) = %q keeps %U", s, out, r)
			}
		}
		clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
			return r != '\t' && !(multiline && r == '\n') && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r))
		})
		if clean && out != s {
			t.Fatalf("terminalSafe(%q) = %q: changed a string with nothing to escape", s, out)
		}
		// What the transcript shortens stays whole characters.
		if c := clip(out, 7); !utf8.ValidString(c) || utf8.RuneCountInString(c) > 7 {
			t.Fatalf("clip(%q, 7) = %q", out, c)
		}
		_ = summarize(s)
		_ = citedSources([]byte(s))
	})
}
