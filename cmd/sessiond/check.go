package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
)

var checkCommand = &command{
	name:     "check",
	synopsis: "[flags]",
	summary:  "verify the store: its file, every log, every projection",
	help: `
Check opens the store <data>/sessiond.db as serve would (recovering what the
write-ahead log holds) and verifies it: bbolt's own check of the file, that
every Session's log reads back whole from seq 0 without a hole, and that
every projection (Session records, messages, the inbox, the ID index) is
exactly what the logs make of it. For the last, it replays every log into a
new store in a temporary directory (--tmp, default the data directory; it
needs room for a copy) and compares both row by row. Instruction entries
and saved approvals are kept beside the logs, not made from them: an
entry must belong to a Session that exists.

It prints what it checked, or each problem found (the first 20, then how
many more). Like run, it cannot share the data directory with a running
daemon. Exit status: 0 when the store is sound, 1 when a problem was found
or the store could not be opened (a damaged write-ahead log: see 'sessiond
repair').`,
	run: runCheck,
}

// runCheck is the check command.
func runCheck(ctx context.Context, a *app, c *command, args []string) int {
	var tmp *string
	o, code, ok := a.offline(c, args, func(fs *flag.FlagSet) {
		tmp = fs.String("tmp", "", "`DIR` for the store rebuilt from the logs (default the data directory)")
	})
	if !ok {
		return code
	}
	if *tmp != "" {
		if err := checkDir("--tmp", *tmp); err != nil {
			return a.fail(c, err)
		}
	}
	path := o.path
	st, err := openOffline(path, o.opts)
	if err != nil {
		return a.fail(c, withRepairHint(err, o.cfg.Data))
	}
	defer st.Close()
	r, err := st.Verify(ctx, cmp.Or(*tmp, o.cfg.Data))
	if ctx.Err() != nil {
		// Interrupted: what it had not rebuilt yet is no finding.
		fmt.Fprintf(a.stderr, "sessiond check: stopped before it finished (%v); the store is unchanged\n", context.Cause(ctx))
		return exitCode(ctx)
	}
	if err != nil {
		return a.fail(c, err)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintf(a.stdout, "%s is sound (Sessions: %d, events: %d): every projection is what the logs make\n", path, r.Sessions, r.Events)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "%s (Sessions: %d, events: %d) has problems:\n", path, r.Sessions, r.Events)
	for _, p := range r.Problems {
		fmt.Fprintf(a.stdout, "  %s\n", terminalSafe(p, false))
	}
	if r.More > 0 {
		fmt.Fprintf(a.stdout, "  ... and %d more\n", r.More)
	}
	return exitFailed
}
