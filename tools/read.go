package tools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools/internal/runes"
)

// ReadConfig configures the read tool. Zero fields take the defaults of
// DefaultReadConfig.
type ReadConfig struct {
	// DefaultLimit is the page size in lines (or directory entries) when
	// the input has no limit; it is also the largest limit accepted.
	DefaultLimit int
	// MaxLineBytes is how much of one line is shown; longer lines are
	// truncated with a marker.
	MaxLineBytes int
	// MaxPageBytes bounds the text of one page; a page stops early, with a
	// next cursor, rather than exceed it.
	MaxPageBytes int
	// MaxBinaryBytes is the largest binary file returned (base64-encoded).
	MaxBinaryBytes int64
}

// DefaultReadConfig returns the defaults: 2000 lines per page, lines cut at
// 2000 bytes, pages of at most 50 KiB of text, binary files up to 256 KiB.
func DefaultReadConfig() ReadConfig {
	return ReadConfig{DefaultLimit: 2000, MaxLineBytes: 2000, MaxPageBytes: 50 << 10, MaxBinaryBytes: 256 << 10}
}

// withDefaults fills zero fields and rejects negative ones.
func (c ReadConfig) withDefaults() (ReadConfig, error) {
	d := DefaultReadConfig()
	if c.DefaultLimit < 0 || c.MaxLineBytes < 0 || c.MaxPageBytes < 0 || c.MaxBinaryBytes < 0 {
		return c, fmt.Errorf("%w: read: negative limit", ErrInvalidConfig)
	}
	if c.DefaultLimit == 0 {
		c.DefaultLimit = d.DefaultLimit
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = d.MaxLineBytes
	}
	if c.MaxPageBytes == 0 {
		c.MaxPageBytes = d.MaxPageBytes
	}
	if c.MaxBinaryBytes == 0 {
		c.MaxBinaryBytes = d.MaxBinaryBytes
	}
	return c, nil
}

// ReadInput is the input of the read tool.
type ReadInput struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// ReadMetadata is the metadata of a read result.
type ReadMetadata struct {
	// Path is the path read, relative to the Location root or as
	// "@reference/path".
	Path string `json:"path"`
	// Kind is "text", "binary" or "directory".
	Kind string `json:"kind"`
	// Offset is the one-based first line or entry of the page.
	Offset int `json:"offset,omitempty"`
	// Count is the number of lines or entries on the page.
	Count int `json:"count"`
	// Next is the offset of the next page; absent on the last page.
	Next int `json:"next,omitempty"`
	// Total is the number of lines (when the page reached the end of the
	// file) or directory entries.
	Total int `json:"total,omitempty"`
	// Truncated counts the lines of the page that were cut.
	Truncated int `json:"truncated,omitempty"`
	// Size is the file size in bytes.
	Size int64 `json:"size,omitempty"`
	// Mime is the detected media type of a binary file.
	Mime string `json:"mime,omitempty"`
	// Encoding is "base64" for binary files.
	Encoding string `json:"encoding,omitempty"`
}

