package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tailscale/hujson"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools"
)

// ConfigFileName is the name of the configuration file LoadConfig looks for
// in the data directory when no path is given.
const ConfigFileName = "sessiond.json"

// Config is the daemon configuration of DESIGN.md §8. It is read from a JSON
// file with comments and trailing commas, then overridden by environment
// variables (see LoadConfig). The zero value of every number and string
// means "the default"; validate fills the defaults in.
type Config struct {
	// Addr is the HTTP listen address, host:port. Port 0 picks a free port.
	Addr string `json:"addr"`
	// Data is the data directory: the store and the default sessiond.json.
	// A relative path in a config file is relative to the file's directory.
	Data string `json:"data"`
	// Token, when set, is the bearer token that every route but /api/health
	// and /metrics requires. It may be "{env:NAME}"; NAME unset or empty is
	// an error unless SESSIOND_TOKEN replaces the token.
	Token string `json:"token"`
	// Roots limits the directories Sessions may use as Locations; empty
	// allows every directory. Each root must be absolute after a config
	// file's relative roots are resolved against the file's directory.
	Roots []string `json:"roots"`
	// CORS lists the origins (scheme://host[:port], or "*") allowed to call
	// the API from a browser; empty turns CORS off.
	CORS []string `json:"cors"`
	// Providers maps provider IDs, the part before "/" of a model
	// reference, to their configuration.
	Providers map[string]ProviderConfig `json:"providers"`
	// Model is the default model, "provider/model". When empty, validate
	// picks the first model (by provider and model ID) of the first usable
	// provider that lists models. With no providers at all the embedded
	// demo provider is used, and Model may only name provider "demo".
	Model string `json:"model"`
	// Agents maps agent names to their configuration. Agent "build" always
	// exists: validate adds the default one when the file does not define
	// it.
	Agents map[string]AgentConfig `json:"agents"`
	// Compaction configures automatic context compaction.
	Compaction CompactionConfig `json:"compaction"`
	// Limits bounds what clients may send.
	Limits LimitsConfig `json:"limits"`
}

// ProviderConfig configures one model provider.
type ProviderConfig struct {
	// Type selects the adapter: openai (any OpenAI-compatible Chat
	// Completions endpoint), anthropic or script.
	Type llm.ProviderType `json:"type"`
	// BaseURL overrides the API endpoint of an openai or anthropic
	// provider, such as http://127.0.0.1:11434/v1 for a local Ollama.
	BaseURL string `json:"baseURL"`
	// APIKey authenticates an openai or anthropic provider. "{env:NAME}"
	// reads environment variable NAME. Any non-empty value counts as a
	// credential, so a local server that needs none may use "none".
	APIKey string `json:"apiKey"`
	// IdleTimeout is how many seconds an openai or anthropic response may
	// go without a byte (before its headers, or within its stream) before
	// the request fails as a transport error, which the runner retries like
	// one. 0 takes 600; -1 waits forever. A slow local server that
	// processes a long prompt before its first token may need more.
	IdleTimeout int `json:"idleTimeout"`
	// ThinkingBudget enables an anthropic provider's extended thinking with
	// this many budget tokens (at least 1024, and below a request's output
	// limit, else thinking stays off); 0 leaves it off.
	ThinkingBudget int `json:"thinkingBudget"`
	// AdaptiveThinking enables an anthropic provider's adaptive thinking,
	// for the models that have it (the model decides how much to think); it
	// takes precedence over ThinkingBudget.
	AdaptiveThinking bool `json:"adaptiveThinking"`
	// File is the JSON script of a script provider. A relative path in a
	// config file is relative to the file's directory.
	File string `json:"file"`
	// Models maps model IDs (which may contain "/") to their limits and
	// prices. A script provider without models accepts any model ID.
	Models map[string]ModelConfig `json:"models"`

	// keyEnv is the variable an "{env:NAME}" apiKey read, when it was
	// unset or empty: what a request of the provider then needs set.
	keyEnv string
}

// ModelConfig describes one model of a provider.
type ModelConfig struct {
	// Context is the context window in tokens; 0 takes llm.DefaultContext.
	Context int `json:"context"`
	// Output is the output limit in tokens; 0 takes llm.DefaultOutput,
	// capped at half the context window.
	Output int `json:"output"`
	// Prices are USD per million tokens.
	Prices llm.Prices `json:"prices"`
	// HostedTools names provider-hosted tools to enable on every request
	// ("web_search" on Anthropic).
	HostedTools []string `json:"hostedTools"`
}

// AgentConfig configures one agent.
type AgentConfig struct {
	// Prompt replaces the base system text a request starts with (by
	// default the selected model's provider-family baseline).
	Prompt string `json:"prompt"`
	// Model overrides Config.Model for the agent's Sessions.
	Model string `json:"model"`
	// Steps is the number of model steps one prompt may take; 0 takes the
	// default of 50.
	Steps int `json:"steps"`
	// Permission lists the agent's permission rules; the last matching rule
	// wins, and a request no rule matches is asked. When the list is absent
	// (nil) validate fills the default rules, which allow read and ask for
	// everything else; an explicit empty list asks for everything.
	Permission []Rule `json:"permission"`
}

