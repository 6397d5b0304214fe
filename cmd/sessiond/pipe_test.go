package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// gatedDaemon answers every client command with a small JSON body, and
// /api/session/ses_1/log with one event at once and the rest of the log
// once gate is closed, so that a test can close the reader in between.
type gatedDaemon struct{ gate chan struct{} }

func (d *gatedDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/session/ses_1/log" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":{"id":"ses_1"},"hasMore":false}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	fmt.Fprint(w, "id: 0\ndata: {\"seq\":0}\n\n")
	fl.Flush()
	select {
	case <-d.gate:
	case <-r.Context().Done():
		return
	}
	for seq := 1; seq < 100; seq++ {
		fmt.Fprintf(w, "id: %d\ndata: {\"seq\":%d}\n\n", seq, seq)
	}
	fmt.Fprint(w, "data: {\"type\":\"log.synced\"}\n\n")
	fl.Flush()
	if r.URL.Query().Get("follow") == "true" {
		<-r.Context().Done()
	}
}

// closedStdout runs sessiond with args and its stdout a pipe whose reader
// head has: head reads lines, then closes its end, then calls after
// (nil: nothing), as `sessiond … | head -n lines` does. It returns the
// exit status and stderr; being killed by a signal fails the test.
func closedStdout(t *testing.T, env []string, lines int, after func(), args ...string) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Env, cmd.Stdout = env, w
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = w.Close() // the child holds the only write end
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	br := bufio.NewReader(r)
	for range lines {
		if _, err := br.ReadString('\n'); err != nil {
			t.Errorf("sessiond %s: read stdout: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
			break
		}
	}
	_ = r.Close()
	if after != nil {
		after()
	}
	eventually(t, "sessiond "+strings.Join(args, " ")+" to exit", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}, stderr.String)
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
		t.Fatalf("sessiond %s was killed by %v\nstderr:\n%s", strings.Join(args, " "), ws.Signal(), stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestClosedStdoutEndsQuietly: a command whose stdout reader went away
// (sessiond log … | head -1) ends as well-behaved tools do, quietly and
// with status 0 (exitReaderGone): it printed "write /dev/stdout: broken
// pipe" to stderr and exited 1, failing a pipeline under set -o pipefail
// because its head had seen enough. Every command that prints is covered.
func TestClosedStdoutEndsQuietly(t *testing.T) {
	srv := httptest.NewServer(&gatedDaemon{gate: make(chan struct{})}) // never opened
	defer srv.Close()
	env := testEnv(t, "SESSIOND_ADDR", srv.URL)
	dir := t.TempDir()

	// The reader is gone before the first write.
	for _, args := range [][]string{
		{"session", "create", "--dir", dir},
		{"session", "list"},
		{"session", "get", "ses_1"},
		{"session", "move", "ses_1", "--dir", dir},
		{"session", "agent", "ses_1", "plan"},
		{"session", "model", "ses_1", "p/m"},
		{"prompt", "ses_1", "hi"},
		{"log", "ses_1"},
		{"log", "ses_1", "--follow"},
		{"history", "ses_1"},
		{"messages", "ses_1"},
		{"active"},
		{"interrupt", "ses_1"},
		{"resume", "ses_1"},
		{"wait", "ses_1"},
		{"compact", "ses_1"},
		{"instruction", "list", "ses_1"},
		{"instruction", "set", "ses_1", "k", "text"},
		{"instruction", "delete", "ses_1", "k"},
		{"permissions"},
		{"reply", "per_1", "once"},
	} {
		if code, errOut := closedStdout(t, env, 0, nil, args...); code != exitReaderGone || errOut != "" {
			t.Errorf("sessiond %s: exit %d, stderr %q; want exit %d and nothing on stderr", strings.Join(args, " "), code, errOut, exitReaderGone)
		}
	}

	// As with head -1: the reader leaves after the first line, and the
	// log goes on.
	for _, args := range [][]string{{"log", "ses_1"}, {"log", "ses_1", "--follow"}} {
		d := &gatedDaemon{gate: make(chan struct{})}
		srv := httptest.NewServer(d)
		code, errOut := closedStdout(t, testEnv(t, "SESSIOND_ADDR", srv.URL), 1, func() { close(d.gate) }, args...)
		srv.Close()
		if code != exitReaderGone || errOut != "" {
			t.Errorf("sessiond %s | head -1: exit %d, stderr %q; want exit %d and nothing on stderr", strings.Join(args, " "), code, errOut, exitReaderGone)
		}
	}

	// run lets its busy period end without a reader and reports how it
	// ended, nothing about the transcript.
	cfgDir := t.TempDir()
	writeFile(t, cfgDir, "s.json", `{"responses":[{"steps":[{"text":"first"},{"finish":"stop"}]}]}`)
	cfg := writeFile(t, cfgDir, "c.json", `{"providers":{"s":{"type":"script","file":"s.json"}},"model":"s/x"}`)
	code, errOut := closedStdout(t, testEnv(t, "SESSIOND_DATA", t.TempDir()), 0, nil, "run", "--config", cfg, "--dir", dir, "hi")
	if code != exitOK || !strings.Contains(errOut, "succeeded") || strings.Contains(errOut, "pipe") || strings.Contains(errOut, "transcript") {
		t.Errorf("sessiond run: exit %d\nstderr:\n%s", code, errOut)
	}
}
