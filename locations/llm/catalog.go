package llm

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/sessiond/sessiond/messages"
)

// Defaults for a configured model that omits its limits.
const (
	// DefaultContext is the context window, in tokens, of a model whose
	// spec leaves Context at 0.
	DefaultContext = 128000
	// DefaultOutput is the output limit, in tokens, of a model whose spec
	// leaves Output at 0. It is capped at half the context window so a
	// small model keeps room for its prompt.
	DefaultOutput = 8192
)

// maxListed caps how many known names an error message lists.
const maxListed = 10

// ProviderType says which adapter serves a provider.
type ProviderType string

// Provider types.
const (
	// ProviderOpenAI is any OpenAI-compatible Chat Completions endpoint.
	ProviderOpenAI ProviderType = "openai"
	// ProviderAnthropic is the Anthropic Messages API.
	ProviderAnthropic ProviderType = "anthropic"
	// ProviderScript is the deterministic scripted model of package script.
	// It needs no credentials.
	ProviderScript ProviderType = "script"
	// ProviderCustom is a provider an embedder implements in Go (the client
	// locations.Services.Provider returns for its ID). The catalog asks it
	// for no credentials (the embedder holds them), accepts any hosted
	// tool name, and, with no models listed, any model ID; its models
	// start from the generic base prompt rather than one written for
	// OpenAI's or Anthropic's models. The daemon's config has no such
	// type: it builds only the clients it knows.
	ProviderCustom ProviderType = "custom"
)

// open reports whether providers of type t need no credentials and, with
// no models listed, serve any model ID.
func (t ProviderType) open() bool { return t == ProviderScript || t == ProviderCustom }

// ProviderSpec describes one configured provider. The config layer fills it;
// the catalog does not know the config file format.
type ProviderSpec struct {
	// ID is the provider part of "provider/model"; it must not contain "/".
	ID   string
	Type ProviderType
	// HasCredentials says whether an API key (or an explicit "none" for a
	// local server) is configured. Script providers ignore it.
	HasCredentials bool
	// CredentialsHint says how to give a provider without credentials
	// some, in the refusal of its models; empty says to set its apiKey
	// (or the type's environment variable).
	CredentialsHint string
	// Models maps model IDs, which may contain "/", to their limits. A
	// script provider with no models accepts every model ID with default
	// limits.
	Models map[string]ModelSpec
}

// ModelSpec is the configured description of one model. Zero limits take
// DefaultContext and DefaultOutput.
type ModelSpec struct {
	Context int
	Output  int
	Prices  Prices
	// HostedTools names the provider-hosted tools every request to the
	// model enables (Request.HostedTools): "web_search" on Anthropic, any
	// name on a script provider; OpenAI's Chat Completions has none.
	HostedTools []string
}

// hostedTools are the provider-hosted tools each provider type can enable;
// a nil list accepts any name.
var hostedTools = map[ProviderType][]string{
	ProviderOpenAI:    {},
	ProviderAnthropic: {"web_search"},
	ProviderScript:    nil,
	ProviderCustom:    nil,
}

// Catalog resolves "provider/model" references to models with their limits
// and prices. It is immutable once built and safe for concurrent use.
type Catalog struct {
	providers map[string]catalogProvider
	ids       []string // sorted provider IDs
}

// catalogProvider is one provider of a Catalog with its resolved models.
type catalogProvider struct {
	spec   ProviderSpec
	models map[string]Model
	ids    []string // sorted model IDs
}

