package locations

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// InstructionEntries is the source of API-managed instruction entries under
// key SourceEntries. Lookup returns the Session's entries by entry key; an
// error makes the source unavailable. Entries render sorted by key, each
// under a header naming it; empty entries contribute nothing. A nil Lookup
// observes no entries.
type InstructionEntries struct {
	Lookup func(ctx context.Context) (map[string]string, error)
}

// Key implements Source.
func (InstructionEntries) Key() string { return SourceEntries }

// Observe implements Source.
func (e InstructionEntries) Observe(ctx context.Context) (Observation, error) {
	if e.Lookup == nil {
		return Available(""), nil
	}
	entries, err := e.Lookup(ctx)
	if err != nil {
		return Observation{}, fmt.Errorf("locations: look up instruction entries: %w", err)
	}
	keys := make([]string, 0, len(entries))
	for k, v := range entries {
		if strings.TrimSpace(v) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	sections := make([]string, len(keys))
	for i, k := range keys {
		sections[i] = fmt.Sprintf(entryHeader+"%q:\n%s", k, strings.TrimRight(entries[k], " \t\r\n"))
	}
	return Available(strings.Join(sections, "\n\n")), nil
}
