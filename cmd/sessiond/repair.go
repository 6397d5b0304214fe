package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sessiond/sessiond/persistence"
)

var repairCommand = &command{
	name:     "repair",
	synopsis: "[flags]",
	summary:  "recover a store whose write-ahead log is damaged",
	help: `
Repair opens the store <data>/sessiond.db as serve would and reports
whether it needs repairing. A store needs it when its write-ahead log holds
a record that was written durably and is damaged now (a checksum that no
longer matches, while whole records follow it): serve and run then refuse
to open it, because recovering it means dropping that commit and every
commit after it, which clients were told had succeeded. It also needs it
when the last run did not stop cleanly and the log file it was writing is
gone (deleted, emptied, or the database file was copied without it):
commits since the last flush into the database file were in it. (Killed
while a flush ran, it also needs the file before that one, which holds
the commits the flush was writing.)

Without --force, repair only reports the damage: the log file, the record
and how many whole records follow it, and what the commits it would drop
wrote, as far as the records after the damaged one can be read: for each
Session, the seqs of its events there (and whether it was created there),
and how many other rows. With --force it reports the same, copies both
log files beside the store (sessiond.db-wal.damaged-TIME,
sessiond.db-wal2.damaged-TIME) and then recovers every commit before the
damaged record, dropping it and the rest. Sessions keep their history up to there, with no hole; what the
dropped commits recorded is gone from them.

Exit status: 0 when the store opens (repaired or never damaged), 1 when it
is damaged and --force was not given, or when it cannot be opened for a
reason repair does not fix (another sessiond has it open, a missing file).`,
	run: runRepair,
}