// NewCatalog validates specs, fills default limits and builds a Catalog. It
// returns an invalid *messages.Error naming the offending field, such as
// providers.local.models.qwen3.output.
func NewCatalog(specs []ProviderSpec) (*Catalog, error) {
	c := &Catalog{providers: make(map[string]catalogProvider, len(specs))}
	for _, spec := range specs {
		field := "providers." + spec.ID
		switch {
		case spec.ID == "":
			return nil, messages.Errorf(messages.ErrInvalid, "providers: a provider has an empty ID")
		case strings.Contains(spec.ID, "/"):
			return nil, messages.Errorf(messages.ErrInvalid, "%s: provider ID %q must not contain \"/\"", field, spec.ID)
		case strings.TrimSpace(spec.ID) != spec.ID:
			return nil, messages.Errorf(messages.ErrInvalid, "%s: provider ID %q has surrounding white space", field, spec.ID)
		}
		if _, dup := c.providers[spec.ID]; dup {
			return nil, messages.Errorf(messages.ErrInvalid, "%s: provider defined twice", field)
		}
		switch spec.Type {
		case ProviderOpenAI, ProviderAnthropic, ProviderScript, ProviderCustom:
		default:
			return nil, messages.Errorf(messages.ErrInvalid, "%s.type: unknown provider type %q (want openai, anthropic, script or custom)", field, spec.Type)
		}
		cp := catalogProvider{spec: spec, models: make(map[string]Model, len(spec.Models))}
		cp.spec.Models = make(map[string]ModelSpec, len(spec.Models))
		for id := range spec.Models {
			cp.ids = append(cp.ids, id)
		}
		sort.Strings(cp.ids) // report the first invalid model deterministically
		for _, id := range cp.ids {
			ms := spec.Models[id]
			m, err := newModel(field+".models."+id, messages.ModelRef{ProviderID: spec.ID, ID: id}, ms)
			if err != nil {
				return nil, err
			}
			for i, name := range ms.HostedTools {
				known := hostedTools[spec.Type]
				switch {
				case strings.TrimSpace(name) == "":
					return nil, messages.Errorf(messages.ErrInvalid, "%s.models.%s.hostedTools[%d]: empty name", field, id, i)
				case known != nil && !slices.Contains(known, name):
					want := "none"
					if len(known) > 0 {
						want = listed(known)
					}
					return nil, messages.Errorf(messages.ErrInvalid, "%s.models.%s.hostedTools[%d]: %s providers host no tool %q (they host: %s)", field, id, i, spec.Type, name, want)
				case slices.Contains(ms.HostedTools[:i], name):
					return nil, messages.Errorf(messages.ErrInvalid, "%s.models.%s.hostedTools[%d]: %q listed twice", field, id, i, name)
				}
			}
			m.HostedTools = slices.Clone(ms.HostedTools)
			m.Family = spec.Type
			ms.HostedTools = slices.Clone(ms.HostedTools) // the caller's slice stays the caller's
			cp.spec.Models[id] = ms
			cp.models[id] = m
		}
		c.providers[spec.ID] = cp
		c.ids = append(c.ids, spec.ID)
	}
	sort.Strings(c.ids)
	return c, nil
}

// newModel validates ms and fills its default limits.
func newModel(field string, ref messages.ModelRef, ms ModelSpec) (Model, error) {
	switch {
	case ref.ID == "":
		return Model{}, messages.Errorf(messages.ErrInvalid, "%s: a model has an empty ID", field)
	case strings.TrimSpace(ref.ID) != ref.ID:
		return Model{}, messages.Errorf(messages.ErrInvalid, "%s: model ID %q has surrounding white space", field, ref.ID)
	case ms.Context < 0:
		return Model{}, messages.Errorf(messages.ErrInvalid, "%s.context: %d is negative", field, ms.Context)
	case ms.Output < 0:
		return Model{}, messages.Errorf(messages.ErrInvalid, "%s.output: %d is negative", field, ms.Output)
	}
	for _, price := range []struct {
		name  string
		value float64
	}{{"input", ms.Prices.Input}, {"output", ms.Prices.Output}, {"cacheRead", ms.Prices.CacheRead}, {"cacheWrite", ms.Prices.CacheWrite}} {
		if price.value < 0 || math.IsNaN(price.value) || math.IsInf(price.value, 0) {
			return Model{}, messages.Errorf(messages.ErrInvalid, "%s.prices.%s: %v is not a price", field, price.name, price.value)
		}
	}
	m := Model{Ref: ref, Context: ms.Context, Output: ms.Output, Prices: ms.Prices}
	if m.Context == 0 {
		m.Context = DefaultContext
	}
	if m.Output == 0 {
		m.Output = max(1, min(DefaultOutput, m.Context/2))
	}
	if m.Output > m.Context {
		return Model{}, messages.Errorf(messages.ErrInvalid, "%s.output: %d exceeds the context window of %d", field, m.Output, m.Context)
	}
	return m, nil
}

// ParseModelRef parses "provider/model". The provider is everything before
// the first "/", so model IDs may contain slashes ("openrouter/meta/llama"
// is model "meta/llama" of provider "openrouter"). It returns an invalid
// *messages.Error when either part is empty or the reference has white
// space around it.
func ParseModelRef(s string) (messages.ModelRef, error) {
	provider, model, ok := strings.Cut(s, "/")
	switch {
	case !ok || provider == "" || model == "":
		return messages.ModelRef{}, messages.Errorf(messages.ErrInvalid, "model %q: want provider/model", s)
	case strings.TrimSpace(s) != s || strings.TrimSpace(provider) != provider || strings.TrimSpace(model) != model:
		return messages.ModelRef{}, messages.Errorf(messages.ErrInvalid, "model %q: remove the white space around provider and model", s)
	}
	return messages.ModelRef{ProviderID: provider, ID: model}, nil
}

