package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// clientHelp is the shared part of every client command's help.
const clientHelp = `
The daemon's address comes from --addr, else $SESSIOND_ADDR, else the addr of
the configuration (default 127.0.0.1:4096); the bearer token from --token,
else $SESSIOND_TOKEN, else the configuration's token.`

// clientFlags are the connection flags of every client command.
type clientFlags struct {
	addr, token, config string
}

// register adds --addr, --token and --config to fs.
func (f *clientFlags) register(fs *flag.FlagSet) {
	// Checked as it is parsed, so a malformed address is a usage error
	// (exit 2) like any other bad flag value.
	fs.Func("addr", "daemon address `HOST:PORT` or URL (default $SESSIOND_ADDR, else the configuration's addr)", func(v string) error {
		// Empty is unset, as before: scripts pass --addr "$X".
		if _, err := baseURL(v); err != nil && v != "" {
			return errors.New("want host:port or an http(s) URL")
		}
		f.addr = v
		return nil
	})
	fs.StringVar(&f.token, "token", "", "bearer `TOKEN` (default $SESSIOND_TOKEN, else the configuration's token)")
	fs.StringVar(&f.config, "config", "", "configuration `FILE` to read addr and token from (default <data>/sessiond.json)")
}

// parseClient parses the arguments of a command whose only flags are the
// client flags.
func (a *app) parseClient(c *command, args []string) (cf clientFlags, pos []string, code int, ok bool) {
	fs := newFlags(c)
	cf.register(fs)
	pos, code, ok = a.parse(c, fs, args)
	return cf, pos, code, ok
}

// client returns a client of the daemon the flags name.
func (f *clientFlags) client(a *app) (*client, error) {
	o := overrides{"SESSIOND_ADDR": f.addr, "SESSIOND_TOKEN": f.token}
	env := a.env(o)
	cfg, err := loadConfig(f.config, env, loadOptions{source: o.source})
	if err != nil {
		var ee *envError // a bad SESSIOND_ADDR or SESSIOND_TOKEN: the client's own
		if f.config != "" || errors.As(err, &ee) || (env("SESSIOND_ADDR") == "" && !errors.Is(err, errNoDataDir)) {
			return nil, err
		}
		// The address is known, or the built-in one serves: a
		// configuration that does not load (no home directory, a
		// daemon-only mistake) need not stop a client.
		cfg = Config{Addr: cmp.Or(env("SESSIOND_ADDR"), builtinConfig().Addr), Token: env("SESSIOND_TOKEN")}
		if _, err := baseURL(cfg.Addr); err != nil && f.addr == "" {
			// --addr is checked as it is parsed: this one is the
			// environment's.
			return nil, fmt.Errorf("SESSIOND_ADDR %q: want host:port or an http(s) URL", cfg.Addr)
		}
	}
	return newClient(cfg.Addr, cfg.Token)
}

// printJSON prints a response body, or its field when field is not "",
// indented on a terminal and on one line otherwise.
func (a *app) printJSON(body []byte, field string) error {
	if field != "" {
		var env map[string]json.RawMessage
		if err := json.Unmarshal(body, &env); err != nil {
			return fmt.Errorf("decode response: %w", err)
		}
		v, ok := env[field]
		if !ok {
			return fmt.Errorf("response has no %q field: %s", field, clip(string(body), 200))
		}
		body = v
	}
	var buf bytes.Buffer
	var err error
	if a.stdoutTTY {
		err = json.Indent(&buf, body, "", "  ")
	} else {
		err = json.Compact(&buf, body)
	}
	if err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	buf.WriteByte('\n')
	_, err = a.stdout.Write(buf.Bytes())
	return err
}

// sessionPath returns the API path of Session id plus suffix.
func sessionPath(id, suffix string) string {
	return "/api/session/" + url.PathEscape(id) + suffix
}

