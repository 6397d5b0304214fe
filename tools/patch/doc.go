// Package patch parses and applies the apply_patch text format that models
// use to edit files:
//
//	*** Begin Patch
//	*** Add File: docs/new.md
//	+first line
//	*** Update File: main.go
//	@@ func main() {
//	 	fmt.Println("hello")
//	-	return
//	+	os.Exit(0)
//	*** End of File
//	*** Delete File: old.txt
//	*** End Patch
//
// The package is pure: it never touches the file system, starts no
// goroutines and keeps no state. The tools package resolves paths, asks for
// permission and performs the file operations.
//
// # Format
//
// A patch is a "*** Begin Patch" line, one or more file operations and an
// "*** End Patch" line. Blank lines before and after the patch and between
// operations are ignored, and every line may end in "\r\n".
//
//   - "*** Add File: PATH" is followed by the new file's lines, each
//     prefixed with '+'. The new file ends with a newline.
//   - "*** Delete File: PATH" has no body.
//   - "*** Update File: PATH" may be followed by "*** Move to: NEW"
//     (parsed, so that callers can reject it clearly) and then by hunks.
//     A hunk starts with "@@" or "@@ ANCHOR"; the header may be omitted for
//     the first hunk of an operation. Hunk lines start with ' ' (context),
//     '-' (removed) or '+' (inserted); a bare empty line is an empty context
//     line, except that bare empty lines at the end of an operation are
//     separators. "*** End of File" closes a hunk that must match at the end
//     of the file. A unified-diff range header ("@@ -3,4 +3,5 @@ func f()")
//     is accepted; its numbers are ignored and any text after the second
//     "@@" becomes the anchor.
//
// # Matching
//
// Apply places hunks in order. Each hunk searches the lines after the
// previous hunk. An anchor must match exactly one line there (compared
// exactly or with surrounding white space trimmed) and narrows the search to
// that line and below. The hunk's context and removed lines must then match
// exactly one position, compared exactly (line endings aside); an
// end-of-file hunk must match at the last lines. A hunk with no context and
// no removed lines inserts after its anchor, or at the end of the file when
// it has none. Missing and ambiguous matches are reported as *HunkError with
// the hunk's one-based number and the candidate line numbers.
//
// Apply keeps every untouched line's own ending, gives inserted lines the
// file's dominant ending (CRLF when most lines end in "\r\n") and preserves
// whether the file ends with a newline.
//
// # Usage
//
//	p, err := patch.Parse(text)
//	if err != nil { ... } // *patch.ParseError with the line number
//	for _, op := range p.Ops {
//		if op.Kind == patch.Update {
//			updated, err := patch.Apply(current, op.Hunks) // *patch.HunkError
//			...
//		}
//	}
package patch
