package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// envOf returns an environment lookup over the given NAME, value pairs.
func envOf(kv ...string) func(string) string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(name string) string { return m[name] }
}

// boolPtr returns a pointer to b.
func boolPtr(b bool) *bool { return &b }

// writeConfig writes doc to sessiond.json in a new directory and returns
// its path.
func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ConfigFileName)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantDefaults returns the documented defaults with data directory data.
func wantDefaults(data string) Config {
	return Config{
		Addr: "127.0.0.1:4096",
		Data: data,
		Agents: map[string]AgentConfig{"build": {Steps: 50, Permission: []Rule{
			{Permission: "*", Pattern: "*", Action: "ask"},
			{Permission: "read", Pattern: "*", Action: "allow"},
		}}},
		Compaction: CompactionConfig{Auto: boolPtr(true), Keep: 8000},
		Limits:     LimitsConfig{InboxBacklog: 1000, SteerBatch: 32, PromptBytes: 1 << 20, BodyBytes: 2 << 20},
	}
}

// revalidate checks that validate accepts c again without changing it.
func revalidate(t testing.TB, c Config) {
	t.Helper()
	again := cloneConfig(t, c)
	if err := again.validate(); err != nil {
		t.Fatalf("validate again: %v", err)
	}
	if !reflect.DeepEqual(again, c) {
		t.Fatalf("validate is not idempotent:\n got %+v\nwant %+v", again, c)
	}
}

// cloneConfig deep-copies c through JSON.
func cloneConfig(t testing.TB, c Config) Config {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var out Config
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	carryUnencoded(&out, c)
	return out
}

// carryUnencoded copies into out what JSON does not carry from c: the
// variable each provider's unset "{env:NAME}" apiKey named, which comes from
// the environment, not from the encoded file.
func carryUnencoded(out *Config, c Config) {
	for id, p := range out.Providers {
		p.keyEnv = c.Providers[id].keyEnv
		out.Providers[id] = p
	}
}

func TestDefaultConfig(t *testing.T) {
	home := func() (string, error) { return "/home/u", nil }
	c := defaultConfig(envOf(), home)
	want := wantDefaults(filepath.Join("/home/u", ".local", "share", "sessiond"))
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaultConfig =\n%+v\nwant\n%+v", c, want)
	}
	validated := cloneConfig(t, c)
	if err := validated.validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(validated, want) {
		t.Fatalf("validate changed the defaults:\n%+v", validated)
	}
	if c.UsesDemo() != true || len(c.CatalogSpecs()) != 0 || c.Model != "" {
		t.Fatalf("defaults: UsesDemo %v, specs %v, model %q", c.UsesDemo(), c.CatalogSpecs(), c.Model)
	}

	// DefaultConfig reads the process environment the same way.
	if got, want := DefaultConfig(), defaultConfig(os.Getenv, os.UserHomeDir); !reflect.DeepEqual(got, want) {
		t.Fatalf("DefaultConfig = %+v, want %+v", got, want)
	}

	// Every call builds fresh maps and slices.
	a, b := DefaultConfig(), DefaultConfig()
	a.Agents["build"].Permission[0].Action = "deny"
	*a.Compaction.Auto = false
	if b.Agents["build"].Permission[0].Action != "ask" || !*b.Compaction.Auto {
		t.Fatal("DefaultConfig values share memory")
	}
}

