package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/mattn/go-isatty"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/tools"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, what a shell reports for ^C
)

// exitReaderGone is the status of a command that stopped writing because
// the reader of its stdout went away (sessiond log … | head -1): 0, what
// it would have been had everything been read, with nothing on stderr. A
// program that SIGPIPE kills reports 141 (128 + SIGPIPE), but sessiond
// catches SIGPIPE on purpose (see main), and the reader leaving is its
// choice, not a failure: a script under set -o pipefail must not fail
// because its head saw enough, and run's status must stay the outcome of
// its busy period, which goes on to its end when nobody reads the
// transcript. One status for every command keeps that rule simple.
const exitReaderGone = exitOK

// readerGone reports whether err is a write to a pipe whose reader has
// gone away. With SIGPIPE caught, such a write fails with EPIPE instead
// of killing the process.
func readerGone(err error) bool { return errors.Is(err, syscall.EPIPE) }

// defaultGCPercent is the garbage collector's target unless GOGC is set.
// sessiond's live heap is small and bounded (memtables of at most about
// twice the store's FlushBytes, idle Session actors at a few KiB each), and
// at Go's default of 100 the collector ran whenever the heap doubled: with
// 100 busy Sessions it took about a fifth of the CPU. 200 cuts the
// runtime's CPU per step by about a tenth, for a heap that peaks at three
// times the live one instead of twice (docs/performance.md).
const defaultGCPercent = 200

// tuneGC sets the collector's target unless the environment chose one.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// tuneProcs gives the Go scheduler one processor more than it would take
// (one per core, or the cgroup's CPU limit), unless GOMAXPROCS is set. The
// store's syncer spends a large share of its time in fdatasync, a blocking
// syscall: the runtime takes its processor away only after a monitor tick,
// and when the call returns the syncer waits in the global run queue for a
// processor while every one is busy, delaying every acknowledgment behind
// it. One spare processor keeps the cores busy during the call and lets the
// syncer go on at once: with 100 busy Sessions on two cores, 20-30% more
// steps per second with fsync on, and no change without it
// (docs/performance.md).
func tuneProcs(getenv func(string) string) {
	if getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
}

