package locations

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// ErrInvalidInstructionsConfig is returned by NewInstructions for a config
// it cannot build sources from.
var ErrInvalidInstructionsConfig = errors.New("locations: invalid instructions config")

// InstructionsConfig describes the instruction sources of one Location.
// Every input that would otherwise be a process global (environment, home
// directory, clock) is a field, so tests and the runner decide them.
type InstructionsConfig struct {
	// Dir is the Location directory. Required and absolute.
	Dir string
	// Getenv reads XDG_CONFIG_HOME and the disable switches of project
	// AGENTS.md files (NewInstructionDiscovery);
	// os.Getenv in production. Nil reads nothing.
	Getenv func(string) string
	// Home is the user's home directory, the fallback for the global
	// AGENTS.md. Empty means no fallback.
	Home string
	// Clock dates the built-ins; nil means time.Now.
	Clock func() time.Time
	// Zone is where the date is taken; nil means time.Local.
	Zone *time.Location
	// GOOS and GOARCH override the reported platform; empty means the
	// running one.
	GOOS, GOARCH string
	// Skills, References and MCP fill the guidance slots. Nil means an
	// always-available empty source; a non-nil source must use the slot's
	// key (SourceSkills, SourceReferences, SourceMCP).
	Skills, References, MCP Source
	// Entries looks up the Session's API-managed entries. Nil means none.
	Entries func(ctx context.Context) (map[string]string, error)
}

// validate fills the guidance slots' defaults and checks the config.
func (c *InstructionsConfig) validate() error {
	if c.Dir == "" || !filepath.IsAbs(c.Dir) {
		return fmt.Errorf("%w: Location directory %q is not absolute", ErrInvalidInstructionsConfig, c.Dir)
	}
	for _, slot := range []struct {
		src *Source
		key string
	}{{&c.Skills, SourceSkills}, {&c.References, SourceReferences}, {&c.MCP, SourceMCP}} {
		if *slot.src == nil {
			*slot.src = StaticSource(slot.key, "")
		} else if k := (*slot.src).Key(); k != slot.key {
			return fmt.Errorf("%w: %s slot holds a source keyed %q", ErrInvalidInstructionsConfig, slot.key, k)
		}
	}
	return nil
}

// NewInstructions combines a Location's instruction sources in their fixed
// order: built-ins, AGENTS.md discovery, skill guidance, reference guidance,
// MCP guidance, API-managed entries.
func NewInstructions(c InstructionsConfig) (*Instructions, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	return Combine(
		InstructionBuiltins{Dir: c.Dir, GOOS: c.GOOS, GOARCH: c.GOARCH, Clock: c.Clock, Zone: c.Zone},
		NewInstructionDiscovery(c.Dir, c.Getenv, c.Home),
		c.Skills,
		c.References,
		c.MCP,
		InstructionEntries{Lookup: c.Entries},
	)
}
