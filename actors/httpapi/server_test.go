package httpapi

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors/actortest"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestServerIsTheHTTPActor: the adapter is the named actor "http" of the
// Runtime's actor system; the name is taken while it serves and free again
// once Shutdown has stopped it.
func TestServerIsTheHTTPActor(t *testing.T) {
	b := harnessBackend(t)
	cfg := ServerConfig{API: Config{Runtime: b.rt, Logger: zerolog.Nop()}}
	first, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	if err := first.Start(l); err != nil {
		t.Fatal(err)
	}
	again := listen(t)
	defer again.Close()
	if err := first.Start(again); err == nil {
		t.Fatal("a started Server started again")
	}
	if first.pid.GetId() != "http" {
		t.Fatalf("adapter actor is %q, want http", first.pid.GetId())
	}
	resp, err := http.Get("http://" + l.Addr().String() + "/api/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d", resp.StatusCode)
	}
	second, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l2 := listen(t)
	defer l2.Close()
	if err := second.Start(l2); err == nil {
		t.Fatal("a second adapter started while the first serves")
	}
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if _, err := http.Get("http://" + l.Addr().String() + "/api/health"); err == nil {
		t.Fatal("still serving after Shutdown")
	}
	third, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Start(listen(t)); err != nil {
		t.Fatalf("name not released after Shutdown: %v", err)
	}
	if err := third.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestServerReportsAcceptFailure: when accepting fails for good the error
// reaches Failed instead of vanishing.
func TestServerReportsAcceptFailure(t *testing.T) {
	b := harnessBackend(t)
	srv, err := NewServer(ServerConfig{API: Config{Runtime: b.rt, Logger: zerolog.Nop()}})
	if err != nil {
		t.Fatal(err)
	}
	l := listen(t)
	if err := srv.Start(l); err != nil {
		t.Fatal(err)
	}
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), actortest.Timeout)
	defer cancel()
	select {
	case err := <-srv.Failed():
		if err == nil {
			t.Fatal("nil accept error")
		}
	case <-ctx.Done():
		t.Fatal("no accept failure reported")
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
