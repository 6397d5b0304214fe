// Package runes cuts UTF-8 text without splitting a character, for the
// tools' truncated outputs, titles and error messages.
//
// # Usage
//
//	b = b[:runes.Whole(b)]          // no character cut off at the end
//	title := runes.Clip(title, 80) // at most 80 bytes plus "…"
package runes
