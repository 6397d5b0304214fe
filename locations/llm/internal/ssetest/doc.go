// Package ssetest is the test harness shared by the provider adapters: an
// httptest server that answers with scripted responses written chunk by chunk
// (each chunk flushed, so boundaries can fall inside an SSE line or inside
// JSON), that can cut a stream, reset a connection or hang; an in-memory
// RoundTripper with the same chunking for fuzzing without sockets; and helpers
// that collect, print and check normalized llm event sequences.
//
// It is imported only by tests.
//
// # Usage
//
//	srv := ssetest.NewServer(t, ssetest.Reply{Chunks: ssetest.Split(body, 17, 40)})
//	p, _ := openai.New(openai.Config{BaseURL: srv.URL, HTTPClient: srv.Client()})
//	events, err := ssetest.Collect(p.Stream(ctx, req))
//	if bad := ssetest.Check(events, err); bad != nil { t.Fatal(bad) }
//	got := ssetest.Lines(events)
package ssetest