// NewRead returns the read built-in: a bounded read of one file or
// directory inside the Location (or a project reference).
func NewRead(cfg ReadConfig) (Tool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &reader{cfg: cfg}
	return NewTool(Definition{
		Name:       "read",
		AsksItself: true,
		Description: "Read a file or list a directory inside the project. `path` is relative to the project root " +
			"(or `@reference/path` for a configured project reference); absolute paths and paths leaving the project are rejected. " +
			fmt.Sprintf("Text files are returned as numbered lines, %d lines per page by default; ", cfg.DefaultLimit) +
			"pass `offset` (one-based line number) and `limit` to page through large files, following the `offset=` hint at the end of each page. " +
			fmt.Sprintf("Lines longer than %d bytes are truncated. ", cfg.MaxLineBytes) +
			fmt.Sprintf("Binary files up to %d bytes are returned base64-encoded. ", cfg.MaxBinaryBytes) +
			"Directories list their direct children, directories first (with a trailing '/'), then files, alphabetically; `offset` and `limit` page the entries.",
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File or directory path relative to the project root, or @reference/path."},
    "offset": {"type": "integer", "minimum": 1, "description": "One-based line (or entry) to start from. Default 1."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Maximum lines (or entries) to return. Default %d."}
  },
  "required": ["path"],
  "additionalProperties": false
}`, cfg.DefaultLimit, cfg.DefaultLimit)),
		Permission: PermissionRead,
	}, r.run), nil
}

// reader is the read built-in.
type reader struct {
	cfg ReadConfig
}

func (r *reader) run(ctx context.Context, call *CallContext, in ReadInput) (Result, error) {
	res, err := call.Paths.Resolve(in.Path)
	if err != nil {
		// Some resolution errors tell what is on disk ("x is a file"): a
		// path the rules deny gets the denial instead, as when it exists,
		// checked both as written and as far as it resolved (through
		// links, as rules on canonical paths expect).
		var patterns []string
		if lexical, ok := call.Paths.Lexical(in.Path); ok {
			patterns = append(patterns, lexical)
		}
		if pe, ok := errors.AsType[*PathError](err); ok && pe.Near != "" && !slices.Contains(patterns, pe.Near) {
			patterns = append(patterns, pe.Near)
		}
		if len(patterns) > 0 {
			if aerr := call.Ask(ctx, Request{Permission: PermissionRead, Patterns: patterns,
				Metadata: mustJSON(map[string]string{"path": in.Path})}); aerr != nil {
				return Result{}, aerr
			}
		}
		return Result{}, err
	}
	shown := displayPath(res)
	// Authorize before looking: whether a path the agent may not read
	// exists is itself something it may not learn. A listing shows the
	// names of what a directory holds, so for a directory the rules decide
	// on its contents too (a rule that denies dir/* keeps their names
	// hidden, not only their bytes), in the same question: one question,
	// and "always" saves both.
	ask := func(patterns ...string) error {
		return call.Ask(ctx, Request{Permission: PermissionRead, Patterns: patterns,
			Metadata: mustJSON(map[string]string{"path": shown})})
	}
	contents := filepath.Join(res.Path, "*")
	patterns := []string{res.Path}
	if fi, err := os.Stat(res.Path); err == nil && fi.IsDir() {
		patterns = append(patterns, contents)
	}
	if err := ask(patterns...); err != nil {
		return Result{}, err
	}
	if !res.Exists {
		return Result{}, fmt.Errorf("read %s: no such file or directory", shown)
	}
	root, err := os.OpenRoot(res.Base)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %v", shown, describeErr(err))
	}
	defer root.Close()
	// Opening a special file is not harmless: a device's driver runs (a
	// watchdog arms, a tape rewinds, a terminal can become the daemon's
	// controlling one), a writer waiting on a FIFO is released, and a
	// socket fails with "no such device or address". What is neither a
	// regular file nor a directory is refused unopened; the descriptor's
	// own type, checked below, covers a swap in between.
	if fi, err := root.Stat(res.Rel); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return Result{}, fmt.Errorf("read %s: not a regular file or directory (%s)", shown, fi.Mode().Type())
	}
	f, fi, err := openNoBlock(root, res.Rel)
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %v", shown, describeErr(err))
	}
	defer f.Close()
	if err := stillAt(res.Path, fi); err != nil {
		return Result{}, fmt.Errorf("read %s: %v", shown, err)
	}
	offset, limit := in.Offset, in.Limit
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = r.cfg.DefaultLimit
	}
	switch {
	case fi.IsDir():
		if len(patterns) == 1 {
			// It became a directory after the question: ask for its
			// contents now.
			if err := ask(contents); err != nil {
				return Result{}, err
			}
		}
		return r.listDir(root, f, res, shown, offset, limit)
	case fi.Mode().IsRegular():
	default:
		return Result{}, fmt.Errorf("read %s: not a regular file or directory (%s)", shown, fi.Mode().Type())
	}
	br := bufio.NewReaderSize(f, readBufferSize)
	if isBinary(br) {
		return r.readBinary(br, shown, fi.Size())
	}
	page, err := readTextPage(ctx, br, pageLimits{offset: offset, limit: limit, maxLine: r.cfg.MaxLineBytes, maxPage: r.cfg.MaxPageBytes})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, messages.Errorf(messages.ErrAborted, "read %s was cancelled", shown)
		}
		var beyond *errOffsetBeyondEnd
		if errors.As(err, &beyond) {
			return Result{}, fmt.Errorf("read %s: %v; use an offset from 1 to %d", shown, err, max(beyond.lines, 1))
		}
		return Result{}, fmt.Errorf("read %s: %v", shown, err)
	}
	return formatTextPage(shown, fi.Size(), page), nil
}

// formatTextPage renders a page as numbered lines with a footer that tells
// the model how to continue.
func formatTextPage(shown string, size int64, page textPage) Result {
	var b strings.Builder
	for i, l := range page.lines {
		fmt.Fprintf(&b, "%6d\t%s\n", page.first+i, l)
	}
	last := page.first + len(page.lines) - 1
	switch {
	case len(page.lines) == 0:
		b.WriteString("(The file is empty.)")
	case page.next > 0:
		fmt.Fprintf(&b, "\n(Showing lines %d-%d. The file has more lines: call read with offset=%d to continue.)", page.first, last, page.next)
	default:
		unit := "lines"
		if page.total == 1 {
			unit = "line"
		}
		fmt.Fprintf(&b, "\n(End of file: %d %s.)", page.total, unit)
	}
	return Result{
		Title:  shown,
		Output: b.String(),
		Metadata: mustJSON(ReadMetadata{
			Path: shown, Kind: "text", Offset: page.first, Count: len(page.lines), Next: page.next,
			Total: page.total, Truncated: page.truncated, Size: size,
		}),
	}
}

// sniffBytes is how much of a file decides between text and binary.
const sniffBytes = 8 << 10

// isBinary reports whether the start of br looks binary: it contains a NUL
// byte or is not valid UTF-8 (a rune cut by the sniff window is fine).
func isBinary(br *bufio.Reader) bool {
	head, _ := br.Peek(sniffBytes)
	if len(head) == sniffBytes {
		head = head[:runes.Whole(head)]
	}
	return strings.IndexByte(string(head), 0) >= 0 || !utf8.Valid(head)
}

func (r *reader) readBinary(br *bufio.Reader, shown string, size int64) (Result, error) {
	if size > r.cfg.MaxBinaryBytes {
		return Result{}, fmt.Errorf("read %s: binary file of %d bytes exceeds the limit of %d bytes for binary reads", shown, size, r.cfg.MaxBinaryBytes)
	}
	data, err := io.ReadAll(io.LimitReader(br, r.cfg.MaxBinaryBytes+1))
	if err != nil {
		return Result{}, fmt.Errorf("read %s: %v", shown, err)
	}
	if int64(len(data)) > r.cfg.MaxBinaryBytes {
		return Result{}, fmt.Errorf("read %s: binary file grew past the limit of %d bytes while reading", shown, r.cfg.MaxBinaryBytes)
	}
	mime := http.DetectContentType(data)
	return Result{
		Title:  shown,
		Output: fmt.Sprintf("Binary file %s (%d bytes, %s), base64-encoded:\n%s", shown, len(data), mime, base64.StdEncoding.EncodeToString(data)),
		Metadata: mustJSON(ReadMetadata{
			Path: shown, Kind: "binary", Count: 1, Size: int64(len(data)), Mime: mime, Encoding: "base64",
		}),
	}, nil
}

// displayPath returns the path as the model should write it, made safe
// for output by showName.
func displayPath(res Resolved) string {
	if res.Reference == "" {
		return showName(res.Rel)
	}
	if res.Rel == "." {
		return "@" + res.Reference
	}
	return showName("@" + res.Reference + "/" + res.Rel)
}

// showName returns a file name or path as tool output shows it. Output
// must be valid UTF-8 but names are bytes, so a name that is not plain
// (valid UTF-8 of printable characters other than '"' and '\') is shown
// Go-quoted by strconv.Quote, its invalid bytes as \xNN escapes.
//
// Quoting, unlike replacing invalid bytes with U+FFFD (strings.ToValidUTF8),
// keeps names distinct and exact: "a\xff" and "a\xfe" do not both become
// "a\ufffd", and the quoted form decodes back to the real bytes
// (strconv.Unquote; bash's $'...' reads the same \xNN escapes). Quoting
// control characters too keeps a listing one entry per line, and since a
// plain name has no '"', a shown name that starts with '"' is quoted.
func showName(name string) string {
	for _, r := range name {
		if r == utf8.RuneError || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return strconv.Quote(name)
		}
	}
	return name
}

// mustJSON marshals values that cannot fail to marshal (plain structs and
// maps of strings and numbers).
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tools: marshal %T: %v", v, err))
	}
	return b
}

// stillAt checks that fi, a file just opened by a path the permission
// rules allowed as path (canonical: no links), is the file at path now,
// reached without a link. The open follows links beneath the root, so a
// link swapped in between the check and the open (by a command the model
// runs at the same time) could have taken it to a file the rules deny.
// A swap back after the open leaves another file at path, which this
// also refuses.
func stillAt(path string, fi fs.FileInfo) error {
	real, err := filepath.EvalSymlinks(path)
	if err == nil && real != path {
		err = fmt.Errorf("%s now resolves to %s", path, real)
	}
	if err == nil {
		var now fs.FileInfo
		if now, err = os.Stat(path); err == nil && !os.SameFile(now, fi) {
			err = fmt.Errorf("%s is another file now", path)
		}
	}
	if err != nil {
		return fmt.Errorf("the path changed while it was opened (%v); it was not read", err)
	}
	return nil
}

// openNoBlock opens rel for reading without blocking, and returns it with
// what it is. A stat before an open would leave a window in which the path
// becomes a FIFO (another process swapping it in), whose blocking open no
// cancellation ends; opening non-blocking and asking the descriptor closes
// it. Only the caller can tell what kinds it takes.
func openNoBlock(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
