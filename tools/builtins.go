//go:build unix

package tools

// BuiltinConfig configures the built-in tools.
type BuiltinConfig struct {
	Read       ReadConfig
	Bash       BashConfig
	ApplyPatch ApplyPatchConfig
}

// RegisterBuiltins registers read, bash and apply_patch in a new scope
// named "builtin" and returns the scope. Closing it removes them again.
func RegisterBuiltins(r *Registry, cfg BuiltinConfig) (*Scope, error) {
	read, err := NewRead(cfg.Read)
	if err != nil {
		return nil, err
	}
	bash, err := NewBash(cfg.Bash)
	if err != nil {
		return nil, err
	}
	applyPatch, err := NewApplyPatch(cfg.ApplyPatch)
	if err != nil {
		return nil, err
	}
	scope := r.NewScope("builtin")
	for _, t := range []Tool{read, bash, applyPatch} {
		if err := r.Register(scope, t); err != nil {
			scope.Close()
			return nil, err
		}
	}
	return scope, nil
}
