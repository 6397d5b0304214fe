// Package tools is the tool layer of one Location: a registry of scoped
// tool registrations, the permission gate tools ask before they act, and
// the built-in tools read, bash and apply_patch.
//
// # Registry
//
// A Registry belongs to one Location (its root directory and named project
// references). Contributors register tools in a Scope (built-ins, a plugin,
// an MCP server); closing the scope removes its tools and rebuilds the
// advertised catalog. Definitions materializes the catalog for one agent:
// tools whose permission the agent's rules deny for every pattern are not
// advertised. Execute looks a call up, decodes its JSON input, validates it
// against the tool's JSON schema, asks for the call (its permission,
// pattern "*", the input shown) unless the tool's Definition says it asks
// for its calls itself as the built-ins do (AsksItself: they ask about
// exactly the commands and paths a call touches), runs the handler with a
// CallContext, validates the result, and settles every failure as a *messages.Error:
// tool.execution (unknown tool, bad input, handler error), permission.rejected,
// aborted (cancellation) or unknown (a recovered panic). Nothing a tool does
// crashes the caller.
//
// # Permissions
//
// Rules {permission, pattern, action} are wildcard-matched (Match: '*' any
// run, '?' one character, '\' makes the next character literal, a trailing
// " *" is optional) against
// the request's permission and patterns, which are plain text, and
// evaluated per agent; the last matching rule wins and the default is ask. A Session without an agent runs as
// DefaultAgent ("build") for both tool materialization and permission
// evaluation. Permissions.Check applies deny and allow rules, then saved
// project approvals (ApprovalStore), then asks the user through an Asker.
// Replies are once, always (saved, then allowed) and reject (with an
// optional message that reaches the model). "Always" saves what the user
// was asked about as a literal pattern (LiteralPattern): approving the
// command "ls *.txt" approves that command only. The one deliberate
// wildcard is external_directory's "<dir>/*", which approves the directory
// and everything beneath it. Pending is the in-process
// Asker: questions wait under request IDs until Reply, their context ends,
// or Cancel withdraws them on interrupt; hooks publish the live
// permission.asked and permission.replied events. As in opencode, a reply
// settles the Session's other questions it decides: "always" saves the
// approval first, then approves every other question of the Session and
// project that rules and saved approvals now allow, evaluated as its ask
// was; "reject" rejects every other question of the Session, so a step
// that asked twice ends; "once" answers one question only.
//
// # Built-ins
//
//   - read: one file or directory relative to the Location root or as
//     "@reference/path". Absolute paths, ".." escapes and symbolic links
//     leading out of the root are rejected; permission read is checked
//     against the canonical path. Text is paged by one-based line offset
//     and limit (streamed, so a 100 MB file costs one buffer), binary files
//     come back base64-encoded up to a size limit, directories list their
//     children directories first, then alphabetically, with a next cursor.
//     Output is valid UTF-8: a name that is not plain text (invalid UTF-8,
//     control characters, '"' or '\') is shown Go-quoted, here and in
//     apply_patch's reports.
//   - bash: runs `bash -c` (or sh) in the Location or a workdir. Bash is
//     NOT sandboxed: the command has the daemon user's full file system,
//     process and network authority. Permission bash (patterns: each
//     simple command of the script, parsed as the shell reads it; default
//     ask) guards every call; "always" approves those commands in that
//     workdir only. A workdir outside the Location also
//     needs external_directory. Mentions of outside paths only produce
//     advisory warnings. The command runs in its own session, without a
//     terminal (a password prompt fails at once), and its own process
//     group, which is killed on timeout, cancellation and when the shell
//     exits. A process that leaves the group escapes those kills: one that
//     calls setsid, or a background job of a shell with job control on
//     (set -m), which gets a process group of its own. After a crash, the
//     next daemon's ledger sweep (ProcessLedger) kills it by its run token.
//   - apply_patch: "*** Begin Patch" edits (package patch). The whole patch
//     is parsed, every target resolved, external directories approved once
//     each, the edit batch approved once, every operation preflighted; then
//     operations commit in order. A late failure returns a report naming
//     applied and not-applied files; there is no rollback, and moves are
//     rejected. A deletion removes the name it is given: a symbolic link
//     there goes, wherever it points (or if it points nowhere), and its
//     target stays.
//
// # Usage
//
//	perms, _ := tools.NewPermissions(tools.PermissionsConfig{
//		Project: root, Agents: agentRules, Approvals: locations.NewApprovals(store), Asker: pending,
//	})
//	reg, _ := tools.NewRegistry(tools.Config{Root: root, Permissions: perms})
//	builtins, _ := tools.RegisterBuiltins(reg, tools.BuiltinConfig{})
//	defer builtins.Close()
//
//	defs := reg.Definitions(agent, nil) // advertise to the model
//	res, err := reg.Execute(ctx, tools.Call{
//		SessionID: sid, Agent: agent, AssistantMessageID: mid, CallID: id, Name: name, Input: input,
//	})
//	if err != nil {
//		failure := messages.AsError(err, messages.ErrUnknown) // the typed error it is or wraps
//		...
//	}
package tools
