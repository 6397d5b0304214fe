package openai

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/internal/wire"
	"github.com/sessiond/sessiond/messages"
)

// DefaultBaseURL is the OpenAI API root used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Provider. The zero value talks to OpenAI without an
// API key.
type Config struct {
	// BaseURL is the API root that chat/completions is resolved against, for
	// instance http://127.0.0.1:11434/v1 for Ollama. Empty means
	// DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends no Authorization header.
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
	// LegacyMaxTokens sends Request.MaxOutputTokens as max_tokens instead of
	// max_completion_tokens, for servers that predate the latter. OpenAI's
	// reasoning models reject max_tokens.
	LegacyMaxTokens bool
	// Now returns the current time, used to read a Retry-After HTTP date;
	// nil means time.Now.
	Now func() time.Time
}

// Provider streams Chat Completions. It is safe for concurrent use.
type Provider struct {
	chat oa.ChatCompletionService
	cfg  Config
	// echo holds the IDs of models whose server refused a request for
	// lacking reasoning_content, and textOnly those whose server refused
	// one for its images (see Stream).
	echo, textOnly sync.Map
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider for cfg. It fails only on a malformed BaseURL.
func New(cfg Config) (*Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// The service is built directly rather than through openai.NewClient,
	// which would also read OPENAI_* environment variables: configuration
	// comes only from Config.
	chat := oa.NewChatCompletionService(
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := wire.IdleMiddleware(cfg.IdleTimeout)(r, next)
			done, _ := r.Context().Value(doneKey{}).(*atomic.Bool)
			return streamBody(res, done), err
		}),
	)
	return &Provider{chat: chat, cfg: cfg}, nil
}

// validate fills the defaults of cfg and checks BaseURL.
func (c *Config) validate() error {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if err := wire.CheckBaseURL("openai", c.BaseURL); err != nil {
		return err
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = wire.DefaultIdleTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: wire.Transport(c.IdleTimeout)}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Stream implements llm.Provider. The request is sent when iteration starts;
// stopping the iteration early closes the response.
//
// A server in a thinking mode that wants reasoning_content back on every
// assistant message (DeepSeek) refuses a history without it, for instance
// after a step that failed before its reasoning was kept or after a switch
// from another model: the request is then sent once more with the field on
// every assistant message, and the model's later requests send it from
// the start.
//
// A server of a model that reads no images (DeepSeek) refuses a request
// with an image part, and the prompt that brought it stays in history: the
// request is then sent once more with each image as a text note, as every
// later request of the model.
func (p *Provider) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		var opts options
		_, opts.echo = p.echo.Load(req.Model.ID)
		_, opts.textOnly = p.textOnly.Load(req.Model.ID)
		for {
			// Each refusal turns one option on, for good: at most three
			// requests.
			switch p.stream(ctx, req, opts, yield) {
			case refusedReasoning:
				p.echo.Store(req.Model.ID, true)
				opts.echo = true
			case refusedImages:
				p.textOnly.Store(req.Model.ID, true)
				opts.textOnly = true
			default:
				return
			}
		}
	}
}

// refusal is what a request was refused for, when sending it again with an
// option on may get past it.
type refusal uint8

const (
	refusedOther     refusal = iota // anything else, or nothing
	refusedReasoning                // lacking reasoning_content
	refusedImages                   // its image parts
)

