package actors_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sessiond/sessiond/actors"
	"github.com/sessiond/sessiond/actors/actortest"
	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// TestProviderRequestsCountCompaction: a compaction's summary request
// goes to the provider like a step's, and sessiond_provider_requests_total
// ("Provider stream requests") counts it: the metric left out every
// summary, so an operator saw fewer requests than the provider billed.
func TestProviderRequestsCountCompaction(t *testing.T) {
	m := actors.NewMetrics(prometheus.NewRegistry())
	h := actortest.New(t, withMetrics(m))
	h.Model.Reply(script.Text("first answer"))
	h.Model.Reply(script.Text("## Objective\nKeep going\n## Next Move\nAnswer the next prompt"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	if n := count(h, sid, messages.TypeCompactionEnded); n != 1 {
		t.Fatalf("%d compactions ended: %v", n, h.Types(sid))
	}
	if got, want := testutil.ToFloat64(m.Requests), float64(h.Model.Count()); got != want {
		t.Fatalf("sessiond_provider_requests_total %v, the provider received %v requests", got, want)
	}
}

// TestMetricsCountWhatHappened: the runtime's metrics move with what they
// count: admissions, promotions (two steers promoted at one boundary count
// two), instruction observations (none unavailable) and updates,
// compactions by reason, the active gauge back at zero, and the commit
// latency and batch size the store reports through Commit.
func TestMetricsCountWhatHappened(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := actors.NewMetrics(reg)
	h, sid, agents := answeredWithAgentsMD(t, "Use tabs.", withMetrics(m))
	started, release := callsBlockingTool(h, "wait")
	h.Prompt(sid, "two")
	<-started
	for _, text := range []string{"steer a", "steer b"} {
		h.PromptWith(persistence.PromptRequest{SessionID: sid, Prompt: messages.Prompt{Text: text}, Delivery: messages.Steer})
	}
	close(release)
	h.WaitIdle(sid)
	if err := os.WriteFile(agents, []byte("Use spaces."), 0o644); err != nil {
		t.Fatal(err)
	}
	h.Prompt(sid, "three")
	h.WaitIdle(sid)
	compactNow(t, h, sid)
	for name, c := range map[string]struct{ got, want float64 }{
		"admissions":             {testutil.ToFloat64(m.Admissions), 5},
		"promotions":             {testutil.ToFloat64(m.Promotions), 5},
		"instruction updates":    {testutil.ToFloat64(m.Updates), 1},
		"manual compactions":     {testutil.ToFloat64(m.Compactions.WithLabelValues(messages.CompactionManual)), 1},
		"active Sessions":        {testutil.ToFloat64(m.Active), 0},
		"observed sources (any)": {float64(min(testutil.CollectAndCount(m.ObserveSecs), 1)), 1},
		"unavailable sources":    {float64(testutil.CollectAndCount(m.Unavailable)), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
	m.Commit(3, 2*time.Millisecond)
	m.Synced(250 * time.Microsecond)
	m.Flushed(1000, 125*time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, mf := range mfs {
		if ms := mf.GetMetric(); len(ms) == 1 && ms[0].GetHistogram() != nil {
			sums[mf.GetName()] = ms[0].GetHistogram().GetSampleSum()
		}
	}
	if sums["sessiond_store_commit_batch"] != 3 || sums["sessiond_store_commit_seconds"] != 0.002 {
		t.Errorf("a commit of 3 operations in 2 ms: %v", sums)
	}
	if sums["sessiond_store_fdatasync_seconds"] != 0.00025 || sums["sessiond_store_flush_seconds"] != 0.125 {
		t.Errorf("a 250 µs fdatasync and a 125 ms flush: %v", sums)
	}
}

// createProbe records, when the creation's session.created.1 is read back
// for the bus, whether the Session's order lock is held.
type createProbe struct {
	persistence.Store
	rt     *actors.Runtime
	mu     sync.Mutex
	locked []bool
}

func (p *createProbe) History(ctx context.Context, id messages.SessionID, q persistence.Query) (persistence.Page[messages.Event], error) {
	page, err := p.Store.History(ctx, id, q)
	if err == nil && q.Limit == 1 && len(page.Data) == 1 {
		if _, ok := page.Data[0].Data.(*messages.SessionCreated); ok {
			p.mu.Lock()
			p.locked = append(p.locked, p.rt.OrderLocked(id))
			p.mu.Unlock()
		}
	}
	return page, err
}

// TestCreationPublishesUnderTheOrderLock: session.created.1 is
// published to the bus under the Session's order lock, as every other
// durable event is (admissions, selections, the runner's commits), so an
// admission racing the creation cannot reach /api/event before seq 0.
// Creation committed and published without it: a prompt for a supplied ID
// admitted in between was published first, and a live subscriber saw seq 1
// before seq 0.
func TestCreationPublishesUnderTheOrderLock(t *testing.T) {
	probe := &createProbe{}
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { probe.Store = c.Store; c.Store = probe }})
	probe.rt = h.Runtime
	sub := h.Runtime.Bus().Subscribe(16, nil)
	defer sub.Close()
	generated := h.Session()
	supplied, created, err := h.Runtime.Create(h.Ctx(), persistence.CreateSession{ID: "ses_audit_supplied", Location: messages.Location{Directory: h.Dir}})
	if err != nil || !created {
		t.Fatalf("create with a supplied ID: created=%v err=%v", created, err)
	}
	probe.mu.Lock()
	locked := append([]bool(nil), probe.locked...)
	probe.mu.Unlock()
	if len(locked) != 2 || !locked[0] || !locked[1] {
		t.Fatalf("order lock held while session.created.1 was published (generated ID, supplied ID): %v", locked)
	}
	for _, sid := range []messages.SessionID{generated, supplied.ID} {
		ev := <-sub.C
		if ev.Type != messages.TypeSessionCreated || ev.Data.Session() != sid {
			t.Fatalf("bus got %s of %s, want session.created.1 of %s", ev.Type, ev.Data.Session(), sid)
		}
	}
}

// TestMetricsAreDocumented: docs/api.md lists every metric the
// runtime exports, under its name and type (it named a few in passing and
// ended with "…").
func TestMetricsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := actors.NewMetrics(reg)
	// Vectors are gathered once they have a series.
	m.Steps.WithLabelValues("ended")
	m.BusyPeriods.WithLabelValues("succeeded")
	m.Tools.WithLabelValues("read", "success")
	m.Compactions.WithLabelValues(messages.CompactionAuto)
	m.ObserveSecs.WithLabelValues("builtin")
	m.Unavailable.WithLabelValues("builtin")
	m.Subscribers.WithLabelValues("log")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 20 {
		t.Fatalf("%d metric families gathered", len(families))
	}
	for _, f := range families {
		row := "| `" + f.GetName() + "` | " + strings.ToLower(f.GetType().String()) + " |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/api.md has no row %q", row)
		}
	}
}

