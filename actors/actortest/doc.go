// Package actortest is a harness for testing code built on sessiond's
// runtime: a temporary store, a scripted model that records every request,
// a fake clock, Go-function tools (Blocking holds a call until the test
// releases or interrupts it), and helpers to prompt, wait for idle and
// read events. sessiond's own tests use it; it is offered to users too.
//
// # Usage
//
//	h := actortest.New(t)
//	h.Model.Reply(script.Text("hi"))
//	sid := h.Session()
//	h.Prompt(sid, "hello")
//	h.WaitIdle(sid)
//	types := h.Types(sid)
package actortest
