//go:build linux

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestServeOnAFullDisk runs the daemon, then takes the room its store's
// files may grow into away (a file size limit on the running process,
// RLIMIT_FSIZE, so a write past it fails with EFBIG as on a full disk):
// prompts are refused with 507 storage.full, which the CLI prints and
// /metrics counts, and health stays ok. Once the limit is lifted, a prompt succeeds without a
// restart, and after one every acknowledged prompt is in its Session.
func TestServeOnAFullDisk(t *testing.T) {
	data := t.TempDir()
	env := testEnv(t, "SESSIOND_DATA", data)
	srv, addr := serveDaemon(t, env)
	client := testEnv(t, "SESSIOND_ADDR", addr)
	sid := string(decode[persistence.Session](t, ok(t, client, "session", "create", "--dir", t.TempDir())).ID)

	pid := srv.cmd.Process.Pid
	var room unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &room); err != nil {
		t.Fatal(err)
	}
	// A little past the log's files as they are: the log's next
	// extensions do not fit.
	var biggest int64
	for _, suffix := range []string{"-wal", "-wal2"} {
		if fi, err := os.Stat(filepath.Join(data, StoreFileName+suffix)); err == nil {
			biggest = max(biggest, fi.Size())
		}
	}
	full := unix.Rlimit{Cur: uint64(biggest + 1<<20), Max: room.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &full, nil); err != nil {
		t.Fatal(err)
	}

	text := strings.Repeat("x", 100<<10)
	var acked []string
	var refused result
	for i := 0; ; i++ {
		id := "msg_full_" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		r := sessiond(t, client, nil, "prompt", sid, text, "--id", id, "--no-resume")
		if r.code == 0 {
			acked = append(acked, id)
			if i == 100 {
				t.Fatalf("100 prompts of 100 KiB fit under a limit of %d bytes", full.Cur)
			}
			continue
		}
		refused = r
		break
	}
	if refused.code != 1 || !strings.Contains(refused.stderr, "sessiond prompt: "+string(messages.ErrStorageFull)+": ") ||
		!strings.Contains(refused.stderr, "(HTTP 507)") || strings.Contains(refused.stderr, data) {
		t.Fatalf("prompt on a full disk: exit %d\nstderr:\n%s", refused.code, refused.stderr)
	}
	if code, body := httpGet(t, addr, "/api/health", ""); code != http.StatusOK {
		t.Fatalf("health on a full disk: %d %s", code, body)
	}
	// Operators see it too.
	if _, metrics := httpGet(t, addr, "/metrics", ""); !regexp.MustCompile(`(?m)^sessiond_store_no_room_total [1-9]`).MatchString(metrics) {
		t.Fatalf("metrics after a refusal for want of room:\n%s", metrics)
	}

	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &room, nil); err != nil {
		t.Fatal(err)
	}
	ok(t, client, "prompt", sid, "room again", "--id", "msg_room", "--no-resume")
	acked = append(acked, "msg_room")
	srv.stop()

	srv, addr = serveDaemon(t, env)
	defer srv.stop()
	log := ok(t, testEnv(t, "SESSIOND_ADDR", addr), "log", sid)
	if n := strings.Count(log, `"type":"session.prompt.admitted.1"`); n != len(acked) {
		t.Fatalf("%d admissions in the log after the restart, %d acknowledged", n, len(acked))
	}
	for _, id := range acked {
		if strings.Count(log, `"inputID":"`+id+`"`) != 1 {
			t.Fatalf("acknowledged prompt %s is not in the log once after the restart", id)
		}
	}
	t.Logf("%d prompts acknowledged, then one refused: %s", len(acked)-1, strings.TrimSpace(refused.stderr))
}
