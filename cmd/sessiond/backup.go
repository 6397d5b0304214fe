package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sessiond/sessiond/locations"
)

var backupCommand = &command{
	name:     "backup",
	synopsis: "[flags] FILE",
	summary:  "copy a running daemon's store to a file",
	help: `
Backup asks the daemon for a copy of its store (GET /api/backup) and writes
it to FILE, which must not exist yet: every commit durable when the request
arrives, none after, in one bbolt file. The daemon goes on serving meanwhile;
it needs room in its data directory for a copy of the store while it sends
it. The file is written beside FILE under a temporary name, checked against
the length the daemon sent, synced, and only then named FILE, so FILE is
never a copy cut short.

To restore, put FILE alone in an empty data directory as sessiond.db (no
write-ahead log files beside it) and start sessiond there; 'sessiond check'
verifies it first. A daemon that is not running needs no backup command:
copy its data directory.
` + clientHelp,
	run: runBackup,
}

func runBackup(ctx context.Context, a *app, c *command, args []string) int {
	cf, pos, code, ok := a.parseClient(c, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return a.usageError(c, "want exactly one FILE to write")
	}
	cl, err := cf.client(a)
	if err != nil {
		return a.fail(c, err)
	}
	n, err := cl.backup(ctx, pos[0])
	if err != nil {
		if ctx.Err() != nil {
			return exitCode(ctx)
		}
		return a.fail(c, err)
	}
	fmt.Fprintf(a.stdout, "%s: %d bytes\n", pos[0], n)
	return exitOK
}

// backup downloads the daemon's store into the new file path: written to
// a temporary file beside it, checked against the response's length,
// synced, renamed, and the directory synced.
func (c *client) backup(ctx context.Context, path string) (n int64, err error) {
	if _, err := os.Lstat(path); err == nil {
		return 0, fmt.Errorf("%s exists; backup writes a new file", path)
	}
	dir := filepath.Dir(path)
	if locations.CheckDirectory(dir) != nil {
		return 0, fmt.Errorf("%s: no directory %s to write it in", path, dir)
	}
	req, err := c.request(ctx, http.MethodGet, "/api/backup", nil, nil)
	if err != nil {
		return 0, err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, c.transportError(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return 0, responseError(res.StatusCode, b)
	}
	want, err := strconv.ParseInt(res.Header.Get("Content-Length"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("GET /api/backup: no length in the response")
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".partial-*")
	if err != nil {
		// The temporary file's name means nothing to the user.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, fmt.Errorf("%s: cannot create a file in %s: %w", path, dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if n, err = io.Copy(tmp, res.Body); err != nil {
		return 0, fmt.Errorf("GET /api/backup: %w", err)
	}
	if n != want {
		return 0, fmt.Errorf("GET /api/backup: the copy was cut short at %d of %d bytes", n, want)
	}
	if err = tmp.Sync(); err != nil {
		return 0, err
	}
	if err = tmp.Close(); err != nil {
		return 0, err
	}
	// A link, unlike a rename, refuses a FILE made meanwhile.
	if err = os.Link(tmp.Name(), path); err != nil {
		return 0, err
	}
	os.Remove(tmp.Name())
	return n, syncDir(filepath.Dir(path))
}
