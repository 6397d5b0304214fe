package locations

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// DefaultAgent is the agent used when a Session names none, for execution
// and permission evaluation alike.
const DefaultAgent = "build"

// DefaultSteps is an agent's step allowance when its config gives none.
const DefaultSteps = 50

// Agent is a configured agent: its system prompt, optional model and step
// allowance. Its permission rules are the tool layer's (BuildConfig.Rules,
// tools.PermissionsConfig.Agents), keyed by the agent's name.
type Agent struct {
	Name   string
	Prompt string
	// Model overrides the Session's model when set.
	Model messages.ModelRef
	// Steps is the step allowance; each promoted input resets it.
	Steps int
}

// ToolCall is one local tool invocation.
type ToolCall struct {
	SessionID          messages.SessionID
	Agent              string
	AssistantMessageID messages.MessageID
	CallID             string
	Name               string
	Input              json.RawMessage
}

// ToolResult is a settled tool call: output, or a typed error.
type ToolResult struct {
	Output   string
	Metadata json.RawMessage
	Err      *messages.Error
	// Halt says the user refused the call (tools.ErrUserRejected): the
	// busy period ends after this step.
	Halt bool
}

// Tools is what the runner needs from a Location's tool registry.
// Implementations are safe for concurrent use; Execute honours ctx and
// turns every failure (including unknown tools) into ToolResult.Err.
type Tools interface {
	Definitions(agent string) []llm.ToolDefinition
	Execute(ctx context.Context, call ToolCall) ToolResult
}

// Services is the service set of one Location: everything the runner needs
// that depends on where a Session runs. No field takes a Session ID.
type Services struct {
	Location messages.Location
	// Catalog resolves models; Provider returns the client of a provider,
	// which must not be nil. Both are needed to run a model.
	Catalog  *llm.Catalog
	Provider func(providerID string) (llm.Provider, error)
	// DefaultModel is used when neither Session nor agent selects one.
	DefaultModel messages.ModelRef
	// Agents are the configured agents by name; one not among them (the
	// default agent included, with a nil map) runs with default settings
	// (Agent).
	Agents map[string]Agent
	// Tools are the Location's tools; nil offers the model none.
	Tools Tools
	// Instructions configures the Location's instruction sources; the
	// runner fills Entries with the Session's API-managed entries. Nil means
	// the Session has no instructions.
	Instructions *InstructionsConfig
}

// Agent returns the named agent, falling back to DefaultAgent and then to
// an agent with default settings.
func (s *Services) Agent(name string) Agent {
	if name == "" {
		name = DefaultAgent
	}
	if a, ok := s.Agents[name]; ok {
		if a.Name == "" {
			a.Name = name
		}
		if a.Steps <= 0 {
			a.Steps = DefaultSteps
		}
		return a
	}
	return Agent{Name: name, Steps: DefaultSteps}
}

// Model resolves the model for a step: the Session's selection, else the
// agent's, else the Location default. A model the catalog cannot resolve, or
// whose provider has no client, is a model.not-found error.
func (s *Services) Model(session messages.ModelRef, agent Agent) (llm.Model, llm.Provider, error) {
	ref := session
	if ref.ID == "" {
		ref = agent.Model
	}
	if ref.ID == "" {
		ref = s.DefaultModel
	}
	m, err := s.Catalog.Resolve(ref)
	if err != nil {
		return llm.Model{}, nil, err
	}
	if s.Provider == nil {
		return llm.Model{}, nil, messages.Errorf(messages.ErrModelNotFound, "model %q: the Location's services have no Provider to give provider %q's client", ref.String(), ref.ProviderID)
	}
	p, err := s.Provider(ref.ProviderID)
	if err != nil {
		return llm.Model{}, nil, err
	}
	if p == nil {
		return llm.Model{}, nil, messages.Errorf(messages.ErrModelNotFound, "model %q: provider %q has no client", ref.String(), ref.ProviderID)
	}
	return m, p, nil
}

// Builder builds the service set of a Location.
type Builder func(loc messages.Location) (*Services, error)

