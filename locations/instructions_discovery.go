package locations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// agentsFileName is the ambient instruction file InstructionDiscovery reads.
const agentsFileName = "AGENTS.md"

// errNoLocationDir reports a source built without a Location directory.
var errNoLocationDir = errors.New("locations: instruction source has no Location directory")

// Environment variables NewInstructionDiscovery reads through its getenv.
const (
	// EnvConfigHome is the XDG base directory of user configuration.
	EnvConfigHome = "XDG_CONFIG_HOME"
	// EnvDisableProjectConfig, when true ("1"), turns off project
	// AGENTS.md files; the global file still applies.
	EnvDisableProjectConfig = "SESSIOND_DISABLE_PROJECT_CONFIG"
	// EnvDisableProjectConfigSEED is the name SEED.md gives the same
	// switch; either turns project files off.
	EnvDisableProjectConfigSEED = "OPENCODE_DISABLE_PROJECT_CONFIG"
)

// InstructionDiscovery is the source of ambient AGENTS.md instructions, one
// ordered aggregate under key SourceAgents: the global file, then project
// files from the project root down to the Location directory.
//
// The Location directory is canonicalized with filepath.EvalSymlinks and the
// project root is its nearest ancestor (or itself) containing ".git", or the
// directory itself when there is none; traversal never goes above the root,
// and a project file whose symlink resolves outside the root is rejected
// (unless it is the global file, already read). A missing file contributes
// nothing; a file that exists but cannot be read makes the whole source
// unavailable, so a transient failure never reads as a removal. Dir is
// required unless DisableProject is set.
type InstructionDiscovery struct {
	// Dir is the Location directory.
	Dir string
	// ConfigHome is $XDG_CONFIG_HOME; the global file is
	// ConfigHome/sessiond/AGENTS.md. Ignored unless absolute, as the XDG
	// specification requires.
	ConfigHome string
	// Home is the user's home directory; the global file falls back to
	// Home/.config/sessiond/AGENTS.md. Empty means no fallback.
	Home string
	// DisableProject turns off project files.
	DisableProject bool
}

// NewInstructionDiscovery returns the discovery source for Location
// directory dir, taking XDG_CONFIG_HOME and SESSIOND_DISABLE_PROJECT_CONFIG
// (or OPENCODE_DISABLE_PROJECT_CONFIG) from getenv (os.Getenv in production; nil reads nothing) and the fallback
// home directory from home.
func NewInstructionDiscovery(dir string, getenv func(string) string, home string) InstructionDiscovery {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	disable, _ := strconv.ParseBool(getenv(EnvDisableProjectConfig))
	seed, _ := strconv.ParseBool(getenv(EnvDisableProjectConfigSEED))
	return InstructionDiscovery{Dir: dir, ConfigHome: getenv(EnvConfigHome), Home: home, DisableProject: disable || seed}
}

// Key implements Source.
func (InstructionDiscovery) Key() string { return SourceAgents }

// GlobalPath returns the path of the global AGENTS.md, or "" when neither
// ConfigHome nor Home locates one.
func (d InstructionDiscovery) GlobalPath() string {
	switch {
	case d.ConfigHome != "" && filepath.IsAbs(d.ConfigHome):
		return filepath.Join(d.ConfigHome, "sessiond", agentsFileName)
	case d.Home != "":
		return filepath.Join(d.Home, ".config", "sessiond", agentsFileName)
	}
	return ""
}

// Observe implements Source. Files are rendered outermost first, each under
// a header naming its path.
func (d InstructionDiscovery) Observe(ctx context.Context) (Observation, error) {
	type candidate struct {
		path string
		// root bounds where a project file's symlinks may resolve; "" for
		// the global file, which the user owns.
		root string
	}
	var candidates []candidate
	if g := d.GlobalPath(); g != "" {
		candidates = append(candidates, candidate{path: g})
	}
	if !d.DisableProject {
		dir, err := canonicalDir(d.Dir)
		if err != nil {
			return Observation{}, err
		}
		root, _, err := instructionProjectRoot(dir)
		if err != nil {
			return Observation{}, err
		}
		var chain []string
		for p := dir; ; p = filepath.Dir(p) {
			chain = append(chain, p)
			if p == root {
				break
			}
		}
		for i := len(chain) - 1; i >= 0; i-- {
			candidates = append(candidates, candidate{path: filepath.Join(chain[i], agentsFileName), root: root})
		}
	}

	var sections []string
	seen := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		if err := ctx.Err(); err != nil {
			return Observation{}, err
		}
		if _, err := os.Lstat(c.path); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			// Missing, or below a regular file ($XDG_CONFIG_HOME/sessiond
			// is a file): either way no such file exists.
			continue
		} else if err != nil {
			return Observation{}, fmt.Errorf("locations: stat %s: %w", c.path, err)
		}
		// The file exists, so from here on every failure (a dangling
		// symlink, a directory, an escape) is unavailability, not absence.
		real, err := filepath.EvalSymlinks(c.path)
		if err != nil {
			return Observation{}, fmt.Errorf("locations: resolve %s: %w", c.path, err)
		}
		if seen[real] {
			// Already read (a project file linking to the global file):
			// nothing new is read, whatever the link's target.
			continue
		}
		if c.root != "" && !withinDir(c.root, real) {
			return Observation{}, fmt.Errorf("locations: %s resolves to %s outside project root %s", c.path, real, c.root)
		}
		seen[real] = true
		b, err := readInstructionFile(real)
		if err != nil {
			return Observation{}, fmt.Errorf("locations: read %s: %w", c.path, err)
		}
		// Instructions are stored in events as text: a file in another
		// encoding would otherwise be stored as bytes JSON cannot carry.
		text := strings.ToValidUTF8(strings.TrimRight(string(b), " \t\r\n"), "\uFFFD")
		if strings.TrimSpace(text) == "" {
			continue
		}
		sections = append(sections, discoveryHeader+c.path+":\n"+text)
	}
	return Available(strings.Join(sections, "\n\n")), nil
}

// maxInstructionFile bounds one AGENTS.md: its text goes into every
// request's privileged instructions.
const maxInstructionFile = 1 << 20

// readInstructionFile reads a regular file of at most maxInstructionFile
// bytes. Anything else is an error (the source is unavailable): a named
// pipe or a device would block the read, and with it the step boundary,
// beyond the reach of cancellation.
func readInstructionFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	if info.Size() > maxInstructionFile {
		return nil, fmt.Errorf("%d bytes, more than the %d an instruction file may have", info.Size(), maxInstructionFile)
	}
	return io.ReadAll(io.LimitReader(f, maxInstructionFile+1))
}

// canonicalDir returns dir made absolute with every symlink resolved. An
// empty dir is an error rather than the process's working directory.
func canonicalDir(dir string) (string, error) {
	if dir == "" {
		return "", errNoLocationDir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("locations: resolve %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("locations: resolve %s: %w", dir, err)
	}
	return real, nil
}

// instructionProjectRoot returns the nearest ancestor of the canonical
// directory dir, dir included, that contains ".git", and true; or dir itself
// and false when no ancestor does.
func instructionProjectRoot(dir string) (root string, git bool, err error) {
	for p := dir; ; {
		marker := filepath.Join(p, ".git")
		if _, err := os.Lstat(marker); err == nil {
			return p, true, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", false, fmt.Errorf("locations: stat %s: %w", marker, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return dir, false, nil
		}
		p = parent
	}
}

// withinDir reports whether the canonical path p is dir or below it.
func withinDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
