package llm_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseModelRef(t *testing.T) {
	tests := []struct {
		in      string
		want    messages.ModelRef
		wantErr string
	}{
		{in: "openai/gpt-4o", want: messages.ModelRef{ProviderID: "openai", ID: "gpt-4o"}},
		{in: "openrouter/meta/llama", want: messages.ModelRef{ProviderID: "openrouter", ID: "meta/llama"}},
		{in: "local/qwen3:8b", want: messages.ModelRef{ProviderID: "local", ID: "qwen3:8b"}},
		{in: "p/a/b/c/", want: messages.ModelRef{ProviderID: "p", ID: "a/b/c/"}},
		{in: "", wantErr: `invalid: model "": want provider/model`},
		{in: "gpt-4o", wantErr: `invalid: model "gpt-4o": want provider/model`},
		{in: "/gpt-4o", wantErr: `invalid: model "/gpt-4o": want provider/model`},
		{in: "openai/", wantErr: `invalid: model "openai/": want provider/model`},
		{in: " openai/gpt-4o", wantErr: `invalid: model " openai/gpt-4o": remove the white space around provider and model`},
		{in: "openai /gpt-4o", wantErr: `invalid: model "openai /gpt-4o": remove the white space around provider and model`},
		{in: "openai/ gpt-4o", wantErr: `invalid: model "openai/ gpt-4o": remove the white space around provider and model`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := llm.ParseModelRef(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %s", err, tt.wantErr)
				}
				if messages.TypeOf(err) != messages.ErrInvalid {
					t.Errorf("type = %s, want invalid", messages.TypeOf(err))
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseModelRef = %+v, %v; want %+v", got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("round trip = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestNewCatalogRejects(t *testing.T) {
	tests := []struct {
		name  string
		specs []llm.ProviderSpec
		want  string
	}{
		{"empty provider ID", []llm.ProviderSpec{{Type: llm.ProviderOpenAI}}, "invalid: providers: a provider has an empty ID"},
		{"slash in provider ID", []llm.ProviderSpec{{ID: "a/b", Type: llm.ProviderOpenAI}}, `invalid: providers.a/b: provider ID "a/b" must not contain "/"`},
		{"space in provider ID", []llm.ProviderSpec{{ID: "a ", Type: llm.ProviderOpenAI}}, `invalid: providers.a : provider ID "a " has surrounding white space`},
		{"duplicate provider", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI}, {ID: "a", Type: llm.ProviderAnthropic}}, "invalid: providers.a: provider defined twice"},
		{"unknown type", []llm.ProviderSpec{{ID: "a", Type: "gemini"}}, `invalid: providers.a.type: unknown provider type "gemini" (want openai, anthropic, script or custom)`},
		{"empty model ID", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"": {}}}}, "invalid: providers.a.models.: a model has an empty ID"},
		{"space in model ID", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{" m": {}}}}, `invalid: providers.a.models. m: model ID " m" has surrounding white space`},
		{"negative context", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {Context: -1}}}}, "invalid: providers.a.models.m.context: -1 is negative"},
		{"negative output", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {Output: -1}}}}, "invalid: providers.a.models.m.output: -1 is negative"},
		{"output beyond context", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {Context: 1000, Output: 2000}}}}, "invalid: providers.a.models.m.output: 2000 exceeds the context window of 1000"},
		{"output beyond default context", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {Output: 200000}}}}, "invalid: providers.a.models.m.output: 200000 exceeds the context window of 128000"},
		{"negative price", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {Prices: llm.Prices{CacheRead: -1}}}}}, "invalid: providers.a.models.m.prices.cacheRead: -1 is not a price"},
		{"NaN price", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {Prices: llm.Prices{Output: math.NaN()}}}}}, "invalid: providers.a.models.m.prices.output: NaN is not a price"},
		{"hosted tool OpenAI lacks", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {HostedTools: []string{"web_search"}}}}}, `invalid: providers.a.models.m.hostedTools[0]: openai providers host no tool "web_search" (they host: none)`},
		{"hosted tool Anthropic lacks", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderAnthropic, Models: map[string]llm.ModelSpec{"m": {HostedTools: []string{"web_search", "code_execution"}}}}}, `invalid: providers.a.models.m.hostedTools[1]: anthropic providers host no tool "code_execution" (they host: "web_search")`},
		{"hosted tool twice", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderScript, Models: map[string]llm.ModelSpec{"m": {HostedTools: []string{"x", "x"}}}}}, `invalid: providers.a.models.m.hostedTools[1]: "x" listed twice`},
		{"empty hosted tool", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderScript, Models: map[string]llm.ModelSpec{"m": {HostedTools: []string{" "}}}}}, `invalid: providers.a.models.m.hostedTools[0]: empty name`},
		{"first invalid model by ID", []llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{
			"z": {Context: -1}, "b": {Output: -1}, "y": {Context: -2}}}}, "invalid: providers.a.models.b.output: -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 5 { // map order must not change which error is reported
				c, err := llm.NewCatalog(tt.specs)
				if err == nil || err.Error() != tt.want {
					t.Fatalf("NewCatalog = %v, %v; want %s", c, err, tt.want)
				}
				if messages.TypeOf(err) != messages.ErrInvalid {
					t.Fatalf("type = %s, want invalid", messages.TypeOf(err))
				}
			}
		})
	}
}