// Manager caches one service set per Location key. Builds of different
// keys run concurrently, and Gets of one key share one build: a directory
// that is slow to resolve (a stalled network mount) delays only its own
// Location, not every Get behind one lock. It is safe for concurrent use.
type Manager struct {
	build Builder
	mu    sync.Mutex
	sets  map[string]*serviceSet
}

// serviceSet is the entry of one Location key: a build in flight until
// done is closed, then the built set or the build's error.
type serviceSet struct {
	done chan struct{}
	svc  *Services
	err  error
}

// NewManager returns a Manager that builds service sets with build.
func NewManager(build Builder) *Manager {
	return &Manager{build: build, sets: map[string]*serviceSet{}}
}

// Get returns the cached service set of loc, building it on first use.
// The set stays cached until Forget: its caller (the Location actor that
// runs loc's Sessions) forgets it once it is idle.
func (m *Manager) Get(loc messages.Location) (*Services, error) {
	key := loc.Key()
	for {
		m.mu.Lock()
		e, ok := m.sets[key]
		if !ok {
			e = &serviceSet{done: make(chan struct{})}
			m.sets[key] = e
			m.mu.Unlock()
			return m.fill(key, loc, e)
		}
		m.mu.Unlock()
		<-e.done
		if e.err != nil {
			return nil, e.err
		}
		if e.svc != nil {
			return e.svc, nil
		}
		// Its build panicked: build it anew.
		m.forget(key, e)
	}
}

// fill builds the set of the new entry e of key and hands the outcome to
// the Gets waiting for it. A failed build is not cached: the next Get
// tries again.
func (m *Manager) fill(key string, loc messages.Location, e *serviceSet) (s *Services, err error) {
	defer func() {
		if s == nil { // also when build panicked
			m.forget(key, e)
		}
		close(e.done)
	}()
	s, err = m.buildSet(loc)
	if err != nil {
		e.err = err
		return nil, err
	}
	e.svc = s
	return s, nil
}

// buildSet builds the service set of loc, naming its directory in a
// failure.
func (m *Manager) buildSet(loc messages.Location) (*Services, error) {
	if m.build == nil {
		return nil, messages.Errorf(messages.ErrInternal, "locations: build %s: the Manager has no Builder", loc.Directory)
	}
	s, err := m.build(loc)
	if err != nil {
		return nil, fmt.Errorf("locations: build %s: %w", loc.Directory, err)
	}
	if s == nil {
		// A runner would stop on the nil set without a word in the log,
		// and every prompt would wait forever.
		return nil, messages.Errorf(messages.ErrInternal, "locations: build %s: the Builder returned no services and no error", loc.Directory)
	}
	return s, nil
}

// Check returns the service set of loc for a caller that only checks
// what the Location configures (creating or moving a Session, selecting
// its agent or model): the cached set when there is one, else a set built
// for the caller alone. Only a Get's set is kept: its user, a Location
// actor, Forgets it once idle; no one would forget the set of a Location
// that was only checked, and a daemon that creates Sessions in many
// directories and never runs them would keep one for each.
func (m *Manager) Check(loc messages.Location) (*Services, error) {
	m.mu.Lock()
	e, ok := m.sets[loc.Key()]
	m.mu.Unlock()
	if ok {
		<-e.done
		if e.svc != nil {
			return e.svc, nil
		}
	}
	return m.buildSet(loc)
}

// Cached returns how many Location keys have a set cached or in the
// making (tests of other packages count them).
func (m *Manager) Cached() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sets)
}

// Forget drops the cached service set of the Location whose Key is key if
// it is svc, so that the next Get builds it anew (from the directory as it
// is then). The actors call it once nothing uses svc any more: a Location
// none of whose Sessions has a live actor.
func (m *Manager) Forget(key string, svc *Services) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.sets[key]
	if !ok || svc == nil {
		return
	}
	select {
	case <-e.done: // e.svc is set (done is closed after it)
		if e.svc == svc {
			delete(m.sets, key)
		}
	default: // a build under way is not svc's
	}
}

// forget removes the entry e of key unless a newer one replaced it.
func (m *Manager) forget(key string, e *serviceSet) {
	m.mu.Lock()
	if m.sets[key] == e {
		delete(m.sets, key)
	}
	m.mu.Unlock()
}
