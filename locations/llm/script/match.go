package script

import (
	"strings"

	"github.com/sessiond/sessiond/locations/llm"
)

// Matcher decides whether a scripted response answers a request. Matchers
// run while the Provider holds its lock, so they must not call the Provider.
type Matcher func(llm.Request) bool

// All returns a Matcher that matches when every one of ms does. All() matches
// every request.
func All(ms ...Matcher) Matcher {
	ms = append([]Matcher(nil), ms...)
	return func(req llm.Request) bool {
		for _, m := range ms {
			if m != nil && !m(req) {
				return false
			}
		}
		return true
	}
}

// SessionKey matches requests whose CacheKey is key. The runner sets a
// stable per-Session CacheKey, so this keys a response to one Session.
func SessionKey(key string) Matcher {
	return func(req llm.Request) bool { return req.CacheKey == key }
}

// ForModel matches requests for the model "provider/model".
func ForModel(ref string) Matcher {
	return func(req llm.Request) bool { return req.Model.String() == ref }
}

// LastUserContains matches requests whose last user message (see
// LastUserText) contains s.
func LastUserContains(s string) Matcher {
	return func(req llm.Request) bool { return strings.Contains(LastUserText(req), s) }
}

// SystemContains matches requests whose system text (all parts) contains s.
func SystemContains(s string) Matcher {
	return func(req llm.Request) bool {
		for _, p := range req.System {
			if strings.Contains(p, s) {
				return true
			}
		}
		return false
	}
}

// OnRound matches requests whose Round is n.
func OnRound(n int) Matcher {
	return func(req llm.Request) bool { return Round(req) == n }
}

// AfterTool matches requests whose last message carries a result of a call
// to the tool name; "*" matches a result of any tool.
func AfterTool(name string) Matcher {
	return func(req llm.Request) bool {
		if len(req.Messages) == 0 {
			return false
		}
		for _, p := range req.Messages[len(req.Messages)-1].Parts {
			if p.Kind == llm.PartToolResult && (name == "*" || p.Name == name) {
				return true
			}
		}
		return false
	}
}

// lastUser returns the index of the last user message that carries text or
// a file, or -1. User messages that carry only tool results do not count, so
// the rule holds for adapters that lower tool results as user turns.
func lastUser(req llm.Request) int {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != llm.RoleUser {
			continue
		}
		for _, p := range m.Parts {
			if p.Kind == llm.PartText || p.Kind == llm.PartFile {
				return i
			}
		}
	}
	return -1
}

// LastUserText returns the text parts of the request's last user message
// joined by newlines, or "" when there is none. The last user message is the
// last message with role user that carries text or a file.
func LastUserText(req llm.Request) string {
	i := lastUser(req)
	if i < 0 {
		return ""
	}
	var texts []string
	for _, p := range req.Messages[i].Parts {
		if p.Kind == llm.PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Round returns the number of assistant messages after the request's last
// user message (all assistant messages when there is none). The first
// request after a prompt is round 0; each tool round trip adds one. It is a
// pure function of the request, so a script keyed on it answers every
// Session alike, whatever their number and interleaving.
func Round(req llm.Request) int {
	n := 0
	for _, m := range req.Messages[lastUser(req)+1:] {
		if m.Role == llm.RoleAssistant {
			n++
		}
	}
	return n
}
