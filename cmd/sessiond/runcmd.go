package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/locations"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// stopTimeout bounds the graceful part of stopping: interrupting Sessions,
// ending HTTP streams, closing the store.
const stopTimeout = 30 * time.Second

// httpStopTimeout bounds how long serve waits, when stopping, for requests
// in flight to finish before it cuts their connections (streams end at
// once; an admission takes milliseconds).
const httpStopTimeout = 5 * time.Second

var runCommand = &command{
	name:     "run",
	synopsis: "[flags] \"text\"",
	summary:  "run one prompt in-process and stream the transcript",
	help: `
Run creates a Session in --dir, prompts it with "text" and streams the
transcript to stdout as it happens, on the same runtime serve uses but
without HTTP. The store in the data directory must not be in use by a
running daemon (talk to that one with 'sessiond prompt' instead).

Permission questions are asked on the terminal: y allows once, a allows
always (saved for the project), n rejects. --yes allows every question for
this run. Without a terminal and without --yes every question is rejected at
once, so run never hangs waiting for an answer.

With no provider configured the built-in demo model answers: it reads
notes.txt (created in --dir when missing), runs ls -la and adds hello.txt,
so it needs --yes without a terminal:

  sessiond run --yes --dir "$(mktemp -d)" "Look around and leave a hello file"

^C interrupts the Session (reason user) and a second ^C quits at once.
SIGTERM, and SIGHUP (the terminal closed), stop the runtime instead
(reason shutdown); a second signal quits at once, killing the commands
tools are running. Exit status: 0 when the busy period succeeded, 1 when
it failed (the error type and message are printed to stderr), 130 when
interrupted by ^C (143 by SIGTERM, 129 by SIGHUP).`,
	run: runRun,
}

// runRun is the run command.
func runRun(ctx context.Context, a *app, c *command, args []string) int {
	fs := newFlags(c)
	var sf storeFlags
	sf.register(fs, "warn")
	dir := fs.String("dir", "", "Session directory `D`, created when missing (default the current directory)")
	model := fs.String("model", "", "model `provider/model` of the Session (default the configured model)")
	yes := fs.Bool("yes", false, "allow every permission question of this run")
	jsonOut := fs.Bool("json", false, "print every live and durable event as one JSON line instead of the transcript")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	text := strings.TrimSpace(strings.Join(pos, " "))
	if text == "" {
		return a.usageError(c, "the prompt text is missing")
	}
	var ref messages.ModelRef
	if *model != "" {
		var err error
		if ref, err = llm.ParseModelRef(*model); err != nil {
			return a.usageError(c, "--model: %v", err)
		}
	}
	log, err := sf.logger(a.stderr, a.stderrTTY)
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	cfg, err := sf.load(a, nil, false)
	if err != nil {
		return a.fail(c, err)
	}
	// The directory is checked against the roots now and created only once
	// the store is open and the model known: a refused run leaves none.
	loc, err := plannedSessionDir(*dir, cfg.Roots)
	if err != nil {
		return a.fail(c, err)
	}

	st, err := openStack(cfg, log, stackOptions{})
	if err != nil {
		return a.fail(c, err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := st.close(sctx); err != nil {
			fmt.Fprintf(a.stderr, "sessiond run: stop: %v\n", err)
		}
	}()
	if err := st.checkModel(ref); err != nil {
		return a.fail(c, err)
	}
	if err := makeSessionDir(loc, cfg.Roots); err != nil {
		return a.fail(c, err)
	}
	if st.demo {
		fmt.Fprintf(a.stderr, "sessiond: %s\n", demoNotice)
		created, err := ensureDemoNotes(loc)
		if err != nil {
			return a.fail(c, fmt.Errorf("demo: %w", err))
		}
		if created {
			fmt.Fprintf(a.stderr, "sessiond: created notes.txt in %s for the demo model to read\n", loc)
		}
		if !*yes && !a.stdinTTY {
			fmt.Fprintln(a.stderr, "sessiond: the demo asks to run bash and apply_patch; without a terminal pass --yes to allow them")
		}
	}

	sess, _, err := st.runtime.Create(ctx, persistence.CreateSession{Location: messages.Location{Directory: loc}, Model: ref})
	if err != nil {
		if ctx.Err() != nil {
			// ^C, SIGTERM or SIGHUP while starting: nothing ran;
			// exit as interrupted (130, 143, 129), not as a failure.
			return exitCode(ctx)
		}
		return a.fail(c, err)
	}
	fmt.Fprintf(a.stderr, "sessiond: session %s in %s\n", sess.ID, loc)

	t := newTranscript(sess.ID, st.bus, st.store, st.pending)
	t.out, t.prompts, t.jsonLines, t.color = a.stdout, a.stderr, *jsonOut, a.stdoutTTY && !*jsonOut
	switch {
	case *yes:
		t.mode = askAllow
	case a.stdinTTY:
		t.mode = askTerminal
		t.lines = readLines(a.stdin)
	default:
		t.mode = askReject
	}
	t.catchUp(ctx) // session.created.1, published before the subscription
	finish := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { t.loop(context.WithoutCancel(ctx), finish) })
	stopTranscript := sync.OnceFunc(func() {
		close(finish)
		wg.Wait()
	})
	defer stopTranscript()

	admitted, err := st.runtime.Prompt(ctx, persistence.PromptRequest{SessionID: sess.ID, Prompt: messages.Prompt{Text: text}})
	if err != nil {
		if ctx.Err() != nil {
			return exitCode(ctx)
		}
		return a.fail(c, err)
	}

	waitCtx, cancelWait := context.WithCancel(context.Background())
	defer cancelWait()
	waited := make(chan error, 1)
	wg.Go(func() { waited <- st.runtime.Wait(waitCtx, sess.ID) })
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-ctx.Done():
		waitErr = a.stopRun(ctx, st, sess.ID, cancelWait, waited)
	}
	stopTranscript()
	// A transcript nobody reads any more (readerGone) changes nothing:
	// the busy period ran to its end and its outcome is the status.
	if t.err != nil && !readerGone(t.err) {
		fmt.Fprintf(a.stderr, "sessiond run: write transcript: %v\n", t.err)
	}
	return a.outcome(ctx, c, st, sess.ID, admitted.AdmittedSeq, waitErr)
}