// ResolveString parses ref with ParseModelRef and resolves it.
func (c *Catalog) ResolveString(ref string) (Model, error) {
	r, err := ParseModelRef(ref)
	if err != nil {
		return Model{}, err
	}
	return c.Resolve(r)
}

// Resolve returns the model ref names with its limits and prices. It
// returns a model.not-found *messages.Error whose message says what is wrong
// for an empty reference, an unknown provider, an unknown model (listing
// some of the provider's models) and a provider without credentials. A nil
// Catalog knows no providers.
func (c *Catalog) Resolve(ref messages.ModelRef) (Model, error) {
	if ref == (messages.ModelRef{}) {
		// A Session, its agent and the daemon all left the model unset.
		return Model{}, messages.Errorf(messages.ErrModelNotFound, "no model selected: select one for the Session or its agent, or configure a default model")
	}
	if ref.ProviderID == "" || ref.ID == "" {
		return Model{}, messages.Errorf(messages.ErrModelNotFound, "model %q: want provider/model", ref.String())
	}
	var p catalogProvider
	ok := false
	if c != nil {
		p, ok = c.providers[ref.ProviderID]
	}
	if !ok {
		known := "no providers are configured"
		if c != nil && len(c.ids) > 0 {
			known = "configured providers: " + listed(c.ids)
		}
		return Model{}, messages.Errorf(messages.ErrModelNotFound, "model %q: unknown provider %q (%s)", ref.String(), ref.ProviderID, known)
	}
	if !p.spec.Type.open() && !p.spec.HasCredentials {
		hint := p.spec.CredentialsHint
		if hint == "" {
			hint = "set its apiKey" + envHint(p.spec.Type)
		}
		return Model{}, messages.Errorf(messages.ErrModelNotFound, "model %q: provider %q has no credentials; %s",
			ref.String(), ref.ProviderID, hint)
	}
	if m, ok := p.models[ref.ID]; ok {
		return m, nil
	}
	if p.spec.Type.open() && len(p.models) == 0 {
		// newModel cannot fail for a valid ID with zero limits.
		m, err := newModel("", ref, ModelSpec{})
		m.Family = p.spec.Type
		return m, err
	}
	known := "it has no models configured"
	if len(p.ids) > 0 {
		known = "known models: " + listed(p.ids)
	}
	return Model{}, messages.Errorf(messages.ErrModelNotFound, "model %q: provider %q has no model %q (%s)", ref.String(), ref.ProviderID, ref.ID, known)
}

// envHint names the environment variable that supplies a key for providers
// of type t, if there is one.
func envHint(t ProviderType) string {
	switch t {
	case ProviderOpenAI:
		return " (or OPENAI_API_KEY)"
	case ProviderAnthropic:
		return " (or ANTHROPIC_API_KEY)"
	}
	return ""
}

// Provider returns the spec of provider id, with defaults not applied.
func (c *Catalog) Provider(id string) (ProviderSpec, bool) {
	if c == nil {
		return ProviderSpec{}, false
	}
	p, ok := c.providers[id]
	if !ok {
		return ProviderSpec{}, false
	}
	spec := p.spec
	spec.Models = make(map[string]ModelSpec, len(p.spec.Models))
	for id, m := range p.spec.Models {
		m.HostedTools = slices.Clone(m.HostedTools)
		spec.Models[id] = m
	}
	return spec, true
}

// Providers returns the IDs of all providers, sorted.
func (c *Catalog) Providers() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.ids)
}

// Models returns every configured model with defaults applied, sorted by
// provider and model ID.
func (c *Catalog) Models() []Model {
	if c == nil {
		return nil
	}
	var out []Model
	for _, pid := range c.ids {
		p := c.providers[pid]
		for _, id := range p.ids {
			out = append(out, p.models[id])
		}
	}
	return out
}

// listed quotes up to maxListed of the sorted names and says how many more
// there are.
func listed(names []string) string {
	n := min(len(names), maxListed)
	q := make([]string, n)
	for i, name := range names[:n] {
		q[i] = fmt.Sprintf("%q", name)
	}
	s := strings.Join(q, ", ")
	if len(names) > n {
		s += fmt.Sprintf(" and %d more", len(names)-n)
	}
	return s
}
