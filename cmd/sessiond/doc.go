// Command sessiond runs the durable agent Session runtime.
//
//	sessiond serve   [flags]            run the daemon (HTTP API)
//	sessiond run     [flags] "text"     run one prompt in-process
//	sessiond session create|list|get    and the other client commands
//
// See docs/cli.md for every command and flag. main is the composition
// root: it reads the configuration, wires the store, the providers, the
// Locations and the actor runtime together, and owns the shutdown order.
package main