var sessionCommand = &command{
	name:     "session",
	synopsis: "create [--dir D] | list | get ID | move ID --dir D | agent ID AGENT | model ID provider/model",
	summary:  "create, list, show, move Sessions of a running daemon, or select their agent or model",
	help: `
session create makes a Session whose Location is --dir (default the current
directory) and prints it; with --id it returns the existing Session of that
ID instead of creating a second one. session list prints every Session,
session get one. session move gives Session ID the Location --dir and prints
it. session agent and session model select the agent or model of Session ID
from its next step on. Output is the JSON of the API's data field. Each subcommand lists its
flags: sessiond session create --help, sessiond session move --help.
` + clientHelp,
	run: runSession,
}

var sessionCreateCommand = &command{
	name:     "session create",
	synopsis: "[--dir D] [--id ses_…] [--agent A] [--model provider/model]",
	summary:  "create a Session",
	help:     "Create a Session in directory D (made absolute here) and print it.\n" + clientHelp,
}

var sessionListCommand = &command{
	name:     "session list",
	synopsis: "[flags]",
	summary:  "list Sessions",
	help:     "Print every Session, oldest first.\n" + clientHelp,
}

var sessionGetCommand = &command{
	name:     "session get",
	synopsis: "[flags] ID",
	summary:  "show one Session",
	help:     "Print Session ID.\n" + clientHelp,
}

var sessionMoveCommand = &command{
	name:     "session move",
	synopsis: "[flags] ID --dir D",
	summary:  "move a Session to another Location",
	help: `
Move Session ID to directory D (made absolute here) and print it. Work
running at the old Location is interrupted (reason superseded) and goes on
at D, which starts from a complete instruction baseline.
` + clientHelp,
}

// runSession dispatches session's subcommands.
func runSession(ctx context.Context, a *app, c *command, args []string) int {
	if len(args) == 0 {
		return a.usageError(c, "want a subcommand: create, list, get, move, agent or model")
	}
	switch args[0] {
	case "-h", "-help", "--help":
		a.commandUsage(a.stdout, c, newFlags(c))
		return exitOK
	case "create":
		return runSessionCreate(ctx, a, sessionCreateCommand, args[1:])
	case "list":
		return runSessionList(ctx, a, sessionListCommand, args[1:])
	case "get":
		return runSessionGet(ctx, a, sessionGetCommand, args[1:])
	case "move":
		return runSessionMove(ctx, a, sessionMoveCommand, args[1:])
	case "agent":
		return runSessionAgent(ctx, a, sessionAgentCommand, args[1:])
	case "model":
		return runSessionModel(ctx, a, sessionModelCommand, args[1:])
	}
	return a.usageError(c, "unknown subcommand %q; want create, list, get, move, agent or model", args[0])
}

var sessionAgentCommand = &command{
	name:     "session agent",
	synopsis: "[flags] ID AGENT",
	summary:  "select a Session's agent",
	help: `
Select AGENT for Session ID from its next step on; running work takes it at
its next step boundary, with no more steps than the agent allows.
` + clientHelp,
}

var sessionModelCommand = &command{
	name:     "session model",
	synopsis: "[flags] ID provider/model",
	summary:  "select a Session's model",
	help: `
Select the model for Session ID from its next step on (a retry waiting
after a failed attempt included).
` + clientHelp,
}

// sessionSelect parses "ID VALUE" for a selection subcommand.
func (a *app) sessionSelect(c *command, args []string, what string) (cf clientFlags, id, value string, code int, ok bool) {
	fs := newFlags(c)
	cf.register(fs)
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return cf, "", "", code, false
	}
	if len(pos) != 2 {
		return cf, "", "", a.usageError(c, "want a Session ID and %s", what), false
	}
	return cf, pos[0], pos[1], exitOK, true
}

func runSessionAgent(ctx context.Context, a *app, c *command, args []string) int {
	cf, id, agent, code, ok := a.sessionSelect(c, args, "an agent")
	if !ok {
		return code
	}
	return a.clientCall(ctx, c, cf, http.MethodPost, sessionPath(id, "/agent"), nil, map[string]string{"agent": agent}, "")
}

func runSessionModel(ctx context.Context, a *app, c *command, args []string) int {
	cf, id, model, code, ok := a.sessionSelect(c, args, "a model provider/model")
	if !ok {
		return code
	}
	ref, err := llm.ParseModelRef(model)
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	return a.clientCall(ctx, c, cf, http.MethodPost, sessionPath(id, "/model"), nil, ref, "")
}

