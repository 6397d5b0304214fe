package tools

import "unicode/utf8"

// Match reports whether s matches the wildcard pattern: '*' matches any run
// of characters, including an empty run and '/', and '?' matches exactly
// one character (one UTF-8 encoded rune). Every other character matches
// itself. Permission names and patterns of rules and saved approvals are
// matched with it.
//
// Match runs in O(len(pattern)·len(s)) time in the worst case and does not
// allocate.
func Match(pattern, s string) bool {
	p, i := 0, 0
	// star and resume record the most recent '*' and the position in s it
	// currently consumes up to, for backtracking.
	star, resume := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
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
				pr, pn := utf8.DecodeRuneInString(pattern[p:])
				sr, sn := utf8.DecodeRuneInString(s[i:])
				if pr == sr && pn == sn && pattern[p:p+pn] == s[i:i+sn] {
					p += pn
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
