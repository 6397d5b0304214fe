package tools

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Config configures a Registry.
type Config struct {
	// Root is the Location directory: absolute and existing.
	Root string
	// References maps project reference names to directories that tools
	// may address as "@name/path". Relative directories are relative to
	// Root.
	References map[string]string
	// Permissions is the Location's permission gate. Required.
	Permissions *Permissions
}

// Registry is the tool registry of one Location. Tools are registered in
// scopes; closing a scope removes its tools. The registry materializes the
// advertised definitions per agent and executes calls, settling every
// failure as a typed tool error. It is safe for concurrent use.
type Registry struct {
	paths *Resolver
	perms *Permissions

	mu      sync.Mutex // guards entries and scope state; serializes catalog rebuilds
	entries map[string]*entry
	// catalog is the sorted snapshot of entries that readers use without
	// locking; it is rebuilt on every change.
	catalog atomic.Pointer[[]*entry]
}

// entry is one registered tool with its compiled schemas.
type entry struct {
	tool     Tool
	def      Definition
	input    *jsonschema.Schema
	metadata *jsonschema.Schema
	scope    *Scope
}

// Scope is a contribution scope: built-ins, one plugin, one MCP server.
// Closing it removes every tool registered through it.
type Scope struct {
	reg    *Registry
	name   string
	closed bool // guarded by reg.mu
}

// NewRegistry returns an empty registry for cfg.
func NewRegistry(cfg Config) (*Registry, error) {
	if cfg.Permissions == nil {
		return nil, fmt.Errorf("%w: Permissions is required", ErrInvalidConfig)
	}
	paths, err := NewResolver(cfg.Root, cfg.References)
	if err != nil {
		return nil, err
	}
	r := &Registry{paths: paths, perms: cfg.Permissions, entries: make(map[string]*entry)}
	r.catalog.Store(new([]*entry))
	return r, nil
}

// Paths returns the registry's path resolver.
func (r *Registry) Paths() *Resolver { return r.paths }

// Permissions returns the registry's permission gate.
func (r *Registry) Permissions() *Permissions { return r.perms }

// NewScope returns an open scope named name (for error messages).
func (r *Registry) NewScope(name string) *Scope {
	return &Scope{reg: r, name: name}
}

// Name returns the scope's name.
func (s *Scope) Name() string { return s.name }

// Close removes the scope's tools and rebuilds the catalog. Calls already
// running finish normally. Closing twice is a no-op.
func (s *Scope) Close() {
	r := s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for name, e := range r.entries {
		if e.scope == s {
			delete(r.entries, name)
		}
	}
	r.rebuild()
}

// Register adds t to the registry under scope. It fails with
// ErrInvalidDefinition when the definition is unusable or t is nil,
// ErrDuplicateTool when the name is taken, ErrScopeClosed and
// ErrForeignScope (also for a nil scope: scopes come from NewScope).
func (r *Registry) Register(scope *Scope, t Tool) error {
	if scope == nil || scope.reg != r {
		return ErrForeignScope
	}
	if t == nil {
		return fmt.Errorf("%w: nil Tool", ErrInvalidDefinition)
	}
	if rt, ok := t.(interface{ runnable() bool }); ok && !rt.runnable() {
		return fmt.Errorf("%w: %s: NewTool was given a nil handler", ErrInvalidDefinition, t.Definition().Name)
	}
	def := t.Definition().clone()
	e, err := compileEntry(def)
	if err != nil {
		return err
	}
	e.tool, e.scope = t, scope
	r.mu.Lock()
	defer r.mu.Unlock()
	if scope.closed {
		return fmt.Errorf("%w: %s", ErrScopeClosed, scope.name)
	}
	if old, ok := r.entries[def.Name]; ok {
		return fmt.Errorf("%w: %s (by scope %s)", ErrDuplicateTool, def.Name, old.scope.name)
	}
	r.entries[def.Name] = e
	r.rebuild()
	return nil
}

// compileEntry validates def and compiles its schemas.
func compileEntry(def Definition) (*entry, error) {
	if !ValidName(def.Name) {
		return nil, fmt.Errorf("%w: name %q: use 1 to 64 characters from A-Z, a-z, 0-9, _ and -", ErrInvalidDefinition, def.Name)
	}
	if def.Description == "" {
		return nil, fmt.Errorf("%w: %s has no description", ErrInvalidDefinition, def.Name)
	}
	in, err := compileSchema(def.Name+"/input", def.InputSchema, true)
	if err != nil {
		return nil, fmt.Errorf("%w: %s input schema: %v", ErrInvalidDefinition, def.Name, err)
	}
	e := &entry{def: def, input: in}
	if len(def.MetadataSchema) > 0 {
		if e.metadata, err = compileSchema(def.Name+"/metadata", def.MetadataSchema, false); err != nil {
			return nil, fmt.Errorf("%w: %s metadata schema: %v", ErrInvalidDefinition, def.Name, err)
		}
	}
	return e, nil
}

// ValidName reports whether name is a tool name the registry accepts, and
// both the OpenAI and the Anthropic API: 1 to 64 characters from A-Z, a-z,
// 0-9, _ and -.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// rebuild publishes a new sorted catalog snapshot. The caller holds r.mu.
func (r *Registry) rebuild() {
	names := slices.Sorted(maps.Keys(r.entries))
	snap := make([]*entry, len(names))
	for i, n := range names {
		snap[i] = r.entries[n]
	}
	r.catalog.Store(&snap)
}

// lookup returns the current entry named name.
func (r *Registry) lookup(name string) (*entry, bool) {
	snap := *r.catalog.Load()
	i, ok := slices.BinarySearchFunc(snap, name, func(e *entry, n string) int {
		switch {
		case e.def.Name < n:
			return -1
		case e.def.Name > n:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, false
	}
	return snap[i], true
}

// Definitions materializes the catalog advertised to agent (DefaultAgent
// when empty) under the agent's rules followed by the Session-level rules
// session: every registered tool, sorted by name, except those whose
// permission the rules deny for every pattern. The result is a fresh copy.
func (r *Registry) Definitions(agent string, session Ruleset) []Definition {
	rules := concat(r.perms.Rules(agent), session)
	snap := *r.catalog.Load()
	defs := make([]Definition, 0, len(snap))
	for _, e := range snap {
		if rules.DeniesAll(e.def.permission()) {
			continue
		}
		defs = append(defs, e.def.clone())
	}
	return defs
}