func runSessionCreate(ctx context.Context, a *app, c *command, args []string) int {
	fs := newFlags(c)
	var cf clientFlags
	cf.register(fs)
	dir := fs.String("dir", "", "Location directory `D` of the Session (default the current directory)")
	id := fs.String("id", "", "Session `ID` (ses_…) to create idempotently")
	agent := fs.String("agent", "", "`AGENT` of the Session (default none: each step uses the build agent)")
	model := fs.String("model", "", "model `provider/model` of the Session (default none: each step uses the agent's, else the daemon's default model)")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return a.usageError(c, "unexpected argument %q", pos[0])
	}
	d := *dir
	if d == "" {
		d = "."
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return a.fail(c, err)
	}
	body := map[string]any{"location": messages.Location{Directory: abs}}
	if *id != "" {
		body["id"] = *id
	}
	if *agent != "" {
		body["agent"] = *agent
	}
	if *model != "" {
		ref, err := llm.ParseModelRef(*model)
		if err != nil {
			return a.usageError(c, "--model: %v", err)
		}
		body["model"] = ref
	}
	return a.clientCall(ctx, c, cf, http.MethodPost, "/api/session", nil, body, "data")
}

func runSessionMove(ctx context.Context, a *app, c *command, args []string) int {
	fs := newFlags(c)
	var cf clientFlags
	cf.register(fs)
	dir := fs.String("dir", "", "the new Location directory `D` (required)")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) == 0:
		return a.usageError(c, "want a Session ID")
	case len(pos) > 1:
		return a.usageError(c, "unexpected argument %q", pos[1])
	case *dir == "":
		return a.usageError(c, "--dir is required")
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return a.fail(c, err)
	}
	body := map[string]any{"location": messages.Location{Directory: abs}}
	return a.clientCall(ctx, c, cf, http.MethodPost, sessionPath(pos[0], "/move"), nil, body, "data")
}

var runSessionList = plainClient(false, http.MethodGet, func(_ []string) string { return "/api/session" }, "data")

var runSessionGet = plainClient(true, http.MethodGet, func(pos []string) string { return sessionPath(pos[0], "") }, "data")

// clientCall runs one request with the flags' client and prints the
// response's field (the whole body when field is ""); an empty success
// prints nothing.
func (a *app) clientCall(ctx context.Context, c *command, cf clientFlags, method, path string, q url.Values, body any, field string) int {
	cl, err := cf.client(a)
	if err != nil {
		return a.fail(c, err)
	}
	res, err := cl.call(ctx, method, path, q, body)
	if err != nil {
		if ctx.Err() != nil {
			return exitCode(ctx)
		}
		return a.fail(c, err)
	}
	if len(bytes.TrimSpace(res)) == 0 {
		return exitOK
	}
	if err := a.printJSON(res, field); err != nil {
		if readerGone(err) {
			return exitReaderGone
		}
		return a.fail(c, err)
	}
	return exitOK
}

var promptCommand = &command{
	name:     "prompt",
	synopsis: "[flags] ID \"text\"",
	summary:  "admit a prompt to a Session and wake it",
	help: `
Prompt admits "text" to Session ID's inbox and prints the admission receipt
({id, sessionID, prompt, delivery, admittedSeq, timeCreated}). It returns
once the prompt is durable, not when the Session has answered: follow the
answer with 'sessiond log ID --follow'. Retrying with the same --id is safe:
an identical retry returns the same receipt, a different prompt under the
same ID is a prompt.conflict.
` + clientHelp,
	run: runPrompt,
}