func TestModelDefaults(t *testing.T) {
	prices := llm.Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	tests := []struct {
		name            string
		spec            llm.ModelSpec
		context, output int
	}{
		{"both omitted", llm.ModelSpec{}, llm.DefaultContext, llm.DefaultOutput},
		{"output omitted", llm.ModelSpec{Context: 200000}, 200000, llm.DefaultOutput},
		{"output omitted on a small model", llm.ModelSpec{Context: 4096}, 4096, 2048},
		{"output omitted on a tiny model", llm.ModelSpec{Context: 1}, 1, 1},
		{"context omitted", llm.ModelSpec{Output: 32000}, llm.DefaultContext, 32000},
		{"both given", llm.ModelSpec{Context: 32768, Output: 4096, Prices: prices}, 32768, 4096},
		{"output equal to context", llm.ModelSpec{Context: 1000, Output: 1000}, 1000, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "p", Type: llm.ProviderOpenAI, HasCredentials: true,
				Models: map[string]llm.ModelSpec{"m": tt.spec}}})
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.ResolveString("p/m")
			if err != nil {
				t.Fatal(err)
			}
			want := llm.Model{Ref: messages.ModelRef{ProviderID: "p", ID: "m"}, Family: llm.ProviderOpenAI, Context: tt.context, Output: tt.output, Prices: tt.spec.Prices}
			if !reflect.DeepEqual(m, want) {
				t.Errorf("model = %+v, want %+v", m, want)
			}
		})
	}
}