// TestInterruptedRetryWaitLeavesTheFakeClock: a retry delay cut short
// by an interrupt is no longer a pending wait of the fake clock. It stayed
// one, so the next retry's Clock.BlockUntil(ctx, 1) returned at once, before
// that retry waited, and the Advance that followed could miss it: the test
// then hung in WaitIdle until Timeout.
func TestInterruptedRetryWaitLeavesTheFakeClock(t *testing.T) {
	h := actortest.New(t)
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderInternal, "overloaded")))
	sid := h.Session()
	h.Prompt(sid, "one")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	if n := h.Clock.Waiters(); n != 0 {
		t.Fatalf("%d fake-clock waits pending after the interrupt that abandoned the retry delay", n)
	}
	// The next retry is the one BlockUntil sees, and the Advance fires it.
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderInternal, "overloaded")))
	h.Model.Reply(script.Text("answered"))
	h.Prompt(sid, "two")
	if err := h.Clock.BlockUntil(h.Ctx(), 1); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(time.Minute)
	h.WaitIdle(sid)
	if types := h.Types(sid); types[len(types)-1] != "session.execution.succeeded" {
		t.Fatalf("after the retry: %v", types)
	}
}

// TestBusyPeriodsCountedByOutcome: every busy period is counted once, by
// how it ended; one that failed before any step (its directory gone, an
// unavailable instruction source) showed in no metric.
func TestBusyPeriodsCountedByOutcome(t *testing.T) {
	m := actors.NewMetrics(prometheus.NewRegistry())
	h := actortest.New(t, actortest.Options{Config: func(c *actors.Config) { c.Metrics = m }})
	g := script.NewGate()
	h.Model.Reply(script.Text("fine"))
	h.Model.Reply(script.Fail(llm.Errorf(messages.ErrProviderAuth, "bad key")))
	h.Model.Reply(script.Hold(g), script.Text("never"))
	sid := h.Session()
	h.Prompt(sid, "one")
	h.WaitIdle(sid)
	h.Prompt(sid, "two")
	h.WaitIdle(sid)
	h.Prompt(sid, "three")
	if err := g.Reached(h.Ctx()); err != nil {
		t.Fatal(err)
	}
	if err := h.Runtime.Interrupt(h.Ctx(), sid); err != nil {
		t.Fatal(err)
	}
	g.Release()
	h.WaitIdle(sid)
	for outcome, want := range map[string]float64{"succeeded": 1, "failed": 1, "interrupted": 1} {
		if got := testutil.ToFloat64(m.BusyPeriods.WithLabelValues(outcome)); got != want {
			t.Errorf("%s: %v, want %v", outcome, got, want)
		}
	}
}
