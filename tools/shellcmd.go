package tools

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// commandPatterns returns what a bash call asks permission for: each
// simple command of the script, as its source text with its assignments,
// redirections and here-document bodies, in order. A rule or saved
// approval must cover every one, so a rule allowing "git status*" allows
// neither "git status; rm -rf ~" nor "git status $(curl … | sh)": the
// commands after the first, and those inside substitutions, are asked for
// on their own. A compound command with redirections of its own
// ("{ a; b; } > f") is asked for as a whole as well.
//
// The script is parsed with mvdan.cc/sh, the shell parser behind shfmt: a
// hand-written split on ";", "&&" and "|" would miss substitutions,
// quoting, here-documents and functions. A script it cannot parse is
// refused rather than asked for as one opaque string, which a prefix rule
// could allow whole.
func commandPatterns(shell, script string) ([]string, error) {
	// Shells split some scripts differently (bash reads $'…' as one word,
	// dash as "$" and a quote), so the script is parsed as the shell that
	// runs it will read it; one not known here is parsed both as bash and
	// as POSIX sh, and every command either finds is asked for.
	var langs []syntax.LangVariant
	switch strings.TrimSuffix(filepath.Base(shell), ".exe") {
	case "bash":
		langs = []syntax.LangVariant{syntax.LangBash}
	case "sh", "dash", "ash", "posh":
		langs = []syntax.LangVariant{syntax.LangPOSIX}
	case "mksh", "ksh":
		langs = []syntax.LangVariant{syntax.LangMirBSDKorn}
	case "zsh":
		langs = []syntax.LangVariant{syntax.LangZsh}
	default:
		langs = []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX}
	}
	var out []string
	for _, lang := range langs {
		f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(script), "")
		if err != nil {
			return nil, fmt.Errorf("bash: the command does not parse as a %s script, so its parts cannot be checked against the permission rules: %v", lang, err)
		}
		out = appendCommands(out, script, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bash: the command has nothing to run")
	}
	return out, nil
}

// appendCommands appends the simple commands of f, parsed from script, to
// out (see commandPatterns).
func appendCommands(out []string, script string, f *syntax.File) []string {
	add := func(st *syntax.Stmt) {
		end := int(st.End().Offset())
		// A here-document's body comes on the lines after its statement,
		// which the parser ends at its ';' or '&' or its last redirection:
		// "python3 - <<'EOF' 2>&1" would leave out the script python runs,
		// and approving it would approve every script run that way.
		for _, r := range st.Redirs {
			if r.Hdoc != nil && len(r.Hdoc.Parts) > 0 {
				end = max(end, int(r.Hdoc.End().Offset()))
			}
		}
		// The parser can place the end of a node it closed itself past the
		// script (zsh's "((A++." ends at 7 of 6 bytes): clamp.
		end = min(end, len(script))
		start := min(int(st.Pos().Offset()), end)
		text := strings.TrimSpace(script[start:end])
		text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
		if text != "" && !slices.Contains(out, text) {
			out = append(out, text)
		}
	}
	// Expansions that make bash evaluate text it expanded, at run time:
	// prompt and escape expansion (${x@P}), indirection (${!x}), and
	// arithmetic on a variable, whose value may hold "a[$(cmd)]". The
	// command such text runs is in no syntax tree, so the expansion
	// itself is asked for: "echo *" allows "echo hi", not
	// "echo ${x@P}". Arithmetic elsewhere (((…)), let, [[ -eq ]]) is a
	// statement of its own, asked for as one; test, printf -v and declare
	// can evaluate a value too, and are not caught (docs/cli.md).
	addNode := func(n syntax.Node) {
		start, end := int(n.Pos().Offset()), min(int(n.End().Offset()), len(script))
		if text := script[min(start, end):end]; text != "" && !slices.Contains(out, text) {
			out = append(out, text)
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.ParamExp:
			switch {
			case x.Excl && x.Names == 0 && x.Index == nil,
				x.Exp != nil && x.Exp.Op == syntax.OtherParamOps && x.Exp.Word != nil && strings.ContainsAny(x.Exp.Word.Lit(), "PE"),
				x.Index != nil && !allElements(x.Index) && arithmNames(x.Index),
				x.Slice != nil && (x.Slice.Offset != nil && arithmNames(x.Slice.Offset) || x.Slice.Length != nil && arithmNames(x.Slice.Length)):
				addNode(x)
			}
		case *syntax.ArithmExp:
			if arithmNames(x.X) {
				addNode(x)
			}
		}
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		switch st.Cmd.(type) {
		case nil, *syntax.CallExpr, *syntax.DeclClause, *syntax.LetClause, *syntax.TestClause, *syntax.ArithmCmd, *syntax.TestDecl:
			add(st)
		default:
			if len(st.Redirs) > 0 {
				add(st)
			}
		}
		return true
	})
	return out
}

// arithmNames reports whether the arithmetic expression x refers to
// anything but number literals: a name or an expansion, whose value bash
// evaluates as arithmetic in turn.
func arithmNames(x syntax.ArithmExpr) bool {
	found := false
	syntax.Walk(x, func(n syntax.Node) bool {
		if w, ok := n.(*syntax.Word); ok {
			lit := w.Lit()
			if lit == "" || strings.TrimLeft(lit, "0123456789") != "" && !isNumber(lit) {
				found = true
			}
		}
		return !found
	})
	return found
}

// allElements reports whether an index is [@] or [*]: every element, no
// arithmetic.
func allElements(x syntax.ArithmExpr) bool {
	w, ok := x.(*syntax.Word)
	return ok && (w.Lit() == "@" || w.Lit() == "*")
}

// isNumber reports whether lit is a number in one of bash's arithmetic
// forms: 42, 0x2a, 052, 2#101010.
func isNumber(lit string) bool {
	lit = strings.ToLower(lit)
	if base, digits, ok := strings.Cut(lit, "#"); ok {
		return base != "" && strings.Trim(base, "0123456789") == "" && digits != "" &&
			strings.Trim(digits, "0123456789abcdefghijklmnopqrstuvwxyz@_") == ""
	}
	if rest, ok := strings.CutPrefix(lit, "0x"); ok {
		return rest != "" && strings.Trim(rest, "0123456789abcdef") == ""
	}
	return lit != "" && strings.Trim(lit, "0123456789") == ""
}