// testCatalog returns a catalog with one provider of each kind.
func testCatalog(t *testing.T) *llm.Catalog {
	t.Helper()
	many := map[string]llm.ModelSpec{}
	for i := range 15 {
		many[fmt.Sprintf("model-%02d", i)] = llm.ModelSpec{}
	}
	c, err := llm.NewCatalog([]llm.ProviderSpec{
		{ID: "openai", Type: llm.ProviderOpenAI, HasCredentials: true, Models: map[string]llm.ModelSpec{
			"gpt-4o":      {Context: 128000, Output: 16384, Prices: llm.Prices{Input: 2.5, Output: 10}},
			"gpt-4o-mini": {Context: 128000, Output: 16384},
		}},
		{ID: "openrouter", Type: llm.ProviderOpenAI, HasCredentials: true, Models: map[string]llm.ModelSpec{
			"meta/llama": {Context: 65536},
		}},
		{ID: "big", Type: llm.ProviderOpenAI, HasCredentials: true, Models: many},
		{ID: "empty", Type: llm.ProviderOpenAI, HasCredentials: true},
		{ID: "anthropic", Type: llm.ProviderAnthropic, Models: map[string]llm.ModelSpec{"claude": {}}},
		{ID: "nokey", Type: llm.ProviderOpenAI, Models: map[string]llm.ModelSpec{"m": {}}},
		{ID: "demo", Type: llm.ProviderScript},
		{ID: "pinned", Type: llm.ProviderScript, Models: map[string]llm.ModelSpec{"fixed": {Context: 1000, Output: 100}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestResolve(t *testing.T) {
	c := testCatalog(t)
	tests := []struct {
		ref     messages.ModelRef
		want    llm.Model
		wantErr string
	}{
		{ref: messages.ModelRef{ProviderID: "openai", ID: "gpt-4o"},
			want: llm.Model{Ref: messages.ModelRef{ProviderID: "openai", ID: "gpt-4o"}, Family: llm.ProviderOpenAI, Context: 128000, Output: 16384, Prices: llm.Prices{Input: 2.5, Output: 10}}},
		{ref: messages.ModelRef{ProviderID: "openrouter", ID: "meta/llama"},
			want: llm.Model{Ref: messages.ModelRef{ProviderID: "openrouter", ID: "meta/llama"}, Family: llm.ProviderOpenAI, Context: 65536, Output: llm.DefaultOutput}},
		{ref: messages.ModelRef{ProviderID: "demo", ID: "anything/at all"},
			want: llm.Model{Ref: messages.ModelRef{ProviderID: "demo", ID: "anything/at all"}, Family: llm.ProviderScript, Context: llm.DefaultContext, Output: llm.DefaultOutput}},
		{ref: messages.ModelRef{ProviderID: "pinned", ID: "fixed"},
			want: llm.Model{Ref: messages.ModelRef{ProviderID: "pinned", ID: "fixed"}, Family: llm.ProviderScript, Context: 1000, Output: 100}},
		{ref: messages.ModelRef{},
			wantErr: `model.not-found: no model selected: select one for the Session or its agent, or configure a default model`},
		{ref: messages.ModelRef{ProviderID: "openai"},
			wantErr: `model.not-found: model "openai/": want provider/model`},
		{ref: messages.ModelRef{ProviderID: "gemini", ID: "pro"},
			wantErr: `model.not-found: model "gemini/pro": unknown provider "gemini" (configured providers: "anthropic", "big", "demo", "empty", "nokey", "openai", "openrouter", "pinned")`},
		{ref: messages.ModelRef{ProviderID: "openai", ID: "gpt-5"},
			wantErr: `model.not-found: model "openai/gpt-5": provider "openai" has no model "gpt-5" (known models: "gpt-4o", "gpt-4o-mini")`},
		{ref: messages.ModelRef{ProviderID: "big", ID: "model-99"},
			wantErr: `model.not-found: model "big/model-99": provider "big" has no model "model-99" (known models: "model-00", "model-01", "model-02", "model-03", "model-04", "model-05", "model-06", "model-07", "model-08", "model-09" and 5 more)`},
		{ref: messages.ModelRef{ProviderID: "empty", ID: "m"},
			wantErr: `model.not-found: model "empty/m": provider "empty" has no model "m" (it has no models configured)`},
		{ref: messages.ModelRef{ProviderID: "pinned", ID: "other"},
			wantErr: `model.not-found: model "pinned/other": provider "pinned" has no model "other" (known models: "fixed")`},
		{ref: messages.ModelRef{ProviderID: "nokey", ID: "m"},
			wantErr: `model.not-found: model "nokey/m": provider "nokey" has no credentials; set its apiKey (or OPENAI_API_KEY)`},
		{ref: messages.ModelRef{ProviderID: "anthropic", ID: "claude"},
			wantErr: `model.not-found: model "anthropic/claude": provider "anthropic" has no credentials; set its apiKey (or ANTHROPIC_API_KEY)`},
		{ref: messages.ModelRef{ProviderID: "nokey", ID: "unknown"},
			wantErr: `model.not-found: model "nokey/unknown": provider "nokey" has no credentials; set its apiKey (or OPENAI_API_KEY)`},
	}
	for _, tt := range tests {
		t.Run(tt.ref.String(), func(t *testing.T) {
			m, err := c.Resolve(tt.ref)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Resolve = %+v, %v\nwant error %s", m, err, tt.wantErr)
				}
				if !errors.Is(err, &messages.Error{Type: messages.ErrModelNotFound}) {
					t.Errorf("error %v is not model.not-found", err)
				}
				if messages.TypeOf(err).HTTPStatus() != http.StatusBadRequest {
					t.Errorf("status = %d, want 400", messages.TypeOf(err).HTTPStatus())
				}
				return
			}
			if err != nil || !reflect.DeepEqual(m, tt.want) {
				t.Fatalf("Resolve = %+v, %v; want %+v", m, err, tt.want)
			}
			if s, err := c.ResolveString(tt.ref.String()); err != nil || !reflect.DeepEqual(s, m) {
				t.Errorf("ResolveString = %+v, %v; want %+v", s, err, m)
			}
		})
	}
	if _, err := c.ResolveString("gpt-4o"); messages.TypeOf(err) != messages.ErrInvalid {
		t.Errorf("ResolveString without a provider = %v, want invalid", err)
	}
}

func TestEmptyCatalogs(t *testing.T) {
	var nilCatalog *llm.Catalog
	empty, err := llm.NewCatalog(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*llm.Catalog{"nil": nilCatalog, "empty": empty} {
		t.Run(name, func(t *testing.T) {
			_, err := c.ResolveString("openai/gpt-4o")
			want := `model.not-found: model "openai/gpt-4o": unknown provider "openai" (no providers are configured)`
			if err == nil || err.Error() != want {
				t.Errorf("Resolve = %v, want %s", err, want)
			}
			if len(c.Providers()) != 0 || len(c.Models()) != 0 {
				t.Error("an empty catalog lists providers or models")
			}
			if _, ok := c.Provider("openai"); ok {
				t.Error("an empty catalog has a provider")
			}
		})
	}
}

func TestCatalogListings(t *testing.T) {
	c := testCatalog(t)
	if got, want := c.Providers(), []string{"anthropic", "big", "demo", "empty", "nokey", "openai", "openrouter", "pinned"}; !slices.Equal(got, want) {
		t.Errorf("Providers = %v, want %v", got, want)
	}
	var refs []string
	for _, m := range c.Models() {
		refs = append(refs, m.Ref.String())
	}
	if len(refs) != 21 || refs[0] != "anthropic/claude" || refs[1] != "big/model-00" || refs[len(refs)-1] != "pinned/fixed" {
		t.Errorf("Models = %v", refs)
	}
	if !slices.IsSorted(refs) {
		t.Errorf("Models are not sorted: %v", refs)
	}

	spec, ok := c.Provider("openai")
	want := llm.ProviderSpec{ID: "openai", Type: llm.ProviderOpenAI, HasCredentials: true, Models: map[string]llm.ModelSpec{
		"gpt-4o":      {Context: 128000, Output: 16384, Prices: llm.Prices{Input: 2.5, Output: 10}},
		"gpt-4o-mini": {Context: 128000, Output: 16384},
	}}
	if !ok || !reflect.DeepEqual(spec, want) {
		t.Fatalf("Provider = %+v, %v", spec, ok)
	}
	delete(spec.Models, "gpt-4o") // a returned spec is a copy
	if _, err := c.ResolveString("openai/gpt-4o"); err != nil {
		t.Errorf("changing a returned spec changed the catalog: %v", err)
	}
}

func TestCatalogCopiesSpecs(t *testing.T) {
	models := map[string]llm.ModelSpec{"m": {Context: 1000}}
	c, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "p", Type: llm.ProviderOpenAI, HasCredentials: true, Models: models}})
	if err != nil {
		t.Fatal(err)
	}
	models["m"] = llm.ModelSpec{Context: 5}
	models["n"] = llm.ModelSpec{}
	if m, err := c.ResolveString("p/m"); err != nil || m.Context != 1000 {
		t.Errorf("p/m = %+v, %v; want the spec as built", m, err)
	}
	if _, err := c.ResolveString("p/n"); err == nil {
		t.Error("a model added to the caller's map after NewCatalog resolved")
	}
}

// TestHostedToolsResolve: a model's hosted tools reach its resolved Model,
// copied so that the spec's slice is not shared.
func TestHostedToolsResolve(t *testing.T) {
	tools := []string{"web_search"}
	c, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "a", Type: llm.ProviderAnthropic, HasCredentials: true,
		Models: map[string]llm.ModelSpec{"m": {HostedTools: tools}, "plain": {}}}})
	if err != nil {
		t.Fatal(err)
	}
	tools[0] = "changed"
	m, err := c.ResolveString("a/m")
	if err != nil || !slices.Equal(m.HostedTools, []string{"web_search"}) {
		t.Fatalf("resolved %+v, %v", m, err)
	}
	if p, err := c.ResolveString("a/plain"); err != nil || p.HostedTools != nil {
		t.Fatalf("plain model %+v, %v", p, err)
	}
}

