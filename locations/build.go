package locations

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// BuildConfig describes how to build the service set of any Location.
type BuildConfig struct {
	Catalog *llm.Catalog
	// Providers maps provider IDs to their clients.
	Providers    map[string]llm.Provider
	DefaultModel messages.ModelRef
	Agents       map[string]Agent
	// Rules are the permission rules of each agent.
	Rules map[string]tools.Ruleset
	// Approvals stores "always" replies durably; Asker asks the user.
	Approvals tools.ApprovalStore
	Asker     tools.Asker
	// References are named project references for read (name -> dir).
	References map[string]string
	// Builtins configures read, bash and apply_patch.
	Builtins tools.BuiltinConfig
	// Instructions is the template of every Location's instruction config;
	// Dir is filled per Location. Nil means no instructions.
	Instructions *InstructionsConfig
	// Roots limits Location directories; empty allows any.
	Roots []string
}

// CheckDirectory returns nil when dir is a directory, else the error of
// its stat or syscall.ENOTDIR.
func CheckDirectory(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		err = syscall.ENOTDIR
	}
	return err
}

// DirectoryProblem says what err (from CheckDirectory or tools.CanonicalDir)
// found wrong with a directory, in words that follow its name: "does not
// exist", "is not a directory", or "cannot be used: <cause>". Every check
// of a directory (a Location's, a root, a flag's) says it in these words.
func DirectoryProblem(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case errors.Is(err, syscall.ENOTDIR):
		return "is not a directory"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return "cannot be used: " + err.Error()
}

// DirectoryError is the invalid error of a Location directory dir that
// err says cannot be used (DirectoryProblem), naming dir as the client
// gave it.
func DirectoryError(dir string, err error) error {
	return messages.Errorf(messages.ErrInvalid, "location.directory: %q %s", dir, DirectoryProblem(err))
}

// NewBuilder returns a Builder that makes a Location's services from cfg:
// the canonical root, a tool registry with the built-ins behind the
// Location's permission gate, and the model catalog.
func NewBuilder(cfg BuildConfig) Builder {
	return func(loc messages.Location) (*Services, error) {
		root, err := tools.CanonicalDir(loc.Directory)
		if err != nil {
			return nil, DirectoryError(loc.Directory, err)
		}
		if !Allowed(cfg.Roots, root) {
			return nil, messages.Errorf(messages.ErrForbidden, "location.directory %q is outside the allowed roots", loc.Directory)
		}
		perms, err := tools.NewPermissions(tools.PermissionsConfig{Project: root, Agents: cfg.Rules, Approvals: cfg.Approvals, Asker: cfg.Asker})
		if err != nil {
			return nil, err
		}
		reg, err := tools.NewRegistry(tools.Config{Root: root, References: cfg.References, Permissions: perms})
		if err != nil {
			return nil, err
		}
		if _, err := tools.RegisterBuiltins(reg, cfg.Builtins); err != nil {
			return nil, fmt.Errorf("locations: register built-ins: %w", err)
		}
		svc := &Services{Location: loc, Catalog: cfg.Catalog, DefaultModel: cfg.DefaultModel, Agents: cfg.Agents, Tools: NewTools(reg),
			Provider: func(id string) (llm.Provider, error) {
				if p, ok := cfg.Providers[id]; ok {
					return p, nil
				}
				return nil, messages.Errorf(messages.ErrModelNotFound, "provider %q has no client", id)
			}}
		if cfg.Instructions != nil {
			ic := *cfg.Instructions
			ic.Dir = root
			svc.Instructions = &ic
		}
		return svc, nil
	}
}

// Allowed reports whether dir lies within one of roots (any dir when roots
// is empty). Both sides should be canonical absolute paths.
func Allowed(roots []string, dir string) bool {
	if len(roots) == 0 {
		return true
	}
	for _, r := range roots {
		if canon, err := filepath.EvalSymlinks(r); err == nil {
			r = canon
		}
		rel, err := filepath.Rel(r, dir)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
			return true
		}
	}
	return false
}
