package httpapi

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/tools"
)

// Defaults of Config.
const (
	DefaultBodyBytes = 2 << 20
	DefaultHeartbeat = 15 * time.Second
	// DefaultStreamWriteTimeout is the default of Config.StreamWriteTimeout.
	DefaultStreamWriteTimeout = 30 * time.Second
	// eventBuffer is the Bus buffer of one /api/event subscriber: how far
	// it may fall behind before it is cut off.
	eventBuffer = 1024
)

// Config configures the HTTP API. Runtime is required; the zero value of
// every other field is usable.
type Config struct {
	// Runtime serves the Session API; its Store is the read side.
	Runtime *actors.Runtime
	// Pending holds permission questions waiting for a reply. Nil means no
	// question is ever pending (GET /api/permission is empty and every
	// reply is 404).
	Pending *tools.Pending
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every route but /api/health and /metrics. Without one, only requests
	// addressed (Host) to an IP address or localhost are served, the rest
	// refused with 403, against DNS rebinding: a test through httptest
	// should address 127.0.0.1, not httptest's example.com.
	Token string
	// Roots, when set, limits the Location directories of new Sessions to
	// these directories and their descendants (compared canonically, after
	// resolving symbolic links). Each root must exist.
	Roots []string
	// CORS lists the origins browsers may call the API from; "*" allows
	// any. Empty disables CORS.
	CORS []string
	// BodyBytes caps request bodies. Default DefaultBodyBytes (2 MiB).
	BodyBytes int64
	// Metrics, when set, counts SSE subscribers (Subscribers, by stream).
	Metrics *actors.Metrics
	// Gatherer is served at /metrics. Default prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger receives request and failure logs. Default: disabled (the
	// zero zerolog.Logger writes nowhere).
	Logger zerolog.Logger
	// Heartbeat is the interval of ": ping" comments on following streams.
	// Default DefaultHeartbeat (15 s).
	Heartbeat time.Duration
	// StreamWriteTimeout bounds how long a stream (log, event) waits for
	// its client to take one burst of frames or a heartbeat, a backup for
	// one 256 KB chunk, and any other answer for all of it (from when it
	// starts: a long poll's wait is not counted). A client that stops
	// reading without closing the connection would otherwise hold the
	// handler's goroutines (and a stream's store tail) for as long as the
	// connection lives; it is cut off instead, and a stream's client
	// resumes with Last-Event-ID. Default DefaultStreamWriteTimeout (30 s).
	StreamWriteTimeout time.Duration
	// Now timestamps request logs. Default time.Now.
	Now func() time.Time
}

// validate fills defaults and canonicalizes Roots; it returns the
// canonical roots.
func (c *Config) validate() ([]string, error) {
	if c.Runtime == nil {
		return nil, errors.New("httpapi: Config needs a Runtime")
	}
	if c.BodyBytes <= 0 {
		c.BodyBytes = DefaultBodyBytes
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.StreamWriteTimeout <= 0 {
		c.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Gatherer == nil {
		c.Gatherer = prometheus.DefaultGatherer
	}
	roots := make([]string, 0, len(c.Roots))
	for _, r := range c.Roots {
		canon, err := tools.CanonicalDir(r)
		if err != nil {
			return nil, fmt.Errorf("httpapi: root %q: %w", r, err)
		}
		roots = append(roots, canon)
	}
	return roots, nil
}
