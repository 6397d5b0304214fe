package locations

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// InstructionBuiltins is the source of built-in instructions under key
// SourceBuiltin: environment facts about the Location and the host-local
// date. The date is rendered without a time of day, so the value, and with
// it the model's instructions, changes once a day rather than every step.
type InstructionBuiltins struct {
	// Dir is the Location directory, reported as the working directory.
	Dir string
	// GOOS and GOARCH name the platform; empty means the running one.
	GOOS, GOARCH string
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
	// Zone is where the date is taken; nil means time.Local, the host's.
	Zone *time.Location
}

// Key implements Source.
func (InstructionBuiltins) Key() string { return SourceBuiltin }

// Observe implements Source. It is unavailable when the Location directory
// cannot be resolved, since then whether it is a git repository is unknown.
func (b InstructionBuiltins) Observe(context.Context) (Observation, error) {
	dir, err := canonicalDir(b.Dir)
	if err != nil {
		return Observation{}, err
	}
	_, git, err := instructionProjectRoot(dir)
	if err != nil {
		return Observation{}, err
	}
	goos, goarch := b.GOOS, b.GOARCH
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	now := time.Now
	if b.Clock != nil {
		now = b.Clock
	}
	zone := b.Zone
	if zone == nil {
		zone = time.Local
	}
	return Available(renderBuiltins(filepath.Clean(b.Dir), goos, goarch, git, now().In(zone))), nil
}

// renderBuiltins renders the built-in instructions from their facts.
func renderBuiltins(dir, goos, goarch string, git bool, today time.Time) string {
	repo := "no"
	if git {
		repo = "yes"
	}
	var b strings.Builder
	b.WriteString("Environment:\n")
	b.WriteString("- Working directory: " + dir + "\n")
	b.WriteString("- Platform: " + goos + "/" + goarch + "\n")
	b.WriteString("- Git repository: " + repo + "\n")
	b.WriteString("- Today's date: " + today.Format("Monday, 2006-01-02"))
	return b.String()
}
