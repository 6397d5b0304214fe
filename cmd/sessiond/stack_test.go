package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// streamOnce sends one request for model to p and returns the first error
// the stream reports, nil when it ends cleanly.
func streamOnce(ctx context.Context, p llm.Provider, model messages.ModelRef) error {
	req := llm.Request{Model: model, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hi"}}}}}
	for _, err := range p.Stream(ctx, req) {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestProvidersFailAStalledResponseAfterTheIdleTimeout: the idleTimeout of
// an openai or anthropic provider reaches its adapter: a server that never
// answers fails the request after the configured second, long before the
// adapter's default of ten minutes.
func TestProvidersFailAStalledResponseAfterTheIdleTimeout(t *testing.T) {
	for _, typ := range []llm.ProviderType{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(string(typ), func(t *testing.T) {
			// The server holds every request until its client gives up or
			// the test ends.
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			defer srv.Close()
			defer close(release)
			s := &stack{cfg: Config{Providers: map[string]ProviderConfig{
				"p": {Type: typ, BaseURL: srv.URL, APIKey: "k", IdleTimeout: 1},
			}}}
			providers, err := s.providers()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = streamOnce(ctx, providers["p"], messages.ModelRef{ProviderID: "p", ID: "m"})
			if err == nil || ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a stalled response ended with %v (context: %v), want an idle timeout", err, ctx.Err())
			}
		})
	}
}

// TestProvidersPriceTheirSteps: an openai or anthropic adapter prices the
// step it finishes from its own provider's models in the catalog.
func TestProvidersPriceTheirSteps(t *testing.T) {
	for _, tt := range []struct {
		typ  llm.ProviderType
		fake *fakeProvider
		base string
	}{
		{llm.ProviderOpenAI, &fakeProvider{path: "/v1/chat/completions", body: openAIStream}, "/v1"},
		{llm.ProviderAnthropic, &fakeProvider{path: "/v1/messages", body: anthropicStream}, ""},
	} {
		t.Run(string(tt.typ), func(t *testing.T) {
			srv := httptest.NewServer(tt.fake)
			defer srv.Close()
			// A provider listed before it has the same model at another
			// price, which must not be the one used.
			cfg := Config{Providers: map[string]ProviderConfig{
				"a": {Type: llm.ProviderScript, File: writeFile(t, t.TempDir(), "s.json", `{"default": {"steps": [{"finish": "stop"}]}}`), Models: map[string]ModelConfig{"m": {Prices: llm.Prices{Input: 1, Output: 1}}}},
				"p": {Type: tt.typ, BaseURL: srv.URL + tt.base, APIKey: "k", Models: map[string]ModelConfig{"m": {Prices: llm.Prices{Input: 1e6, Output: 1e6}}}},
			}}
			s := &stack{cfg: cfg}
			var err error
			if s.catalog, err = llm.NewCatalog(cfg.CatalogSpecs()); err != nil {
				t.Fatal(err)
			}
			providers, err := s.providers()
			if err != nil {
				t.Fatal(err)
			}
			req := llm.Request{Model: messages.ModelRef{ProviderID: "p", ID: "m"}, Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hi"}}}}}
			var cost float64
			for ev, err := range providers["p"].Stream(context.Background(), req) {
				if err != nil {
					t.Fatal(err)
				}
				cost += ev.Cost
			}
			// 12 tokens in and 5 out at a dollar a token.
			if cost != 17 {
				t.Fatalf("cost %v, want 17", cost)
			}
		})
	}
}

// TestDaemonProvidersDoNotRecordRequests: neither a configured script
// provider nor the demo model keeps a copy of the requests it answers,
// since a daemon's record would grow without bound; both still count them.
func TestDaemonProvidersDoNotRecordRequests(t *testing.T) {
	file := writeFile(t, t.TempDir(), "s.json", `{"default": {"steps": [{"text": "fine"}, {"finish": "stop"}]}}`)
	for _, tt := range []struct {
		name string
		s    *stack
		id   string
	}{
		{"script", &stack{cfg: Config{Providers: map[string]ProviderConfig{"s": {Type: llm.ProviderScript, File: file}}}}, "s"},
		{"demo", &stack{demo: true}, demoProvider},
	} {
		t.Run(tt.name, func(t *testing.T) {
			providers, err := tt.s.providers()
			if err != nil {
				t.Fatal(err)
			}
			p, ok := providers[tt.id].(*script.Provider)
			if !ok {
				t.Fatalf("provider %s is %T, want a script provider", tt.id, providers[tt.id])
			}
			_ = streamOnce(context.Background(), p, messages.ModelRef{ProviderID: tt.id, ID: "x"})
			if p.Count() != 1 || len(p.Requests()) != 0 {
				t.Fatalf("after one request: count %d, %d recorded; want 1 and none", p.Count(), len(p.Requests()))
			}
		})
	}
}

// TestAnthropicThinkingReachesTheAdapter: an anthropic provider's
// thinkingBudget or adaptiveThinking is what its requests ask for.
func TestAnthropicThinkingReachesTheAdapter(t *testing.T) {
	for _, tt := range []struct {
		pc   ProviderConfig
		want any
	}{
		{ProviderConfig{}, nil},
		{ProviderConfig{ThinkingBudget: 2048}, map[string]any{"type": "enabled", "budget_tokens": 2048.0}},
		{ProviderConfig{ThinkingBudget: 2048, AdaptiveThinking: true}, map[string]any{"type": "adaptive"}},
	} {
		fake := &fakeProvider{path: "/v1/messages", body: anthropicStream}
		srv := httptest.NewServer(fake)
		pc := tt.pc
		pc.Type, pc.BaseURL, pc.APIKey = llm.ProviderAnthropic, srv.URL, "k"
		providers, err := (&stack{cfg: Config{Providers: map[string]ProviderConfig{"p": pc}}}).providers()
		if err != nil {
			t.Fatal(err)
		}
		err = streamOnce(context.Background(), providers["p"], messages.ModelRef{ProviderID: "p", ID: "m"})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := fake.reqs[0]["thinking"]; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%+v: thinking %v, want %v", tt.pc, got, tt.want)
		}
	}
}

// TestStackObservesStoreFlushes: the daemon's store reports its flushes
// and its log's fdatasyncs to the metrics serve exposes, so that
// sessiond_store_flush_seconds and sessiond_store_fdatasync_seconds count
// what the store did (a store that flushes after every commit here).
func TestStackObservesStoreFlushes(t *testing.T) {
	st, err := openStack(testConfig(t, t.TempDir()), zerolog.Nop(), stackOptions{Metrics: true, flushBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	counts := func() map[string]uint64 {
		families, err := st.registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]uint64{}
		for _, f := range families {
			if ms := f.GetMetric(); len(ms) == 1 && ms[0].GetHistogram() != nil {
				n[f.GetName()] = ms[0].GetHistogram().GetSampleCount()
			}
		}
		return n
	}
	if n := counts(); n["sessiond_store_flush_seconds"] != 0 {
		t.Fatalf("flushes observed before any commit: %v", n)
	}
	// A finished flush is observed when the writer next takes a commit, so
	// commits go on until one is.
	ctx := context.Background()
	for i := 0; counts()["sessiond_store_flush_seconds"] == 0; i++ {
		if i == 1000 {
			t.Fatalf("no flush observed after %d commits: %v", i, counts())
		}
		if _, _, err := st.store.CreateSession(ctx, persistence.CreateSession{Location: messages.Location{Directory: t.TempDir()}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := counts(); n["sessiond_store_fdatasync_seconds"] == 0 {
		t.Errorf("commits made durable without an fdatasync observed: %v", n)
	}
}