// stream makes one request. It reports, having yielded nothing, whether
// the server refused the request only for lacking reasoning_content, when
// echo is off, or for its images, when textOnly is off.
func (p *Provider) stream(ctx context.Context, req llm.Request, opts options, yield func(llm.Event, error) bool) refusal {
	params, err := lower(req, p.cfg.LegacyMaxTokens, opts)
	if err != nil {
		yield(llm.Event{}, err)
		return refusedOther
	}
	var res *http.Response
	var done atomic.Bool // the [DONE] line came (see streamBody)
	stream := p.chat.NewStreaming(context.WithValue(ctx, doneKey{}, &done), params, option.WithResponseInto(&res))
	defer func() { _ = stream.Close() }()

	// A refusal comes before the stream, so nothing was emitted; the check
	// keeps a request that streamed anything from ever being sent again.
	emitted := false
	st := newState(func(ev llm.Event) bool {
		emitted = true
		return yield(ev, nil)
	})
	for stream.Next() {
		if !st.chunk(stream.Current()) {
			return refusedOther
		}
	}
	if err := stream.Err(); err != nil && (!st.finished || ctx.Err() != nil) {
		switch {
		case emitted || ctx.Err() != nil:
		case !opts.echo && wantsReasoningContent(err):
			return refusedReasoning
		case !opts.textOnly && refusesImages(err):
			return refusedImages
		}
		yield(llm.Event{}, p.classify(ctx, err, res))
		return refusedOther
	}
	if !st.finished && !(done.Load() && emitted && st.callsComplete()) {
		// Some servers never send a finish reason (a few gateways' models,
		// on every response): after what they streamed, [DONE] says the
		// response is whole, and it finishes as other. Taken for a cut,
		// each of their steps failed, its calls never made. Nothing before
		// [DONE], a call whose arguments stop short of complete JSON, or
		// no [DONE] at all, is still a stream cut short.
		yield(llm.Event{}, wire.Truncated("a finish reason"))
		return refusedOther
	}
	if !st.end() {
		return refusedOther
	}
	if st.raw == finishServerResources {
		// DeepSeek's server cut the answer short: a failure of the
		// server, not an answer that ended (which would pass for one).
		yield(llm.Event{}, &llm.Error{Type: messages.ErrProviderInternal,
			Message: "generation stopped: the server ran out of resources (finish_reason " + finishServerResources + ")"})
		return refusedOther
	}
	// A failure after the finish reason (for instance a cut before the
	// usage chunk) loses only usage: the step's content is complete.
	fin := st.finish()
	if prices, ok := p.prices(req.Model.ID); ok {
		fin.Cost = prices.Cost(fin.Usage)
	}
	yield(fin, nil)
	return refusedOther
}

// wantsReasoningContent reports whether err is a server's refusal of a
// request (a 400, before any of the stream) whose message names
// reasoning_content: DeepSeek's "The reasoning_content in the thinking
// mode must be passed back to the API." or "Missing reasoning_content
// field in the assistant message at message index 2".
func wantsReasoningContent(err error) bool {
	var apiErr *oa.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest &&
		strings.Contains(apiErr.Message, "reasoning_content")
}

// refusesImages reports whether err is a server's refusal of a request (a
// 400, before any of the stream) for its image parts, from a model that
// reads none: DeepSeek's "Failed to deserialize the JSON body into the
// target type: messages[1]: unknown variant `image_url`, expected `text`".
func refusesImages(err error) bool {
	var apiErr *oa.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest &&
		strings.Contains(apiErr.Message, "unknown variant `image_url`")
}

// finishServerResources is the finish reason with which DeepSeek ends a
// response its inference servers could not complete.
const finishServerResources = "insufficient_system_resource"

func (p *Provider) prices(model string) (llm.Prices, bool) {
	if p.cfg.Prices == nil {
		return llm.Prices{}, false
	}
	return p.cfg.Prices(model)
}

// classify turns a stream failure into an *llm.Error. res is the HTTP
// response, when one arrived.
func (p *Provider) classify(ctx context.Context, err error, res *http.Response) *llm.Error {
	if ctx.Err() != nil {
		return wire.Failure(ctx, err, res != nil)
	}
	var apiErr *oa.Error
	if errors.As(err, &apiErr) {
		return apiError(apiErr, p.cfg.Now())
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return streamError(streamErr.Event.Data)
	}
	// An error body the SDK could not decode (for instance {"error":"text"})
	// still has its status.
	if res != nil && res.StatusCode >= 400 {
		return statusError(res.StatusCode, res.Header, errorBody{Message: err.Error()}, p.cfg.Now())
	}
	return wire.Failure(ctx, err, res != nil)
}
