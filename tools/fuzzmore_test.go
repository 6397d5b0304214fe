//go:build unix

package tools

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzCommandPatternsShells is FuzzCommandPatterns for every shell
// dialect commandPatterns knows, and for an unknown shell (parsed both as
// bash and POSIX): any script fails to parse or yields patterns, each a
// non-empty piece of the script with no surrounding space.
func FuzzCommandPatternsShells(f *testing.F) {
	for _, s := range []string{"make test", "a; b && c | d", "x $(y `z`)", "{ a; } > f", "cat <<EOF\nx\nEOF", "f() { g; }",
		"echo $'a\\'b'; c", "print -r -- ${(j: :)arr}", "a=(1 2); echo ${a[1]}", "[[ a == b ]] && c", "let x=1", "((x++))",
		"cat <<-EOF\n\tx\n\tEOF\nls", "coproc x { y; }", "a |& b", "x=$(<f)"} {
		for i := range 5 {
			f.Add(uint8(i), s)
		}
	}
	shells := []string{"bash", "/bin/sh", "mksh", "zsh", "fish"}
	f.Fuzz(func(t *testing.T, which uint8, script string) {
		shell := shells[int(which)%len(shells)]
		got, err := commandPatterns(shell, script)
		if err != nil {
			return
		}
		if len(got) == 0 {
			t.Fatal("no patterns and no error")
		}
		for _, p := range got {
			if p == "" || strings.TrimSpace(p) != p || !strings.Contains(script, strings.TrimSuffix(p, ";")) {
				t.Fatalf("%s: pattern %q is not a piece of %q", shell, p, script)
			}
		}
	})
}

// FuzzWorkdirLexical: Workdir returns an existing canonical directory or a
// *PathError; Lexical, the path a permission check uses before anything is
// read, never names a place outside the root or reference Resolve would
// resolve into, and agrees with Resolve wherever no link is involved.
func FuzzWorkdirLexical(f *testing.F) {
	for _, seed := range []string{
		"", ".", "..", "../x", "/", "/tmp", "dir", "dir/../..", "link_out", "link_in", "@lib", "@lib/..", "@lib/../loc", "@nope",
		"@scoped", "@scoped/pkg.json", "a.txt", "dir/up", "chain1", "日本語", "a\x00", "@lib/back_to_loc", "@", "@/x",
	} {
		f.Add(seed)
	}
	pt := newPathTree(f)
	root := pt.r.Root()
	lib := pt.r.References()["lib"]
	f.Fuzz(func(t *testing.T, p string) {
		dir, err := pt.r.Workdir(p)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) {
				t.Fatalf("Workdir(%q) error %v is not a *PathError", p, err)
			}
		} else {
			canon, cerr := filepath.EvalSymlinks(dir)
			if cerr != nil || canon != dir || !filepath.IsAbs(dir) {
				t.Fatalf("Workdir(%q) = %q, not canonical (%q, %v)", p, dir, canon, cerr)
			}
		}
		lex, ok := pt.r.Lexical(p)
		res, rerr := pt.r.Resolve(p)
		if !ok {
			if rerr == nil {
				t.Fatalf("Lexical(%q) refused a path Resolve resolves to %q", p, res.Path)
			}
			return
		}
		if !within(root, lex) && !within(lib, lex) {
			t.Fatalf("Lexical(%q) = %q is outside the root and the references", p, lex)
		}
		if rerr == nil && !within(res.Base, lex) {
			t.Fatalf("Lexical(%q) = %q is outside %q, the base Resolve used", p, lex, res.Base)
		}
	})
}

// FuzzShowName: a shown name is valid UTF-8 without control characters,
// is the name itself when plain, and otherwise unquotes to the name.
func FuzzShowName(f *testing.F) {
	for _, s := range []string{"a.txt", "a\xff", "\"q\"", `back\slash`, "tab\there", "\u202e", "日本語", "\ufffd", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		shown := showName(name)
		if !utf8.ValidString(shown) {
			t.Fatalf("showName(%q) = %q is not valid UTF-8", name, shown)
		}
		for _, r := range shown {
			if !strconv.IsPrint(r) {
				t.Fatalf("showName(%q) = %q holds %U", name, shown, r)
			}
		}
		if shown == name {
			if strings.HasPrefix(name, `"`) {
				t.Fatalf("showName(%q) left a name starting with a quote", name)
			}
			return
		}
		back, err := strconv.Unquote(shown)
		if err != nil || back != name {
			t.Fatalf("showName(%q) = %q unquotes to %q, %v", name, shown, back, err)
		}
	})
}

// FuzzParseLedger feeds arbitrary bytes as a process ledger: parsing never
// panics, and every entry it keeps writes back as the line it came from
// (fields separated by one space).
func FuzzParseLedger(f *testing.F) {
	f.Add([]byte("3f1c-boot a1b2\n"))
	f.Add([]byte("b t\nb\nb t x\n\n b  t "))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range parseLedger(b) {
			// Each field on its own: two invalid bytes, one per field,
			// can make a space when joined (0xc2 0x85 is U+0085).
			if e.boot == "" || e.token == "" || strings.ContainsFunc(e.boot, unicode.IsSpace) || strings.ContainsFunc(e.token, unicode.IsSpace) {
				t.Fatalf("entry %+v from %q", e, b)
			}
			line := fmt.Sprintf("%s %s\n", e.boot, e.token)
			if again := parseLedger([]byte(line)); len(again) != 1 || again[0] != e {
				t.Fatalf("%+v does not round-trip: %q -> %+v", e, line, again)
			}
		}
	})
}
