// Package locations builds the services of one Location, the directory (and
// optional workspace) a Session runs in: model catalog and resolver,
// provider clients, instruction producers, permission state, the canonical
// filesystem root and the tool registry. Service sets are built per Location
// key; a Manager caches the set a Location actor runs with until the actor
// forgets it, and builds a throwaway set for callers that only check one
// (Manager.Check). No layer takes a Session ID.
//
// Its instruction part observes the privileged instructions shown to the
// model and decides how the Session's instruction checkpoint must change.
//
// # Invariants
//
//   - Instruction sources combine in a fixed order (built-ins, AGENTS.md
//     discovery, skill, reference and MCP guidance, API-managed entries)
//     under unique namespaced keys; the keys are stored in checkpoints and
//     never change meaning.
//   - Observation does I/O; Reconcile and RenderBaseline are pure. The
//     clock, environment and home directory are inputs, never globals read
//     inside the package.
//   - An unavailable source never reads as a removal: without a checkpoint
//     it blocks execution, with one it keeps its applied value.
//   - A changed observation yields exactly one update, so publishing it and
//     advancing the applied record is one commit.
//
// locations imports messages and persistence (types only) and the standard
// library; it never imports actors or protoactor.
//
// # Usage
//
//	in, err := locations.NewInstructions(locations.InstructionsConfig{
//		Dir: loc.Directory, Getenv: os.Getenv, Home: home, Clock: clock,
//		Entries: func(ctx context.Context) (map[string]string, error) { ... },
//	})
//	obs := in.Load(ctx)               // concurrent, ordered, per-source latency
//	d := locations.Reconcile(cp, obs) // cp is nil without a checkpoint
//	switch d.Kind {
//	case locations.DecisionBlocked:
//		// fail the execution with d.Err; the prompt stays pending
//	case locations.DecisionBaseline, locations.DecisionUpdate:
//		// commit d.Payload(sid) before promoting input
//	}
//
// After a completed compaction the runner rebaselines from
// locations.RenderBaseline(obs.Keys(), obs.Merge(cp.Applied)).
package locations