func main() {
	// A closed stdout (run … | head -1) must be a write error the commands
	// handle (readerGone: they stop writing and end quietly; run lets its
	// busy period end, so the Session gets its terminal event), not the
	// signal that kills a Go program writing to a broken pipe on fd 1 or 2.
	// Notify, not Ignore: an ignored signal stays ignored across exec, so
	// every tool command would run with SIGPIPE ignored (yes | head would
	// fail with "Broken pipe", a shell loop writing to a closed pipe would
	// never end), while a caught one is reset to the default in children.
	// Nothing reads the channel: the runtime drops what does not fit.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	tuneGC(os.Getenv)
	tuneProcs(os.Getenv)
	ctx, stop := notifySignals()
	a := &app{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		getenv:    os.Getenv,
		stdinTTY:  isTerminal(os.Stdin),
		stdoutTTY: isTerminal(os.Stdout),
		stderrTTY: isTerminal(os.Stderr),
	}
	code := a.main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a terminal (not a pipe, file or
// /dev/null).
func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// signalCause is the cancellation cause of the command context: the signal
// that ended it.
type signalCause struct{ sig os.Signal }

func (c signalCause) Error() string { return c.sig.String() + " received" }

// exitCode returns the shell's status for a process ended by the signal
// that cancelled ctx, or exitInterrupted when ctx ended otherwise.
func exitCode(ctx context.Context) int {
	var c signalCause
	if errors.As(context.Cause(ctx), &c) {
		if s, ok := c.sig.(syscall.Signal); ok {
			return 128 + int(s)
		}
	}
	return exitInterrupted
}

// stopSignals returns the signals that stop sessiond: SIGINT (^C),
// SIGTERM and SIGHUP. SIGHUP is what a foreground serve or run gets when
// its terminal closes; its default action killed the process at once,
// without the graceful stop, so no terminal event was recorded and the
// tool commands, in process groups of their own, ran on. A signal ignored
// from the start stays ignored: Notify would install a handler and undo
// what the parent asked for (nohup ignores SIGHUP, a shell ignores SIGINT
// in its background jobs, sessiond serve &).
func stopSignals() []os.Signal {
	var sigs []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// stopsRuntime reports whether sig asks run to stop the runtime (reason
// shutdown) rather than interrupt its Session for the user, as ^C does:
// SIGTERM, and SIGHUP, which says that the terminal, and the user at it,
// is gone.
func stopsRuntime(sig os.Signal) bool {
	return sig == syscall.SIGTERM || sig == syscall.SIGHUP
}

// notifySignals returns a context cancelled by the first of stopSignals.
// A second one ends the process at once if a graceful stop hangs: the
// process groups of running tool commands are killed first (what a shell
// started would outlive the process), then the signal's default action
// ends it. stop releases the handler.
func notifySignals() (context.Context, func()) { return notifyOn(stopSignals(), processSignals) }

// signalHooks are what notifyOn does to the process; tests pass their own.
type signalHooks struct {
	notify    func(c chan<- os.Signal, sigs ...os.Signal)
	stop      func(c chan<- os.Signal)
	reset     func(sigs ...os.Signal)
	killTools func()
	raise     func(sig syscall.Signal)
}

var processSignals = signalHooks{notify: signal.Notify, stop: signal.Stop, reset: signal.Reset,
	killTools: tools.KillProcesses, raise: func(sig syscall.Signal) { _ = syscall.Kill(os.Getpid(), sig) }}

// notifyOn is notifySignals for the signals sigs, through h.
func notifyOn(sigs []os.Signal, h signalHooks) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	if len(sigs) > 0 { // none would relay every signal
		h.notify(ch, sigs...)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-ch:
			cancel(signalCause{s})
		case <-done:
			return
		}
		select {
		case s := <-ch:
			h.killTools()
			h.reset(sigs...)
			if sig, ok := s.(syscall.Signal); ok {
				h.raise(sig)
			}
		case <-done:
		}
	})
	return ctx, func() {
		close(done)
		wg.Wait()
		h.stop(ch)
		cancel(nil)
	}
}

// app is the command-line program with its process state as fields, so
// tests can run commands in-process.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// stdinTTY says whether permission questions can be asked on stdin;
	// stdoutTTY whether output may use colour and indentation; stderrTTY
	// whether logs are for a human.
	stdinTTY, stdoutTTY, stderrTTY bool
}

// command is one subcommand.
type command struct {
	name     string
	synopsis string // arguments after the name, for the usage line
	summary  string // one line for the command list
	help     string // paragraphs shown by --help above the flags
	run      func(ctx context.Context, a *app, c *command, args []string) int
}

// commands lists the subcommands in the order `sessiond --help` shows
// them.
var commands = []*command{
	serveCommand,
	runCommand,
	sessionCommand,
	promptCommand,
	logCommand,
	historyCommand,
	messagesCommand,
	activeCommand,
	resumeCommand,
	waitCommand,
	interruptCommand,
	compactCommand,
	instructionCommand,
	permissionsCommand,
	replyCommand,
	backupCommand,
	checkCommand,
	repairCommand,
}

// findCommand returns the subcommand called name.
func findCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// main runs the command line args (without the program name) and returns
// the exit status.
func (a *app) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		a.usage(a.stdout)
		return exitOK
	case "help":
		if len(args) == 1 || slices.Contains([]string{"-h", "-help", "--help"}, args[1]) {
			a.usage(a.stdout)
			return exitOK
		}
		if c := findCommand(args[1]); c != nil {
			return c.run(ctx, a, c, append(args[2:], "--help"))
		}
		args = args[1:]
	}
	c := findCommand(args[0])
	if c == nil {
		fmt.Fprintf(a.stderr, "sessiond: unknown command %q\n\n", args[0])
		a.usage(a.stderr)
		return exitUsage
	}
	return c.run(ctx, a, c, args[1:])
}

