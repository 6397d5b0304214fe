package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/anthropic"
	"github.com/sessiond/sessiond/locations/llm/openai"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// StoreFileName is the name of the store file in the data directory.
const StoreFileName = "sessiond.db"

// ProcessLedgerName is the file in the data directory that lists the run
// tokens of running tool commands (tools.OpenProcessLedger).
const ProcessLedgerName = "tool-processes"

// lockTimeout bounds waiting for the store's file lock. bbolt's lock is what
// keeps two daemons off one data directory; a short wait turns "another
// sessiond has it" into a prompt error instead of a hang.
const lockTimeout = 500 * time.Millisecond

// errDataDirInUse reports that another process holds the store's lock.
var errDataDirInUse = errors.New("data dir is in use by another sessiond")

// stack is one process's runtime: the store, the model catalog and
// provider clients, the permission broker, the live event bus and the actor
// runtime, wired from a Config. serve puts HTTP in front of it; run drives
// it in-process.
type stack struct {
	cfg      Config
	log      zerolog.Logger
	store    *persistence.Bolt
	bus      *actors.Bus
	pending  *tools.Pending
	catalog  *llm.Catalog
	runtime  *actors.Runtime
	metrics  *actors.Metrics
	registry *prometheus.Registry
	// demo is true when no provider is configured and the embedded demo
	// model serves every Session.
	demo bool
	// defaultModel is the model of Sessions and agents that select none;
	// zero when the configuration names none.
	defaultModel messages.ModelRef
}

// stackOptions are the parts of a stack that differ between serve and run.
type stackOptions struct {
	// Metrics turns on Prometheus metrics (serve exposes them).
	Metrics bool
	// flushBytes, when positive, replaces the store's FlushBytes: tests
	// flush after a few commits instead of 8 MiB of them.
	flushBytes int64
}

// withRepairHint adds to an error of opening the store in data, when its
// write-ahead log or database file is damaged, what deals with that.
func withRepairHint(err error, data string) error {
	if d := (*persistence.WALDamage)(nil); errors.As(err, &d) && d.Missing {
		return fmt.Errorf("%w\nput the missing file back if there is a copy of it; 'sessiond repair --data %s --force' opens the store without it", err, data)
	} else if d != nil && d.Short > 0 {
		return fmt.Errorf("%w\nput the whole file back if there is a copy of it; 'sessiond repair --data %s --force' opens the store with the records it still holds", err, data)
	}
	if errors.Is(err, persistence.ErrWALDamaged) {
		return fmt.Errorf("%w\n'sessiond repair --data %s' reports the damage, and with --force drops it and every commit after it", err, data)
	}
	if errors.Is(err, persistence.ErrCorrupt) {
		return fmt.Errorf("%w\nbbolt cannot read the database file: restore the data directory from a copy taken while no daemon ran", err)
	}
	return err
}

