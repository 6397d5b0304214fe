// Package actortest is a harness for testing code built on sessiond's
// runtime: a temporary store, a scripted model that records every request,
// a fake clock, Go-function tools (Blocking holds a call until the test
// releases or interrupts it), and helpers to prompt, wait for idle or for
// an event, and read events, messages and requests. sessiond's own tests
// use it; it is offered to users too.
//
// # Usage
//
//	h := actortest.New(t)
//	h.Model.Reply(script.Text("hi"))
//	sid := h.Session()
//	h.Prompt(sid, "hello")
//	h.WaitIdle(sid)
//	types := h.Types(sid)
//
// Every wait is bounded by Options.Timeout (30 seconds, or less under a
// shorter go test -timeout) and fails the test with what it waited for
// and the Session's last event.
//
// The harness's Tools take any object as input and ask no permission. To
// test tools with a schema the runtime enforces, permission rules and
// questions, put the daemon's registry (tools.NewRegistry, with a
// tools.Pending to answer questions) in Harness.Services.Tools through
// locations.NewTools, before the first Session: Example_registry shows it.
// A script file of the daemon's script provider loads with script.Load
// and replaces Harness.Model.
package actortest