func TestDefaultDataDir(t *testing.T) {
	home := func() (string, error) { return "/home/u", nil }
	noHome := func() (string, error) { return "", errors.New("no home") }
	tests := []struct {
		name string
		env  func(string) string
		home func() (string, error)
		want string
	}{
		{"SESSIOND_DATA wins", envOf("SESSIOND_DATA", "/srv/sd", "XDG_DATA_HOME", "/x"), home, "/srv/sd"},
		{"SESSIOND_DATA may be relative", envOf("SESSIOND_DATA", "rel"), home, "rel"},
		{"XDG_DATA_HOME", envOf("XDG_DATA_HOME", "/x/data"), home, "/x/data/sessiond"},
		{"relative XDG_DATA_HOME is ignored", envOf("XDG_DATA_HOME", "x/data"), home, "/home/u/.local/share/sessiond"},
		{"home", envOf(), home, "/home/u/.local/share/sessiond"},
		{"no home", envOf(), noHome, ""},
		{"empty home", envOf(), func() (string, error) { return "", nil }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := defaultDataDir(tt.env, tt.home); got != filepath.FromSlash(tt.want) {
				t.Fatalf("defaultDataDir = %q, want %q", got, tt.want)
			}
		})
	}

	// LoadConfig finds the home directory through env alone.
	c, err := LoadConfig("", envOf("HOME", "/nonexistent/home", "USERPROFILE", "/nonexistent/home", "home", "/nonexistent/home"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("/nonexistent/home", ".local", "share", "sessiond"); c.Data != want {
		t.Fatalf("data = %q, want %q", c.Data, want)
	}
	// A data directory from the environment is not the file's: a
	// relative one stays relative to the working directory, not to the
	// directory of the file read.
	c, err = LoadConfig(writeConfig(t, `{}`), envOf("HOME", "rel", "USERPROFILE", "rel", "home", "rel"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("rel", ".local", "share", "sessiond"); c.Data != want {
		t.Fatalf("data = %q, want %q", c.Data, want)
	}
	// Without a data directory there is no default file either, not even
	// one in the working directory.
	t.Chdir(t.TempDir())
	if err := os.WriteFile(ConfigFileName, []byte(`{"addr": "nope"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig("", envOf())
	if err == nil || err.Error() != "invalid: data: no data directory; set SESSIOND_DATA, XDG_DATA_HOME or HOME" {
		t.Fatalf("LoadConfig without a home = %v", err)
	}
}

func TestLoadConfigDefaultPath(t *testing.T) {
	dir := t.TempDir()
	env := envOf("SESSIOND_DATA", dir)

	// No file: the defaults.
	c, err := LoadConfig("", env)
	if err != nil {
		t.Fatal(err)
	}
	if want := wantDefaults(dir); !reflect.DeepEqual(c, want) {
		t.Fatalf("LoadConfig without a file =\n%+v\nwant\n%+v", c, want)
	}

	// <data>/sessiond.json when it exists.
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), []byte(`{"addr": "127.0.0.1:0", /* a comment */}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig("", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:0" || c.Data != dir {
		t.Fatalf("LoadConfig read addr %q, data %q", c.Addr, c.Data)
	}

	// A byte-order mark, as Windows editors write, is not an error.
	if err := os.WriteFile(filepath.Join(dir, ConfigFileName), []byte("\xef\xbb\xbf{\"addr\": \"127.0.0.1:1\"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = LoadConfig("", env); err != nil || c.Addr != "127.0.0.1:1" {
		t.Fatalf("LoadConfig with a byte-order mark: addr %q, %v", c.Addr, err)
	}

	// An explicit path must exist.
	_, err = LoadConfig(filepath.Join(dir, "missing.json"), env)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadConfig(missing) = %v, want not exist", err)
	}

	// A default path that cannot be read is an error too.
	if err := os.Remove(filepath.Join(dir, ConfigFileName)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, ConfigFileName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err = LoadConfig("", env); err == nil {
		t.Fatal("LoadConfig read a directory as its config file")
	}
}

func TestLoadConfigFull(t *testing.T) {
	path := filepath.Join("testdata", "config", "full.jsonc")
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path, envOf("SESSIOND_DATA", "/ignored", "TEST_TOKEN", "s3cret", "TEST_ANTHROPIC", "sk-ant"))
	if err != nil {
		t.Fatal(err)
	}
	// SESSIOND_DATA overrides the file's data; load once more without it.
	if c.Data != "/ignored" {
		t.Fatalf("data = %q, want SESSIOND_DATA to override the file", c.Data)
	}
	c, err = LoadConfig(path, envOf("HOME", "/home/u", "USERPROFILE", "/home/u", "home", "/home/u",
		"TEST_TOKEN", "s3cret", "TEST_ANTHROPIC", "sk-ant"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Addr:  ":8080",
		Data:  filepath.Join(abs, "state"),
		Token: "s3cret",
		Roots: []string{filepath.FromSlash("/srv/work"), filepath.Join(abs, "projects")},
		CORS:  []string{"http://localhost:5173", "https://app.example.com:8443"},
		Providers: map[string]ProviderConfig{
			"local": {Type: llm.ProviderOpenAI, BaseURL: "http://127.0.0.1:11434/v1", APIKey: "none", Models: map[string]ModelConfig{
				"qwen3":            {Context: 32768, Output: 4096},
				"meta/llama3.1:8b": {},
			}},
			"claude": {Type: llm.ProviderAnthropic, APIKey: "sk-ant", Models: map[string]ModelConfig{
				"claude-sonnet-4-5": {Context: 200000, Output: 64000, Prices: llm.Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
			}},
			"demo": {Type: llm.ProviderScript, File: filepath.Join(abs, "scripts", "demo.json")},
		},
		Model: "local/qwen3",
		Agents: map[string]AgentConfig{
			"build": {Prompt: "Build things.", Steps: 25, Permission: []Rule{
				{Permission: "*", Pattern: "*", Action: "ask"},
				{Permission: "read", Pattern: "*", Action: "allow"},
				{Permission: "bash", Pattern: "rm *", Action: "deny"},
			}},
			"plan":  {Model: "claude/claude-sonnet-4-5", Steps: 50, Permission: defaultRules()},
			"quiet": {Model: "demo/anything", Steps: 50, Permission: []Rule{}},
		},
		Compaction: CompactionConfig{Auto: boolPtr(false), Buffer: 10000, Keep: 4000},
		Limits:     LimitsConfig{InboxBacklog: 10, SteerBatch: 4, PromptBytes: 4096, BodyBytes: 8192},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("LoadConfig =\n%+v\nwant\n%+v", c, want)
	}
	revalidate(t, c)
	if c.UsesDemo() {
		t.Fatal("UsesDemo with providers configured")
	}

	catalog, err := llm.NewCatalog(c.CatalogSpecs())
	if err != nil {
		t.Fatal(err)
	}
	for ref, wantCtx := range map[string]int{
		"local/qwen3":              32768,
		"local/meta/llama3.1:8b":   llm.DefaultContext,
		"claude/claude-sonnet-4-5": 200000,
		"demo/anything":            llm.DefaultContext,
	} {
		m, err := catalog.ResolveString(ref)
		if err != nil {
			t.Fatalf("resolve %s: %v", ref, err)
		}
		if m.Context != wantCtx {
			t.Fatalf("%s: context %d, want %d", ref, m.Context, wantCtx)
		}
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		env  []string
		want string // the message of the invalid *messages.Error
	}{
		{"syntax", "{\n  \"addr\": ,\n}", nil,
			"syntax error: line 2, column 11: invalid character ',' at start of value"},
		{"unterminated", `{"addr": "x"`, nil,
			"syntax error: line 1, column 13: parsing object after value: unexpected EOF"},
		{"empty file", ``, nil,
			"syntax error: line 1, column 1: parsing value: unexpected EOF"},
		{"top level not an object", `[1]`, nil,
			"config: want an object, got an array (line 1, column 1)"},
		{"unknown top-level key", "{\n  // the port\n  \"adr\": \"x\"}", nil,
			"adr: unknown field; want one of addr, data, token, roots, cors, providers, model, agents, compaction, limits (line 3, column 3)"},
		{"unknown nested key", `{"providers": {"local": {"type": "openai", "modles": {}}}}`, nil,
			"providers.local.modles: unknown field; want one of type, baseURL, apiKey, idleTimeout, thinkingBudget, adaptiveThinking, file, models (line 1, column 44)"},
		{"field names are case-sensitive", `{"Addr": "x"}`, nil,
			"Addr: unknown field; want one of addr, data, token, roots, cors, providers, model, agents, compaction, limits (line 1, column 2)"},
		{"unknown price", `{"providers": {"p": {"type": "openai", "models": {"m": {"prices": {"in": 1}}}}}}`, nil,
			"providers.p.models.m.prices.in: unknown field; want one of input, output, cacheRead, cacheWrite (line 1, column 68)"},
		{"duplicate key", "{\"addr\": \"a:1\",\n \"addr\": \"b:2\"}", nil,
			"addr: duplicate key (line 2, column 2)"},
		{"duplicate map key", `{"agents": {"a": {}, "\u0061": {}}}`, nil,
			"agents.a: duplicate key (line 1, column 22)"},
		{"string for an integer", `{"limits": {"inboxBacklog": "10"}}`, nil,
			"limits.inboxBacklog: want an integer, got a string (line 1, column 29)"},
		{"fraction for an integer", `{"agents": {"build": {"steps": 1.5}}}`, nil,
			"agents.build.steps: want an integer, got 1.5 (line 1, column 32)"},
		{"integer overflow", `{"limits": {"bodyBytes": 99999999999999999999}}`, nil,
			"limits.bodyBytes: 99999999999999999999 is out of range (line 1, column 26)"},
		{"price overflow", `{"providers": {"p": {"type": "openai", "models": {"m": {"prices": {"input": 1e999}}}}}}`, nil,
			"providers.p.models.m.prices.input: 1e999 is out of range (line 1, column 77)"},
		{"string for a bool", `{"compaction": {"auto": "yes"}}`, nil,
			"compaction.auto: want true or false, got a string (line 1, column 25)"},
		{"object for a string", `{"model": {}}`, nil,
			"model: want a string, got an object (line 1, column 11)"},
		{"object for an array", `{"roots": {"a": 1}}`, nil,
			"roots: want an array, got an object (line 1, column 11)"},
		{"number in an array", `{"cors": ["http://a", 7]}`, nil,
			"cors[1]: want a string, got the number 7 (line 1, column 23)"},
		{"32-digit number for a string", `{"model": 12345678901234567890123456789012}`, nil,
			"model: want a string, got the number 12345678901234567890123456789012 (line 1, column 11)"},
		{"longer number for a string", `{"model": 123456789012345678901234567890123}`, nil,
			"model: want a string, got a number (line 1, column 11)"},
		{"bad addr", `{"addr": "localhost"}`, nil,
			`addr: "localhost": want host:port`},
		{"bad port", `{"addr": "localhost:http"}`, nil,
			`addr: "localhost:http": want a port number from 0 to 65535`},
		{"port out of range", `{"addr": ":65536"}`, nil,
			`addr: ":65536": want a port number from 0 to 65535`},
		{"URL of another scheme", `{"addr": "ftp://sd.example"}`, nil,
			`addr: "ftp://sd.example": want host:port or an http(s) URL`},
		{"URL without a host", `{"addr": "http://"}`, nil,
			`addr: "http://": want host:port or an http(s) URL`},
		{"port with a leading zero", `{"addr": "127.0.0.1:080"}`, nil,
			`addr: "127.0.0.1:080": want a port number from 0 to 65535`},
		{"token with a space", `{"token": "a b"}`, nil,
			"token: use printable ASCII without spaces"},
		{"token with a DEL", `{"token": "a\u007fb"}`, nil,
			"token: use printable ASCII without spaces"},
		{"empty root", `{"roots": ["/a", ""]}`, nil,
			"roots[1]: empty path"},
		{"bad origin", `{"cors": ["*", "localhost:3000"]}`, nil,
			`cors[1]: "localhost:3000" is not an origin; want scheme://host[:port] or *`},
		{"origin with a path", `{"cors": ["http://a.example/app"]}`, nil,
			`cors[0]: "http://a.example/app" is not an origin; want scheme://host[:port] or *`},
		{"origin with a user", `{"cors": ["http://u@a.example"]}`, nil,
			`cors[0]: "http://u@a.example" is not an origin; want scheme://host[:port] or *`},
		{"origin with a query", `{"cors": ["http://a.example?x=1"]}`, nil,
			`cors[0]: "http://a.example?x=1" is not an origin; want scheme://host[:port] or *`},
		{"origin with an empty query", `{"cors": ["http://a.example?"]}`, nil,
			`cors[0]: "http://a.example?" is not an origin; want scheme://host[:port] or *`},
		{"origin with a fragment", `{"cors": ["http://a.example#top"]}`, nil,
			`cors[0]: "http://a.example#top" is not an origin; want scheme://host[:port] or *`},
		{"unknown provider type", `{"providers": {"local": {"type": "foo"}}}`, nil,
			`providers.local.type: want openai, anthropic or script, got "foo"`},
		{"missing provider type", `{"providers": {"local": {"apiKey": "k"}}}`, nil,
			"providers.local.type: missing; want openai, anthropic or script"},
		{"provider ID with a slash", `{"providers": {"a/b": {"type": "openai"}}}`, nil,
			`providers.a/b: provider ID "a/b" must not contain "/"`},
		{"empty provider ID", `{"providers": {"": {"type": "openai"}}}`, nil,
			"providers: a provider has an empty ID"},
		// Providers are checked in ID order, each completely, before the
		// models: the later provider's own mistake is not reported first.
		{"provider ID with a slash before another mistake", `{"providers": {"a/b": {"type": "openai"}, "c": {}}}`, nil,
			`providers.a/b: provider ID "a/b" must not contain "/"`},
		{"provider ID with white space", `{"providers": {" p": {"type": "openai"}, "q": {}}}`, nil,
			`providers. p: provider ID " p" has surrounding white space`},
		{"bad base URL", `{"providers": {"local": {"type": "openai", "baseURL": "127.0.0.1:11434"}}}`, nil,
			`providers.local.baseURL: "127.0.0.1:11434" is not an http or https URL`},
		{"base URL without a host", `{"providers": {"local": {"type": "openai", "baseURL": "http://"}}}`, nil,
			`providers.local.baseURL: "http://" is not an http or https URL`},
		{"base URL from a variable", `{"providers": {"local": {"type": "openai", "baseURL": "{env:BASE}"}}}`, nil,
			`providers.local.baseURL: "{env:BASE}": {env:NAME} is read only in apiKey and token (for an openai provider, OPENAI_BASE_URL sets a baseURL the file leaves out)`},
		{"negative idle timeout", `{"providers": {"o": {"type": "openai", "idleTimeout": -2}}}`, nil,
			`providers.o.idleTimeout: -2: want seconds, 0 for the default (600) or -1 for none`},
		{"idle timeout of a script provider", `{"providers": {"s": {"type": "script", "file": "s.json", "idleTimeout": 5}}}`, nil,
			`providers.s.idleTimeout: a script provider takes no idleTimeout`},
		{"thinking budget below the API's minimum", `{"providers": {"a": {"type": "anthropic", "thinkingBudget": 1023}}}`, nil,
			`providers.a.thinkingBudget: 1023: want at least 1024 tokens, or 0 for no thinking`},
		{"negative thinking budget", `{"providers": {"a": {"type": "anthropic", "thinkingBudget": -1}}}`, nil,
			`providers.a.thinkingBudget: -1: want at least 1024 tokens, or 0 for no thinking`},
		{"thinking budget of an openai provider", `{"providers": {"o": {"type": "openai", "thinkingBudget": 2048}}}`, nil,
			`providers.o.thinkingBudget: only an anthropic provider takes a thinking budget`},
		{"adaptive thinking of a script provider", `{"providers": {"s": {"type": "script", "file": "s.json", "adaptiveThinking": true}}}`, nil,
			`providers.s.adaptiveThinking: only an anthropic provider takes adaptive thinking`},
		{"api key with white space", `{"providers": {"o": {"type": "openai", "apiKey": " sk-1"}}}`, nil,
			"providers.o.apiKey: has surrounding white space"},
		{"token from a variable with a space", `{"token": "{env:TOK}"}`, []string{"TOK", "a b"},
			`token: "{env:TOK}": environment variable TOK: use printable ASCII without spaces`},
		{"api key from a variable with white space", `{"providers": {"o": {"type": "anthropic", "apiKey": "{env:KEY}"}}}`, []string{"KEY", "sk-1\n"},
			`providers.o.apiKey: "{env:KEY}": environment variable KEY: has surrounding white space`},
		{"file on an openai provider", `{"providers": {"o": {"type": "openai", "file": "x.json"}}}`, nil,
			"providers.o.file: only script providers read a file"},
		{"script without a file", `{"providers": {"demo": {"type": "script"}}}`, nil,
			"providers.demo.file: a script provider needs the path of its JSON script"},
		{"script with a key", `{"providers": {"demo": {"type": "script", "file": "d.json", "apiKey": "k"}}}`, nil,
			"providers.demo.apiKey: a script provider takes no apiKey"},
		{"script with a base URL", `{"providers": {"demo": {"type": "script", "file": "d.json", "baseURL": "http://x"}}}`, nil,
			"providers.demo.baseURL: a script provider takes no baseURL"},
		{"unclosed env reference", `{"providers": {"o": {"type": "openai", "apiKey": "{env:KEY"}}}`, nil,
			`providers.o.apiKey: "{env:KEY" lacks the closing "}" of {env:NAME}`},
		{"empty env reference", `{"token": "{env:}"}`, nil,
			`token: "{env:}" does not name an environment variable; want {env:NAME}`},
		{"env reference with a space", `{"token": "{env:MY TOKEN}"}`, nil,
			`token: "{env:MY TOKEN}" does not name an environment variable; want {env:NAME}`},
		{"token from an unset variable", `{"token": "{env:SESSIOND_SECRET}"}`, nil,
			`token: "{env:SESSIOND_SECRET}": environment variable SESSIOND_SECRET is unset or empty; an empty token would turn authentication off`},
		{"token from an empty variable", `{"token": "{env:SESSIOND_SECRET}"}`, []string{"SESSIOND_SECRET", ""},
			`token: "{env:SESSIOND_SECRET}": environment variable SESSIOND_SECRET is unset or empty; an empty token would turn authentication off`},
		{"output above context", `{"providers": {"p": {"type": "openai", "models": {"m": {"context": 100, "output": 200}}}}}`, nil,
			"providers.p.models.m.output: 200 exceeds the context window of 100"},
		{"negative context", `{"providers": {"p": {"type": "openai", "models": {"m": {"context": -1}}}}}`, nil,
			"providers.p.models.m.context: -1 is negative"},
		{"negative price", `{"providers": {"p": {"type": "anthropic", "models": {"m": {"prices": {"cacheWrite": -1}}}}}}`, nil,
			"providers.p.models.m.prices.cacheWrite: -1 is not a price"},
		{"model not provider/model", `{"model": "gpt-5"}`, nil,
			`model: want provider/model, got "gpt-5"`},
		{"model of an unknown provider", `{"providers": {"a": {"type": "openai"}, "b": {"type": "anthropic"}}, "model": "x/m"}`, nil,
			`model: provider "x" is not configured (configured: "a", "b")`},
		{"model without providers", `{"model": "x/m"}`, nil,
			`model: provider "x" is not configured (no providers are; the demo provider is "demo")`},
		{"unknown model", `{"providers": {"p": {"type": "openai", "models": {"a": {}, "b": {}}}}, "model": "p/c"}`, nil,
			`model: provider "p" has no model "c" (known: "a", "b")`},
		{"model of a provider without models", `{"model": "openai/gpt-5"}`, []string{"OPENAI_API_KEY", "sk", "OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"},
			`model: provider "openai" has no models; add "gpt-5" under providers.openai.models`},
		{"empty agent name", `{"agents": {"": {}}}`, nil,
			"agents: an agent has an empty name"},
		{"agent name with white space", `{"agents": {"plan ": {}}}`, nil,
			`agents.plan : agent name "plan " has surrounding white space`},
		{"agent model", `{"agents": {"plan": {"model": "nope/m"}}}`, nil,
			`agents.plan.model: provider "nope" is not configured (no providers are; the demo provider is "demo")`},
		{"negative steps", `{"agents": {"build": {"steps": -1}}}`, nil,
			"agents.build.steps: -1 is less than 1"},
		{"bad action", `{"agents": {"build": {"permission": [
			{"permission": "*", "action": "ask"},
			{"permission": "read", "action": "allow"},
			{"permission": "bash", "pattern": "ls", "action": "maybe"}]}}}`, nil,
			`agents.build.permission[2].action: want allow, deny or ask, got "maybe"`},
		{"missing action", `{"agents": {"build": {"permission": [{"permission": "*"}]}}}`, nil,
			"agents.build.permission[0].action: missing; want allow, deny or ask"},
		{"missing permission", `{"agents": {"build": {"permission": [{"pattern": "*", "action": "allow"}]}}}`, nil,
			"agents.build.permission[0].permission: missing; name a permission such as read, bash or *"},
		// A rule no permission matches did nothing: a misspelled deny
		// left bash allowed.
		// {env:} outside apiKey and token was taken literally: a data
		// directory named "{env:QA_DATA}".
		{"env in data", `{"data": "{env:QA_DATA}"}`, nil, `data: "{env:QA_DATA}": {env:NAME} is read only in apiKey and token`},
		{"env in addr", `{"addr": "{env:QA_ADDR}"}`, nil, `addr: "{env:QA_ADDR}": {env:NAME} is read only in apiKey and token`},
		{"env in roots", `{"roots": ["/a", "{env:R}/x"]}`, nil, `roots[1]: "{env:R}/x": {env:NAME} is read only in apiKey and token`},
		{"env in a script file", `{"providers": {"s": {"type": "script", "file": "{env:F}"}}}`, nil,
			`providers.s.file: "{env:F}": {env:NAME} is read only in apiKey and token`},
		{"misspelled permission", `{"agents": {"build": {"permission": [{"permission": "*", "action": "allow"}, {"permission": "Bash", "action": "deny"}]}}}`, nil,
			`agents.build.permission[1].permission: "Bash" matches none of the permissions sessiond's tools ask for: read, edit, bash, external_directory (names are case-sensitive; * matches any)`},
		{"permission wildcard matching none", `{"agents": {"build": {"permission": [{"permission": "shell*", "action": "deny"}]}}}`, nil,
			`agents.build.permission[0].permission: "shell*" matches none of the permissions sessiond's tools ask for: read, edit, bash, external_directory (names are case-sensitive; * matches any)`},
		{"negative buffer", `{"compaction": {"buffer": -5}}`, nil,
			"compaction.buffer: -5 is negative"},
		{"negative keep", `{"compaction": {"keep": -1}}`, nil,
			"compaction.keep: -1 is negative"},
		{"negative inbox backlog", `{"limits": {"inboxBacklog": -1}}`, nil,
			"limits.inboxBacklog: -1 is negative"},
		{"negative steer batch", `{"limits": {"steerBatch": -2}}`, nil,
			"limits.steerBatch: -2 is negative"},
		{"negative body bytes", `{"limits": {"bodyBytes": -3}}`, nil,
			"limits.bodyBytes: -3 is negative"},
		{"prompt larger than a body", `{"limits": {"promptBytes": 4194304}}`, nil,
			"limits.promptBytes: 4194304 exceeds limits.bodyBytes (2097152); a prompt must fit in a request body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.doc)
			env := envOf(append([]string{"SESSIOND_DATA", t.TempDir()}, tt.env...)...)
			for range 3 { // map order must not change which error is reported
				c, err := LoadConfig(path, env)
				var me *messages.Error
				if !errors.As(err, &me) {
					t.Fatalf("LoadConfig = %+v, %v; want an invalid error %q", c, err, tt.want)
				}
				if me.Type != messages.ErrInvalid || me.Message != tt.want {
					t.Fatalf("error = %s: %s\nwant  invalid: %s", me.Type, me.Message, tt.want)
				}
				if want := "config " + path + ": invalid: " + tt.want; err.Error() != want {
					t.Fatalf("error = %q, want %q", err, want)
				}
			}
		})
	}
}

// TestLoadConfigEnvErrors: a bad value in a variable is reported under
// the variable's name, not blamed on the configuration file, whether a
// file was read or not. The file's path, in front of every error of the
// file's own values (TestLoadConfigErrors), stays away from these.
func TestLoadConfigEnvErrors(t *testing.T) {
	// The file configures a provider of each type, so that the provider
	// variables fill them in; without it they add providers.
	doc := `{"providers": {"o": {"type": "openai"}, "a": {"type": "anthropic"}}}`
	for _, tt := range []struct {
		env  []string
		want string // the message of the invalid *messages.Error
	}{
		{[]string{"SESSIOND_ADDR", "nope"}, `SESSIOND_ADDR: "nope": want host:port`},
		{[]string{"SESSIOND_ADDR", "ftp://sd.example"}, `SESSIOND_ADDR: "ftp://sd.example": want host:port or an http(s) URL`},
		{[]string{"SESSIOND_TOKEN", "a b"}, "SESSIOND_TOKEN: use printable ASCII without spaces"},
		{[]string{"OPENAI_API_KEY", "sk-1\n"}, "OPENAI_API_KEY: has surrounding white space"},
		{[]string{"OPENAI_API_KEY", "sk-1", "OPENAI_BASE_URL", "ftp://x"}, `OPENAI_BASE_URL: "ftp://x" is not an http or https URL`},
		{[]string{"ANTHROPIC_API_KEY", " sk-ant"}, "ANTHROPIC_API_KEY: has surrounding white space"},
		// Taken for false by the instruction discovery, a "yes" left
		// project AGENTS.md files in force.
		{[]string{"SESSIOND_DISABLE_PROJECT_CONFIG", "yes"}, `SESSIOND_DISABLE_PROJECT_CONFIG: "yes": want true or false (or 1, 0)`},
		{[]string{"OPENCODE_DISABLE_PROJECT_CONFIG", "on"}, `OPENCODE_DISABLE_PROJECT_CONFIG: "on": want true or false (or 1, 0)`},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "conf", ConfigFileName)
		if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		env := envOf(append([]string{"SESSIOND_DATA", dir}, tt.env...)...)
		for _, p := range []string{path, ""} { // the file, or none at <data>/sessiond.json
			c, err := LoadConfig(p, env)
			var me *messages.Error
			if !errors.As(err, &me) || me.Type != messages.ErrInvalid || me.Message != tt.want {
				t.Errorf("%q, file %q: LoadConfig = %+v, %v\nwant invalid: %s", tt.env, p, c, err, tt.want)
				continue
			}
			if want := "invalid: " + tt.want; err.Error() != want {
				t.Errorf("%q, file %q: error %q, want %q", tt.env, p, err, want)
			}
		}
	}

	// A variable nothing uses is not checked: no openai provider takes
	// OPENAI_BASE_URL, and no key adds one.
	if _, err := LoadConfig("", envOf("SESSIOND_DATA", t.TempDir(), "OPENAI_BASE_URL", "ftp://x")); err != nil {
		t.Fatalf("unused OPENAI_BASE_URL: %v", err)
	}
}

// TestConfigErrorsNameTheirSource: the commands report a bad setting
// under its source: the variable, the flag that stands in for it, or the
// configuration file's path.
func TestConfigErrorsNameTheirSource(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, ConfigFileName)
	if err := os.WriteFile(file, []byte(`{"providers": {"o": {"type": "openai"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		// serve listens on its address: a URL is for clients.
		{map[string]string{"SESSIOND_ADDR": "http://127.0.0.1:1"}, []string{"serve"},
			`sessiond serve: invalid: SESSIOND_ADDR: "http://127.0.0.1:1": want host:port to listen on, not a URL`},
		{map[string]string{"SESSIOND_TOKEN": "a b"}, []string{"serve"},
			"sessiond serve: invalid: SESSIOND_TOKEN: use printable ASCII without spaces"},
		{nil, []string{"serve", "--token", "a b"},
			"sessiond serve: invalid: --token: use printable ASCII without spaces"},
		{map[string]string{"OPENAI_BASE_URL": "127.0.0.1:11434"}, []string{"run", "hi"},
			`sessiond run: invalid: OPENAI_BASE_URL: "127.0.0.1:11434" is not an http or https URL`},
		{map[string]string{"SESSIOND_TOKEN": "a\tb"}, []string{"active"},
			"sessiond active: invalid: SESSIOND_TOKEN: use printable ASCII without spaces"},
		{nil, []string{"active", "--token", "a b", "--config", file},
			"sessiond active: invalid: --token: use printable ASCII without spaces"},
		// A known address does not excuse the client's own bad token: it
		// went on and sent it.
		{map[string]string{"SESSIOND_ADDR": "127.0.0.1:1", "SESSIOND_TOKEN": "a b"}, []string{"active"},
			"sessiond active: invalid: SESSIOND_TOKEN: use printable ASCII without spaces"},
	} {
		env := map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()}
		for k, v := range tt.env {
			env[k] = v
		}
		code, out, errOut := runApp(t, env, tt.args...)
		if code != exitFailed || out != "" || errOut != tt.want+"\n" {
			t.Errorf("%v %q: exit %d, stderr %q; want exit 1, %q", tt.env, tt.args, code, errOut, tt.want)
		}
	}

	// A flag that replaces a bad variable leaves nothing to report: the
	// client goes on to dial.
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data, "SESSIOND_TOKEN": "a b"}, "active", "--token", "ok", "--addr", "127.0.0.1:1")
	if code != exitFailed || !strings.Contains(errOut, "cannot reach sessiond") {
		t.Errorf("--token over a bad SESSIOND_TOKEN: exit %d, stderr %q", code, errOut)
	}

	// The file's own mistakes name the file.
	if err := os.WriteFile(file, []byte(`{"addr": "http://127.0.0.1:1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runApp(t, map[string]string{"SESSIOND_DATA": data}, "serve")
	if want := "sessiond serve: config " + file + `: invalid: addr: "http://127.0.0.1:1": want host:port to listen on, not a URL` + "\n"; code != exitFailed || errOut != want {
		t.Errorf("a URL addr in the file: exit %d, stderr %q; want %q", code, errOut, want)
	}
}

func TestLoadConfigEnv(t *testing.T) {
	doc := `{
		"addr": "127.0.0.1:1",
		"data": "/from/file",
		"token": "file-token",
		"providers": {
			"plain":  {"type": "openai"},
			"keyed":  {"type": "openai", "baseURL": "http://127.0.0.1:11434/v1", "apiKey": "own"},
			"named":  {"type": "openai", "apiKey": "{env:MY_KEY}"},
			"unset":  {"type": "openai", "apiKey": "{env:NOT_SET}"},
			"claude": {"type": "anthropic"},
			"claude2": {"type": "anthropic", "apiKey": "sk-own"},
		},
	}`
	path := writeConfig(t, doc)

	c, err := LoadConfig(path, envOf())
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:1" || c.Data != "/from/file" || c.Token != "file-token" {
		t.Fatalf("without env: addr %q, data %q, token %q", c.Addr, c.Data, c.Token)
	}
	if p := c.Providers["plain"]; p.APIKey != "" || p.BaseURL != "" {
		t.Fatalf("without env: plain = %+v", p)
	}
	if len(c.Providers) != 6 {
		t.Fatalf("providers = %v", c.Providers)
	}

	env := envOf(
		"SESSIOND_ADDR", "0.0.0.0:9000",
		"SESSIOND_DATA", "/from/env",
		"SESSIOND_TOKEN", "env-token",
		"OPENAI_BASE_URL", "https://gateway.example/v1",
		"OPENAI_API_KEY", "sk-openai",
		"ANTHROPIC_API_KEY", "sk-anthropic",
		"MY_KEY", "sk-mine",
	)
	c, err = LoadConfig(path, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "0.0.0.0:9000" || c.Data != "/from/env" || c.Token != "env-token" {
		t.Fatalf("with env: addr %q, data %q, token %q", c.Addr, c.Data, c.Token)
	}
	want := map[string]ProviderConfig{
		"plain":   {Type: llm.ProviderOpenAI, BaseURL: "https://gateway.example/v1", APIKey: "sk-openai"},
		"keyed":   {Type: llm.ProviderOpenAI, BaseURL: "http://127.0.0.1:11434/v1", APIKey: "own"},
		"named":   {Type: llm.ProviderOpenAI, BaseURL: "https://gateway.example/v1", APIKey: "sk-mine"},
		"unset":   {Type: llm.ProviderOpenAI, BaseURL: "https://gateway.example/v1", keyEnv: "NOT_SET"}, // named its variable: no fallback
		"claude":  {Type: llm.ProviderAnthropic, APIKey: "sk-anthropic"},
		"claude2": {Type: llm.ProviderAnthropic, APIKey: "sk-own"},
	}
	if !reflect.DeepEqual(c.Providers, want) {
		t.Fatalf("providers =\n%+v\nwant\n%+v", c.Providers, want)
	}
	revalidate(t, c)

	// {env:NAME} in the token.
	c, err = LoadConfig(writeConfig(t, `{"token": "{env:TOK}"}`), envOf("SESSIOND_DATA", "/d", "TOK", "t0k"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "t0k" {
		t.Fatalf("token = %q", c.Token)
	}
	// SESSIOND_TOKEN (or --token) replaces a token whose variable is unset:
	// authentication stays on, so that is no error.
	c, err = LoadConfig(writeConfig(t, `{"token": "{env:TOK}"}`), envOf("SESSIOND_DATA", "/d", "SESSIOND_TOKEN", "env-token"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "env-token" {
		t.Fatalf("token = %q", c.Token)
	}
}

func TestLoadConfigEnvAddsProviders(t *testing.T) {
	env := envOf("SESSIOND_DATA", t.TempDir(),
		"OPENAI_API_KEY", "sk-openai", "OPENAI_BASE_URL", "http://127.0.0.1:8000/v1", "ANTHROPIC_API_KEY", "sk-anthropic")
	c, err := LoadConfig("", env)
	if err != nil {
		t.Fatal(err)
	}
	// Anthropic's models are known, so a key is all it takes; the models
	// of the server OPENAI_BASE_URL names are not.
	anthropicModels, _ := keyModels(llm.ProviderAnthropic)
	want := map[string]ProviderConfig{
		"openai":    {Type: llm.ProviderOpenAI, BaseURL: "http://127.0.0.1:8000/v1", APIKey: "sk-openai"},
		"anthropic": {Type: llm.ProviderAnthropic, APIKey: "sk-anthropic", Models: anthropicModels},
	}
	if !reflect.DeepEqual(c.Providers, want) {
		t.Fatalf("providers = %+v, want %+v", c.Providers, want)
	}
	if c.UsesDemo() || c.Model != "anthropic/claude-sonnet-4-5" {
		t.Fatalf("UsesDemo %v, model %q", c.UsesDemo(), c.Model)
	}
	catalog, err := llm.NewCatalog(c.CatalogSpecs())
	if err != nil {
		t.Fatal(err)
	}
	_, err = catalog.ResolveString("openai/gpt-5")
	if messages.TypeOf(err) != messages.ErrModelNotFound || !strings.Contains(err.Error(), "no models configured") {
		t.Fatalf("resolve of an unlisted model = %v", err)
	}
	if m, err := catalog.ResolveString(c.Model); err != nil || m.Context != 200000 || m.Output != 64000 || m.Prices.Input != 3 {
		t.Fatalf("default model = %+v, %v", m, err)
	}

	// OpenAI's own API, with nothing but its key: its models, gpt-5 first.
	c, err = LoadConfig("", envOf("SESSIOND_DATA", t.TempDir(), "OPENAI_API_KEY", "sk-openai"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "openai/gpt-5" || len(c.Providers) != 1 || len(c.Providers["openai"].Models) != 3 {
		t.Fatalf("model %q, providers %+v", c.Model, c.Providers)
	}
	revalidate(t, c)

	// A configured provider of the type keeps the variable from adding one;
	// a provider of another type that holds the name keeps it.
	path := writeConfig(t, `{"providers": {
		"mine": {"type": "anthropic"},
		"openai": {"type": "script", "file": "o.json"},
	}}`)
	c, err = LoadConfig(path, env)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]ProviderConfig{
		"mine":   {Type: llm.ProviderAnthropic, APIKey: "sk-anthropic"},
		"openai": {Type: llm.ProviderScript, File: filepath.Join(filepath.Dir(path), "o.json")},
	}
	if !reflect.DeepEqual(c.Providers, want) {
		t.Fatalf("providers = %+v, want %+v", c.Providers, want)
	}
	path = writeConfig(t, `{"providers": {"anthropic": {"type": "script", "file": "a.json"}}}`)
	c, err = LoadConfig(path, env)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]ProviderConfig{
		"anthropic": {Type: llm.ProviderScript, File: filepath.Join(filepath.Dir(path), "a.json")},
		"openai":    {Type: llm.ProviderOpenAI, BaseURL: "http://127.0.0.1:8000/v1", APIKey: "sk-openai"},
	}
	if !reflect.DeepEqual(c.Providers, want) {
		t.Fatalf("providers = %+v, want %+v", c.Providers, want)
	}

	// Only a key adds a provider.
	c, err = LoadConfig("", envOf("SESSIOND_DATA", t.TempDir(), "OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.UsesDemo() {
		t.Fatalf("providers = %+v", c.Providers)
	}
}

func TestValidateDefaultModel(t *testing.T) {
	c := defaultConfig(envOf("SESSIOND_DATA", "/d"), nil)
	c.Providers = map[string]ProviderConfig{
		"a-nokey": {Type: llm.ProviderOpenAI, Models: map[string]ModelConfig{"m": {}}},
		"b-empty": {Type: llm.ProviderOpenAI, APIKey: "k"},
		"c-ok":    {Type: llm.ProviderAnthropic, APIKey: "k", Models: map[string]ModelConfig{"z": {}, "y": {}}},
		"d-later": {Type: llm.ProviderScript, File: "/s.json", Models: map[string]ModelConfig{"s": {}}},
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.Model != "c-ok/y" {
		t.Fatalf("default model = %q, want c-ok/y", c.Model)
	}
	revalidate(t, c)

	// A script provider needs no key.
	c = defaultConfig(envOf("SESSIOND_DATA", "/d"), nil)
	c.Providers = map[string]ProviderConfig{"s": {Type: llm.ProviderScript, File: "/s.json", Models: map[string]ModelConfig{"one": {}}}}
	if err := c.validate(); err != nil || c.Model != "s/one" {
		t.Fatalf("validate = %v, model %q", err, c.Model)
	}

	// A configured provider that lists the models a key alone adds takes
	// the key's default; one whose models differ (here in their hosted
	// tools) is not the key's and takes its first model by ID.
	keyed, _ := keyModels(llm.ProviderAnthropic)
	for _, hosted := range [][]string{nil, {"web_search"}} {
		models := maps.Clone(keyed)
		for id, m := range models {
			m.HostedTools = hosted
			models[id] = m
		}
		c = defaultConfig(envOf("SESSIOND_DATA", "/d"), nil)
		c.Providers = map[string]ProviderConfig{"a": {Type: llm.ProviderAnthropic, APIKey: "k", Models: models}}
		want := "a/claude-sonnet-4-5"
		if hosted != nil {
			want = "a/claude-haiku-4-5"
		}
		if err := c.validate(); err != nil || c.Model != want {
			t.Fatalf("hosted tools %q: validate = %v, model %q, want %q", hosted, err, c.Model, want)
		}
	}

	// Nothing usable: no default model.
	c = defaultConfig(envOf("SESSIOND_DATA", "/d"), nil)
	c.Providers = map[string]ProviderConfig{"p": {Type: llm.ProviderOpenAI, Models: map[string]ModelConfig{"m": {}}}}
	if err := c.validate(); err != nil || c.Model != "" {
		t.Fatalf("validate = %v, model %q", err, c.Model)
	}
}

// TestLoadConfigEdgeValues: the smallest and largest values each check
// admits load, and mean what the documentation says.
func TestLoadConfigEdgeValues(t *testing.T) {
	for _, tt := range []struct {
		doc   string
		check func(c Config) bool
	}{
		// A prompt may be as large as a request body.
		{`{"limits": {"promptBytes": 4096, "bodyBytes": 4096}}`,
			func(c Config) bool { return c.Limits.PromptBytes == 4096 && c.Limits.BodyBytes == 4096 }},
		// idleTimeout: 0 is the adapter's default, -1 none, else seconds.
		{`{"providers": {"o": {"type": "openai"}}}`,
			func(c Config) bool { return c.Providers["o"].idle() == 0 }},
		{`{"providers": {"o": {"type": "openai", "idleTimeout": -1}}}`,
			func(c Config) bool { return c.Providers["o"].idle() < 0 }},
		{`{"providers": {"a": {"type": "anthropic", "idleTimeout": 30}}}`,
			func(c Config) bool { return c.Providers["a"].idle() == 30*time.Second }},
		{`{"addr": "127.0.0.1:65535", "token": "!~"}`,
			func(c Config) bool { return c.Addr == "127.0.0.1:65535" && c.Token == "!~" }},
		{`{"addr": "127.0.0.1:0"}`,
			func(c Config) bool { return c.Addr == "127.0.0.1:0" }},
	} {
		c, err := LoadConfig(writeConfig(t, tt.doc), envOf("SESSIOND_DATA", t.TempDir()))
		if err != nil || !tt.check(c) {
			t.Errorf("%s: LoadConfig = %+v, %v", tt.doc, c, err)
		}
	}
}

func TestValidateDemo(t *testing.T) {
	c := defaultConfig(envOf("SESSIOND_DATA", "/d"), nil)
	if !c.UsesDemo() {
		t.Fatal("no providers, but UsesDemo is false")
	}
	c.Model = "demo/scripted"
	c.Agents["plan"] = AgentConfig{Model: "demo/other"}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if c.Model != "demo/scripted" {
		t.Fatalf("model = %q", c.Model)
	}
	// The demo provider is not there once providers are configured.
	c.Providers = map[string]ProviderConfig{"s": {Type: llm.ProviderScript, File: "/s.json"}}
	err := c.validate()
	if err == nil || err.Error() != `invalid: model: provider "demo" is not configured (configured: "s")` {
		t.Fatalf("validate = %v", err)
	}
}

func TestValidateAfterChanges(t *testing.T) {
	// The lead applies flags such as --root to a loaded Config and
	// validates again.
	c, err := LoadConfig("", envOf("SESSIOND_DATA", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	c.Roots = append(c.Roots, "/srv/a/./b/", "relative")
	err = c.validate()
	if err == nil || err.Error() != `invalid: roots[1]: "relative" is not an absolute path` {
		t.Fatalf("validate = %v", err)
	}
	if c.Roots[0] != filepath.FromSlash("/srv/a/b") {
		t.Fatalf("roots[0] = %q, want it cleaned", c.Roots[0])
	}

	// validate restores the build agent and fills zero fields.
	c = Config{Data: "/d", Agents: map[string]AgentConfig{"plan": {}}}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	want := wantDefaults("/d")
	want.Agents["plan"] = AgentConfig{Steps: 50, Permission: defaultRules()}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("validate filled\n%+v\nwant\n%+v", c, want)
	}
}

func TestCatalogSpecs(t *testing.T) {
	prices := llm.Prices{Input: 1, Output: 2, CacheRead: 0.5, CacheWrite: 1.5}
	c := Config{Providers: map[string]ProviderConfig{
		"z-local":  {Type: llm.ProviderOpenAI, BaseURL: "http://127.0.0.1:11434/v1", APIKey: "none", Models: map[string]ModelConfig{"q": {Context: 8192, Output: 1024}}},
		"a-claude": {Type: llm.ProviderAnthropic, Models: map[string]ModelConfig{"c": {Prices: prices}}},
		"m-demo":   {Type: llm.ProviderScript, File: "/d.json"},
	}}
	want := []llm.ProviderSpec{
		{ID: "a-claude", Type: llm.ProviderAnthropic, Models: map[string]llm.ModelSpec{"c": {Prices: prices}}},
		{ID: "m-demo", Type: llm.ProviderScript},
		{ID: "z-local", Type: llm.ProviderOpenAI, HasCredentials: true, Models: map[string]llm.ModelSpec{"q": {Context: 8192, Output: 1024}}},
	}
	if got := c.CatalogSpecs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("CatalogSpecs =\n%+v\nwant\n%+v", got, want)
	}
	catalog, err := llm.NewCatalog(c.CatalogSpecs())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.ResolveString("z-local/q"); err != nil {
		t.Fatal(err)
	}
	_, err = catalog.ResolveString("a-claude/c")
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("resolve without credentials = %v", err)
	}
	if got := (Config{}).CatalogSpecs(); len(got) != 0 {
		t.Fatalf("CatalogSpecs of no providers = %v", got)
	}
}

func TestExampleConfig(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "sessiond.json")
	for _, env := range []func(string) string{
		envOf("SESSIOND_DATA", t.TempDir()),
		envOf("SESSIOND_DATA", t.TempDir(), "OPENAI_API_KEY", "sk-o", "ANTHROPIC_API_KEY", "sk-a"),
	} {
		c, err := LoadConfig(path, env)
		if err != nil {
			t.Fatal(err)
		}
		revalidate(t, c)
		for _, id := range []string{"local", "openai", "anthropic"} {
			if len(c.Providers[id].Models) == 0 {
				t.Fatalf("provider %s has no models: %+v", id, c.Providers)
			}
		}
		if len(c.Providers) != 3 || c.Model != "local/qwen3" || len(c.Agents["build"].Permission) < 3 || len(c.Agents) != 2 {
			t.Fatalf("example = %+v", c)
		}
		catalog, err := llm.NewCatalog(c.CatalogSpecs())
		if err != nil {
			t.Fatal(err)
		}
		if a, err := catalog.ResolveString("anthropic/claude-sonnet-4-5"); err == nil && !slices.Equal(a.HostedTools, []string{"web_search"}) {
			t.Fatalf("hosted tools of the example's Anthropic model: %q", a.HostedTools)
		}
		m, err := catalog.ResolveString(c.Model)
		if err != nil {
			t.Fatal(err)
		}
		if m.Context != 32768 || m.Output != 4096 {
			t.Fatalf("default model = %+v", m)
		}
		withKeys := env("OPENAI_API_KEY") != ""
		for _, ref := range []string{"openai/gpt-5", "anthropic/claude-sonnet-4-5"} {
			if _, err := catalog.ResolveString(ref); (err == nil) != withKeys {
				t.Fatalf("resolve %s with keys %v: %v", ref, withKeys, err)
			}
		}
	}
}

// fuzzEnv is the environment of FuzzLoadConfig.
var fuzzEnv = envOf(
	"SESSIOND_DATA", "/data",
	"OPENAI_API_KEY", "sk-openai",
	"OPENAI_BASE_URL", "http://127.0.0.1:1/v1",
	"KEY", "from-env",
)

// FuzzLoadConfig feeds arbitrary bytes as the config file. Decoding and
// validation never panic and fail only with invalid *messages.Error values;
// an accepted configuration passes validate again unchanged, builds a
// catalog, and survives a round trip through its JSON encoding.
func FuzzLoadConfig(f *testing.F) {
	for _, name := range []string{
		filepath.Join("testdata", "config", "full.jsonc"),
		filepath.Join("..", "..", "examples", "sessiond.json"),
	} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"addr": ":0",}`, `{"data": "rel", "roots": ["a", "/b/../c"]}`,
		`{"providers": {"p": {"type": "openai", "models": {"m": {"context": 10, "output": 5}}}}, "model": "p/m"}`,
		`{"providers": {"s": {"type": "script", "file": "s.json"}}, "agents": {"x": {"model": "s/any", "steps": 3}}}`,
		`{"agents": {"build": null, "b": {"permission": [{"permission": "read", "action": "deny"}]}}}`,
		`{"token": "{env:KEY}", "providers": {"a": {"type": "anthropic", "apiKey": "{env:KEY}"}}}`,
		`{"limits": {"promptBytes": 1, "bodyBytes": 1}, "compaction": {"auto": null, "keep": 1}}`,
		`/* c */ {"cors": ["*", "http://a:1"], // x
		}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := defaultConfig(fuzzEnv, func() (string, error) { return "/home/u", nil })
		c, err := decodeConfig(base, data, "/cfg")
		if err == nil {
			err = c.applyEnv(fuzzEnv, loadOptions{})
		}
		if err == nil {
			err = c.validate()
		}
		if err != nil {
			var me *messages.Error
			if !errors.As(err, &me) || me.Type != messages.ErrInvalid {
				t.Fatalf("error %v (%T) is not an invalid *messages.Error", err, err)
			}
			return
		}
		revalidate(t, c)
		if _, err := llm.NewCatalog(c.CatalogSpecs()); err != nil {
			t.Fatalf("accepted config builds no catalog: %v", err)
		}
		encoded, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeConfig(defaultConfig(fuzzEnv, nil), encoded, "/elsewhere")
		if err == nil {
			err = again.validate()
		}
		if err != nil {
			t.Fatalf("encoded config %s: %v", encoded, err)
		}
		carryUnencoded(&again, c)
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed the config:\n got %+v\nwant %+v", again, c)
		}
	})
}

// TestTuneGC: sessiond raises the collector's target unless GOGC is set.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tuneGC(func(string) string { return "" })
	// Above Go's default of 100: a target at the default would leave the
	// collector's CPU share where docs/performance.md measured it too high.
	if got := debug.SetGCPercent(100); got != defaultGCPercent || got <= 100 {
		t.Fatalf("GC percent %d without GOGC, want %d, above Go's default 100", got, defaultGCPercent)
	}
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent %d with GOGC set, want it left alone", got)
	}
}

// TestTuneProcs: sessiond takes one processor more than Go's default
// unless GOMAXPROCS is set.
func TestTuneProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	tuneProcs(func(string) string { return "" })
	if got := runtime.GOMAXPROCS(0); got != prev+1 {
		t.Fatalf("GOMAXPROCS %d without GOMAXPROCS set, want %d", got, prev+1)
	}
	runtime.GOMAXPROCS(prev)
	tuneProcs(func(k string) string {
		if k == "GOMAXPROCS" {
			return "1"
		}
		return ""
	})
	if got := runtime.GOMAXPROCS(0); got != prev {
		t.Fatalf("GOMAXPROCS %d with GOMAXPROCS set, want it left alone", got)
	}
}

// TestUnsetKeyVariableIsNamed: an apiKey read from an unset variable
// leaves its provider without credentials, and the refusal of its models
// names that variable, not the type's fallback (OPENAI_API_KEY, which
// fills only a provider that sets no apiKey, so it would not help).
func TestUnsetKeyVariableIsNamed(t *testing.T) {
	c, err := LoadConfig(writeConfig(t, `{"providers": {"mock": {"type": "openai", "baseURL": "http://127.0.0.1:1/v1",
		"apiKey": "{env:QA_KEY_UNSET}", "models": {"m": {}}}}, "model": "mock/m"}`), envOf("OPENAI_API_KEY", "sk-fromenv", "SESSIOND_DATA", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := llm.NewCatalog(c.CatalogSpecs())
	if err != nil {
		t.Fatal(err)
	}
	_, err = catalog.ResolveString("mock/m")
	want := `model "mock/m": provider "mock" has no credentials; set environment variable QA_KEY_UNSET, which its apiKey reads`
	if e := messages.AsError(err, messages.ErrUnknown); err == nil || e.Type != messages.ErrModelNotFound || e.Message != want {
		t.Fatalf("resolve = %v, want %q", err, want)
	}
}