// stopRun interrupts the Session after a signal and waits for the
// interruption to settle: SIGINT interrupts it with reason user, SIGTERM
// and SIGHUP stop the runtime (reason shutdown).
func (a *app) stopRun(ctx context.Context, st *stack, sid messages.SessionID, cancelWait func(), waited <-chan error) error {
	sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	var c signalCause
	if errors.As(context.Cause(ctx), &c) && stopsRuntime(c.sig) {
		fmt.Fprintln(a.stderr, "sessiond: stopping")
		err := st.runtime.Shutdown(sctx)
		cancelWait() // the runtime is gone; its Wait cannot answer
		<-waited
		return err
	}
	if a.stdinTTY {
		fmt.Fprintln(a.stderr) // the ^C echo may have landed mid-line, after a question
	}
	fmt.Fprintln(a.stderr, "sessiond: interrupting (^C again quits at once)")
	if err := st.runtime.Interrupt(sctx, sid); err != nil {
		cancelWait()
		<-waited
		return err
	}
	select {
	case err := <-waited:
		return err
	case <-sctx.Done():
		cancelWait()
		<-waited
		return sctx.Err()
	}
}

// outcome reports how the busy period of the prompt admitted at seq ended
// and returns the exit status.
func (a *app) outcome(ctx context.Context, c *command, st *stack, sid messages.SessionID, seq int64, waitErr error) int {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	var terminal messages.Payload
	steps, events := 0, 0
	for item, err := range st.store.Log(rctx, sid, seq, false) {
		if err != nil {
			return a.fail(c, err)
		}
		if item.Event == nil {
			continue
		}
		events++
		switch p := item.Event.Data.(type) {
		case *messages.StepEnded, *messages.StepFailed:
			steps++
		case *messages.ExecutionSucceeded, *messages.ExecutionFailed, *messages.ExecutionInterrupted:
			terminal = p
		}
	}
	sess, _ := st.store.Get(rctx, sid)
	usage := fmt.Sprintf("%d step(s), %d tokens in, %d out", steps, sess.Tokens.Input, sess.Tokens.Output)
	switch p := terminal.(type) {
	case *messages.ExecutionSucceeded:
		fmt.Fprintf(a.stderr, "sessiond: %s succeeded: %s\n", sid, usage)
		return exitOK
	case *messages.ExecutionFailed:
		fmt.Fprintf(a.stderr, "sessiond run: %s failed: %s: %s\n", sid, p.Error.Type, p.Error.Message)
		return exitFailed
	case *messages.ExecutionInterrupted:
		fmt.Fprintf(a.stderr, "sessiond: %s interrupted (reason %s): %s\n", sid, p.Reason, usage)
		if ctx.Err() != nil {
			return exitCode(ctx)
		}
		return exitInterrupted
	}
	if ctx.Err() != nil {
		return exitCode(ctx)
	}
	if waitErr != nil {
		return a.fail(c, waitErr)
	}
	if events > 0 {
		return a.fail(c, fmt.Errorf("%s: the busy period ended without a recorded outcome (see the errors above)", sid))
	}
	return a.fail(c, fmt.Errorf("%s: the prompt did not run and stays pending (see the errors above; --log-level info shows more)", sid))
}