// Rule is one permission rule: requests whose permission and pattern match
// the wildcards Permission and Pattern get Action.
type Rule struct {
	// Permission is a wildcard over permission names such as read, bash or
	// external_directory.
	Permission string `json:"permission"`
	// Pattern is a wildcard over the request's pattern (a path, a command);
	// empty means "*".
	Pattern string `json:"pattern"`
	// Action is allow, deny or ask.
	Action string `json:"action"`
}

// CompactionConfig configures automatic context compaction.
type CompactionConfig struct {
	// Auto turns automatic compaction on; nil means true.
	Auto *bool `json:"auto"`
	// Buffer is the number of tokens kept free below the context window;
	// compaction starts when a step would leave less. 0 takes 20000, or a
	// quarter of the model's window when that is less.
	Buffer int `json:"buffer"`
	// Keep is the number of tokens of recent context kept after the
	// summary, at most a quarter of the model's window; a tool output in
	// it is cut to half of it. 0 takes 8000.
	Keep int `json:"keep"`
}

// LimitsConfig bounds what clients may send. 0 takes the default of each.
type LimitsConfig struct {
	// InboxBacklog is how many admitted prompts may wait per Session
	// (default 1000); more are refused with inbox.full.
	InboxBacklog int `json:"inboxBacklog"`
	// SteerBatch is how many steering prompts one step takes in at once
	// (default 32).
	SteerBatch int `json:"steerBatch"`
	// PromptBytes is the largest prompt text, in bytes (default 1 MiB).
	PromptBytes int `json:"promptBytes"`
	// BodyBytes is the largest HTTP request body, in bytes (default 2 MiB).
	// It must be at least PromptBytes.
	BodyBytes int `json:"bodyBytes"`
}

// DefaultConfig returns the built-in configuration, with the data directory
// taken from $SESSIOND_DATA, else $XDG_DATA_HOME/sessiond, else
// ~/.local/share/sessiond.
func DefaultConfig() Config {
	return defaultConfig(os.Getenv, os.UserHomeDir)
}

// defaultConfig is DefaultConfig with the environment and the home
// directory as inputs.
func defaultConfig(env func(string) string, home func() (string, error)) Config {
	c := builtinConfig()
	c.Data = defaultDataDir(env, home)
	return c
}

// builtinConfig returns the defaults that do not depend on the environment.
// validate fills zero fields from it.
func builtinConfig() Config {
	auto := true
	return Config{
		Addr:       "127.0.0.1:4096",
		Agents:     map[string]AgentConfig{"build": defaultAgent()},
		Compaction: CompactionConfig{Auto: &auto, Keep: 8000}, // Buffer 0: per model (actors.Config)
		Limits: LimitsConfig{
			InboxBacklog: 1000,
			SteerBatch:   32,
			PromptBytes:  1 << 20,
			BodyBytes:    2 << 20,
		},
	}
}

// defaultAgent returns the default "build" agent.
func defaultAgent() AgentConfig {
	return AgentConfig{Steps: 50, Permission: defaultRules()}
}

// defaultRules returns the rules of an agent that sets none: ask for
// everything, but allow read.
func defaultRules() []Rule {
	return []Rule{
		{Permission: "*", Pattern: "*", Action: "ask"},
		{Permission: "read", Pattern: "*", Action: "allow"},
	}
}

// defaultDataDir resolves the data directory: $SESSIOND_DATA, else
// $XDG_DATA_HOME/sessiond (only when absolute, as the XDG spec requires),
// else <home>/.local/share/sessiond. It returns "" when none is known.
func defaultDataDir(env func(string) string, home func() (string, error)) string {
	if d := env("SESSIOND_DATA"); d != "" {
		return d
	}
	if x := env("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "sessiond")
	}
	h, err := home()
	if err != nil || h == "" {
		return ""
	}
	return filepath.Join(h, ".local", "share", "sessiond")
}

// envHome looks the home directory up through env the way os.UserHomeDir
// does, so LoadConfig reads no process state besides files.
func envHome(env func(string) string) func() (string, error) {
	return func() (string, error) {
		name := "HOME"
		switch runtime.GOOS {
		case "windows":
			name = "USERPROFILE"
		case "plan9":
			name = "home"
		}
		if h := env(name); h != "" {
			return h, nil
		}
		return "", fmt.Errorf("$%s is not set", name)
	}
}

// LoadConfig reads the configuration. With an empty path it reads
// <data>/sessiond.json when that file exists and uses the defaults
// otherwise. The file is JSON with comments and trailing commas; unknown
// and duplicate keys are errors. Then env (nil means os.Getenv) overrides:
// SESSIOND_ADDR, SESSIOND_DATA and SESSIOND_TOKEN replace addr, data and
// token; OPENAI_BASE_URL and OPENAI_API_KEY fill baseURL and apiKey of the
// openai providers that leave them empty, ANTHROPIC_API_KEY the apiKey of
// the anthropic providers; and when no provider of a type is configured but
// its key is set, a provider "openai" or "anthropic" with that key and no
// models is added. A command-line flag can take precedence over both by
// wrapping env. A token "{env:NAME}" with NAME unset or empty, and no
// SESSIOND_TOKEN, is an error: it would turn authentication off.
//
// Configuration errors are invalid *messages.Error values naming the field,
// such as "providers.local.type: ...", wrapped with the file's path when a
// file was read. An error in a value taken from a variable names the
// variable instead ("SESSIOND_ADDR: ...") and is not wrapped with the path:
// the file is not at fault. One in the value a "{env:NAME}" of the file
// read names the field, the reference and the variable, with the path.
func LoadConfig(path string, env func(string) string) (Config, error) {
	return loadConfig(path, env, loadOptions{})
}

