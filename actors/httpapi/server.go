package httpapi

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"time"
)

// Default connection timeouts of a Server.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// ServerConfig configures a Server: the API and its connection timeouts.
// Zero timeouts take the defaults above.
type ServerConfig struct {
	API Config
	// ReadHeaderTimeout bounds reading request headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. net/http
	// clears the deadline once the request is read, so it cuts neither
	// streams nor long polls.
	ReadTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request.
	IdleTimeout time.Duration
}

// Server is the HTTP adapter of DESIGN.md §3: it owns the http.Server that
// serves the API and ends streams and long polls at shutdown.
//
// It is deliberately not a protoactor actor. net/http already gives each
// connection its own goroutine, and the adapter has no state that a
// mailbox would protect; routing every request through one mailbox would
// serialize reads that must not queue behind anything (DESIGN.md §3), and
// a pool of adapter actors would only add a hop. The commands the adapter
// issues do travel as actor messages: Runtime sends them to the execution
// router, which forwards them to the Session actors.
type Server struct {
	api  *api
	http *http.Server
}

// NewServer returns a Server for cfg; it does not listen until Serve.
func NewServer(cfg ServerConfig) (*Server, error) {
	a, err := newAPI(cfg.API)
	if err != nil {
		return nil, err
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	hs := &http.Server{
		Handler:           a,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		// No WriteTimeout: it would cut streams and long polls (wait,
		// interrupt), which end with their client or at Shutdown instead.
		ErrorLog: log.New(a.log, "", 0),
	}
	return &Server{api: a, http: hs}, nil
}

// Handler returns the API handler the Server serves.
func (s *Server) Handler() http.Handler { return s.api }

// Serve accepts connections on l until Shutdown. It returns nil after
// Shutdown and the accept error otherwise.
func (s *Server) Serve(l net.Listener) error {
	if err := s.http.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections, ends every stream (their clients
// resume later with Last-Event-ID) and answers long polls with 503
// shutting-down, then waits for in-flight requests until ctx ends. Call it
// before shutting the Runtime down (DESIGN.md §3 shutdown order).
func (s *Server) Shutdown(ctx context.Context) error {
	s.api.shutdown()
	return s.http.Shutdown(ctx)
}
