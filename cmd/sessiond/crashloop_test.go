// The process ledger, and the check of what its sweep leaves, read /proc.

//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// crashloopRounds is how many times TestCrashLoop kills the daemon. The
// default keeps `go test -race ./cmd/sessiond` short; hunting bugs wants
// -crashloop.rounds 50.
var crashloopRounds = flag.Int("crashloop.rounds", 0, "TestCrashLoop: kill and restart the daemon this many times (default 12)")

// The shape of one round of TestCrashLoop.
const (
	crashRoundsDefault     = 12
	crashClients           = 4 // client goroutines per round
	crashSessionsPerClient = 2 // Sessions each client creates
	crashPromptsPerRound   = 8 // prompts each client sends per round, retries included
	// crashToolWindow bounds the random delay between the first tool
	// command of a "tools" round and the kill; a command runs about 200 ms,
	// so some finish and most are cut.
	crashToolWindow = 400 * time.Millisecond
	// crashAdmissionWindow bounds the random delay between the start of
	// the clients of an "admissions" round and the kill.
	crashAdmissionWindow = 80 * time.Millisecond
	crashMaxFailures     = 40 // reported failures before the rest are counted only
)

// crashTool is the command every scripted bash call runs (%s is the
// quoted effects file). It records its run token and its Session (the
// directory is named after it) in the effects file, outside the store,
// before anything else; leaves a background process that only the kill of
// its process group ends (the ledger's job after a SIGKILL); works a
// little; and prints the token, so a tool.success carries it.
const crashTool = `echo "$SESSIOND_TOOL_RUN ${PWD##*/}" >> %s; sleep 300 & sleep 0.2; echo "token=$SESSIOND_TOOL_RUN"`

// tokenRx finds the run token in a bash tool's output.
var tokenRx = regexp.MustCompile(`token=([0-9a-f]+)`)

// TestCrashLoop kills the real daemon with SIGKILL again and again on one
// data dir, while clients create Sessions and admit prompts whose scripted
// model runs bash commands, some rounds during admissions and some while
// tools run. After the last round it starts the daemon once more, resumes
// every Session, waits until all are idle, and checks through the HTTP API
// and a side-effect file that nothing acknowledged was lost or doubled:
// every acknowledged prompt is in its Session once, with the receipt it was
// acknowledged with; logs are contiguous with unique event IDs; every tool
// call is settled once (those cut by a kill as interrupted), no step is
// left open and every busy period of the last daemon ends; no tool command
// ran twice or without its record; and nothing a killed daemon's commands
// started is still running (the process ledger's sweep). Meanwhile
// followers stream some Sessions' logs across every kill and restart,
// resuming after the last event they received; at the end each must have
// received every event of its Session once, in order, as the history has
// it (crashloop_follow_test.go).
func TestCrashLoop(t *testing.T) {
	rounds := crashRoundsDefault
	if testing.Short() {
		rounds = 2
	}
	if *crashloopRounds > 0 {
		rounds = *crashloopRounds // a longer loop, run by hand
	}
	l := newCrashLoop(t)
	began := time.Now()
	followers := l.startFollowers()
	defer followers.stop() // also when a check stops the test early
	var kills, sweeps int
	for round := range rounds {
		mode := "admissions"
		if round%2 == 1 {
			mode = "tools"
		}
		srv, base := l.startDaemon(round, mode)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for c := range crashClients {
			wg.Go(func() { l.client(ctx, base, round, c) })
		}
		after := l.kill(round, mode, srv)
		cancel()
		wg.Wait()
		kills++
		sweeps += l.ended(round, srv)
		t.Logf("round %d (%s): killed %v after the clients started; %d acknowledged admissions, %d tool runs so far",
			round, mode, after.Round(time.Millisecond), l.ackedCount(), len(l.readEffects(round).order))
		if l.tooMany() {
			t.FailNow()
		}
	}

	// The last daemon: resume everything and let it settle.
	srv, base := l.startDaemon(rounds, "final")
	sessions := l.listSessions(base)
	before := map[messages.SessionID]int64{}
	for _, s := range sessions {
		before[s.ID] = s.LastSeq
	}
	for _, s := range sessions {
		l.mustDo(base, http.MethodPost, "/api/session/"+string(s.ID)+"/resume", nil, http.StatusNoContent)
	}
	for _, s := range sessions {
		l.mustDo(base, http.MethodPost, "/api/session/"+string(s.ID)+"/wait", nil, http.StatusNoContent)
	}
	eventually(t, "no active Session", func() bool {
		var active struct {
			Data map[string]any `json:"data"`
		}
		mustJSON(t, l.mustDo(base, http.MethodGet, "/api/session/active", nil, http.StatusOK), &active)
		return len(active.Data) == 0
	}, srv.stderr.String)
	retries := l.retries
	l.retryAcknowledged(base)
	tools := l.check(base, before)
	followed := followers.check(base, srv)
	l.checkProcesses(rounds, "once the final busy periods ended")
	srv.stop()
	sweeps += l.ended(rounds, srv)

	t.Logf("%d rounds, %d SIGKILLs in %v: %d Sessions, %d acknowledged admissions (%d sent, %d acknowledged retries during the rounds), "+
		"%d tool calls (%d succeeded, %d interrupted by a kill), %d tool runs in the effects file, %d left processes swept",
		rounds, kills, time.Since(began).Round(time.Millisecond), len(sessions), l.ackedCount(), len(l.prompts), retries,
		tools.called, tools.succeeded, tools.failed, tools.runs, sweeps)
	t.Logf("%d log followers: %d events received in %d streams (%d reconnects), %d log.synced markers, %d connects refused; caught up %v after the history was read",
		len(followers.all), followed.events, followed.streams, followed.streams-len(followers.all), followed.markers, followed.refused,
		followed.catchUp.Round(time.Millisecond))
	if l.ackedCount() == 0 || tools.succeeded == 0 || followed.events == 0 || followed.streams <= len(followers.all) {
		t.Errorf("the loop exercised nothing: %d acknowledged admissions, %d tool successes, %d events followed in %d streams",
			l.ackedCount(), tools.succeeded, followed.events, followed.streams)
	}
}

