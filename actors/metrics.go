package actors

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiond/sessiond/locations"
)

// Metrics are sessiond's operational metrics. A nil *Metrics records
// nothing, so tests and embedders may leave it out. Each field is the
// series NewMetrics names it after (its Help text says what it counts;
// docs/api.md lists them under GET /metrics); they are exported so that an
// embedder can read them in tests, not to be set one by one.
type Metrics struct {
	Admissions    prometheus.Counter
	Promotions    prometheus.Counter
	Drains        prometheus.Counter
	BusyPeriods   *prometheus.CounterVec
	Requests      prometheus.Counter
	Steps         *prometheus.CounterVec
	Retries       prometheus.Counter
	Tools         *prometheus.CounterVec
	Compactions   *prometheus.CounterVec
	Active        prometheus.Gauge
	CommitSeconds prometheus.Histogram
	CommitBatch   prometheus.Histogram
	SyncSeconds   prometheus.Histogram
	FlushSeconds  prometheus.Histogram
	NoRoom        prometheus.Counter
	ObserveSecs   *prometheus.HistogramVec
	Unavailable   *prometheus.CounterVec
	BaselineBytes prometheus.Gauge
	Updates       prometheus.Counter
	Subscribers   *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Admissions:    prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiond_admissions_total", Help: "Prompts admitted (new rows only)."}),
		Promotions:    prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiond_promotions_total", Help: "Inputs promoted into visible history."}),
		Drains:        prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiond_drains_total", Help: "Runner drains started."}),
		BusyPeriods:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_busy_periods_total", Help: "Busy periods by how they ended: succeeded, failed or interrupted."}, []string{"outcome"}),
		Requests:      prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiond_provider_requests_total", Help: "Provider stream requests: step attempts and compaction summaries."}),
		Steps:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_steps_total", Help: "Step attempts by outcome."}, []string{"outcome"}),
		Retries:       prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiond_retries_total", Help: "Retries scheduled."}),
		Tools:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_tool_calls_total", Help: "Tool calls (local and provider-hosted) by tool (\"unknown\" for a name the request did not offer) and outcome (success or failed), counted as each settles."}, []string{"tool", "outcome"}),
		Compactions:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_compactions_total", Help: "Compactions started by reason."}, []string{"reason"}),
		Active:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessiond_active_sessions", Help: "Sessions with an active busy period in this process."}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiond_store_commit_seconds", Help: "Group commit latency.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		CommitBatch:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiond_store_commit_batch", Help: "Operations per group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		SyncSeconds:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiond_store_fdatasync_seconds", Help: "Duration of one fdatasync of the write-ahead log, which makes a group commit durable.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)}),
		FlushSeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiond_store_flush_seconds", Help: "Duration of one flush of the memtable into the database file, its fsyncs included.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		NoRoom:        prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiond_store_no_room_total", Help: "Writes the store refused because the disk had no room for them (storage.full)."}),
		ObserveSecs:   prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sessiond_instruction_observe_seconds", Help: "Instruction source observation latency.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"source"}),
		Unavailable:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiond_instruction_unavailable_total", Help: "Unavailable instruction source observations."}, []string{"source"}),
		BaselineBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessiond_instruction_baseline_bytes", Help: "Size of the last rendered instruction baseline."}),
		Updates:       prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiond_instruction_updates_total", Help: "Chronological instruction updates published."}),
		Subscribers:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sessiond_sse_subscribers", Help: "Connected SSE subscribers by stream."}, []string{"stream"}),
	}
	if reg != nil {
		reg.MustRegister(m.Admissions, m.Promotions, m.Drains, m.BusyPeriods, m.Requests, m.Steps, m.Retries, m.Tools, m.Compactions,
			m.Active, m.CommitSeconds, m.CommitBatch, m.SyncSeconds, m.FlushSeconds, m.NoRoom, m.ObserveSecs, m.Unavailable, m.BaselineBytes, m.Updates, m.Subscribers)
	}
	return m
}

func (m *Metrics) promoted(n int) {
	if m != nil {
		m.Promotions.Add(float64(n))
	}
}

func (m *Metrics) drain() {
	if m != nil {
		m.Drains.Inc()
	}
}

func (m *Metrics) busyPeriod(outcome string) {
	if m != nil {
		m.BusyPeriods.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) request() {
	if m != nil {
		m.Requests.Inc()
	}
}

func (m *Metrics) step(outcome string) {
	if m != nil {
		m.Steps.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) retry() {
	if m != nil {
		m.Retries.Inc()
	}
}

func (m *Metrics) tool(name, outcome string) {
	if m != nil {
		m.Tools.WithLabelValues(name, outcome).Inc()
	}
}

func (m *Metrics) compaction(reason string) {
	if m != nil {
		m.Compactions.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) active(delta float64) {
	if m != nil {
		m.Active.Add(delta)
	}
}

// Commit observes one store group commit; pass it as persistence
// Options.OnCommit.
func (m *Metrics) Commit(ops int, d time.Duration) {
	if m != nil {
		m.CommitSeconds.Observe(d.Seconds())
		m.CommitBatch.Observe(float64(ops))
	}
}

// Synced observes one fdatasync of the store's write-ahead log; pass it as
// persistence Options.OnSync.
func (m *Metrics) Synced(d time.Duration) {
	if m != nil {
		m.SyncSeconds.Observe(d.Seconds())
	}
}

// Flushed observes one flush of the store's memtable; pass it as
// persistence Options.OnFlush.
func (m *Metrics) Flushed(_ int, d time.Duration) {
	if m != nil {
		m.FlushSeconds.Observe(d.Seconds())
	}
}

// RefusedNoRoom counts a write the store refused for want of room on the
// disk; pass it as persistence Options.OnNoRoom.
func (m *Metrics) RefusedNoRoom() {
	if m != nil {
		m.NoRoom.Inc()
	}
}

// Admitted counts a new admission.
func (m *Metrics) Admitted() {
	if m != nil {
		m.Admissions.Inc()
	}
}

func (m *Metrics) instructions(obs locations.Observed) {
	if m == nil {
		return
	}
	for _, r := range obs.Results {
		m.ObserveSecs.WithLabelValues(r.Key).Observe(r.Latency.Seconds())
		if !r.Observation.Available() {
			m.Unavailable.WithLabelValues(r.Key).Inc()
		}
	}
}

func (m *Metrics) baseline(n int) {
	if m != nil {
		m.BaselineBytes.Set(float64(n))
	}
}

func (m *Metrics) update() {
	if m != nil {
		m.Updates.Inc()
	}
}
