// Package httpapi is sessiond's HTTP adapter (DESIGN.md §7): it decodes
// requests, calls the Session API of an actors.Runtime, and serves JSON
// responses and server-sent event streams. A Server runs as the actor
// "http" under the root of the Runtime's actor system (DESIGN.md §3); the
// actor owns the listener's lifecycle, while requests run on net/http's
// per-connection goroutines.
//
// Invariants:
//
//   - Every route is one row of the route table (routes.go); the same table
//     registers the ServeMux patterns and is checked against the OpenAPI
//     document served at /api/openapi.json.
//   - Errors are served as {"error": {"type", "message"}} with the status of
//     messages.ErrorType.HTTPStatus; a 500 never carries internals (they are
//     logged with a reference the response names).
//   - Reads (get, list, history, messages, log) go to the read-side store and
//     never queue behind execution; commands go through the Runtime, whose
//     actors serialize them per Session.
//   - A durable log stream sends each event with its seq as the SSE id, so a
//     client reconnecting with Last-Event-ID neither loses nor repeats an
//     event. Live streams (/api/event) carry no ids: they cannot be resumed.
//   - Every goroutine a handler starts is waited for before the handler
//     returns; streams end when the client goes away or the Server shuts
//     down.
//
// # Usage
//
//	srv, err := httpapi.NewServer(httpapi.ServerConfig{API: httpapi.Config{
//		Runtime: rt, Pending: pending, Token: os.Getenv("SESSIOND_TOKEN"),
//		Metrics: metrics, Gatherer: registry, Logger: log,
//	}})
//	if err != nil { ... }
//	l, _ := net.Listen("tcp", "127.0.0.1:4096")
//	if err := srv.Start(l); err != nil { ... } // spawns the "http" actor
//	...
//	srv.Shutdown(ctx) // before rt.Shutdown: stop accepting, end streams
package httpapi