// checkModel resolves the model a new Session would use, so that a missing
// model or credential is reported before anything is created.
func (s *stack) checkModel(ref messages.ModelRef) error {
	if ref.ID == "" {
		ref = s.defaultModel
	}
	if ref.ID == "" {
		if a, ok := s.cfg.Agents["build"]; ok && a.Model != "" {
			return nil // the build agent names its own model
		}
		return messages.Errorf(messages.ErrModelNotFound,
			"no model: set \"model\" in the configuration, list models for a provider, or pass --model provider/model")
	}
	_, err := s.catalog.Resolve(ref)
	return err
}

// sessionDir returns the absolute Session directory for --dir (default the
// working directory), creating it when missing, once it is known to lie
// within roots (none: anywhere): plannedSessionDir, then makeSessionDir.
func sessionDir(dir string, roots []string) (string, error) {
	abs, err := plannedSessionDir(dir, roots)
	if err != nil {
		return "", err
	}
	return abs, makeSessionDir(abs, roots)
}

// plannedSessionDir returns the absolute form of --dir and refuses it when
// it would lie outside roots once created, creating nothing.
func plannedSessionDir(dir string, roots []string) (string, error) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	planned, err := canonicalToBe(abs)
	if err != nil {
		return "", fmt.Errorf("--dir %s: %w", abs, err)
	}
	return abs, outsideRoots(abs, planned, roots)
}

// makeSessionDir creates the directory abs when missing and checks it
// against roots again: a symbolic link created since plannedSessionDir
// cannot lead outside them.
func makeSessionDir(abs string, roots []string) error {
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	return outsideRoots(abs, canon, roots)
}

// outsideRoots refuses --dir abs, whose canonical form is canon, when it
// is outside every root.
func outsideRoots(abs, canon string, roots []string) error {
	if locations.Allowed(roots, canon) {
		return nil
	}
	return messages.Errorf(messages.ErrForbidden, "--dir %s is outside the allowed roots (%s)", abs, strings.Join(roots, ", "))
}

// canonicalToBe returns the canonical form path will have once created: its
// deepest existing ancestor without symbolic links, joined with the rest.
func canonicalToBe(path string) (string, error) {
	rest := ""
	for {
		canon, err := filepath.EvalSymlinks(path)
		if err == nil {
			return filepath.Join(canon, rest), nil
		}
		parent := filepath.Dir(path)
		if !errors.Is(err, fs.ErrNotExist) || parent == path {
			return "", err
		}
		rest = filepath.Join(filepath.Base(path), rest)
		path = parent
	}
}

// readLines delivers r's lines on a channel. The reading goroutine blocks
// in Read until input arrives or the process exits: a terminal read cannot
// be cancelled, and nothing else reads stdin.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}