// crashLoop is the state of TestCrashLoop shared by its rounds.
type crashLoop struct {
	t       *testing.T
	env     []string
	config  string
	root    string // the Session directories, each named after its Session
	effects string // the side-effect file of the tool commands
	data    string // the daemon's data dir, kept across rounds
	hc      *http.Client
	// daemon is the address of the running daemon, for the followers.
	daemon crashDaemon

	// starts holds the epoch ms at which each daemon (by round; the last
	// is the final one) was started, to tell which round wrote an event.
	starts []int64
	modes  []string // the kill mode of each round
	// ledger is the process ledger the last killed daemon left, for
	// reports.
	ledger string

	mu       sync.Mutex
	created  map[messages.SessionID]bool // acknowledged creates
	prompts  map[messages.MessageID]*crashPrompt
	order    []messages.MessageID // the prompts in the order first sent
	retries  int                  // acknowledged retries of acknowledged prompts
	failures int
}

// crashPrompt is a prompt a client sent.
type crashPrompt struct {
	id    messages.MessageID
	sid   messages.SessionID
	text  string
	round int // of the first send
	// receipt is the first acknowledged receipt, nil while no answer was
	// a 200 (the daemon may or may not have admitted it).
	receipt  *persistence.Admitted
	ackRound int
}

func newCrashLoop(t *testing.T) *crashLoop {
	t.Helper()
	dir := t.TempDir()
	l := &crashLoop{
		t:       t,
		root:    filepath.Join(dir, "sessions"),
		effects: filepath.Join(dir, "effects"),
		created: map[messages.SessionID]bool{},
		prompts: map[messages.MessageID]*crashPrompt{},
		// Its own transport, whose idle connections the test closes.
		hc: &http.Client{Transport: &http.Transport{}, Timeout: deadline},
	}
	t.Cleanup(l.hc.CloseIdleConnections)
	for c := range crashClients {
		for j := range crashSessionsPerClient {
			if err := os.MkdirAll(filepath.Join(l.root, string(crashSessionID(c, j))), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	script, err := json.Marshal(map[string]any{
		"description": "TestCrashLoop: one bash call per prompt, then done",
		"responses": []any{map[string]any{
			"name":  "run the command",
			"match": map[string]any{"round": 0},
			"steps": []any{
				map[string]any{"text": "Running it."},
				map[string]any{"toolCall": map[string]any{"id": "call_run", "name": "bash",
					"input": map[string]any{"command": fmt.Sprintf(crashTool, "'"+l.effects+"'")}}},
				map[string]any{"finish": "tool-calls"},
			},
		}},
		"default": map[string]any{"steps": []any{map[string]any{"text": "Done."}, map[string]any{"finish": "stop"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "script.json", string(script))
	l.config = writeFile(t, dir, "sessiond.json", `{"providers": {"s": {"type": "script", "file": "script.json"}}, "model": "s/crash",
		"agents": {"build": {"permission": [{"permission": "*", "pattern": "*", "action": "allow"}]}}}`)
	l.data = filepath.Join(dir, "data")
	l.env = testEnv(t, "SESSIOND_DATA", l.data)
	// Whatever the checks find, nothing a tool command started outlives
	// the test (a failure can stop it before the checks).
	t.Cleanup(func() {
		for _, p := range l.toolProcesses() {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	})
	return l
}

// crashSessionID names client c's Session j.
func crashSessionID(c, j int) messages.SessionID {
	return messages.SessionID(fmt.Sprintf("ses_crash_c%d_%d", c, j))
}

// fail reports a failure, up to crashMaxFailures of them.
func (l *crashLoop) fail(format string, args ...any) {
	l.t.Helper()
	l.mu.Lock()
	l.failures++
	n := l.failures
	l.mu.Unlock()
	switch {
	case n <= crashMaxFailures:
		l.t.Errorf(format, args...)
	case n == crashMaxFailures+1:
		l.t.Errorf("more failures follow; only their number is reported")
	}
}

func (l *crashLoop) tooMany() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures > crashMaxFailures
}

func (l *crashLoop) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.prompts {
		if p.receipt != nil {
			n++
		}
	}
	return n
}

// startDaemon starts the daemon of round on the shared data dir, checks
// what the previous rounds left (the log so far, and no process of a
// killed daemon's commands), and returns it with its base URL.
func (l *crashLoop) startDaemon(round int, mode string) (*proc, string) {
	l.t.Helper()
	l.starts = append(l.starts, time.Now().UnixMilli())
	l.modes = append(l.modes, mode)
	srv, addr := serveDaemon(l.t, l.env, "--config", l.config)
	base := "http://" + addr
	l.daemon.set(addr, round)
	if round > 0 {
		l.checkProcesses(round, "after the restart")
		l.checkAdmissions(round, base)
	}
	return srv, base
}

// kill waits as mode says, kills the daemon with SIGKILL and waits until
// it is gone. It returns how long after the clients started it killed.
func (l *crashLoop) kill(round int, mode string, srv *proc) time.Duration {
	began := time.Now()
	switch mode {
	case "admissions":
		time.Sleep(rand.N(crashAdmissionWindow)) // when to kill, not synchronisation
	case "tools":
		runs := len(l.readEffects(round).order)
		eventually(l.t, fmt.Sprintf("round %d: a tool command", round), func() bool {
			select {
			case <-srv.done:
				l.t.Fatalf("round %d: the daemon exited before it was killed: %v\nstderr:\n%s", round, srv.err, srv.stderr.String())
			default:
			}
			return len(l.readEffects(round).order) > runs
		}, srv.stderr.String)
		time.Sleep(rand.N(crashToolWindow)) // when to kill, not synchronisation
	}
	after := time.Since(began)
	select {
	case <-srv.done:
		l.t.Fatalf("round %d: the daemon exited before it was killed: %v\nstderr:\n%s", round, srv.err, srv.stderr.String())
	default:
	}
	// Process.Signal, not syscall.Kill on the pid: the same SIGKILL, but it
	// cannot hit another process that reused the pid.
	srv.signal(syscall.SIGKILL)
	select {
	case <-srv.done:
	case <-time.After(deadline):
		l.t.Fatalf("round %d: the daemon did not die within %v of SIGKILL", round, deadline)
	}
	l.daemon.set("", round)
	if ws, ok := srv.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		l.t.Fatalf("round %d: the daemon ended with %v, not by the SIGKILL\nstderr:\n%s", round, srv.cmd.ProcessState, srv.stderr.String())
	}
	b, _ := os.ReadFile(filepath.Join(l.data, ProcessLedgerName))
	l.ledger = string(b)
	return after
}

// ended looks through the log of the daemon of round, which has exited:
// it reports panics and errors it logged, and returns how many process
// groups its ledger sweep killed when it started.
func (l *crashLoop) ended(round int, srv *proc) int {
	swept := 0
	sc := bufio.NewScanner(strings.NewReader(srv.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var entry struct {
			Level  string `json:"level"`
			Groups int    `json:"processes"`
		}
		if json.Unmarshal([]byte(line), &entry) != nil {
			if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
				l.fail("round %d: the daemon crashed by itself:\n%s", round, srv.stderr.String())
			}
			continue
		}
		swept += entry.Groups
		if entry.Level == "error" || entry.Level == "fatal" || entry.Level == "panic" {
			l.fail("round %d: the daemon logged: %s", round, line)
		}
	}
	return swept
}

// client is one client of round: it creates its Sessions (supplied IDs,
// so a lost answer is retried next round) and sends prompts with supplied
// IDs to any created Session, some of them retries of earlier prompts,
// until the daemon is gone or it has sent its share.
func (l *crashLoop) client(ctx context.Context, base string, round, c int) {
	for j := range crashSessionsPerClient {
		sid := crashSessionID(c, j)
		status, body, err := l.do(ctx, base, http.MethodPost, "/api/session",
			map[string]any{"id": sid, "location": map[string]any{"directory": filepath.Join(l.root, string(sid))}})
		if err != nil {
			return // the daemon is gone
		}
		if status != http.StatusOK {
			l.fail("round %d: Session %s: create: HTTP %d %s", round, sid, status, body)
			return
		}
		l.mu.Lock()
		l.created[sid] = true
		l.mu.Unlock()
	}
	for i := range crashPromptsPerRound {
		if !l.send(ctx, base, round, l.pick(round, c, i), true) {
			return
		}
		pause := time.NewTimer(rand.N(20 * time.Millisecond))
		select {
		case <-ctx.Done():
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// pick returns the next prompt of client c: a retry of an earlier one a
// quarter of the time, else a new one for a random created Session.
func (l *crashLoop) pick(round, c, i int) *crashPrompt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.order) > 0 && rand.IntN(4) == 0 {
		return l.prompts[l.order[rand.IntN(len(l.order))]]
	}
	var sids []messages.SessionID
	for sid := range l.created {
		sids = append(sids, sid)
	}
	slices.Sort(sids)
	id := messages.MessageID(fmt.Sprintf("msg_crash_r%d_c%d_%d", round, c, i))
	p := &crashPrompt{id: id, sid: sids[rand.IntN(len(sids))], text: fmt.Sprintf("prompt %s: run the command", id), round: round}
	l.prompts[id] = p
	l.order = append(l.order, id)
	return p
}

// send admits p and reports whether the daemon answered. The first 200
// makes p acknowledged; every later one must return the same receipt.
func (l *crashLoop) send(ctx context.Context, base string, round int, p *crashPrompt, resume bool) bool {
	status, body, err := l.do(ctx, base, http.MethodPost, "/api/session/"+string(p.sid)+"/prompt",
		map[string]any{"id": p.id, "prompt": map[string]any{"text": p.text}, "resume": resume})
	if err != nil {
		return false // no answer: p may or may not be admitted
	}
	if status != http.StatusOK {
		l.fail("round %d: Session %s: prompt %s: HTTP %d %s", round, p.sid, p.id, status, body)
		return false
	}
	var got struct {
		Data persistence.Admitted `json:"data"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		l.fail("round %d: Session %s: prompt %s: %v in %s", round, p.sid, p.id, err, body)
		return false
	}
	l.mu.Lock()
	first, ackRound := p.receipt, p.ackRound
	if first == nil {
		r := got.Data
		p.receipt, p.ackRound = &r, round
	} else {
		l.retries++
	}
	l.mu.Unlock()
	switch r := got.Data; {
	case first == nil && (r.ID != p.id || r.SessionID != p.sid || r.Prompt.Text != p.text || r.Delivery != messages.Steer):
		l.fail("round %d: Session %s: prompt %s acknowledged with %+v", round, p.sid, p.id, r)
	case first != nil && !reflect.DeepEqual(*first, r):
		l.fail("round %d: Session %s: a retry of prompt %s returned %+v; acknowledged in round %d with %+v",
			round, p.sid, p.id, r, ackRound, *first)
	}
	return true
}

// retryAcknowledged sends every acknowledged prompt again, without a
// wake: each must answer its first receipt (idempotency across crashes).
func (l *crashLoop) retryAcknowledged(base string) {
	final := len(l.starts) - 1
	for _, id := range l.order {
		if p := l.prompts[id]; p.receipt != nil {
			if !l.send(context.Background(), base, final, p, false) {
				l.fail("final round: Session %s: the retry of prompt %s got no answer", p.sid, p.id)
			}
		}
	}
}

// do sends a request and returns the status and body; err is a transport
// error (the daemon died), including one while reading the body.
func (l *crashLoop) do(ctx context.Context, base, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := l.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, b, nil
}

// mustDo is do against a daemon that must answer want.
func (l *crashLoop) mustDo(base, method, path string, body any, want int) []byte {
	l.t.Helper()
	status, b, err := l.do(context.Background(), base, method, path, body)
	if err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		l.t.Fatalf("%s %s: HTTP %d %s, want %d", method, path, status, b, want)
	}
	return b
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// listSessions returns every Session of the store, which must all be the
// test's.
func (l *crashLoop) listSessions(base string) []persistence.Session {
	l.t.Helper()
	var list struct {
		Data []persistence.Session `json:"data"`
	}
	mustJSON(l.t, l.mustDo(base, http.MethodGet, "/api/session", nil, http.StatusOK), &list)
	for _, s := range list.Data {
		if _, err := os.Stat(filepath.Join(l.root, string(s.ID))); err != nil || !strings.HasPrefix(string(s.ID), "ses_crash_c") {
			l.fail("Session %s was never created by the test: %+v", s.ID, s)
		}
	}
	return list.Data
}

// history returns a Session's whole log.
func (l *crashLoop) history(base string, sid messages.SessionID) []messages.Event {
	l.t.Helper()
	return allPages(l, base, "/api/session/"+string(sid)+"/history", messages.Event.Seq)
}

// transcript returns a Session's projected messages.
func (l *crashLoop) transcript(base string, sid messages.SessionID) []persistence.Message {
	l.t.Helper()
	return allPages(l, base, "/api/session/"+string(sid)+"/message", func(m persistence.Message) int64 { return m.Seq })
}

// allPages reads every page of a paged route, following the seq of each
// page's last item.
func allPages[T any](l *crashLoop, base, path string, seq func(T) int64) []T {
	l.t.Helper()
	var all []T
	for after := int64(-1); ; {
		var page persistence.Page[T]
		mustJSON(l.t, l.mustDo(base, http.MethodGet, fmt.Sprintf("%s?after=%d&limit=100", path, after), nil, http.StatusOK), &page)
		all = append(all, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			return all
		}
		after = seq(page.Data[len(page.Data)-1])
	}
}

// roundOf returns the round whose daemon wrote ev (the final one is
// len(rounds)).
func (l *crashLoop) roundOf(ev messages.Event) int {
	r := 0
	for i, start := range l.starts {
		if ev.Created >= start {
			r = i
		}
	}
	return r
}

// describe formats events for a failure report.
func (l *crashLoop) describe(evs ...messages.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		data, _ := json.Marshal(ev.Data)
		if len(data) > 400 {
			data = append(data[:400:400], "…"...)
		}
		r := l.roundOf(ev)
		fmt.Fprintf(&b, "\n\tseq %d (round %d, %s) %s %s %s", ev.Seq(), r, l.modes[r], ev.ID, ev.Type, data)
	}
	return b.String()
}

// checkLog checks that a Session's log is its own and contiguous from 0,
// and that its event IDs are unique (ids spans Sessions).
func (l *crashLoop) checkLog(round int, sid messages.SessionID, evs []messages.Event, ids map[messages.EventID]string) {
	for i, ev := range evs {
		if ev.Durable == nil || ev.Durable.AggregateID != sid || ev.Seq() != int64(i) {
			l.fail("round %d: Session %s: event %d of the log is out of place:%s", round, sid, i, l.describe(evs[max(i-2, 0):min(i+3, len(evs))]...))
			return
		}
		where := fmt.Sprintf("%s@%d", sid, ev.Seq())
		if prev, dup := ids[ev.ID]; dup {
			l.fail("round %d: Session %s: event ID %s at %s and %s:%s", round, sid, ev.ID, prev, where, l.describe(ev))
		}
		ids[ev.ID] = where
	}
}

// checkAdmissions runs at each restart: the logs so far are contiguous,
// and every prompt acknowledged so far was admitted exactly once.
func (l *crashLoop) checkAdmissions(round int, base string) {
	ids := map[messages.EventID]string{}
	for _, s := range l.listSessions(base) {
		evs := l.history(base, s.ID)
		l.checkLog(round, s.ID, evs, ids)
		admitted := map[messages.MessageID][]messages.Event{}
		for _, ev := range evs {
			if d, ok := ev.Data.(*messages.PromptAdmitted); ok {
				admitted[d.InputID] = append(admitted[d.InputID], ev)
			}
		}
		// The clients of the previous round are done: no lock needed.
		for _, id := range l.order {
			p := l.prompts[id]
			if p.sid == s.ID && (p.receipt != nil && len(admitted[id]) != 1 || len(admitted[id]) > 1) {
				l.fail("round %d: Session %s: prompt %s (acknowledged in round %d: %v) admitted %d times:%s",
					round, s.ID, id, p.ackRound, p.receipt != nil, len(admitted[id]), l.describe(admitted[id]...))
			}
		}
	}
}

// crashEffects is the effects file: a line per tool command run.
type crashEffects struct {
	session map[string]messages.SessionID // by run token
	order   []string                      // tokens in file order
}

// readEffects reads the effects file; a token twice is a failure.
func (l *crashLoop) readEffects(round int) crashEffects {
	e := crashEffects{session: map[string]messages.SessionID{}}
	b, err := os.ReadFile(l.effects)
	if os.IsNotExist(err) {
		return e
	}
	if err != nil {
		l.t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, line := range lines[:len(lines)-1] { // the last is empty, or being written
		token, sid, ok := strings.Cut(line, " ")
		if !ok || token == "" {
			l.fail("round %d: effects line %d is malformed: %q", round, i+1, line)
			continue
		}
		if prev, dup := e.session[token]; dup {
			l.fail("round %d: tool run %s is in the effects file twice (Sessions %s and %s): a command ran twice", round, token, prev, sid)
			continue
		}
		e.session[token] = messages.SessionID(sid)
		e.order = append(e.order, token)
	}
	return e
}

// crashProc is a running process that a tool command started.
type crashProc struct {
	pid     int
	token   string
	cmdline string
}

// toolProcesses returns the running processes of the test's tool
// commands: those with a run token in their environment whose token is in
// the effects file or whose working directory is a Session's.
func (l *crashLoop) toolProcesses() []crashProc {
	runs := map[string]bool{}
	if b, err := os.ReadFile(l.effects); err == nil {
		for line := range strings.Lines(string(b)) {
			token, _, _ := strings.Cut(line, " ")
			runs[token] = true
		}
	}
	dirs, _ := os.ReadDir("/proc")
	var out []crashProc
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + d.Name() + "/environ")
		if err != nil {
			continue // gone, or not ours to read
		}
		for v := range bytes.SplitSeq(env, []byte{0}) {
			token, ok := bytes.CutPrefix(v, []byte("SESSIOND_TOOL_RUN="))
			if !ok {
				continue
			}
			cwd, _ := os.Readlink("/proc/" + d.Name() + "/cwd")
			if runs[string(token)] || strings.HasPrefix(cwd, l.root+string(filepath.Separator)) {
				cmd, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
				out = append(out, crashProc{pid: pid, token: string(token), cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))})
			}
			break
		}
	}
	return out
}

// checkProcesses checks that no process of a killed daemon's tool
// commands runs, at a moment when the running daemon runs none: its ledger
// sweep killed them when it started. The kills take effect at once but not
// synchronously, so it polls briefly; what is left is reported and killed.
func (l *crashLoop) checkProcesses(round int, when string) {
	var left []crashProc
	end := time.Now().Add(5 * time.Second)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		if left = l.toolProcesses(); len(left) == 0 || time.Now().After(end) {
			break
		}
		time.Sleep(delay)
	}
	if len(left) == 0 {
		return
	}
	effects := l.readEffects(round)
	for _, p := range left {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
		l.fail("round %d: %s, process %d %q of tool run %s (Session %s) still runs: the ledger sweep missed it\n"+
			"\t/proc/%d/stat: %s\tthe ledger the killed daemon left:\n%s",
			round, when, p.pid, p.cmdline, p.token, effects.session[p.token], p.pid, stat, l.ledger)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// crashToolCounts sums the tool calls over every Session.
type crashToolCounts struct {
	called, succeeded, failed, runs int
}

// callKey names a tool call: callID is unique only within its step.
type callKey struct {
	asst messages.MessageID
	call string
}

// check runs the final checks on every Session; before holds each
// Session's last seq before the final resume.
func (l *crashLoop) check(base string, before map[messages.SessionID]int64) crashToolCounts {
	final := len(l.starts) - 1
	effects := l.readEffects(final)
	runs := map[messages.SessionID]int{}
	for _, sid := range effects.session {
		runs[sid]++
	}
	var total crashToolCounts
	total.runs = len(effects.order)
	ids := map[messages.EventID]string{}
	successTokens := map[string]string{} // token -> where
	for _, s := range l.listSessions(base) {
		sid := s.ID
		evs := l.history(base, sid)
		l.checkLog(final, sid, evs, ids)
		if s.LastSeq != int64(len(evs)-1) {
			l.fail("final round: Session %s: lastSeq %d, but the log has %d events", sid, s.LastSeq, len(evs))
		}
		l.checkPrompts(sid, evs, l.transcript(base, sid))
		c := l.checkExecution(sid, evs, before[sid], effects, successTokens)
		total.called += c.called
		total.succeeded += c.succeeded
		total.failed += c.failed

		// No tool ran twice: every run of the Session's commands is a
		// call that succeeded with its token, or one that a kill cut.
		if runs[sid] > c.called || runs[sid]-c.succeeded > c.failed {
			var tools []messages.Event
			for _, ev := range evs {
				if ev.Type == messages.TypeToolCalled || ev.Type == messages.TypeToolSucceeded || ev.Type == messages.TypeToolFailed {
					tools = append(tools, ev)
				}
			}
			l.fail("final round: Session %s: %d runs in the effects file, but %d tool calls, %d succeeded and %d interrupted:%s",
				sid, runs[sid], c.called, c.succeeded, c.failed, l.describe(tools...))
		}
		delete(runs, sid)
	}
	for sid, n := range runs {
		l.fail("final round: %d runs in the effects file for %s, which is no Session", n, sid)
	}
	if total.runs > total.called {
		l.fail("final round: %d runs in the effects file, but only %d tool calls", total.runs, total.called)
	}
	return total
}

// checkPrompts checks a Session's admissions after the final resume:
// every acknowledged prompt was admitted and promoted once, as
// acknowledged; an unacknowledged one at most once; nothing else was; and
// the transcript shows each promoted prompt as one user message.
func (l *crashLoop) checkPrompts(sid messages.SessionID, evs []messages.Event, msgs []persistence.Message) {
	admitted := map[messages.MessageID][]messages.Event{}
	promoted := map[messages.MessageID][]messages.Event{}
	for _, ev := range evs {
		switch d := ev.Data.(type) {
		case *messages.PromptAdmitted:
			admitted[d.InputID] = append(admitted[d.InputID], ev)
			p := l.prompts[d.InputID]
			if p == nil || p.sid != sid || d.Prompt.Text != p.text || d.Delivery != messages.Steer {
				l.fail("final round: Session %s: an admission the test never sent (or not so):%s", sid, l.describe(ev))
			}
		case *messages.PromptPromoted:
			promoted[d.InputID] = append(promoted[d.InputID], ev)
			if len(admitted[d.InputID]) == 0 {
				l.fail("final round: Session %s: prompt %s promoted before it was admitted:%s", sid, d.InputID, l.describe(ev))
			}
		}
	}
	users := map[messages.MessageID][]persistence.Message{}
	for _, m := range msgs {
		switch m.Role {
		case persistence.RoleUser:
			users[m.ID] = append(users[m.ID], m)
			if p := l.prompts[m.ID]; p == nil || m.Prompt == nil || m.Prompt.Text != p.text {
				l.fail("final round: Session %s: user message %s at seq %d is no prompt the test sent as such: %+v", sid, m.ID, m.Seq, m.Prompt)
			}
		case persistence.RoleAssistant:
			for _, part := range m.Parts {
				if t := part.Tool; t != nil && (t.State == persistence.ToolPending || t.State == persistence.ToolRunning) {
					l.fail("final round: Session %s: assistant message %s still has tool %s %s", sid, m.ID, t.CallID, t.State)
				}
			}
		}
	}
	for _, id := range l.order {
		p := l.prompts[id]
		if p.sid != sid {
			continue
		}
		a, pr, u := admitted[id], promoted[id], users[id]
		events := l.describe(append(slices.Clone(a), pr...)...)
		switch {
		case p.receipt != nil && (len(a) != 1 || len(pr) != 1 || len(u) != 1):
			l.fail("final round: Session %s: prompt %s, acknowledged in round %d, admitted %d, promoted %d times, %d user messages:%s",
				sid, id, p.ackRound, len(a), len(pr), len(u), events)
		case p.receipt != nil && (a[0].Seq() != p.receipt.AdmittedSeq || a[0].Created != p.receipt.TimeCreated || u[0].Seq != pr[0].Seq()):
			l.fail("final round: Session %s: prompt %s acknowledged in round %d with %+v, user message at seq %d:%s",
				sid, id, p.ackRound, *p.receipt, u[0].Seq, events)
		case p.receipt == nil && (len(a) > 1 || len(pr) != len(a) || len(u) != len(a)):
			l.fail("final round: Session %s: prompt %s (sent in round %d, never acknowledged) admitted %d, promoted %d times, %d user messages:%s",
				sid, id, p.round, len(a), len(pr), len(u), events)
		}
	}
}

// checkExecution walks a Session's log: busy periods, steps and tool
// calls open and close in order, with the kills as the only cuts; and
// every busy period of the final daemon (events after before) ends. It
// returns the Session's tool counts.
func (l *crashLoop) checkExecution(sid messages.SessionID, evs []messages.Event, before int64, effects crashEffects, successTokens map[string]string) crashToolCounts {
	var c crashToolCounts
	var busy, step *messages.Event // the open busy period and step
	calls := map[callKey]messages.Event{}
	settled := map[callKey]messages.Event{}
	// inputs holds calls whose input began streaming: a kill before their
	// tool.called leaves them for the orphan sweep, which fails them.
	inputs := map[callKey]messages.Event{}
	finalBusy := 0
	cut := func(open messages.Event, ev messages.Event) bool { return l.roundOf(open) < l.roundOf(ev) }
	for i := range evs {
		ev := evs[i]
		switch d := ev.Data.(type) {
		case *messages.ExecutionStarted:
			if busy != nil && !cut(*busy, ev) {
				l.fail("Session %s: a busy period started while one was open in the same process:%s", sid, l.describe(*busy, ev))
			}
			busy = &evs[i]
			if ev.Seq() > before {
				finalBusy++
			}
		case *messages.ExecutionSucceeded, *messages.ExecutionFailed, *messages.ExecutionInterrupted:
			switch {
			case busy == nil || cut(*busy, ev):
				l.fail("Session %s: a busy period terminal without its start:%s", sid, l.describe(ev))
			case ev.Type != messages.TypeExecutionSucceeded:
				// Nothing interrupts gracefully and the script never errs.
				l.fail("Session %s: a busy period did not succeed:%s", sid, l.describe(*busy, ev))
			}
			busy = nil
		case *messages.StepStarted:
			if step != nil {
				l.fail("Session %s: a step started while another was open (the orphan sweep must close it first):%s", sid, l.describe(*step, ev))
			}
			step = &evs[i]
		case *messages.StepEnded, *messages.StepFailed:
			asst := stepOf(ev)
			if step == nil || stepOf(*step) != asst {
				l.fail("Session %s: a step terminal without its start:%s", sid, l.describe(ev))
				step = nil
				continue
			}
			for k, called := range calls {
				if _, ok := settled[k]; k.asst == asst && !ok {
					l.fail("Session %s: a step ended before its tool call was settled:%s", sid, l.describe(*step, called, ev))
				}
			}
			if f, ok := d.(*messages.StepFailed); ok && (f.Error.Type != messages.ErrAborted || !cut(*step, ev)) {
				l.fail("Session %s: a step failed other than by a kill:%s", sid, l.describe(*step, ev))
			}
			step = nil
		case *messages.ToolCalled:
			k := callKey{d.AssistantMessageID, d.CallID}
			if prev, dup := calls[k]; dup {
				l.fail("Session %s: tool call %s of %s called twice:%s", sid, d.CallID, d.AssistantMessageID, l.describe(prev, ev))
			}
			if step == nil || stepOf(*step) != d.AssistantMessageID || cut(*step, ev) {
				l.fail("Session %s: a tool call outside its step:%s", sid, l.describe(ev))
			}
			calls[k] = ev
			c.called++
		case *messages.ToolInputStarted:
			inputs[callKey{d.AssistantMessageID, d.CallID}] = ev
		case *messages.ToolSucceeded, *messages.ToolFailed:
			k := settlementOf(ev)
			called, ok := calls[k]
			if _, failed := d.(*messages.ToolFailed); !ok && failed {
				// Only the sweep settles a call never called, and only as
				// interrupted (checked below).
				called, ok = inputs[k]
			}
			if prev, dup := settled[k]; dup || !ok {
				l.fail("Session %s: tool call %s of %s settled twice or never called:%s", sid, k.call, k.asst, l.describe(called, prev, ev))
				continue
			}
			settled[k] = ev
			if f, isFailed := d.(*messages.ToolFailed); isFailed {
				c.failed++
				if f.Error.Type != messages.ErrAborted || !strings.HasPrefix(f.Error.Message, "Tool execution interrupted") || !cut(called, ev) {
					l.fail("Session %s: a tool call failed other than interrupted by a kill:%s", sid, l.describe(called, ev))
				}
				continue
			}
			c.succeeded++
			out := d.(*messages.ToolSucceeded).Output
			m := tokenRx.FindStringSubmatch(out)
			switch {
			case cut(called, ev):
				l.fail("Session %s: a tool call succeeded in a later process than it was called in:%s", sid, l.describe(called, ev))
			case m == nil:
				l.fail("Session %s: a tool call succeeded without printing its run token:%s", sid, l.describe(called, ev))
			case effects.session[m[1]] != sid:
				l.fail("Session %s: tool run %s succeeded but its side effect is not in the effects file (or is another Session's: %q):%s",
					sid, m[1], effects.session[m[1]], l.describe(called, ev))
			case successTokens[m[1]] != "":
				l.fail("Session %s: tool run %s succeeded twice (also at %s):%s", sid, m[1], successTokens[m[1]], l.describe(called, ev))
			default:
				successTokens[m[1]] = fmt.Sprintf("%s@%d", sid, ev.Seq())
			}
		}
	}
	if step != nil {
		l.fail("Session %s: a step is left open:%s", sid, l.describe(*step))
	}
	for k, called := range calls {
		if _, ok := settled[k]; !ok {
			l.fail("Session %s: a tool call is never settled:%s", sid, l.describe(called))
		}
	}
	switch {
	case busy != nil:
		l.fail("Session %s: the final busy period has no terminal:%s", sid, l.describe(evs[busy.Seq():]...))
	case finalBusy == 0:
		l.fail("Session %s: the final resume ran no busy period (last seq %d before it):%s", sid, before, l.describe(evs[min(before+1, int64(len(evs))):]...))
	}
	return c
}

// stepOf returns the assistant message of a step event.
func stepOf(ev messages.Event) messages.MessageID {
	switch d := ev.Data.(type) {
	case *messages.StepStarted:
		return d.AssistantMessageID
	case *messages.StepEnded:
		return d.AssistantMessageID
	case *messages.StepFailed:
		return d.AssistantMessageID
	}
	return ""
}

// settlementOf returns the call a tool settlement settles.
func settlementOf(ev messages.Event) callKey {
	switch d := ev.Data.(type) {
	case *messages.ToolSucceeded:
		return callKey{d.AssistantMessageID, d.CallID}
	case *messages.ToolFailed:
		return callKey{d.AssistantMessageID, d.CallID}
	}
	return callKey{}
}
