package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/persistence"
)

// inProcessServe is a serve command running in the test process, stopped
// by cancelling its command context as a signal would.
type inProcessServe struct {
	t      *testing.T
	addr   string
	stderr *syncBuffer
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when serve has returned code
	code   int
}

// serveInProcess runs `sessiond serve --addr 127.0.0.1:0 args…` in this
// process with env as its environment and returns it once it listens. It
// fails the test if serve exits first. The test's end stops it if it
// still runs.
func serveInProcess(t *testing.T, env map[string]string, args ...string) *inProcessServe {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &inProcessServe{t: t, stderr: &syncBuffer{}, cancel: cancel, done: make(chan struct{})}
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: s.stderr, getenv: func(k string) string { return env[k] }}
	go func() {
		s.code = a.main(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...))
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.stop()
		}
	})
	rx := regexp.MustCompile(`listening on http://(\S+)`)
	eventually(t, "serve to listen", func() bool {
		if m := rx.FindStringSubmatch(s.stderr.String()); m != nil {
			s.addr = m[1]
			return true
		}
		select {
		case <-s.done:
			t.Fatalf("serve exited %d before it listened\nstderr:\n%s", s.code, s.stderr.String())
		default:
		}
		return false
	}, s.stderr.String)
	return s
}

// stop cancels serve's context with SIGTERM as the cause, as the signal
// handler does, and returns its exit status.
func (s *inProcessServe) stop() int {
	s.t.Helper()
	s.cancel(signalCause{syscall.SIGTERM})
	return s.wait()
}

// wait returns serve's exit status once it has returned.
func (s *inProcessServe) wait() int {
	s.t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(deadline):
		s.t.Fatalf("serve did not stop within %v\nstderr:\n%s", deadline, s.stderr.String())
		return 0
	}
}

// get sends GET path to the daemon with token (none when empty) and
// returns the status and body.
func (s *inProcessServe) get(path, token string) (int, string) {
	s.t.Helper()
	return httpGet(s.t, s.addr, path, token)
}

