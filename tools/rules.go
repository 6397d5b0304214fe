package tools

import (
	"fmt"
	"strings"
)

// Action is what a permission rule decides.
type Action string

// Actions of permission rules.
const (
	// Allow lets the call proceed without asking.
	Allow Action = "allow"
	// Deny rejects the call without asking.
	Deny Action = "deny"
	// Ask asks the user, unless a saved approval covers the request.
	Ask Action = "ask"
)

// DefaultAction is the decision when no rule matches.
const DefaultAction = Ask

// Rule decides one action for the requests whose permission and pattern
// match its own wildcard Permission and Pattern (see Match).
type Rule struct {
	Permission string `json:"permission"`
	Pattern    string `json:"pattern"`
	Action     Action `json:"action"`
}

// String returns the rule in a compact human-readable form.
func (r Rule) String() string {
	return fmt.Sprintf("%s %q %s", r.Permission, r.Pattern, r.Action)
}

// Ruleset is an ordered list of rules. The last matching rule wins.
type Ruleset []Rule

// Validate checks that every rule has a permission, a pattern and a known
// action.
func (rs Ruleset) Validate() error {
	for i, r := range rs {
		switch {
		case r.Permission == "":
			return fmt.Errorf("%w: rule %d has no permission", ErrInvalidRule, i)
		case r.Pattern == "":
			return fmt.Errorf("%w: rule %d (%s) has no pattern", ErrInvalidRule, i, r.Permission)
		case r.Action != Allow && r.Action != Deny && r.Action != Ask:
			return fmt.Errorf("%w: rule %d (%s %q) has action %q, want allow, deny or ask", ErrInvalidRule, i, r.Permission, r.Pattern, r.Action)
		}
	}
	return nil
}

// Find returns the last rule matching permission and pattern.
func (rs Ruleset) Find(permission, pattern string) (Rule, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		if Match(rs[i].Permission, permission) && Match(rs[i].Pattern, pattern) {
			return rs[i], true
		}
	}
	return Rule{}, false
}

// Evaluate returns the action of the last rule matching permission and
// pattern, or DefaultAction when none matches.
func (rs Ruleset) Evaluate(permission, pattern string) Action {
	if r, ok := rs.Find(permission, pattern); ok {
		return r.Action
	}
	return DefaultAction
}

// DeniesAll reports whether the rules deny permission for every possible
// pattern: the last rule whose permission matches has pattern "*" (or only
// stars) and action deny. Tools whose permission is denied outright are
// not advertised.
func (rs Ruleset) DeniesAll(permission string) bool {
	for i := len(rs) - 1; i >= 0; i-- {
		if Match(rs[i].Permission, permission) {
			return rs[i].Action == Deny && strings.Trim(rs[i].Pattern, "*") == "" && rs[i].Pattern != ""
		}
	}
	return false
}

// concat returns a new ruleset with b after a.
func concat(a, b Ruleset) Ruleset {
	out := make(Ruleset, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}
