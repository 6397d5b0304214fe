package runes

import "testing"

func TestWhole(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"aé", 3}, {"a\xc3", 1}, {"a€", 4}, {"a\xe2\x82", 1}, {"😀", 4}, {"😀"[:3], 0},
		{"\x80\x80", 2}, // not UTF-8 at all: nothing to trim as a cut rune
	} {
		if got := Whole([]byte(tc.in)); got != tc.want {
			t.Errorf("Whole(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 80, "short"}, {"abcdef", 3, "abc…"}, {"aéb", 2, "a…"}, {"aéb", 3, "aé…"}, {"€€", 4, "€…"},
	} {
		if got := Clip(tc.in, tc.max); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
