package httpapi

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/persistence"
)

// fixedBackups is a store whose backups are a copy of data.
type fixedBackups struct {
	persistence.Store
	data []byte
}

func (s fixedBackups) Backup(context.Context) (io.ReadCloser, int64, error) {
	return io.NopCloser(bytes.NewReader(s.data)), int64(len(s.data)), nil
}

// deadlineListener hands out connections that record the write deadlines
// set on them.
type deadlineListener struct {
	net.Listener
	mu        sync.Mutex
	deadlines []time.Duration // each one's distance from when it was set
}

func (l *deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c, l: l}, nil
}

type deadlineConn struct {
	net.Conn
	l *deadlineListener
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	if !t.IsZero() {
		c.l.mu.Lock()
		c.l.deadlines = append(c.l.deadlines, time.Until(t))
		c.l.mu.Unlock()
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(t)
}

// serveOn starts a server with cfg on wrap of a free local port's
// listener, shut down when the test ends.
func serveOn(t *testing.T, cfg Config, wrap func(net.Listener) net.Listener) {
	t.Helper()
	srv, err := NewServer(ServerConfig{API: cfg})
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(wrap(inner)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
}

// TestBackupDeadlinePerChunk: a backup larger than one chunk arrives whole,
// and each backupChunk of it gets its own write deadline of
// StreamWriteTimeout, so a slow client that keeps reading a large store is
// not cut off by one deadline for the whole copy.
func TestBackupDeadlinePerChunk(t *testing.T) {
	const chunks = 4
	data := make([]byte, chunks*backupChunk+1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b := harnessBackend(t, actortest.Options{Config: func(c *actors.Config) {
		c.Store = fixedBackups{Store: c.Store, data: data}
	}})
	l := &deadlineListener{}
	serveOn(t, Config{Runtime: b.rt, Logger: zerolog.Nop(), StreamWriteTimeout: time.Hour}, func(inner net.Listener) net.Listener {
		l.Listener = inner
		return l
	})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + l.Addr().String() + "/api/backup")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("backup of %d bytes: read %d, %v; want it whole", len(data), len(got), err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// One deadline as the answer starts (every answer gets it), then one
	// per chunk: the four whole ones and the rest.
	if n := len(l.deadlines); n != 1+chunks+1 {
		t.Fatalf("%d write deadlines for an answer of %d chunks and a rest, want %d", n, chunks, 1+chunks+1)
	}
	for _, d := range l.deadlines {
		if d <= time.Hour-time.Minute || d > time.Hour {
			t.Fatalf("write deadline %v ahead, want StreamWriteTimeout", d)
		}
	}
}

// countedBackups is a store whose backups are a copy of data that counts
// what the handler reads of it and reports when it is closed.
type countedBackups struct {
	persistence.Store
	data   []byte
	read   *atomic.Int64
	closed chan struct{}
}

func (s countedBackups) Backup(context.Context) (io.ReadCloser, int64, error) {
	return &countedCopy{r: bytes.NewReader(s.data), s: s}, int64(len(s.data)), nil
}

type countedCopy struct {
	r *bytes.Reader
	s countedBackups
}

func (c *countedCopy) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.s.read.Add(int64(n))
	return n, err
}

func (c *countedCopy) Close() error {
	close(c.s.closed)
	return nil
}

// TestStalledBackupStopsReading: once a write to a stalled client fails,
// the handler stops copying; it does not read the rest of the store to
// throw it away.
func TestStalledBackupStopsReading(t *testing.T) {
	data := make([]byte, 8*backupChunk)
	st := countedBackups{data: data, read: new(atomic.Int64), closed: make(chan struct{})}
	b := harnessBackend(t, actortest.Options{Config: func(c *actors.Config) {
		st.Store = c.Store
		c.Store = st
	}})
	ctx, cancel, done := getStalled(t, b.rt, 20*time.Millisecond, "/api/backup")
	select {
	case <-st.closed:
	case <-ctx.Done():
		t.Fatal("a stalled backup client held its copy")
	}
	if n := st.read.Load(); n >= 2*backupChunk {
		t.Fatalf("read %d bytes of a %d-byte backup for a client that took none", n, len(data))
	}
	cancel()
	<-done
}

// gatedBackups is a store whose backups are a copy of data that, after
// its first read, reads no more until the request's context ends.
type gatedBackups struct {
	persistence.Store
	data            []byte
	started, closed chan struct{}
}

func (s gatedBackups) Backup(ctx context.Context) (io.ReadCloser, int64, error) {
	return &gatedCopy{r: bytes.NewReader(s.data), s: s, ctx: ctx}, int64(len(s.data)), nil
}

type gatedCopy struct {
	r     *bytes.Reader
	s     gatedBackups
	ctx   context.Context
	reads int
}

func (c *gatedCopy) Read(p []byte) (int, error) {
	if c.reads++; c.reads == 2 {
		close(c.s.started)
		<-c.ctx.Done()
	}
	return c.r.Read(p)
}

func (c *gatedCopy) Close() error {
	close(c.s.closed)
	return nil
}

// TestBackupClientGoneIsNotLogged: a backup cut short because its client
// went away is the client's choice, not a failure worth a warning.
func TestBackupClientGoneIsNotLogged(t *testing.T) {
	st := gatedBackups{data: make([]byte, 8*backupChunk), started: make(chan struct{}), closed: make(chan struct{})}
	b := harnessBackend(t, actortest.Options{Config: func(c *actors.Config) {
		st.Store = c.Store
		c.Store = st
	}})
	var logs syncLog
	var addr string
	serveOn(t, Config{Runtime: b.rt, Logger: zerolog.New(&logs), StreamWriteTimeout: actortest.Timeout}, func(l net.Listener) net.Listener {
		addr = l.Addr().String()
		return l
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/backup", nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := tr.RoundTrip(req); err == nil {
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
	}()
	<-st.started
	cancel() // the client goes away mid-copy
	<-done
	<-st.closed
	if strings.Contains(logs.String(), "cut short") {
		t.Fatalf("a client that went away logged a warning: %s", logs.String())
	}
}
