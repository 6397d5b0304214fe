package patch

import "fmt"

// Markers of the patch format.
const (
	BeginMarker     = "*** Begin Patch"
	EndMarker       = "*** End Patch"
	AddMarker       = "*** Add File:"
	UpdateMarker    = "*** Update File:"
	DeleteMarker    = "*** Delete File:"
	MoveMarker      = "*** Move to:"
	EndOfFileMarker = "*** End of File"
)

// Kind is the kind of a file operation.
type Kind int

// Kinds of file operations.
const (
	Add Kind = iota + 1
	Update
	Delete
)

// String returns "add", "update" or "delete".
func (k Kind) String() string {
	switch k {
	case Add:
		return "add"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Letter returns the one-letter status used in change lists: A, M or D.
func (k Kind) Letter() string {
	switch k {
	case Add:
		return "A"
	case Update:
		return "M"
	case Delete:
		return "D"
	}
	return "?"
}

// Patch is a parsed patch: its file operations in order.
type Patch struct {
	Ops []Op
}

// Op is one file operation.
type Op struct {
	// Kind says what the operation does.
	Kind Kind
	// Path is the target path exactly as written in the patch.
	Path string
	// MoveTo is the destination of an "*** Move to:" line of an update, or
	// empty.
	MoveTo string
	// Content holds the lines of an added file, without their '+' prefix
	// and without line endings.
	Content []string
	// Hunks holds the hunks of an update.
	Hunks []Hunk
	// Line is the one-based line of the operation's header in the patch.
	Line int
}

// NewContent returns the bytes of an added file: its lines joined by "\n",
// ending with a newline unless the file is empty.
func (op Op) NewContent() []byte {
	if len(op.Content) == 0 {
		return nil
	}
	n := 0
	for _, l := range op.Content {
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	for _, l := range op.Content {
		b = append(b, l...)
		b = append(b, '\n')
	}
	return b
}

// LineKind says what a hunk line does.
type LineKind byte

// Kinds of hunk lines, named by their prefix.
const (
	Context LineKind = ' '
	Remove  LineKind = '-'
	Insert  LineKind = '+'
)

// Line is one line of a hunk, without its prefix and line ending.
type Line struct {
	Kind LineKind
	Text string
}

// Hunk is one contiguous change of an update.
type Hunk struct {
	// Anchor is the text after "@@ ", or empty.
	Anchor string
	// Lines are the hunk's context, removed and inserted lines in order.
	Lines []Line
	// EndOfFile is set when the hunk ended with "*** End of File": it must
	// match at the end of the file.
	EndOfFile bool
	// Line is the one-based line of the hunk's first line in the patch
	// (its "@@" header when it has one).
	Line int
}

// Old returns the lines the hunk expects in the file: its context and
// removed lines in order.
func (h Hunk) Old() []string {
	var old []string
	for _, l := range h.Lines {
		if l.Kind != Insert {
			old = append(old, l.Text)
		}
	}
	return old
}

// Counts returns the number of inserted and removed lines.
func (h Hunk) Counts() (inserted, removed int) {
	for _, l := range h.Lines {
		switch l.Kind {
		case Insert:
			inserted++
		case Remove:
			removed++
		}
	}
	return inserted, removed
}