// runRepair is the repair command.
func runRepair(ctx context.Context, a *app, c *command, args []string) int {
	var force *bool
	o, code, ok := a.offline(c, args, func(fs *flag.FlagSet) {
		force = fs.Bool("force", false, "drop the damaged record and every commit after it (a copy of the log is kept)")
	})
	if !ok {
		return code
	}
	path, opts := o.path, o.opts
	st, err := openOffline(path, opts)
	var d *persistence.WALDamage
	switch {
	case err == nil:
		if err := st.Close(); err != nil {
			return a.fail(c, err)
		}
		fmt.Fprintf(a.stdout, "%s opens cleanly: nothing to repair\n", path)
		return exitOK
	case !errors.As(err, &d):
		return a.fail(c, err)
	}
	switch {
	case d.Missing:
		fmt.Fprintf(a.stdout, "%s: the log file that holds the commits from record %d on (generation %d) is missing: "+
			"neither %s nor %s2 holds it; the last run did not stop cleanly, so it may have acknowledged commits that are lost\n",
			path, d.Record, d.Gen, d.File, d.File)
		if d.Intact > 0 {
			// Killed while a flush ran: the later file is there, but its
			// records come after the missing ones and go with them.
			fmt.Fprintf(a.stdout, "the other log file holds %d later records, which cannot be recovered without it either\n", d.Intact)
		}
	case d.Short > 0:
		fmt.Fprintf(a.stdout, "%s: it is %d bytes, smaller than any log file sessiond has started: it was cut short (a copy that stopped early, a truncation) "+
			"after the last run, which did not stop cleanly, wrote to it; the commits from record %d on that it held, if any, are lost\n", d.File, d.Short, d.Record)
	case d.Header:
		fmt.Fprintf(a.stdout, "%s: its header is damaged; it holds record %d, which cannot be checked without it, and %d records follow it\n", d.File, d.Record, d.Intact)
	default:
		fmt.Fprintf(a.stdout, "%s: record %d at offset %d is damaged; %d whole records follow it\n", d.File, d.Record, d.Offset, d.Intact)
	}
	if !d.Missing && d.Short == 0 {
		// Read before anything changes: a repair zeroes what it drops. An
		// operator who cannot be told whose commits go should not be
		// asked to drop them, so a failed read stops the repair.
		dr, err := d.Dropped()
		if err != nil {
			return a.fail(c, err)
		}
		printDropped(a.stdout, d, dr)
	}
	if !*force {
		again := "'sessiond repair --data " + o.cfg.Data + " --force'"
		switch {
		case d.Missing:
			fmt.Fprintf(a.stdout, "put the file back if there is a copy of it; %s opens the store without it%s\n", again, keptCopy(path))
		case d.Short > 0:
			fmt.Fprintf(a.stdout, "put the whole file back if there is a copy of it; %s opens the store with the records it still holds%s\n", again, keptCopy(path))
		default:
			fmt.Fprintf(a.stdout, "repairing drops it and every commit after it; run %s to do so%s\n", again, keptCopy(path))
		}
		return exitFailed
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	for _, suffix := range []string{"-wal", "-wal2"} {
		to := path + suffix + ".damaged-" + stamp
		if _, err := os.Stat(path + suffix); errors.Is(err, os.ErrNotExist) {
			continue // the missing file of a d.Missing: nothing to keep
		}
		if err := copyDurably(path+suffix, to); err != nil {
			return a.fail(c, fmt.Errorf("keeping a copy of the log: %w", err))
		}
		fmt.Fprintf(a.stdout, "kept a copy of %s at %s\n", path+suffix, to)
	}
	opts.RepairWAL = true
	if st, err = persistence.Open(path, opts); err != nil {
		return a.fail(c, err)
	}
	if err := st.Close(); err != nil {
		return a.fail(c, err)
	}
	switch {
	case d.Missing:
		fmt.Fprintf(a.stdout, "repaired %s: opened without the missing log file; commits from record %d on, if the last run made any, are lost\n", path, d.Record)
	case d.Short > 0:
		fmt.Fprintf(a.stdout, "repaired %s: recovered the records before record %d; the commits the cut-short file lost, if any, are gone\n", path, d.Record)
	default:
		fmt.Fprintf(a.stdout, "repaired %s: dropped record %d and the %d commits after it\n", path, d.Record, d.Intact)
	}
	return exitOK
}

// keptCopy says, for a repair's advice, that --force keeps a copy of the
// log files beside path, when there is one to keep.
func keptCopy(path string) string {
	for _, suffix := range []string{"-wal", "-wal2"} {
		if _, err := os.Stat(path + suffix); err == nil {
			return " (a copy of the log is kept)"
		}
	}
	return ""
}

// droppedListed is how many Sessions printDropped lists: a damaged log of
// a busy daemon can take commits of thousands, and the first ones with a
// count of the rest say enough to decide.
const droppedListed = 20

// printDropped prints what the commits a repair of d drops wrote, per
// Session, as dr has it.
func printDropped(w io.Writer, d *persistence.WALDamage, dr persistence.Dropped) {
	var unread string
	switch {
	case !d.Header && dr.Unread > 1:
		unread = fmt.Sprintf(" (record %d itself cannot be read, nor %d of the records after it)", d.Record, dr.Unread-1)
	case !d.Header:
		unread = fmt.Sprintf(" (record %d itself cannot be read)", d.Record)
	case dr.Unread > 0:
		unread = fmt.Sprintf(" (%d of them cannot be read)", dr.Unread)
	}
	fmt.Fprintf(w, "what repairing drops%s:\n", unread)
	for i, s := range dr.Sessions {
		if i == droppedListed {
			fmt.Fprintf(w, "  and %d more Sessions\n", len(dr.Sessions)-i)
			break
		}
		seqs := fmt.Sprintf("events %d to %d", s.FirstSeq, s.LastSeq)
		if s.FirstSeq == s.LastSeq {
			seqs = fmt.Sprintf("event %d", s.FirstSeq)
		}
		created := ""
		if s.Created {
			created = ", created in the dropped commits"
		}
		fmt.Fprintf(w, "  %s: %s (%s)%s\n", s.ID, seqs, plural(s.Events, "event"), created)
	}
	if dr.Other > 0 {
		fmt.Fprintf(w, "  %s\n", plural(dr.Other, "other row"))
	}
	if len(dr.Sessions) == 0 && dr.Other == 0 {
		fmt.Fprintf(w, "  nothing that can be read\n")
	}
}

// copyDurably copies file from to a new file to and syncs it and its
// directory, so the copy exists before the original is changed.
func copyDurably(from, to string) (err error) {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := dst.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	if err := dst.Sync(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// syncDir syncs directory dir, so that the names made in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// offlineStore is what a command that opens the store itself (check,
// repair) needs once its flags are parsed.
type offlineStore struct {
	cfg  Config
	path string // the store file, which exists
	opts persistence.Options
}

// offline parses args for c: --data, --config, --log-level (default
// warn), the flags that flags adds, and no arguments. It builds the logger
// and loads the configuration, and fails when the data directory holds no
// store. ok false means the command is done, with exit status code.
func (a *app) offline(c *command, args []string, flags func(fs *flag.FlagSet)) (o offlineStore, code int, ok bool) {
	fs := newFlags(c)
	var sf storeFlags
	sf.register(fs, "warn")
	flags(fs)
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return offlineStore{}, code, false
	}
	if len(pos) > 0 {
		return offlineStore{}, a.usageError(c, "unexpected argument %q", pos[0]), false
	}
	log, err := sf.logger(a.stderr, a.stderrTTY)
	if err != nil {
		return offlineStore{}, a.usageError(c, "%v", err), false
	}
	cfg, err := sf.load(a, nil, false)
	if err != nil {
		return offlineStore{}, a.fail(c, err), false
	}
	path := filepath.Join(cfg.Data, StoreFileName)
	if _, err := os.Stat(path); err != nil {
		return offlineStore{}, a.fail(c, fmt.Errorf("no store to %s: %w", c.name, err)), false
	}
	return offlineStore{cfg: cfg, path: path, opts: persistence.Options{Timeout: lockTimeout, Logger: log}}, 0, true
}

// openOffline opens the store at path for a command that needs it to
// itself: a running daemon's lock is an error saying so.
func openOffline(path string, opts persistence.Options) (*persistence.Bolt, error) {
	st, err := persistence.Open(path, opts)
	if errors.Is(err, persistence.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is locked; stop the sessiond that has it open first", errDataDirInUse, path)
	}
	return st, err
}

// plural returns n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
