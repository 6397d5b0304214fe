package patch

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseError reports a malformed patch.
type ParseError struct {
	// Line is the one-based line of the patch text the error is about.
	Line int
	// Msg describes the problem.
	Msg string
}

// Error implements error.
func (e *ParseError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Problem says why a hunk could not be placed.
type Problem int

// Problems of hunk placement.
const (
	// ContextMissing means the hunk's context and removed lines occur
	// nowhere in the searched lines.
	ContextMissing Problem = iota + 1
	// ContextAmbiguous means they occur more than once.
	ContextAmbiguous
	// AnchorMissing means the "@@" anchor line occurs nowhere.
	AnchorMissing
	// AnchorAmbiguous means the anchor line occurs more than once.
	AnchorAmbiguous
)

// HunkError reports a hunk that does not match the file exactly once.
type HunkError struct {
	// Hunk is the one-based number of the hunk within its operation.
	Hunk int
	// Problem says what went wrong.
	Problem Problem
	// From is the one-based file line where the search started.
	From int
	// Matches holds the one-based file lines of the candidates of an
	// ambiguous match.
	Matches []int
	// Anchor is the hunk's anchor text.
	Anchor string
	// Expected holds the lines the hunk looked for: its context and removed
	// lines.
	Expected []string
	// EndOfFile is set when the hunk had to match at the end of the file.
	EndOfFile bool
}

// maxQuoted bounds the expected lines quoted in an error message.
const maxQuoted = 8

// Error implements error. The message is written for the model that made
// the patch: it names the hunk, the problem and the lines that were sought.
func (e *HunkError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hunk %d: ", e.Hunk)
	switch e.Problem {
	case AnchorMissing:
		fmt.Fprintf(&b, "anchor line %q not found", e.Anchor)
	case AnchorAmbiguous:
		fmt.Fprintf(&b, "anchor line %q is ambiguous: it matches lines %s; use a more specific anchor", e.Anchor, lineList(e.Matches))
	case ContextMissing:
		if e.EndOfFile {
			b.WriteString("context not found at the end of the file")
		} else {
			b.WriteString("context not found")
		}
	case ContextAmbiguous:
		fmt.Fprintf(&b, "context is ambiguous: it matches at lines %s; add more context lines or an @@ anchor", lineList(e.Matches))
	default:
		b.WriteString("cannot be placed")
	}
	if e.From > 1 {
		fmt.Fprintf(&b, " (searched from line %d, after the previous hunk or anchor)", e.From)
	}
	if (e.Problem == ContextMissing || e.Problem == ContextAmbiguous) && len(e.Expected) > 0 {
		b.WriteString("; expected lines:")
		for i, l := range e.Expected {
			if i == maxQuoted {
				fmt.Fprintf(&b, "\n  … (%d more)", len(e.Expected)-maxQuoted)
				break
			}
			fmt.Fprintf(&b, "\n  %q", l)
		}
	}
	return b.String()
}

// maxListed bounds the line numbers listed in an error message.
const maxListed = 5

func lineList(lines []int) string {
	parts := make([]string, 0, maxListed+1)
	for i, l := range lines {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(lines)-maxListed))
			break
		}
		parts = append(parts, strconv.Itoa(l))
	}
	return strings.Join(parts, ", ")
}
