package tools

import (
	"strings"
	"unicode/utf8"
)

// Match reports whether s matches the wildcard pattern. In a pattern, '*'
// matches any run of characters, including an empty run and '/'; '?'
// matches exactly one character (one UTF-8 encoded rune); and '\' makes the
// character after it match itself, so "\*", "\?" and "\\" match a literal
// '*', '?' and '\' (a '\' that ends the pattern matches itself). Every
// other character matches itself. A pattern that ends with a space and a
// '*' also matches s without them: "git push *" matches "git push" as well
// as "git push origin" (as opencode's rules do, whose configurations carry
// over), so a rule that denies a command's every use denies its bare use
// too. s is plain text: nothing in it is special. Permission names and
// patterns of rules and saved approvals are matched with it;
// LiteralPattern turns text into the pattern that matches only that text
// (it escapes the '*', so a literal command never ends with " *").
//
// Match runs in O(len(pattern)·len(s)) time in the worst case and does not
// allocate.
func Match(pattern, s string) bool {
	if bare, ok := strings.CutSuffix(pattern, " *"); ok {
		// The space may be escaped ("a\ *"): then its '\' goes too.
		if n := len(bare) - len(strings.TrimRight(bare, `\`)); n%2 == 1 {
			bare = bare[:len(bare)-1]
		}
		if match(bare, s) {
			return true
		}
	}
	return match(pattern, s)
}

// match is Match without the optional trailing " *".
func match(pattern, s string) bool {
	p, i := 0, 0
	// star and resume record the most recent '*' and the position in s it
	// currently consumes up to, for backtracking.
	star, resume := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			c, lit := pattern[p], p
			if c == '\\' && p+1 < len(pattern) {
				// An escaped character is compared literally below.
				c, lit = 0, p+1
			}
			switch c {
			case '*':
				star, resume = p, i
				p++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[i:])
				p++
				i += n
				continue
			default:
				pr, pn := utf8.DecodeRuneInString(pattern[lit:])
				sr, sn := utf8.DecodeRuneInString(s[i:])
				if pr == sr && pn == sn && pattern[lit:lit+pn] == s[i:i+sn] {
					p = lit + pn
					i += sn
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last '*' swallow one more character and retry.
		_, n := utf8.DecodeRuneInString(s[resume:])
		resume += n
		p, i = star+1, resume
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// wildcardSpecial are the characters that Match treats specially.
const wildcardSpecial = `*?\`

// LiteralPattern returns the pattern that Match matches against s and
// nothing else: s with '*', '?' and '\' escaped. An approval of a request's
// resource, such as a bash command, must be saved in this form: saved as is,
// the command "ls *.txt" would approve "ls /; rm -rf ~; echo .txt".
func LiteralPattern(s string) string {
	if !strings.ContainsAny(s, wildcardSpecial) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(wildcardSpecial, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
