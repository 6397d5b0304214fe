package anthropic

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/locations/llm/internal/ssetest"
	"github.com/sessiond/sessiond/messages"
)

// TestStalledStream: a response that stops sending bytes, in its body or
// before its headers, fails as provider.transport once the idle timeout
// passes, instead of keeping its Session busy until someone interrupts it.
// (The server never sends more, so the outcome does not depend on timing.)
func TestStalledStream(t *testing.T) {
	partial := messageStart(smallUsage) + blockStart("0", `{"type":"text","text":""}`) +
		blockDelta("0", `{"type":"text_delta","text":"partial"}`)
	for _, tc := range []struct {
		name   string
		reply  ssetest.Reply
		client bool // the test server's client: the idle limit bounds the body only
		events int
		want   string
	}{
		{"body", ssetest.Reply{Chunks: []string{partial}, Hang: true}, true, 2, "stalled"},
		{"headers", ssetest.Reply{Hang: true}, false, 0, "timeout awaiting response headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := ssetest.NewServer(t, tc.reply)
			cfg := Config{BaseURL: srv.URL, APIKey: "sk-ant-test", IdleTimeout: 50 * time.Millisecond}
			if tc.client {
				cfg.HTTPClient = srv.Client()
			}
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			events, err := ssetest.Collect(p.Stream(context.Background(), simpleRequest()))
			le := wantError(t, err, messages.ErrProviderTransport, 0, 0)
			if !le.Retryable() || !strings.Contains(le.Message, tc.want) || len(events) != tc.events {
				t.Fatalf("error %q (retryable %v), events %v", le.Message, le.Retryable(), ssetest.Lines(events))
			}
		})
	}
}
