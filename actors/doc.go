// Package actors is the protoactor glue of sessiond: the process-global
// execution router, one supervisor per Location, one coordinator actor per
// Session, a drain child per busy period and a child per local tool call,
// plus the runner those drains execute.
//
// # Topology
//
//	root
//	 ├─ http               the HTTP adapter (package httpapi), when serving
//	 └─ execution          router: sessionID -> store.Get -> Location -> Session actor
//	     └─ location-N      one per Location key in use; holds its service set; restarts and passivates
//	                        Sessions; stops (and its set is dropped) once none of them has an actor
//	         └─ <sid>-N     coordinator: mailbox serializes wake/run/interrupt/wait; never blocks
//	             └─ drain$N owns the busy period's goroutine (the runner loop)
//	                 └─ tool children, one per local tool call; a panic becomes tool.failed "unknown"
//
// # Invariants
//
//   - One busy period per Session at a time in this process, observed by one
//     session.execution.started.1 and exactly one terminal (succeeded,
//     failed or interrupted), including coalesced follow-up drains and
//     joined resumes. The events are history; Active is the authority on
//     liveness and is empty after a restart.
//   - Every step closes with exactly one step.ended or step.failed, only
//     after every tool call it started has settled (the store enforces it).
//   - A tool call is durable before its tool starts; a tool from a process
//     that died is failed as aborted by the next drain and never re-run.
//   - Durable events are batched between durability points (tool.called,
//     a step's terminal); a live event waits behind the durable events
//     queued before it, at most Config.LiveHold, so subscribers never see
//     a delta before its fragment's start and a fast model's tool step
//     costs two commits.
//   - The coordinator's decisions are a pure state machine (coordinator.go);
//     retry delays read an injected Clock.
//
// # Usage
//
//	rt, err := actors.New(actors.Config{Store: st, Locations: locations.NewManager(build)})
//	defer rt.Shutdown(ctx)
//	s, _, _ := rt.Create(ctx, persistence.CreateSession{Location: loc})
//	rt.Prompt(ctx, persistence.PromptRequest{SessionID: s.ID, Prompt: messages.Prompt{Text: "hi"}})
//	rt.Wait(ctx, s.ID)
//
// Permission questions reach clients through the Bus only when the
// embedder wires them there, as cmd/sessiond does: a tools.Pending as the
// Builder's Asker (locations.BuildConfig.Asker), whose OnAsked and
// OnReplied publish each payload on the Runtime's Bus as a live event
// (messages.Event{ID, Created, Type: p.Type(), Data: p}). Stop in this
// order: rt.Shutdown, then pending.CancelAll (questions nobody answered
// are withdrawn), then the store's Close.
//
// Package actortest offers a harness (temp store, scripted model, fake
// clock, Go-function tools) for tests of code built on this package.
package actors