// openStack opens the store in cfg.Data and starts a runtime on it. The
// caller must call close. On error nothing is left open.
func openStack(cfg Config, log zerolog.Logger, opts stackOptions) (_ *stack, err error) {
	s := &stack{cfg: cfg, log: log, demo: cfg.UsesDemo(), bus: actors.NewBus()}

	specs := cfg.CatalogSpecs()
	if s.demo {
		specs = append(specs, llm.ProviderSpec{ID: demoProvider, Type: llm.ProviderScript})
	}
	if s.catalog, err = llm.NewCatalog(specs); err != nil {
		return nil, err
	}
	providers, err := s.providers()
	if err != nil {
		return nil, err
	}
	model := cfg.Model
	if model == "" && s.demo {
		model = demoProvider + "/" + demoModel
	}
	if model != "" {
		if s.defaultModel, err = llm.ParseModelRef(model); err != nil {
			return nil, err
		}
	}
	agents, rules, err := agentsOf(cfg)
	if err != nil {
		return nil, err
	}

	if opts.Metrics {
		s.registry = prometheus.NewRegistry()
		s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		s.metrics = actors.NewMetrics(s.registry)
	}

	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	popts := persistence.Options{
		PromptBytes:  cfg.Limits.PromptBytes,
		InboxBacklog: cfg.Limits.InboxBacklog,
		Timeout:      lockTimeout,
		Logger:       s.log,
		FlushBytes:   opts.flushBytes,
	}
	if s.metrics != nil {
		popts.OnCommit, popts.OnSync, popts.OnFlush, popts.OnNoRoom = s.metrics.Commit, s.metrics.Synced, s.metrics.Flushed, s.metrics.RefusedNoRoom
	}
	s.store, err = persistence.Open(filepath.Join(cfg.Data, StoreFileName), popts)
	if errors.Is(err, persistence.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is locked; stop the other sessiond, or talk to it with the client commands (sessiond prompt, sessiond log)",
			errDataDirInUse, filepath.Join(cfg.Data, StoreFileName))
	}
	if err != nil {
		return nil, withRepairHint(err, cfg.Data)
	}
	defer func() {
		if err != nil {
			_ = s.store.Close()
		}
	}()
	// With the data dir to itself (its store is locked), this process
	// kills what the tool commands of one that died without its graceful
	// stop left running, before anything runs again.
	ledger, killed, err := tools.OpenProcessLedger(filepath.Join(cfg.Data, ProcessLedgerName))
	if err != nil {
		return nil, err
	}
	if killed > 0 {
		s.log.Warn().Int("processes", killed).Msg("killed the processes tool commands of a previous run left running")
	}

	ids := messages.NewIDs(nil, nil)
	s.pending = tools.NewPending(tools.PendingConfig{
		OnAsked:   func(p *messages.PermissionAsked) { s.publishLive(ids, p) },
		OnReplied: func(p *messages.PermissionReplied) { s.publishLive(ids, p) },
	})

	bash := tools.DefaultBashConfig()
	bash.Ledger = ledger
	bash.Env = commandEnv(os.Environ(), cfg.Token)
	home, _ := os.UserHomeDir() // no home only means no global AGENTS.md fallback
	builder := locations.NewBuilder(locations.BuildConfig{
		Catalog:      s.catalog,
		Providers:    providers,
		DefaultModel: s.defaultModel,
		Agents:       agents,
		Rules:        rules,
		Approvals:    locations.NewApprovals(s.store),
		Asker:        s.pending,
		Builtins: tools.BuiltinConfig{
			Read:       tools.DefaultReadConfig(),
			Bash:       bash,
			ApplyPatch: tools.DefaultApplyPatchConfig(),
		},
		Instructions: &locations.InstructionsConfig{Getenv: os.Getenv, Home: home, Clock: time.Now},
		Roots:        cfg.Roots,
	})
	s.runtime, err = actors.New(actors.Config{
		Store:            s.store,
		Locations:        locations.NewManager(builder),
		IDs:              ids,
		Logger:           log,
		Metrics:          s.metrics,
		Bus:              s.bus,
		SteerBatch:       cfg.Limits.SteerBatch,
		AutoCompact:      cfg.Compaction.Auto == nil || *cfg.Compaction.Auto,
		CompactionBuffer: cfg.Compaction.Buffer,
		KeepTokens:       cfg.Compaction.Keep,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// publishLive puts a live-only payload on the bus.
func (s *stack) publishLive(ids *messages.IDs, p messages.Payload) {
	s.bus.Publish(messages.Event{ID: ids.Event(), Created: time.Now().UnixMilli(), Type: p.Type(), Data: p})
}

// close stops the runtime (interrupting active Sessions with reason
// shutdown), withdraws questions nobody answered, and closes the store, in
// that order.
func (s *stack) close(ctx context.Context) error {
	err := s.runtime.Shutdown(ctx)
	s.pending.CancelAll()
	return errors.Join(err, s.store.Close())
}

// providers builds the client of every configured provider, plus the demo
// model when none is configured.
func (s *stack) providers() (map[string]llm.Provider, error) {
	out := make(map[string]llm.Provider, len(s.cfg.Providers)+1)
	if s.demo {
		p, err := script.Parse(demoScript)
		if err != nil {
			return nil, fmt.Errorf("embedded demo script: %w", err)
		}
		out[demoProvider] = p.SetRecord(false)
	}
	for _, id := range slices.Sorted(maps.Keys(s.cfg.Providers)) {
		pc := s.cfg.Providers[id]
		prices := s.prices(id)
		var (
			p   llm.Provider
			err error
		)
		switch pc.Type {
		case llm.ProviderOpenAI:
			p, err = openai.New(openai.Config{BaseURL: pc.BaseURL, APIKey: pc.APIKey, Prices: prices, IdleTimeout: pc.idle()})
		case llm.ProviderAnthropic:
			p, err = anthropic.New(anthropic.Config{BaseURL: pc.BaseURL, APIKey: pc.APIKey, Prices: prices, IdleTimeout: pc.idle(),
				ThinkingBudget: pc.ThinkingBudget, AdaptiveThinking: pc.AdaptiveThinking})
		case llm.ProviderScript:
			var sp *script.Provider
			if sp, err = script.Load(pc.File); err == nil {
				p = sp.SetRecord(false) // a daemon must not keep every request
			}
		default:
			err = fmt.Errorf("unknown type %q", pc.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("providers.%s: %w", id, err)
		}
		out[id] = p
	}
	return out, nil
}

// prices returns the price lookup of provider id's models, from the catalog.
func (s *stack) prices(id string) func(string) (llm.Prices, bool) {
	return func(model string) (llm.Prices, bool) {
		m, err := s.catalog.Resolve(messages.ModelRef{ProviderID: id, ID: model})
		if err != nil {
			return llm.Prices{}, false
		}
		return m.Prices, true
	}
}

// agentsOf converts the configured agents and their permission rules.
func agentsOf(cfg Config) (map[string]locations.Agent, map[string]tools.Ruleset, error) {
	agents := make(map[string]locations.Agent, len(cfg.Agents))
	rules := make(map[string]tools.Ruleset, len(cfg.Agents))
	for name, ac := range cfg.Agents {
		a := locations.Agent{Name: name, Prompt: ac.Prompt, Steps: ac.Steps}
		if ac.Model != "" {
			ref, err := llm.ParseModelRef(ac.Model)
			if err != nil {
				return nil, nil, fmt.Errorf("agents.%s.model: %w", name, err)
			}
			a.Model = ref
		}
		rs := make(tools.Ruleset, len(ac.Permission))
		for i, r := range ac.Permission {
			rs[i] = tools.Rule{Permission: r.Permission, Pattern: r.Pattern, Action: tools.Action(r.Action)}
		}
		if err := rs.Validate(); err != nil {
			return nil, nil, fmt.Errorf("agents.%s.permission: %w", name, err)
		}
		agents[name], rules[name] = a, rs
	}
	return agents, rules, nil
}

// commandEnv returns the environment of tool commands: the daemon's,
// without its bearer token: SESSIOND_TOKEN, and any other variable that
// holds the token (the one a "{env:NAME}" token in the configuration
// names, or one --token "$VAR" was given from). A command has no use for
// it, `env` would put it in the transcript (and so in the provider's
// hands), and with it a command could answer its own permission questions
// through the API. Commands are not sandboxed (SEED.md), so this keeps the
// token out of their way, not out of their reach: a configuration file
// that holds it stays readable to them.
func commandEnv(environ []string, token string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(e string) bool {
		name, value, _ := strings.Cut(e, "=")
		return name == "SESSIOND_TOKEN" || (token != "" && value == token)
	})
}
