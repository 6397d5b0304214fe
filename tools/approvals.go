package tools

import (
	"context"
	"slices"
	"sync"
)

// ApprovalStore keeps the approvals a user saved by replying "always". It is
// keyed by project, so approvals outlive Sessions. Implementations must be
// safe for concurrent use.
type ApprovalStore interface {
	// Approved reports whether a saved approval of project covers
	// permission and pattern. Saved permissions and patterns are wildcards
	// matched with Match, so saving "git *" for bash approves every git
	// command; pattern is plain text. Permissions.Check saves a request's
	// patterns escaped with LiteralPattern unless the request's Always says
	// otherwise.
	Approved(ctx context.Context, project, permission, pattern string) (bool, error)
	// Save durably records approvals of permission for patterns. It returns
	// only after the approvals would survive a restart.
	Save(ctx context.Context, project, permission string, patterns []string) error
}

// Approval is one saved approval.
type Approval struct {
	Permission string `json:"permission"`
	Pattern    string `json:"pattern"`
}

// MemoryApprovals is an ApprovalStore in process memory, for tests and for
// runs that need no durability. The zero value is ready to use.
type MemoryApprovals struct {
	mu       sync.Mutex
	projects map[string][]Approval
}

var _ ApprovalStore = (*MemoryApprovals)(nil)

// Approved implements ApprovalStore.
func (m *MemoryApprovals) Approved(ctx context.Context, project, permission, pattern string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.projects[project] {
		if Match(a.Permission, permission) && Match(a.Pattern, pattern) {
			return true, nil
		}
	}
	return false, nil
}

// Save implements ApprovalStore. Saving an approval twice keeps one copy.
func (m *MemoryApprovals) Save(ctx context.Context, project, permission string, patterns []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.projects == nil {
		m.projects = make(map[string][]Approval)
	}
	for _, p := range patterns {
		a := Approval{Permission: permission, Pattern: p}
		if !slices.Contains(m.projects[project], a) {
			m.projects[project] = append(m.projects[project], a)
		}
	}
	return nil
}

// List returns the approvals saved for project in the order they were saved.
func (m *MemoryApprovals) List(project string) []Approval {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.projects[project])
}