// usage prints the program's usage: the command list.
func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `sessiond is a durable agent Session runtime.

Usage:
  sessiond <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'sessiond <command> --help' for a command's flags.
Environment: SESSIOND_ADDR, SESSIOND_DATA, SESSIOND_TOKEN, OPENAI_BASE_URL,
OPENAI_API_KEY, ANTHROPIC_API_KEY. Documentation: docs/cli.md.
`)
}

// newFlags returns an empty flag set for c. Parse errors and --help are
// handled by parse, so the set itself prints nothing.
func newFlags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args, allowing flags before, between and after positional
// arguments ("--" ends the flags). With --help it prints c's usage to
// stdout; on a bad flag it prints the error to stderr. ok is false in both
// cases and code is the exit status to return.
func (a *app) parse(c *command, fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	var rest []string
	for i, arg := range args {
		if arg == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			a.commandUsage(a.stdout, c, fs)
			return nil, exitOK, false
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "sessiond %s: %s\nRun 'sessiond %s --help' for usage.\n", c.name, flagError(err), c.name)
			return nil, exitUsage, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, rest...), exitOK, true
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagNamed finds the flag names in the flag package's errors, which it
// writes with one dash ("flag provided but not defined: -x").
var flagNamed = regexp.MustCompile(`(flag provided but not defined: |flag needs an argument: |for flag |" for )-([A-Za-z][\w-]*)`)

// flagError returns a flag parsing error as the help and the docs spell
// flags: with two dashes.
func flagError(err error) string {
	return flagNamed.ReplaceAllString(err.Error(), "${1}--${2}")
}

// checkDir refuses dir, named what (a flag or a configuration key), unless
// it is a directory, saying what it is instead (locations.DirectoryProblem).
func checkDir(what, dir string) error {
	if err := locations.CheckDirectory(dir); err != nil {
		return fmt.Errorf("%s %s %s", what, dir, locations.DirectoryProblem(err))
	}
	return nil
}

// usageError prints a usage mistake that flag parsing cannot see (a
// missing argument) and returns exitUsage.
func (a *app) usageError(c *command, format string, args ...any) int {
	fmt.Fprintf(a.stderr, "sessiond %s: %s\nUsage: sessiond %s %s\nRun 'sessiond %s --help' for details.\n",
		c.name, fmt.Sprintf(format, args...), c.name, c.synopsis, c.name)
	return exitUsage
}

// fail prints err for command c and returns exitFailed.
func (a *app) fail(c *command, err error) int {
	// An error can carry text from elsewhere (a body from whatever answers
	// at the daemon's address, a path): control characters in it must not
	// reach the terminal as escape sequences (line breaks may: a joined
	// error has several lines).
	fmt.Fprintf(a.stderr, "sessiond %s: %s\n", c.name, terminalSafe(err.Error(), true))
	return exitFailed
}

// commandUsage prints c's usage and its flags, GNU style (--name VALUE).
func (a *app) commandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: sessiond %s %s\n\n%s\n", c.name, c.synopsis, strings.TrimSpace(c.help))
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if name != "" {
			head += " " + name
		}
		// A usage that states its default already ("(default all)") says
		// it better than the flag's zero-like sentinel would.
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "[]" && !strings.Contains(usage, "(default ") {
			usage += fmt.Sprintf(" (default %q)", d)
		}
		lines = append(lines, head+"\n        "+strings.ReplaceAll(usage, "\n", "\n        "))
	})
	if len(lines) > 0 {
		sort.Strings(lines)
		fmt.Fprintf(w, "\nFlags:\n%s\n", strings.Join(lines, "\n"))
	}
}

// stringList is a repeatable string flag.
type stringList []string

var _ flag.Value = (*stringList)(nil)

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