func runPrompt(ctx context.Context, a *app, c *command, args []string) int {
	fs := newFlags(c)
	var cf clientFlags
	cf.register(fs)
	id := fs.String("id", "", "message `ID` (msg_…) that makes the admission idempotent")
	delivery := fs.String("delivery", "", "delivery `MODE`: steer (join the running work at the next step) or queue (wait until the Session is idle); default steer")
	noResume := fs.Bool("no-resume", false, "admit only; do not wake the Session")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) < 2 {
		return a.usageError(c, "want a Session ID and the prompt text")
	}
	text := strings.Join(pos[1:], " ")
	body := map[string]any{"prompt": messages.Prompt{Text: text}}
	if *id != "" {
		body["id"] = *id
	}
	if *delivery != "" {
		if d := messages.Delivery(*delivery); !d.Valid() {
			return a.usageError(c, "--delivery %q: want steer or queue", *delivery)
		}
		body["delivery"] = *delivery
	}
	if *noResume {
		body["resume"] = false
	}
	return a.clientCall(ctx, c, cf, http.MethodPost, sessionPath(pos[0], "/prompt"), nil, body, "data")
}

var logCommand = &command{
	name:     "log",
	synopsis: "[flags] ID",
	summary:  "print a Session's durable event log (and follow it)",
	help: `
Log prints Session ID's durable events, one JSON document per line, then the
{"type":"log.synced"} marker once the replay reached the end. When the
connection drops it reconnects with Last-Event-ID, so no event is lost or
printed twice. Without --follow it exits once the marker arrived, or fails
if several streams in a row end before it without a new event. With
--follow it keeps printing new events until interrupted; --live adds the
Session's live-only events (text, reasoning and tool input deltas, usage,
permission asks and replies) after the marker, where they happen between
the durable ones. Live events missed while reconnecting are not printed:
the durable events that end each fragment carry its whole text.
` + clientHelp,
	run: runLog,
}

func runLog(ctx context.Context, a *app, c *command, args []string) int {
	fs := newFlags(c)
	var cf clientFlags
	cf.register(fs)
	after := fs.Int64("after", -1, "print events with a seq greater than `N` (default all)")
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	live := fs.Bool("live", false, "with --follow, also print live events (deltas, usage, permission asks) as they happen")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return a.usageError(c, "want exactly one Session ID")
	}
	if *live && !*follow {
		return a.usageError(c, "--live needs --follow")
	}
	cl, err := cf.client(a)
	if err != nil {
		return a.fail(c, err)
	}
	opts := logOptions{After: *after, Follow: *follow, Live: *live, Notify: func(s string) { fmt.Fprintf(a.stderr, "sessiond log: %s\n", s) }}
	if err := cl.streamLog(ctx, pos[0], opts, a.stdout); err != nil {
		if readerGone(err) {
			return exitReaderGone
		}
		return a.fail(c, err)
	}
	if ctx.Err() != nil && !*follow {
		return exitCode(ctx)
	}
	return exitOK
}

var historyCommand = &command{
	name:     "history",
	synopsis: "[flags] ID",
	summary:  "print one page of a Session's durable events",
	help: `
History prints one page of Session ID's durable events with seq greater than
--after: {"data": [event…], "hasMore": bool}. Page on with --after set to
the last seq printed.
` + clientHelp,
	run: runHistory,
}

var runHistory = pagedClient("/history", "events")

// pagedClient runs a command that prints one page of a Session's listing
// at suffix (what names its items).
func pagedClient(suffix, what string) func(context.Context, *app, *command, []string) int {
	return func(ctx context.Context, a *app, c *command, args []string) int {
		return runPaged(ctx, a, c, args, suffix, what)
	}
}

func runPaged(ctx context.Context, a *app, c *command, args []string, suffix, what string) int {
	fs := newFlags(c)
	var cf clientFlags
	cf.register(fs)
	after := fs.Int64("after", -1, what+" with a seq greater than `N` (default from the start)")
	limit := fs.Int("limit", 0, "at most `N` "+what+", 1 to 100 (default 50)")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return a.usageError(c, "want exactly one Session ID")
	}
	// What the user set is sent as set, for the server to check: a value
	// that means "unset" here (--limit 0) must not pass silently.
	q := url.Values{}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "after":
			q.Set("after", strconv.FormatInt(*after, 10))
		case "limit":
			q.Set("limit", strconv.Itoa(*limit))
		}
	})
	return a.clientCall(ctx, c, cf, http.MethodGet, sessionPath(pos[0], suffix), q, nil, "")
}