// httpGet GETs path from the daemon at addr, with token when set, and
// returns the status and the body.
func httpGet(t *testing.T, addr, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// createSession posts a Session in dir with token and returns the status.
func (s *inProcessServe) createSession(token, dir string) int {
	s.t.Helper()
	body, _ := json.Marshal(map[string]any{"location": map[string]string{"directory": dir}})
	req, err := http.NewRequest("POST", "http://"+s.addr+"/api/session", strings.NewReader(string(body)))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// occupied returns the address of a port the test listens on until it
// ends.
func occupied(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// reopenStore opens the store of data directory data, failing the test
// if it is still locked, and closes it again.
func reopenStore(t *testing.T, data string) {
	t.Helper()
	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{Timeout: lockTimeout})
	if err != nil {
		t.Fatalf("reopen the store: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestServeFlagsReachTheDaemon: what serve's flags set reaches the
// running daemon: --addr wins over SESSIOND_ADDR, --token guards the API,
// --root (repeatable, relative to the working directory) confines Session
// directories, and /metrics serves the Go, process and sessiond metrics,
// the store's commits included. The stop is graceful (exit 0, the cause
// and "stopped" logged) and releases the store.
func TestServeFlagsReachTheDaemon(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	for _, d := range []string{"one", "two"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	data := t.TempDir()
	env := map[string]string{"SESSIOND_DATA": data, "SESSIOND_ADDR": occupied(t), "HOME": t.TempDir()}
	s := serveInProcess(t, env, "--token", "tok-flag", "--root", "one", "--root", "two")

	if code, _ := s.get("/api/session", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/session without the token: %d, want 401", code)
	}
	if code, _ := s.get("/api/session", "tok-flag"); code != http.StatusOK {
		t.Errorf("GET /api/session with --token's token: %d, want 200", code)
	}
	for _, tt := range []struct {
		dir  string
		want int
	}{
		{filepath.Join(work, "one"), http.StatusOK},
		{filepath.Join(work, "two"), http.StatusOK},
		{t.TempDir(), http.StatusForbidden},
	} {
		if code := s.createSession("tok-flag", tt.dir); code != tt.want {
			t.Errorf("create a Session in %s: %d, want %d", tt.dir, code, tt.want)
		}
	}
	code, metrics := s.get("/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{"go_goroutines ", "process_open_fds ", "sessiond_active_sessions ", "sessiond_store_commit_batch_count ", "sessiond_store_fdatasync_seconds_count ", "sessiond_store_flush_seconds_count "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^sessiond_store_commit_batch_count 0$`).MatchString(metrics) {
		t.Error("/metrics counts no store commit after two Sessions were created")
	}
	if regexp.MustCompile(`(?m)^sessiond_store_fdatasync_seconds_count 0$`).MatchString(metrics) {
		t.Error("/metrics counts no fdatasync of the log after two Sessions were created")
	}

	if code := s.stop(); code != exitOK {
		t.Fatalf("serve exited %d\nstderr:\n%s", code, s.stderr.String())
	}
	errOut := s.stderr.String()
	for _, want := range []string{
		"sessiond: listening on http://" + s.addr + " (data " + data + ")\n",
		`"cause":"terminated received",`,
		`"message":"shutting down"`,
		`"message":"stopped"`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	reopenStore(t, data)
}

// TestServeRefusesAnAddressInUse: serve fails (exit 1) with the listen
// error when its address is taken, before it opens the store: no data
// directory is left behind, nor a store locked for the next daemon.
func TestServeRefusesAnAddressInUse(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	addr := occupied(t)
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()}, "serve", "--addr", addr)
	if code != exitFailed || !strings.Contains(errOut, "sessiond serve: listen tcp "+addr+": bind: address already in use") {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("serve refused for its address left %s: %v", data, err)
	}
}

// TestServeLetsARequestInFlightFinish: stopping serve stops HTTP first
// and gives a request its handler is reading time to finish
// (httpStopTimeout) before the runtime and the store go: a Session
// created by a request whose body arrives after the stop began is
// answered and durable.
func TestServeLetsARequestInFlightFinish(t *testing.T) {
	data := t.TempDir()
	s := serveInProcess(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()})
	body := fmt.Sprintf(`{"id": "ses_inflight", "location": {"directory": %q}}`, t.TempDir())
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// With Expect: 100-continue the server answers "100 Continue" once
	// the handler reads the body: from then on the request is in flight.
	if _, err := fmt.Fprintf(conn, "POST /api/session HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", s.addr, len(body)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("before the body: %q, %v", line, err)
	}
	if _, err := r.ReadString('\n'); err != nil { // the blank line after 100 Continue
		t.Fatal(err)
	}
	s.cancel(signalCause{syscall.SIGTERM})
	eventually(t, "serve to start stopping", func() bool {
		return strings.Contains(s.stderr.String(), `"message":"shutting down"`)
	}, s.stderr.String)
	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("the request in flight was cut: %v\nstderr:\n%s", err, s.stderr.String())
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the request in flight: %d", res.StatusCode)
	}
	if code := s.wait(); code != exitOK {
		t.Fatalf("serve exited %d\nstderr:\n%s", code, s.stderr.String())
	}
	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Get(context.Background(), "ses_inflight"); err != nil {
		t.Fatalf("the Session created while stopping: %v", err)
	}
}

// testConfig returns a Config of the data directory data with the
// demo model, as loadConfig makes it.
func testConfig(t *testing.T, data string) Config {
	t.Helper()
	cfg, err := (&storeFlags{data: data}).load(&app{getenv: envOf("HOME", t.TempDir())}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestOpenStackOwnsTheDataDir: openStack creates the data directory
// for its user alone (it holds every Session's history), starts without
// warnings on a clean directory, and close releases the store.
func TestOpenStackOwnsTheDataDir(t *testing.T) {
	data := filepath.Join(t.TempDir(), "new")
	var logs syncBuffer
	st, err := openStack(testConfig(t, data), zerolog.New(&logs).Level(zerolog.WarnLevel), stackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(data)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v, %v; want mode 0700", fi, err)
	}
	if logs.String() != "" {
		t.Errorf("a clean start logged:\n%s", logs.String())
	}
	reopenStore(t, data)
}

// TestOpenStackReleasesTheStoreOnError: an error after the store is
// open (here the process ledger cannot be read) is returned and leaves
// the store closed, not locked against the next try; a store path that
// is not a store fails without opening anything.
func TestOpenStackReleasesTheStoreOnError(t *testing.T) {
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(data, ProcessLedgerName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := openStack(testConfig(t, data), zerolog.Nop(), stackOptions{}); err == nil || !strings.Contains(err.Error(), "process ledger") {
		t.Fatalf("openStack with a directory for its ledger: %v", err)
	}
	reopenStore(t, data)

	data = t.TempDir()
	if err := os.Mkdir(filepath.Join(data, StoreFileName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := openStack(testConfig(t, data), zerolog.Nop(), stackOptions{}); err == nil {
		t.Fatal("openStack on a directory named " + StoreFileName + " succeeded")
	}
}

// TestOpenStackKillsWhatAPreviousRunLeft: a process a tool command of
// a sessiond that died without its graceful stop left running (its run
// token in the data directory's ledger) is killed when the next stack
// opens, and the warning says how many were.
func TestOpenStackKillsWhatAPreviousRunLeft(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	const token = "leftover-token-1"
	writeFile(t, data, ProcessLedgerName, strings.TrimSpace(string(boot))+" "+token+"\n")
	sleep := exec.Command("sleep", "60")
	sleep.Env = append(os.Environ(), "SESSIOND_TOOL_RUN="+token)
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleep.Wait() }()
	t.Cleanup(func() {
		_ = sleep.Process.Kill()
		<-waited
	})

	var logs syncBuffer
	st, err := openStack(testConfig(t, data), zerolog.New(&logs), stackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `{"level":"warn","processes":1,"message":"killed the processes tool commands of a previous run left running"}`) {
		t.Errorf("logs:\n%s", logs.String())
	}
	select {
	case <-waited:
		waited <- nil // for the cleanup
	case <-time.After(deadline):
		t.Fatal("the leftover process still runs")
	}
}

// TestRunRefusedPromptFails: a prompt the store refuses (over the
// configured promptBytes) fails run with exit 1 and the store's error,
// not as an interruption.
func TestRunRefusedPromptFails(t *testing.T) {
	data := t.TempDir()
	writeFile(t, data, ConfigFileName, `{"limits": {"promptBytes": 10}}`)
	code, _, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data, "HOME": t.TempDir()}, "run", "--yes", "--dir", t.TempDir(), strings.Repeat("a", 11))
	if code != exitFailed || !strings.Contains(errOut, "sessiond run: ") || !strings.Contains(errOut, "too-large") {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
}

// TestExitCode: the status of a command a signal ended is 128 plus the
// signal's number, as a shell reports it; a context ended otherwise
// counts as ^C (130).
func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		cause error
		want  int
	}{
		{signalCause{syscall.SIGINT}, 130},
		{signalCause{syscall.SIGTERM}, 143},
		{signalCause{syscall.SIGHUP}, 129},
		{nil, exitInterrupted},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(tt.cause)
		if got := exitCode(ctx); got != tt.want {
			t.Errorf("exitCode after %v = %d, want %d", tt.cause, got, tt.want)
		}
	}
}

// TestRunSIGTERMStopsTheRuntime: SIGTERM stops run's runtime instead of
// interrupting the Session for the user as ^C does: it says it is
// stopping, the Session is interrupted with reason shutdown, and run
// exits 143 (128 + SIGTERM).
func TestRunSIGTERMStopsTheRuntime(t *testing.T) {
	p := start(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), "run", "--json", "--config", slowConfig(t), "--dir", t.TempDir(), "hi")
	p.waitFor(&p.stdout, `"type":"session.step.started.1"`)
	p.signal(syscall.SIGTERM)
	if code := p.wait(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, 128+int(syscall.SIGTERM), p.stderr.String())
	}
	if errOut := p.stderr.String(); !strings.Contains(errOut, "sessiond: stopping\n") || !strings.Contains(errOut, "interrupted (reason shutdown)") ||
		strings.Contains(errOut, "interrupting (^C again") {
		t.Fatalf("stderr:\n%s", errOut)
	}
}