// loadOptions adapt loadConfig to a command.
type loadOptions struct {
	// source names, for errors, where the value env returns for a
	// variable came from when not from the variable itself: the flag
	// that stands in for it (--token for SESSIOND_TOKEN). Nil, or "",
	// names the variable.
	source func(name string) string
	// listen requires addr to be an address to listen on, not a URL, as
	// the daemon's is.
	listen bool
}

// name returns the name errors give the source of variable v's value.
func (o loadOptions) name(v string) string {
	if o.source != nil {
		if s := o.source(v); s != "" {
			return s
		}
	}
	return v
}

// envError is a configuration error in a value that came from the
// environment (or from a flag standing in for a variable), not from the
// file: its message names the variable, and loadConfig does not wrap it
// with the file's path.
type envError struct{ err error }

func (e *envError) Error() string { return e.err.Error() }
func (e *envError) Unwrap() error { return e.err }

// loadConfig is LoadConfig with the options of a command.
func loadConfig(path string, env func(string) string, o loadOptions) (Config, error) {
	if env == nil {
		env = os.Getenv
	}
	c := defaultConfig(env, envHome(env))
	explicit := path != ""
	if !explicit && c.Data != "" {
		path = filepath.Join(c.Data, ConfigFileName)
	}
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			dir, err := filepath.Abs(filepath.Dir(path))
			if err != nil {
				return Config{}, fmt.Errorf("config %s: %w", path, err)
			}
			if c, err = decodeConfig(c, data, dir); err != nil {
				return Config{}, fmt.Errorf("config %s: %w", path, err)
			}
		case !explicit && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
			// No file; ENOTDIR: the data directory is a file (or lies
			// under one), which is the data directory's problem, and
			// opening the store says so, not a configuration file the
			// user never named.
			path = ""
		default:
			return Config{}, fmt.Errorf("config: %w", err)
		}
	}
	err := c.applyEnv(env, o)
	if err == nil {
		err = c.validate()
	}
	if err == nil && o.listen {
		// The file's or the default: applyEnv checked the environment's.
		err = checkListen("addr", c.Addr)
	}
	var ee *envError
	switch {
	case err == nil:
		return c, nil
	case path != "" && !errors.As(err, &ee):
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	default:
		return Config{}, err
	}
}

// utf8BOM is the UTF-8 byte-order mark.
var utf8BOM = []byte("\xef\xbb\xbf")

// decodeConfig decodes the HuJSON document data over base. Relative paths
// in the document are resolved against dir. It does not apply the
// environment or validate.
func decodeConfig(base Config, data []byte, dir string) (Config, error) {
	// hujson.Parse aliases its input and Standardize rewrites comments in
	// place; work on a copy so the caller's bytes stay intact.
	src := bytes.Clone(data)
	if bytes.HasPrefix(src, utf8BOM) {
		// Editors on Windows start UTF-8 files with a byte-order mark,
		// which JSON does not allow; spaces keep every offset.
		copy(src, "   ")
	}
	ast, err := hujson.Parse(src)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "hujson: ")
		return Config{}, messages.Errorf(messages.ErrInvalid, "syntax error: %s", msg)
	}
	if err := checkShape(data, &ast, reflect.TypeFor[Config](), ""); err != nil {
		return Config{}, err
	}
	// Standardize replaces comments and trailing commas with spaces, so
	// byte offsets, and with them line and column numbers, stay the same.
	ast.Standardize()
	std := ast.Pack()

	c := base
	c.Data = "" // tell a data directory from the file apart from the default
	dec := json.NewDecoder(bytes.NewReader(std))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		// checkShape admits only documents that decode; this reports what
		// it might miss.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			line, col := lineColumn(std, int(te.Offset))
			return Config{}, fieldErrorf(te.Field, "cannot use JSON %s as %s (line %d, column %d)", te.Value, te.Type, line, col)
		}
		return Config{}, messages.Errorf(messages.ErrInvalid, "%v", err)
	}
	// {env:NAME} is expanded in apiKey and token only; elsewhere it would
	// be taken as it stands (a data directory named "{env:NAME}").
	if err := noEnvRef("data", c.Data); err != nil {
		return Config{}, err
	}
	if err := noEnvRef("addr", c.Addr); err != nil {
		return Config{}, err
	}
	for i, r := range c.Roots {
		if err := noEnvRef(fmt.Sprintf("roots[%d]", i), r); err != nil {
			return Config{}, err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Providers)) {
		if err := noEnvRef("providers."+id+".file", c.Providers[id].File); err != nil {
			return Config{}, err
		}
	}
	if c.Data == "" {
		c.Data = base.Data
	} else {
		c.Data = resolvePath(dir, c.Data)
	}
	for i, r := range c.Roots {
		c.Roots[i] = resolvePath(dir, r)
	}
	for id, p := range c.Providers {
		if p.File != "" {
			p.File = resolvePath(dir, p.File)
			c.Providers[id] = p
		}
	}
	return c, nil
}

// noEnvRef refuses an "{env:NAME}" reference in a field that does not
// expand it.
func noEnvRef(field, v string) error {
	if strings.Contains(v, "{env:") {
		return fieldErrorf(field, "%q: {env:NAME} is read only in apiKey and token", v)
	}
	return nil
}