var activeCommand = &command{
	name:     "active",
	synopsis: "[flags]",
	summary:  "list the Sessions that are running now",
	help: `
Active prints the Sessions with a busy period in the daemon right now:
{"<id>": {"type": "running"}}.
` + clientHelp,
	run: runActive,
}

var runActive = plainClient(false, http.MethodGet, func(_ []string) string { return "/api/session/active" }, "data")

var interruptCommand = &command{
	name:     "interrupt",
	synopsis: "[flags] ID",
	summary:  "interrupt a Session's running work",
	help: `
Interrupt stops Session ID's busy period (reason user) and returns once its
tools settled and session.execution.interrupted.1 is durable. Interrupting
an idle Session does nothing.
` + clientHelp,
	run: runInterrupt,
}

var runInterrupt = sessionPost("/interrupt")

// sessionPost runs a command that POSTs to one Session's route at suffix
// and prints nothing.
func sessionPost(suffix string) func(context.Context, *app, *command, []string) int {
	return plainClient(true, http.MethodPost, func(pos []string) string { return sessionPath(pos[0], suffix) }, "")
}

var instructionCommand = &command{
	name:     "instruction",
	synopsis: "[flags] list ID | set ID KEY \"text\" | delete ID KEY",
	summary:  "list, set or delete a Session's instruction entries",
	help: `
Instruction entries are the last instruction source of a Session: a change
is observed at its next step boundary and reaches the log as
session.instructions.updated.1. instruction list prints them as
{"<key>": "<text>"}; instruction set gives KEY (1 to 200 characters) the
text; instruction delete removes KEY (not-found when there is none).
` + clientHelp,
	run: runInstruction,
}

func runInstruction(ctx context.Context, a *app, c *command, args []string) int {
	cf, pos, code, ok := a.parseClient(c, args)
	if !ok {
		return code
	}
	want := map[string]int{"list": 2, "set": 4, "delete": 3}
	if len(pos) == 0 {
		return a.usageError(c, "want a subcommand: list, set or delete")
	}
	if want[pos[0]] == 0 {
		return a.usageError(c, "unknown subcommand %q; want list, set or delete", pos[0])
	}
	if len(pos) != want[pos[0]] {
		return a.usageError(c, "usage: %s %s", c.name, map[string]string{"list": "list ID", "set": `set ID KEY "text"`, "delete": "delete ID KEY"}[pos[0]])
	}
	if pos[0] != "list" {
		if pos[2] == "" {
			return a.usageError(c, "KEY is empty; want 1 to 200 characters")
		}
	}
	switch pos[0] {
	case "set":
		return a.clientCall(ctx, c, cf, http.MethodPut, sessionPath(pos[1], "/instruction/"+keySegment(pos[2])), nil, map[string]string{"text": pos[3]}, "")
	case "delete":
		return a.clientCall(ctx, c, cf, http.MethodDelete, sessionPath(pos[1], "/instruction/"+keySegment(pos[2])), nil, nil, "")
	}
	return a.clientCall(ctx, c, cf, http.MethodGet, sessionPath(pos[1], "/instruction"), nil, nil, "data")
}

// keySegment returns instruction key k as one escaped path segment. "."
// and ".." are sent as %2E and %2E%2E: as they are, every URL resolver
// on the way (the client's, a proxy's) would take them for the directory
// and its parent, and the daemon would not see the key.
func keySegment(k string) string {
	if k == "." || k == ".." {
		return strings.Repeat("%2E", len(k))
	}
	return url.PathEscape(k)
}

var resumeCommand = &command{
	name:     "resume",
	synopsis: "[flags] ID",
	summary:  "run a Session: start its work or join what runs",
	help: `
Resume starts a busy period of Session ID, or joins the one running, and
returns once it started; it does not wait for the work (see wait). An idle
Session with nothing pending still takes one step. Prompts admitted with
'sessiond prompt --no-resume' run this way.
` + clientHelp,
	run: sessionPost("/resume"),
}

