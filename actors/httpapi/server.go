package httpapi

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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

// Server is the HTTP adapter of DESIGN.md §3: the actor "http" under the
// root of the Runtime's actor system, beside the execution router. The
// actor owns the http.Server's lifecycle: it starts serving when it starts
// and, asked to stop, ends streams and long polls, drains in-flight
// requests and stops itself. Requests are not funnelled through its
// mailbox: net/http gives each connection a goroutine, reads go straight to
// the store (they must never queue, DESIGN.md §3) and commands travel as
// actor messages from there, through the Runtime to the execution router
// and the Session actors.
type Server struct {
	api    *api
	http   *http.Server
	pid    *actor.PID
	failed chan error
	serve  sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// NewServer returns a Server for cfg; it does not serve until Start.
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
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	return &Server{api: a, http: hs, failed: make(chan error, 1)}, nil
}

// Handler returns the API handler the Server serves.
func (s *Server) Handler() http.Handler { return s.api }

// Start spawns the adapter actor, which serves l until Shutdown. A later
// failure to accept is reported on Failed.
func (s *Server) Start(l net.Listener) error {
	if s.pid != nil {
		return errors.New("httpapi: server already started")
	}
	pid, err := s.api.cfg.Runtime.Spawn("http", actor.PropsFromProducer(func() actor.Actor { return &adapter{s: s, l: l} }))
	if err != nil {
		return err
	}
	s.pid = pid
	return nil
}

// Failed reports the accept error that ended serving early, if any.
func (s *Server) Failed() <-chan error { return s.failed }

// Shutdown stops accepting connections, ends every stream (their clients
// resume later with Last-Event-ID) and answers long polls with 503
// shutting-down, then waits for in-flight requests until ctx ends, and
// stops the adapter actor. It is safe to call more than once. Call it before shutting the Runtime down
// (DESIGN.md §3 shutdown order).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.pid == nil {
		return nil
	}
	// Later calls wait for the first and share its result: the actor is
	// gone after one stop.
	s.stopOnce.Do(func() {
		reply := make(chan error, 1)
		s.api.cfg.Runtime.Send(s.pid, &stopServing{ctx: ctx, reply: reply})
		select {
		case s.stopErr = <-reply:
		case <-ctx.Done():
			// No answer (past the deadline, or the runtime stopped the
			// actor first): cut the connections here, or the wait below
			// for the serving goroutine would never end.
			s.stopErr = ctx.Err()
			_ = s.http.Close()
		}
		s.serve.Wait()
		// Stopped here, once, and waited for: its name ("http") is free
		// for a next Server once it has terminated. (Had it stopped
		// itself too, this stop would reach a dead actor, and every
		// clean stop logged dead letters.)
		if err := s.api.cfg.Runtime.StopActor(ctx, s.pid); err != nil && s.stopErr == nil {
			s.stopErr = err
		}
	})
	return s.stopErr
}

// adapter is the actor behind Server.
type adapter struct {
	s *Server
	l net.Listener
}

// stopServing asks the adapter to shut the http.Server down and stop.
type stopServing struct {
	ctx   context.Context
	reply chan error
}

// Receive implements actor.Actor.
func (a *adapter) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.s.serve.Go(func() {
			if err := a.s.http.Serve(a.l); !errors.Is(err, http.ErrServerClosed) {
				a.s.failed <- err
			}
		})
	case *stopServing:
		a.s.api.shutdown()
		err := a.s.http.Shutdown(m.ctx)
		if err != nil {
			_ = a.s.http.Close() // past the deadline: cut what is left
		}
		m.reply <- err
	}
}