// TestCustomProviders: a provider an embedder implements needs no
// credentials, takes any hosted tool name, serves any model ID when it
// lists none and only its own when it does, and its models take the
// generic base prompt's family.
func TestCustomProviders(t *testing.T) {
	c, err := llm.NewCatalog([]llm.ProviderSpec{
		{ID: "mine", Type: llm.ProviderCustom},
		{ID: "pinned", Type: llm.ProviderCustom, Models: map[string]llm.ModelSpec{"m": {Context: 2000, Output: 100, HostedTools: []string{"anything"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Resolve(messages.ModelRef{ProviderID: "mine", ID: "any/model"})
	want := llm.Model{Ref: messages.ModelRef{ProviderID: "mine", ID: "any/model"}, Family: llm.ProviderCustom, Context: llm.DefaultContext, Output: llm.DefaultOutput}
	if err != nil || !reflect.DeepEqual(m, want) {
		t.Fatalf("Resolve = %+v, %v; want %+v", m, err, want)
	}
	m, err = c.Resolve(messages.ModelRef{ProviderID: "pinned", ID: "m"})
	want = llm.Model{Ref: messages.ModelRef{ProviderID: "pinned", ID: "m"}, Family: llm.ProviderCustom, Context: 2000, Output: 100, HostedTools: []string{"anything"}}
	if err != nil || !reflect.DeepEqual(m, want) {
		t.Fatalf("Resolve = %+v, %v; want %+v", m, err, want)
	}
	_, err = c.Resolve(messages.ModelRef{ProviderID: "pinned", ID: "other"})
	if got := fmt.Sprint(err); got != `model.not-found: model "pinned/other": provider "pinned" has no model "other" (known models: "m")` {
		t.Fatalf("an unlisted model: %s", got)
	}
}
