package tools

import (
	"fmt"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// commandPatterns returns what a bash call asks permission for: each
// simple command of the script, as its source text with its assignments
// and redirections, in order. A rule or saved approval must cover every
// one, so a rule allowing "git status*" allows neither "git status; rm -rf
// ~" nor "git status $(curl … | sh)": the commands after the first, and
// those inside substitutions, are asked for on their own. A compound
// command with redirections of its own ("{ a; b; } > f") is asked for as a
// whole as well.
//
// The script is parsed with mvdan.cc/sh, the shell parser behind shfmt: a
// hand-written split on ";", "&&" and "|" would miss substitutions,
// quoting, here-documents and functions. A script it cannot parse is
// refused rather than asked for as one opaque string, which a prefix rule
// could allow whole.
func commandPatterns(script string) ([]string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		return nil, fmt.Errorf("bash: the command does not parse as a shell script, so its parts cannot be checked against the permission rules: %v", err)
	}
	var out []string
	add := func(n syntax.Node) {
		text := strings.TrimSpace(script[n.Pos().Offset():n.End().Offset()])
		text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
		if text != "" && !slices.Contains(out, text) {
			out = append(out, text)
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
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
	if len(out) == 0 {
		return nil, fmt.Errorf("bash: the command has nothing to run")
	}
	return out, nil
}
