package tools

import (
	"path/filepath"
	"slices"
	"strings"
)

// harmlessPaths are absolute paths commands routinely use that warrant no
// warning.
var harmlessPaths = []string{"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "/dev/random", "/dev/urandom"}

// outsidePaths returns, sorted and without duplicates, the absolute paths
// (and "~" paths, expanded with home when it is known) mentioned in command
// that lie outside root. It is a best-effort lexical scan that feeds
// advisory warnings only: it is not a sandbox and it is easy to evade.
func outsidePaths(command, root, home string) []string {
	fields := strings.FieldsFunc(command, func(r rune) bool {
		switch r {
		case ' ', '\t', '\n', '\r', ';', '|', '&', '(', ')', '<', '>', '\'', '"', '`', '=', ',', '{', '}':
			return true
		}
		return false
	})
	var out []string
	for _, f := range fields {
		p := f
		switch {
		case strings.HasPrefix(p, "/"):
		case home != "" && (p == "~" || strings.HasPrefix(p, "~/")):
			p = filepath.Join(home, strings.TrimPrefix(p, "~"))
		default:
			continue
		}
		p = filepath.Clean(p)
		if slices.Contains(harmlessPaths, p) || within(root, p) {
			continue
		}
		if c, err := filepath.EvalSymlinks(p); err == nil && within(root, c) {
			continue
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
