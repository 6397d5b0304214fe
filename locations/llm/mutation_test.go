package llm_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// Tests in this file pin behaviour that mutation testing found unchecked.

func TestInfinitePriceIsRejected(t *testing.T) {
	_, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "a", Type: llm.ProviderOpenAI,
		Models: map[string]llm.ModelSpec{"m": {Prices: llm.Prices{Input: math.Inf(1)}}}}})
	if messages.TypeOf(err) != messages.ErrInvalid {
		t.Fatalf("infinite price: %v", err)
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[llm.EventKind]string{
		llm.TextStart:      "text-start",
		llm.ToolResult:     "tool-result",
		0:                  "",
		llm.ToolResult + 1: fmt.Sprintf("kind(%d)", llm.ToolResult+1),
	} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	e := &llm.Error{Type: messages.ErrProviderInternal, Message: "overloaded", StatusCode: 529}
	if got, want := e.Error(), "provider.internal (529): overloaded"; got != want {
		t.Errorf("with a status: %q, want %q", got, want)
	}
	e.StatusCode = 0
	if got, want := e.Error(), "provider.internal: overloaded"; got != want {
		t.Errorf("without a status: %q, want %q", got, want)
	}
	if got := e.Typed(); got != (messages.Error{Type: messages.ErrProviderInternal, Message: "overloaded"}) {
		t.Errorf("Typed = %+v", got)
	}
}

func TestErrorRetryable(t *testing.T) {
	for _, tt := range []struct {
		e    llm.Error
		want bool
	}{
		{llm.Error{Type: messages.ErrProviderRateLimit}, true},
		{llm.Error{Type: messages.ErrProviderInternal}, true},
		{llm.Error{Type: messages.ErrProviderTransport}, true},
		{llm.Error{Type: messages.ErrProviderTransport, NoRetry: true}, false},
		{llm.Error{Type: messages.ErrProviderRateLimit, NoRetry: true}, false},
		{llm.Error{Type: messages.ErrProviderInvalidRequest}, false},
		{llm.Error{Type: messages.ErrProviderAuth}, false},
		{llm.Error{Type: messages.ErrAborted}, false},
	} {
		if got := tt.e.Retryable(); got != tt.want {
			t.Errorf("%+v Retryable = %v, want %v", tt.e, got, tt.want)
		}
	}
}

func TestAsError(t *testing.T) {
	typed := &llm.Error{Type: messages.ErrProviderAuth, Message: "bad key", RetryAfter: time.Second}
	if got := llm.AsError(fmt.Errorf("stream: %w", typed)); got != typed {
		t.Errorf("wrapped typed error: %+v", got)
	}
	if got := llm.AsError(fmt.Errorf("read: %w", context.Canceled)); got.Type != messages.ErrAborted {
		t.Errorf("cancellation: %+v", got)
	}
	if got := llm.AsError(errors.New("connection reset")); got.Type != messages.ErrProviderUnknown || got.Message != "connection reset" {
		t.Errorf("untyped error: %+v", got)
	}
}

// TestPricesCost: reasoning tokens bill at the output price and cache
// reads and writes at their own prices.
func TestPricesCost(t *testing.T) {
	p := llm.Prices{Input: 1, Output: 10, CacheRead: 100, CacheWrite: 1000}
	u := messages.Tokens{Input: 1, Output: 2, Reasoning: 3}
	u.Cache.Read, u.Cache.Write = 4, 5
	want := (1*1 + 5*10 + 4*100 + 5*1000) / 1e6
	if got := p.Cost(u); math.Abs(got-want) > 1e-12 {
		t.Fatalf("cost %v, want %v", got, want)
	}
	// Cache prices left out bill cached tokens at the input price, not 0.
	p = llm.Prices{Input: 1, Output: 10}
	want = (1*1 + 5*10 + 4*1 + 5*1) / 1e6
	if got := p.Cost(u); math.Abs(got-want) > 1e-12 {
		t.Fatalf("cost without cache prices %v, want %v", got, want)
	}
}

func TestCatalogProvidersIsACopy(t *testing.T) {
	c, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "b", Type: llm.ProviderScript}, {ID: "a", Type: llm.ProviderScript}})
	if err != nil {
		t.Fatal(err)
	}
	c.Providers()[0] = "changed"
	if got := c.Providers(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("Providers after a caller changed a returned slice: %q", got)
	}
}