// resolvePath makes a non-empty relative path p relative to dir.
func resolvePath(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// applyEnv applies the environment overrides described at LoadConfig and
// expands "{env:NAME}" in token and apiKey values. It checks every value
// it takes from a variable as it takes it, with the check validate would
// make: validate can only name the field, and the error would blame the
// file. A variable's own value fails with an *envError naming the
// variable (or the flag that stood in for it, see loadOptions); a value a
// reference of the file read names the field and the variable.
func (c *Config) applyEnv(env func(string) string, o loadOptions) error {
	// fromEnv checks variable name's value under the name of its source.
	fromEnv := func(name string, check func(field, v string) error) error {
		if err := check(o.name(name), env(name)); err != nil {
			return &envError{err}
		}
		return nil
	}
	// Read by each Location's instruction discovery, which takes a value
	// it cannot parse for false: a "yes" would leave project AGENTS.md
	// files in force without a word.
	for _, name := range []string{locations.EnvDisableProjectConfig, locations.EnvDisableProjectConfigSEED} {
		if err := fromEnv(name, func(field, v string) error {
			if _, err := strconv.ParseBool(v); v != "" && err != nil {
				return fieldErrorf(field, "%q: want true or false (or 1, 0)", v)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	if v := env("SESSIOND_ADDR"); v != "" {
		check := checkAddr
		if o.listen {
			check = checkListen
		}
		if err := fromEnv("SESSIOND_ADDR", check); err != nil {
			return err
		}
		c.Addr = v
	}
	if v := env("SESSIOND_DATA"); v != "" {
		c.Data = v
	}
	token, name, err := expandEnvRef("token", c.Token, env)
	switch {
	case err != nil:
		return err
	case env("SESSIOND_TOKEN") != "":
		if err := fromEnv("SESSIOND_TOKEN", checkToken); err != nil {
			return err
		}
		token = env("SESSIOND_TOKEN")
	case name != "" && token == "":
		// An empty token turns authentication off: a file that asks for
		// a token must not start an open daemon (or a client that sends
		// none) because the variable is missing. An empty apiKey, by
		// contrast, fails on its own at the first request.
		return fieldErrorf("token", "%q: environment variable %s is unset or empty; an empty token would turn authentication off", c.Token, name)
	case name != "":
		if err := checkToken(refField("token", c.Token, name), token); err != nil {
			return err
		}
	}
	c.Token = token

	openaiBase, openaiKey, anthropicKey := env("OPENAI_BASE_URL"), env("OPENAI_API_KEY"), env("ANTHROPIC_API_KEY")
	haveOpenAI, haveAnthropic := false, false
	for _, id := range slices.Sorted(maps.Keys(c.Providers)) {
		p := c.Providers[id]
		field := "providers." + id + ".apiKey"
		ref, set := p.APIKey, p.APIKey != ""
		if p.APIKey, name, err = expandEnvRef(field, p.APIKey, env); err != nil {
			return err
		}
		switch p.Type {
		case llm.ProviderOpenAI, llm.ProviderAnthropic:
			// Only these take a key: a script provider's is an error
			// of the file, which validate reports as such.
			if name != "" {
				if err := checkKey(refField(field, ref, name), p.APIKey); err != nil {
					return err
				}
				if p.APIKey == "" {
					p.keyEnv = name
				}
			}
		}
		switch p.Type {
		case llm.ProviderOpenAI:
			haveOpenAI = true
			if p.BaseURL == "" && openaiBase != "" {
				if err := fromEnv("OPENAI_BASE_URL", checkBaseURL); err != nil {
					return err
				}
				p.BaseURL = openaiBase
			}
			if !set && openaiKey != "" {
				if err := fromEnv("OPENAI_API_KEY", checkKey); err != nil {
					return err
				}
				p.APIKey = openaiKey
			}
		case llm.ProviderAnthropic:
			haveAnthropic = true
			if !set && anthropicKey != "" {
				if err := fromEnv("ANTHROPIC_API_KEY", checkKey); err != nil {
					return err
				}
				p.APIKey = anthropicKey
			}
		}
		c.Providers[id] = p
	}
	// A provider of another type that has the name is kept, and the
	// variables go unused.
	free := func(id string) bool {
		_, taken := c.Providers[id]
		return !taken
	}
	add := func(id string, p ProviderConfig) {
		if c.Providers == nil {
			c.Providers = make(map[string]ProviderConfig)
		}
		c.Providers[id] = p
	}
	if !haveOpenAI && openaiKey != "" && free("openai") {
		if err := fromEnv("OPENAI_API_KEY", checkKey); err != nil {
			return err
		}
		p := ProviderConfig{Type: llm.ProviderOpenAI, BaseURL: openaiBase, APIKey: openaiKey}
		if openaiBase == "" {
			// OpenAI's own API: its models are known. Another server's
			// (OPENAI_BASE_URL) are not, and need a configuration.
			p.Models, _ = keyModels(llm.ProviderOpenAI)
		} else if err := fromEnv("OPENAI_BASE_URL", checkBaseURL); err != nil {
			return err
		}
		add("openai", p)
	}
	if !haveAnthropic && anthropicKey != "" && free("anthropic") {
		if err := fromEnv("ANTHROPIC_API_KEY", checkKey); err != nil {
			return err
		}
		p := ProviderConfig{Type: llm.ProviderAnthropic, APIKey: anthropicKey}
		p.Models, _ = keyModels(llm.ProviderAnthropic)
		add("anthropic", p)
	}
	return nil
}

// refField names, for errors, the value that reference ref
// ("{env:NAME}") in field read from variable name.
func refField(field, ref, name string) string {
	return fmt.Sprintf("%s: %q: environment variable %s", field, ref, name)
}

// sameLimits reports whether a and b have the same limits and prices.
func sameLimits(a, b ModelConfig) bool {
	return a.Context == b.Context && a.Output == b.Output && a.Prices == b.Prices && len(a.HostedTools) == len(b.HostedTools)
}

// keyModels returns the models of a provider that an API key alone adds
// (no configuration names a provider of its type), and the one to use by
// default, so that a key is all it takes to run. Limits and prices (USD
// per million tokens) are the providers' published ones; a configuration
// that lists models replaces these.
func keyModels(t llm.ProviderType) (map[string]ModelConfig, string) {
	switch t {
	case llm.ProviderAnthropic:
		return map[string]ModelConfig{
			"claude-sonnet-4-5": {Context: 200000, Output: 64000, Prices: llm.Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
			"claude-haiku-4-5":  {Context: 200000, Output: 64000, Prices: llm.Prices{Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25}},
			"claude-opus-4-1":   {Context: 200000, Output: 32000, Prices: llm.Prices{Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75}},
		}, "claude-sonnet-4-5"
	case llm.ProviderOpenAI:
		return map[string]ModelConfig{
			"gpt-5":      {Context: 400000, Output: 128000, Prices: llm.Prices{Input: 1.25, Output: 10, CacheRead: 0.125}},
			"gpt-5-mini": {Context: 400000, Output: 128000, Prices: llm.Prices{Input: 0.25, Output: 2, CacheRead: 0.025}},
			"gpt-4.1":    {Context: 1047576, Output: 32768, Prices: llm.Prices{Input: 2, Output: 8, CacheRead: 0.5}},
		}, "gpt-5"
	}
	return nil, ""
}

// expandEnvRef returns env(NAME) and NAME for a value of the form
// "{env:NAME}", and the value itself and "" otherwise. field names the
// value in errors.
func expandEnvRef(field, v string, env func(string) string) (value, name string, err error) {
	rest, ok := strings.CutPrefix(v, "{env:")
	if !ok {
		return v, "", nil
	}
	name, ok = strings.CutSuffix(rest, "}")
	switch {
	case !ok:
		return "", "", fieldErrorf(field, "%q lacks the closing \"}\" of {env:NAME}", v)
	case name == "" || strings.ContainsAny(name, "{}= \t\r\n"):
		return "", "", fieldErrorf(field, "%q does not name an environment variable; want {env:NAME}", v)
	}
	return env(name), name, nil
}

// validate checks c and fills its defaults. It returns an invalid
// *messages.Error naming the first offending field, checking fields in a
// fixed order. Running it again on its result changes nothing.
func (c *Config) validate() error {
	d := builtinConfig()
	if c.Addr == "" {
		c.Addr = d.Addr
	}
	if err := checkAddr("addr", c.Addr); err != nil {
		return err
	}
	if c.Data == "" {
		return errNoDataDir
	}
	if err := checkToken("token", c.Token); err != nil {
		return err
	}
	for i, r := range c.Roots {
		field := fmt.Sprintf("roots[%d]", i)
		switch {
		case r == "":
			return fieldErrorf(field, "empty path")
		case !filepath.IsAbs(r):
			return fieldErrorf(field, "%q is not an absolute path", r)
		}
		c.Roots[i] = filepath.Clean(r)
	}
	for i, o := range c.CORS {
		if err := checkOrigin(fmt.Sprintf("cors[%d]", i), o); err != nil {
			return err
		}
	}
	if err := c.checkProviders(); err != nil {
		return err
	}
	if c.Model == "" {
		c.Model = c.firstModel()
	}
	if c.Model != "" {
		if err := c.checkModel("model", c.Model); err != nil {
			return err
		}
	}
	if err := c.checkAgents(); err != nil {
		return err
	}
	if err := c.Compaction.fill(d.Compaction); err != nil {
		return err
	}
	return c.Limits.fill(d.Limits)
}

// errNoDataDir is the configuration error of an environment that names no
// data directory; client commands, which need none, go on without it.
var errNoDataDir = fieldErrorf("data", "no data directory; set SESSIOND_DATA, XDG_DATA_HOME or HOME")

// The checks of values that a variable may supply as well as the file
// take the name to report them under: the field, or the variable.

// checkAddr checks addr as the daemon's address: a listen address
// host:port, or (for clients only, see checkListen) an http(s) URL.
func checkAddr(field, addr string) error {
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fieldErrorf(field, "%q: want host:port or an http(s) URL", addr)
		}
		return nil
	}
	return checkListen(field, addr)
}

// checkListen checks a listen address.
func checkListen(field, addr string) error {
	if strings.Contains(addr, "://") {
		return fieldErrorf(field, "%q: want host:port to listen on, not a URL", addr)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fieldErrorf(field, "%q: want host:port", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return fieldErrorf(field, "%q: want a port number from 0 to 65535", addr)
	}
	return nil
}

// checkToken checks a bearer token: it goes into an HTTP header.
func checkToken(field, token string) error {
	for _, r := range token {
		if r <= ' ' || r >= 0x7f {
			return fieldErrorf(field, "use printable ASCII without spaces")
		}
	}
	return nil
}

// checkBaseURL checks the API endpoint of an openai or anthropic provider.
func checkBaseURL(field, v string) error {
	if v == "" {
		return nil
	}
	if strings.HasPrefix(v, "{env:") {
		return fieldErrorf(field, "%q: {env:NAME} is read only in apiKey and token (for an openai provider, OPENAI_BASE_URL sets a baseURL the file leaves out)", v)
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fieldErrorf(field, "%q is not an http or https URL", v)
	}
	return nil
}

// checkKey checks an API key: white space around it is a copying mistake
// the provider would answer with an authentication error.
func checkKey(field, key string) error {
	if strings.TrimSpace(key) != key {
		return fieldErrorf(field, "has surrounding white space")
	}
	return nil
}

// checkOrigin checks one CORS origin.
func checkOrigin(field, o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return fieldErrorf(field, "%q is not an origin; want scheme://host[:port] or *", o)
	}
	return nil
}

// checkProviders checks the providers in ID order, then their models
// through the catalog.
func (c *Config) checkProviders() error {
	for _, id := range slices.Sorted(maps.Keys(c.Providers)) {
		p := c.Providers[id]
		field := "providers." + id
		switch {
		case id == "":
			return fieldErrorf("providers", "a provider has an empty ID")
		case strings.Contains(id, "/"):
			return fieldErrorf(field, "provider ID %q must not contain \"/\"", id)
		case strings.TrimSpace(id) != id:
			return fieldErrorf(field, "provider ID %q has surrounding white space", id)
		}
		switch p.Type {
		case llm.ProviderOpenAI, llm.ProviderAnthropic:
			if p.File != "" {
				return fieldErrorf(field+".file", "only script providers read a file")
			}
			if err := checkBaseURL(field+".baseURL", p.BaseURL); err != nil {
				return err
			}
			if err := checkKey(field+".apiKey", p.APIKey); err != nil {
				return err
			}
			if p.IdleTimeout < -1 {
				return fieldErrorf(field+".idleTimeout", "%d: want seconds, 0 for the default (600) or -1 for none", p.IdleTimeout)
			}
			if err := p.checkThinking(field); err != nil {
				return err
			}
		case llm.ProviderScript:
			if err := p.checkThinking(field); err != nil {
				return err
			}
			switch {
			case p.IdleTimeout != 0:
				return fieldErrorf(field+".idleTimeout", "a script provider takes no idleTimeout")
			case p.File == "":
				return fieldErrorf(field+".file", "a script provider needs the path of its JSON script")
			case p.BaseURL != "":
				return fieldErrorf(field+".baseURL", "a script provider takes no baseURL")
			case p.APIKey != "":
				return fieldErrorf(field+".apiKey", "a script provider takes no apiKey")
			}
		case "":
			return fieldErrorf(field+".type", "missing; want openai, anthropic or script")
		default:
			return fieldErrorf(field+".type", "want openai, anthropic or script, got %q", p.Type)
		}
	}
	// The catalog owns the rules for model IDs, limits and prices, and its
	// errors already name the field (providers.<id>.models.<model>...).
	_, err := llm.NewCatalog(c.CatalogSpecs())
	return err
}

// firstModel returns the default model: the first model, by ID (or the
// default of a provider a key alone added), of the first provider, by ID,
// that has credentials (or needs none) and lists models; "" when there is
// none.
func (c *Config) firstModel() string {
	for _, id := range slices.Sorted(maps.Keys(c.Providers)) {
		p := c.Providers[id]
		if len(p.Models) == 0 || (p.Type != llm.ProviderScript && p.APIKey == "") {
			continue
		}
		if models, def := keyModels(p.Type); def != "" && maps.EqualFunc(p.Models, models, sameLimits) {
			return id + "/" + def // a provider a key alone added
		}
		return id + "/" + slices.Sorted(maps.Keys(p.Models))[0]
	}
	return ""
}

// checkModel checks that ref names a configured model. It leaves
// credentials to the catalog: a provider without a key may be configured
// for others to use.
func (c *Config) checkModel(field, ref string) error {
	r, err := llm.ParseModelRef(ref)
	if err != nil {
		return fieldErrorf(field, "want provider/model, got %q", ref)
	}
	p, ok := c.Providers[r.ProviderID]
	switch {
	case !ok && c.UsesDemo() && r.ProviderID == "demo":
		return nil
	case !ok && c.UsesDemo():
		return fieldErrorf(field, "provider %q is not configured (no providers are; the demo provider is \"demo\")", r.ProviderID)
	case !ok:
		return fieldErrorf(field, "provider %q is not configured (configured: %s)", r.ProviderID, quoteList(slices.Sorted(maps.Keys(c.Providers))))
	case p.Type == llm.ProviderScript && len(p.Models) == 0:
		return nil
	}
	if _, ok := p.Models[r.ID]; ok {
		return nil
	}
	if len(p.Models) == 0 {
		return fieldErrorf(field, "provider %q has no models; add %q under providers.%s.models", r.ProviderID, r.ID, r.ProviderID)
	}
	return fieldErrorf(field, "provider %q has no model %q (known: %s)", r.ProviderID, r.ID, quoteList(slices.Sorted(maps.Keys(p.Models))))
}

// checkAgents checks the agents in name order and fills their defaults,
// adding the default "build" agent when it is missing.
func (c *Config) checkAgents() error {
	if c.Agents == nil {
		c.Agents = make(map[string]AgentConfig)
	}
	if _, ok := c.Agents["build"]; !ok {
		c.Agents["build"] = defaultAgent()
	}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		a := c.Agents[name]
		field := "agents." + name
		switch {
		case name == "":
			return fieldErrorf("agents", "an agent has an empty name")
		case strings.TrimSpace(name) != name:
			return fieldErrorf(field, "agent name %q has surrounding white space", name)
		}
		if a.Model != "" {
			if err := c.checkModel(field+".model", a.Model); err != nil {
				return err
			}
		}
		switch {
		case a.Steps < 0:
			return fieldErrorf(field+".steps", "%d is less than 1", a.Steps)
		case a.Steps == 0:
			a.Steps = defaultAgent().Steps
		}
		if a.Permission == nil {
			a.Permission = defaultRules()
		}
		for i := range a.Permission {
			r := &a.Permission[i]
			rf := fmt.Sprintf("%s.permission[%d]", field, i)
			if r.Permission == "" {
				return fieldErrorf(rf+".permission", "missing; name a permission such as read, bash or *")
			}
			// A rule no permission matches does nothing: a misspelled deny
			// ("Bash") would leave the command allowed without a word.
			if !slices.ContainsFunc(tools.BuiltinPermissions(), func(p string) bool { return tools.Match(r.Permission, p) }) {
				return fieldErrorf(rf+".permission", "%q matches none of the permissions sessiond's tools ask for: %s (names are case-sensitive; * matches any)",
					r.Permission, strings.Join(tools.BuiltinPermissions(), ", "))
			}
			if r.Pattern == "" {
				r.Pattern = "*"
			}
			switch r.Action {
			case "allow", "deny", "ask":
			case "":
				return fieldErrorf(rf+".action", "missing; want allow, deny or ask")
			default:
				return fieldErrorf(rf+".action", "want allow, deny or ask, got %q", r.Action)
			}
		}
		c.Agents[name] = a
	}
	return nil
}

// fill checks cc and fills its zero fields from d.
func (cc *CompactionConfig) fill(d CompactionConfig) error {
	if cc.Auto == nil {
		auto := *d.Auto
		cc.Auto = &auto
	}
	for _, f := range []struct {
		name  string
		v     *int
		value int
	}{{"buffer", &cc.Buffer, d.Buffer}, {"keep", &cc.Keep, d.Keep}} {
		switch {
		case *f.v < 0:
			return fieldErrorf("compaction."+f.name, "%d is negative", *f.v)
		case *f.v == 0:
			*f.v = f.value
		}
	}
	return nil
}

// fill checks l and fills its zero fields from d.
func (l *LimitsConfig) fill(d LimitsConfig) error {
	for _, f := range []struct {
		name  string
		v     *int
		value int
	}{
		{"inboxBacklog", &l.InboxBacklog, d.InboxBacklog},
		{"steerBatch", &l.SteerBatch, d.SteerBatch},
		{"promptBytes", &l.PromptBytes, d.PromptBytes},
		{"bodyBytes", &l.BodyBytes, d.BodyBytes},
	} {
		switch {
		case *f.v < 0:
			return fieldErrorf("limits."+f.name, "%d is negative", *f.v)
		case *f.v == 0:
			*f.v = f.value
		}
	}
	if l.PromptBytes > l.BodyBytes {
		return fieldErrorf("limits.promptBytes", "%d exceeds limits.bodyBytes (%d); a prompt must fit in a request body", l.PromptBytes, l.BodyBytes)
	}
	return nil
}

// CatalogSpecs converts the providers, sorted by ID, for llm.NewCatalog. Any
// non-empty apiKey, such as "none" for a local server, counts as
// credentials.
func (c Config) CatalogSpecs() []llm.ProviderSpec {
	specs := make([]llm.ProviderSpec, 0, len(c.Providers))
	for _, id := range slices.Sorted(maps.Keys(c.Providers)) {
		p := c.Providers[id]
		spec := llm.ProviderSpec{ID: id, Type: p.Type, HasCredentials: p.APIKey != ""}
		if p.keyEnv != "" {
			spec.CredentialsHint = "set environment variable " + p.keyEnv + ", which its apiKey reads"
		}
		if len(p.Models) > 0 {
			spec.Models = make(map[string]llm.ModelSpec, len(p.Models))
			for mid, m := range p.Models {
				spec.Models[mid] = llm.ModelSpec{Context: m.Context, Output: m.Output, Prices: m.Prices, HostedTools: m.HostedTools}
			}
		}
		specs = append(specs, spec)
	}
	return specs
}

// UsesDemo reports whether no provider is configured, in which case the
// embedded demo script model (demo/scripted) serves the Sessions.
func (c Config) UsesDemo() bool { return len(c.Providers) == 0 }

// fieldErrorf returns an invalid *messages.Error whose message starts with
// the JSON path of the offending field.
func fieldErrorf(field, format string, args ...any) error {
	return messages.Errorf(messages.ErrInvalid, "%s: %s", field, fmt.Sprintf(format, args...))
}

// quoteList quotes and joins names.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// checkShape walks the parsed document v against the Go type t before it is
// decoded, so that unknown keys, duplicate keys and values of the wrong
// kind are reported with their JSON path and line and column, which
// encoding/json does not give. src is the document the offsets refer to.
func checkShape(src []byte, v *hujson.Value, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v.Value.Kind() == 'n' {
		return nil // null leaves the Go value as it is, or nil
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		obj, ok := v.Value.(*hujson.Object)
		if !ok {
			return shapeErrorf(src, v, path, "want an object, got %s", describe(v))
		}
		var names []string
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			names, fields = jsonFields(t)
		}
		seen := make(map[string]bool, len(obj.Members))
		for i := range obj.Members {
			m := &obj.Members[i]
			name := m.Name.Value.(hujson.Literal).String()
			fp := joinPath(path, name)
			if seen[name] {
				return shapeErrorf(src, &m.Name, fp, "duplicate key")
			}
			seen[name] = true
			var elem reflect.Type
			if t.Kind() == reflect.Map {
				elem = t.Elem()
			} else if elem, ok = fields[name]; !ok {
				return shapeErrorf(src, &m.Name, fp, "unknown field; want one of %s", strings.Join(names, ", "))
			}
			if err := checkShape(src, &m.Value, elem, fp); err != nil {
				return err
			}
		}
	case reflect.Slice:
		arr, ok := v.Value.(*hujson.Array)
		if !ok {
			return shapeErrorf(src, v, path, "want an array, got %s", describe(v))
		}
		for i := range arr.Elements {
			if err := checkShape(src, &arr.Elements[i], t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.String:
		if v.Value.Kind() != '"' {
			return shapeErrorf(src, v, path, "want a string, got %s", describe(v))
		}
	case reflect.Bool:
		if k := v.Value.Kind(); k != 't' && k != 'f' {
			return shapeErrorf(src, v, path, "want true or false, got %s", describe(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Value.Kind() != '0' {
			return shapeErrorf(src, v, path, "want an integer, got %s", describe(v))
		}
		lit := string(v.Value.(hujson.Literal))
		if _, err := strconv.ParseInt(lit, 10, t.Bits()); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return shapeErrorf(src, v, path, "%s is out of range", lit)
			}
			return shapeErrorf(src, v, path, "want an integer, got %s", lit)
		}
	case reflect.Float32, reflect.Float64:
		if v.Value.Kind() != '0' {
			return shapeErrorf(src, v, path, "want a number, got %s", describe(v))
		}
		lit := string(v.Value.(hujson.Literal))
		if _, err := strconv.ParseFloat(lit, t.Bits()); err != nil {
			return shapeErrorf(src, v, path, "%s is out of range", lit)
		}
	}
	return nil
}

// jsonFields returns the JSON names of t's fields in declaration order and
// their types by name.
func jsonFields(t reflect.Type) ([]string, map[string]reflect.Type) {
	var names []string
	types := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
		types[name] = f.Type
	}
	return names, types
}

// joinPath appends a key to a JSON path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe names the kind of a JSON value for an error message.
func describe(v *hujson.Value) string {
	switch v.Value.Kind() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '0':
		if lit := string(v.Value.(hujson.Literal)); len(lit) <= 32 {
			return "the number " + lit
		}
		return "a number"
	}
	return "null"
}

// shapeErrorf returns an invalid *messages.Error for the value v at path,
// with its line and column in src.
func shapeErrorf(src []byte, v *hujson.Value, path, format string, args ...any) error {
	if path == "" {
		path = "config"
	}
	line, col := lineColumn(src, v.StartOffset)
	return fieldErrorf(path, "%s (line %d, column %d)", fmt.Sprintf(format, args...), line, col)
}

// lineColumn returns the 1-based line and column (in bytes) of offset n in
// src.
func lineColumn(src []byte, n int) (line, col int) {
	n = min(max(n, 0), len(src))
	line = 1 + bytes.Count(src[:n], []byte("\n"))
	col = 1 + n - (bytes.LastIndexByte(src[:n], '\n') + 1)
	return line, col
}

// minThinkingBudget is the smallest budget the Messages API accepts.
const minThinkingBudget = 1024

// checkThinking refuses thinking settings the provider's type has not, and
// a budget the API would refuse.
func (p ProviderConfig) checkThinking(field string) error {
	switch {
	case p.Type != llm.ProviderAnthropic && p.ThinkingBudget != 0:
		return fieldErrorf(field+".thinkingBudget", "only an anthropic provider takes a thinking budget")
	case p.Type != llm.ProviderAnthropic && p.AdaptiveThinking:
		return fieldErrorf(field+".adaptiveThinking", "only an anthropic provider takes adaptive thinking")
	case p.ThinkingBudget != 0 && p.ThinkingBudget < minThinkingBudget:
		return fieldErrorf(field+".thinkingBudget", "%d: want at least %d tokens, or 0 for no thinking", p.ThinkingBudget, minThinkingBudget)
	}
	return nil
}

// idle returns the IdleTimeout of an openai or anthropic adapter's Config:
// 0 for the adapter's default, negative for none.
func (p ProviderConfig) idle() time.Duration {
	if p.IdleTimeout < 0 {
		return -1
	}
	return time.Duration(p.IdleTimeout) * time.Second
}
