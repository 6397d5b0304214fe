package tools

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything at all/with/slashes", true},
		{"", "", true},
		{"", "a", false},
		{"bash", "bash", true},
		{"bash", "bas", false},
		{"ba?h", "bash", true},
		{"ba?h", "bah", false},
		{"?", "é", true}, // one rune, two bytes
		{"??", "é", false},
		{"git *", "git status", true},
		{"git *", "git", false},
		{"git *", "gitk", false},
		{"*.env", "/home/me/proj/.env", true},
		{"*.env", "/home/me/proj/.env.local", false},
		{"*.env*", "/home/me/proj/.env.local", true},
		{"src/*", "src/a/b/c.go", true},
		{"src/*.go", "src/a/b/c.go", true},
		{"*a*b*c*", "xxaxxbxxcxx", true},
		{"*a*b*c*", "xxaxxcxxbxx", false},
		{"a*a*a*a*b", strings.Repeat("a", 40), false},
		{"**", "x", true},
		{"*?", "", false},
		{"*?", "x", true},
		{"external_*", "external_directory", true},
		{"rm -rf *", "rm -rf /", true},
		{"日本*", "日本語", true},
		{"日?語", "日本語", true},
	}
	for _, tc := range tests {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

// wildcardRegexp translates a wildcard pattern to the equivalent anchored
// regular expression: the oracle of FuzzMatch.
func wildcardRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`)$`)
	return regexp.MustCompile(b.String())
}

func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"*", ""}, {"git *", "git status"}, {"a?c", "abc"}, {"*a*b", "aabab"}, {"日?語", "日本語"}, {"**?*", "xy"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(s) || len(pattern) > 64 {
			return
		}
		want := wildcardRegexp(pattern).MatchString(s)
		if got := Match(pattern, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, regexp oracle says %v", pattern, s, got, want)
		}
	})
}
