package anthropic

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// DefaultBaseURL is the Anthropic API root used when Config.BaseURL is
// empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is max_tokens when neither the request nor Config sets
// one; the API requires a value.
const DefaultMaxTokens = 8192

// Config configures a Provider. The zero value talks to Anthropic without an
// API key.
type Config struct {
	// BaseURL is the API root that v1/messages is resolved against. Empty
	// means DefaultBaseURL.
	BaseURL string
	// APIKey is the credential; the SDK sends it as a bearer token. Empty
	// sends none.
	APIKey string
	// HTTPClient carries the requests; nil means a new client with
	// http.DefaultTransport and no overall timeout (streams are long-lived;
	// cancel through the context).
	HTTPClient *http.Client
	// IdleTimeout fails a request whose response stalls, sending no byte
	// of headers or body for this long, with provider.transport (see
	// wire.IdleBody); 0 means wire.DefaultIdleTimeout, negative never.
	// With a supplied HTTPClient it bounds the body only.
	IdleTimeout time.Duration
	// Prices returns a model's prices for StepFinish.Cost; nil, or false for
	// a model, reports a cost of 0.
	Prices func(modelID string) (llm.Prices, bool)
	// MaxTokens is max_tokens for requests whose MaxOutputTokens is 0; zero
	// means DefaultMaxTokens.
	MaxTokens int
	// ThinkingBudget, when positive and below max_tokens, enables extended
	// thinking with this many budget tokens (the API's minimum is 1024).
	// Models that support adaptive thinking deprecate budgets, and the SDK
	// then prints a warning to stderr: use AdaptiveThinking for them.
	ThinkingBudget int
	// AdaptiveThinking enables adaptive thinking (the model decides how much
	// to think); it takes precedence over ThinkingBudget.
	AdaptiveThinking bool
	// Now returns the current time, used to read a Retry-After HTTP date;
	// nil means time.Now.
	Now func() time.Time
}

// Provider streams Anthropic Messages. It is safe for concurrent use.
type Provider struct {
	messages sdk.MessageService
	cfg      Config
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider for cfg. It fails only on a malformed BaseURL.
func New(cfg Config) (*Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := wire.IdleMiddleware(cfg.IdleTimeout)(r, next)
			return withEventLines(res), err
		}),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	client := sdk.NewClient(opts...)
	return &Provider{messages: client.Messages, cfg: cfg}, nil
}

// validate fills the defaults of cfg and checks BaseURL.
func (c *Config) validate() error {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if err := wire.CheckBaseURL("anthropic", c.BaseURL); err != nil {
		return err
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = wire.DefaultIdleTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: wire.Transport(c.IdleTimeout)}
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Stream implements llm.Provider. The request is sent when iteration starts;
// stopping the iteration early closes the response.
func (p *Provider) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		params, err := lower(req, p.cfg)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		var res *http.Response
		stream := p.messages.NewStreaming(ctx, params, option.WithResponseInto(&res))
		defer func() { _ = stream.Close() }()

		st := newState(func(ev llm.Event) bool { return yield(ev, nil) })
		st.deferred = deferredCalls(req.Messages)
		for stream.Next() {
			if !st.event(stream.Current()) {
				return
			}
			if st.stopped {
				break // message_stop: nothing follows
			}
		}
		// A failure after message_delta, with every block closed, loses
		// only message_stop: the step's content, stop reason and usage are
		// complete, so it finishes (as the OpenAI adapter's does once the
		// finish reason came) rather than fail and be retried.
		done := st.stopped || st.complete()
		if err := stream.Err(); err != nil && (!done || ctx.Err() != nil) {
			yield(llm.Event{}, p.classify(ctx, err, res))
			return
		}
		if !done {
			yield(llm.Event{}, wire.Truncated("message_stop"))
			return
		}
		if st.reason == sdk.StopReasonModelContextWindowExceeded {
			yield(llm.Event{}, &llm.Error{Type: messages.ErrProviderContextOverflow,
				Message: "generation stopped: the model's context window is full (model_context_window_exceeded)"})
			return
		}
		fin := st.finish()
		if p.cfg.Prices != nil {
			if prices, ok := p.cfg.Prices(req.Model.ID); ok {
				fin.Cost = prices.Cost(fin.Usage)
			}
		}
		yield(fin, nil)
	}
}

// classify turns a stream failure into an *llm.Error. res is the HTTP
// response, when one arrived.
func (p *Provider) classify(ctx context.Context, err error, res *http.Response) *llm.Error {
	if ctx.Err() != nil {
		return wire.Failure(ctx, err, res != nil)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return apiError(apiErr, p.cfg.Now())
	}
	return wire.Failure(ctx, err, res != nil)
}
