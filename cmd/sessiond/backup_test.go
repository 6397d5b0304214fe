package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/persistence"
)

// TestBackup: backup writes a running daemon's store to a new file, which
// opens as a store holding the daemon's Sessions and verifies; it refuses
// a file that exists, and wants exactly one.
func TestBackup(t *testing.T) {
	env := scriptedEnv(t)
	s := serveInProcess(t, env)
	dir, _ := json.Marshal(t.TempDir())
	s.postOK("/api/session", `{"id": "ses_backup", "location": {"directory": `+string(dir)+`}}`)
	s.postOK("/api/session/ses_backup/prompt", `{"prompt": {"text": "hi"}, "resume": false}`)

	file := filepath.Join(t.TempDir(), "copy.db")
	code, out, errOut := runApp(t, env, "backup", "--addr", s.addr, file)
	if code != exitOK || !strings.HasPrefix(out, file+": ") {
		t.Fatalf("backup: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".copy.db.partial-*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	data := t.TempDir()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, StoreFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := persistence.Open(filepath.Join(data, StoreFileName), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := st.Pending(context.Background(), "ses_backup")
	if err != nil || len(pending) != 1 || pending[0].Prompt.Text != "hi" {
		t.Fatalf("the copy's pending prompts: %+v, %v", pending, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runApp(t, map[string]string{"SESSIOND_DATA": data}, "check", "--tmp", t.TempDir()); code != exitOK {
		t.Fatalf("check of the copy: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	if code, _, errOut := runApp(t, env, "backup", "--addr", s.addr, file); code != exitFailed || !strings.Contains(errOut, "exists") {
		t.Errorf("backup to an existing file: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runApp(t, env, "backup", "--addr", s.addr); code != exitUsage || !strings.Contains(errOut, "want exactly one FILE") {
		t.Errorf("backup without a file: exit %d, stderr %q", code, errOut)
	}
	// A directory that is not there is named, not the temporary file
	// backup would have written in it.
	nodir := filepath.Join(t.TempDir(), "nodir", "copy.db")
	if code, _, errOut := runApp(t, env, "backup", "--addr", s.addr, nodir); code != exitFailed ||
		!strings.Contains(errOut, nodir+": no directory "+filepath.Dir(nodir)+" to write it in") || strings.Contains(errOut, "partial") {
		t.Errorf("backup into a missing directory: exit %d, stderr %q", code, errOut)
	}
}

// TestBackupRefusesACopyCutShort: a response without its length, or
// shorter than it, leaves neither FILE nor a temporary file behind.
func TestBackupRefusesACopyCutShort(t *testing.T) {
	for name, tc := range map[string]struct {
		handler http.HandlerFunc
		want    string
	}{
		"no length": {func(w http.ResponseWriter, r *http.Request) {
			w.(http.Flusher).Flush() // chunked: no Content-Length
			w.Write([]byte("bbolt"))
		}, "no length"},
		"cut short": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("bbolt"))
		}, "unexpected EOF"},
		"an error": {func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error": {"type": "unauthorized", "message": "missing or wrong bearer token"}}`))
		}, "missing or wrong bearer token"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			dir := t.TempDir()
			file := filepath.Join(dir, "copy.db")
			code, _, errOut := runApp(t, nil, "backup", "--addr", srv.URL, file)
			if code != exitFailed || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errOut, tc.want)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
}