var waitCommand = &command{
	name:     "wait",
	synopsis: "[flags] ID",
	summary:  "wait until a Session is idle",
	help: `
Wait returns once Session ID has no work running and no wake in flight.
Work waiting for an answer to a permission question is running: wait
returns after someone answers it (sessiond reply) and the work ends.
` + clientHelp,
	run: sessionPost("/wait"),
}

var compactCommand = &command{
	name:     "compact",
	synopsis: "[flags] ID",
	summary:  "ask for a manual compaction of a Session",
	help: `
Compact admits a manual compaction of Session ID (reusing one still
pending) and wakes it. The compaction runs once the work in flight is done,
before every prompt not yet promoted (those admitted before it too); follow the log for
session.compaction.ended.1 or session.compaction.failed.1.
` + clientHelp,
	run: sessionPost("/compact"),
}

var messagesCommand = &command{
	name:     "messages",
	synopsis: "[flags] ID",
	summary:  "print one page of a Session's messages",
	help: `
Messages prints one page of Session ID's projected messages (user, system,
assistant with its parts, compaction rows) whose source seq is greater than
--after: {"data": [message…], "hasMore": bool}. Page on with --after set to
the last message's seq.
` + clientHelp,
	run: pagedClient("/message", "messages"),
}

var permissionsCommand = &command{
	name:     "permissions",
	synopsis: "[flags] [ID]",
	summary:  "list the permission questions waiting for a reply",
	help: `
Permissions prints the questions Sessions' tools are waiting on, oldest
first: [{id, sessionID, permission, patterns, …}]; with a Session ID, that
Session's only. Answer one with 'sessiond reply REQUEST_ID
once|always|reject'.
` + clientHelp,
	run: runPermissions,
}

func runPermissions(ctx context.Context, a *app, c *command, args []string) int {
	cf, pos, code, ok := a.parseClient(c, args)
	if !ok {
		return code
	}
	var q url.Values
	switch len(pos) {
	case 0:
	case 1:
		q = url.Values{"sessionID": {pos[0]}}
	default:
		return a.usageError(c, "want at most one Session ID")
	}
	return a.clientCall(ctx, c, cf, http.MethodGet, "/api/permission", q, nil, "data")
}

var replyCommand = &command{
	name:     "reply",
	synopsis: "[flags] REQUEST_ID once|always|reject",
	summary:  "answer a permission question",
	help: `
Reply answers the permission question REQUEST_ID (per_…, see 'sessiond
permissions' or the permission.asked events of /api/event): once allows this
call, always also saves the approval for the project, reject refuses it;
--message tells the model why.
` + clientHelp,
	run: runReply,
}

func runReply(ctx context.Context, a *app, c *command, args []string) int {
	fs := newFlags(c)
	var cf clientFlags
	cf.register(fs)
	message := fs.String("message", "", "`TEXT` for the model, with a rejection")
	pos, code, ok := a.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 2 {
		return a.usageError(c, "want a request ID and once, always or reject")
	}
	switch pos[1] {
	case "once", "always", "reject":
	default:
		return a.usageError(c, "reply %q: want once, always or reject", pos[1])
	}
	body := map[string]any{"reply": pos[1]}
	if *message != "" {
		body["message"] = *message
	}
	return a.clientCall(ctx, c, cf, http.MethodPost, "/api/permission/"+url.PathEscape(pos[0])+"/reply", nil, body, "")
}

// plainClient makes the run function of a client command that takes only
// the client flags and either no argument or exactly one Session ID, and
// sends one request: method to path(args), printing field of the reply.
func plainClient(oneSession bool, method string, path func(pos []string) string, field string) func(context.Context, *app, *command, []string) int {
	return func(ctx context.Context, a *app, c *command, args []string) int {
		cf, pos, code, ok := a.parseClient(c, args)
		if !ok {
			return code
		}
		switch {
		case oneSession && len(pos) != 1:
			return a.usageError(c, "want exactly one Session ID")
		case !oneSession && len(pos) > 0:
			return a.usageError(c, "unexpected argument %q", pos[0])
		}
		return a.clientCall(ctx, c, cf, method, path(pos), nil, nil, field)
	}
}
