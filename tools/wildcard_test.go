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
		{"git *", "git", true}, // a trailing " *" is optional
		{"git push *", "git push", true},
		{"git push *", "git pushx", false},
		{"git push *", "git", false},
		{`a\ *`, "a", true}, // the space escaped: both go
		{`a\\ *`, `a\`, true},
		{`a\\ *`, "a", false},
		{`git \*`, "git", false}, // a literal '*' is not optional
		{"git*", "git", true},
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
		{`ls \*.txt`, "ls *.txt", true},
		{`ls \*.txt`, "ls a.txt", false},
		{`ls \*.txt`, "ls /; touch pwned; echo .txt", false},
		{`a\?`, "a?", true},
		{`a\?`, "ab", false},
		{`a\\b`, `a\b`, true},
		{`a\\*`, `a\bc`, true},
		{`a\\*`, `abc`, false},
		{`a\b`, "ab", true}, // an escaped ordinary character is itself
		{`a\`, `a\`, true},  // a trailing '\' is itself
		{`a\`, "a", false},
		{`\**`, "*x", true},
		{`\**`, "x*", false},
		{`*\*`, "x*", true},
		{`*\*`, "*x", false},
		{`\日?`, "日本", true},
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
	var tokens []string
	escaped := false
	for _, r := range pattern {
		switch {
		case escaped:
			tokens = append(tokens, regexp.QuoteMeta(string(r)))
			escaped = false
		case r == '\\':
			escaped = true
		case r == '*':
			tokens = append(tokens, `.*`)
		case r == '?':
			tokens = append(tokens, `.`)
		default:
			tokens = append(tokens, regexp.QuoteMeta(string(r)))
		}
	}
	if escaped { // a trailing '\' is itself
		tokens = append(tokens, `\\`)
	}
	if n := len(tokens); !escaped && n >= 2 && tokens[n-2] == " " && tokens[n-1] == `.*` {
		tokens = append(tokens[:n-2], `(?: .*)?`) // a trailing " *" is optional
	}
	return regexp.MustCompile(`^(?s:` + strings.Join(tokens, "") + `)$`)
}

func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{
		{"*", ""}, {"git *", "git status"}, {"a?c", "abc"}, {"*a*b", "aabab"}, {"日?語", "日本語"}, {"**?*", "xy"}, {`a\*b\\?\`, `a*b\c\`},
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

func TestLiteralPatternMatchesOnlyItself(t *testing.T) {
	for _, tc := range []struct {
		s, pattern string
		other      []string // texts the literal pattern must not match
	}{
		{"ls *.txt", `ls \*.txt`, []string{"ls /; touch pwned; echo .txt", "ls a.txt"}},
		{"rm -f ?", `rm -f \?`, []string{"rm -f x"}},
		{`echo a\*`, `echo a\\\*`, []string{`echo a\b`, "echo a*"}},
		{"/tmp/*", `/tmp/\*`, []string{"/tmp/x"}},
		{"git status", "git status", []string{"git status --short"}},
		{"", "", []string{"x"}},
	} {
		if got := LiteralPattern(tc.s); got != tc.pattern {
			t.Errorf("LiteralPattern(%q) = %q, want %q", tc.s, got, tc.pattern)
		}
		if !Match(LiteralPattern(tc.s), tc.s) {
			t.Errorf("LiteralPattern(%q) does not match itself", tc.s)
		}
		for _, o := range tc.other {
			if Match(LiteralPattern(tc.s), o) {
				t.Errorf("LiteralPattern(%q) matches %q", tc.s, o)
			}
		}
	}
}

func FuzzLiteralPattern(f *testing.F) {
	for _, seed := range [][2]string{
		{"ls *.txt", "ls /; echo .txt"}, {`a\b`, `a\b`}, {"??", "ab"}, {`\`, `\\`}, {"日*", "日本"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, s, other string) {
		if len(s) > 64 {
			return
		}
		if got, want := Match(LiteralPattern(s), other), s == other; got != want {
			t.Fatalf("Match(LiteralPattern(%q) = %q, %q) = %v, want %v", s, LiteralPattern(s), other, got, want)
		}
	})
}

// TestMatchComparesInvalidBytesExactly: bytes that are not UTF-8 all decode
// to the same replacement rune, but match only themselves, so an approval
// of a command holding one does not cover a command holding another.
func TestMatchComparesInvalidBytesExactly(t *testing.T) {
	if Match("cat \xff", "cat \xfe") || Match(LiteralPattern("rm \xff*"), "rm \xfe*") {
		t.Fatal("one invalid byte matched another")
	}
	if !Match("cat \xff", "cat \xff") || !Match("cat *", "cat \xfe") {
		t.Fatal("invalid bytes not matched where they should be")
	}
}
