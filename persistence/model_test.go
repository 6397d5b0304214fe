package persistence_test

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

var (
	modelRounds = flag.Int("model.rounds", 4, "TestStoreAgainstModel: random runs (seeds seed, seed+1, ...)")
	modelOps    = flag.Int("model.ops", 600, "TestStoreAgainstModel: operations per run")
	modelSeed   = flag.Uint64("model.seed", 20261207, "TestStoreAgainstModel: first seed")
)

// TestStoreAgainstModel drives the store with random operations and checks
// every answer and every read against a plain model of the contract. The
// operations: Session creation with supplied and generated IDs; admissions
// with exact retries and conflicting reuse, up to a backlog; promotions;
// steps with text and reasoning (a wrong ordinal refused), tool calls with
// or without streamed input, their settlements, and ends (refused before
// the settlements) that end or fail; agent and model selections and moves;
// instruction baselines and updates; busy periods; scheduled retries;
// manual compaction barriers; instruction entries written and deleted;
// approvals. Three workers run at once, each on Sessions, IDs and projects
// of its own, so their operations share group commits (and a batch reruns
// the others' when one fails); between phases the store is reopened at
// random. The log is flushed every few kilobytes, so reads merge the
// memtables with bbolt at every stage of a flush, and reopening recovers
// from the log.
func TestStoreAgainstModel(t *testing.T) {
	for r := range *modelRounds {
		seed := *modelSeed + uint64(r)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runModel(t, seed, *modelOps)
		})
	}
}

var mctx = context.Background()

type modelInput struct {
	receipt  persistence.Admitted // a prompt's; a barrier's ID, Session and seq
	kind     string
	promoted int64 // seq of its promotion or settlement; -1 while pending
}

type modelSession struct {
	id       messages.SessionID
	events   []string // types by seq
	pending  []messages.MessageID
	messages []modelMessage // by seq
	open     messages.MessageID
	// The manual compaction barriers: queued is waiting, running has
	// started (stale: before the store last opened).
	queued, running messages.MessageID
	stale           bool
	entries         map[string]string
	// The open step's parts as projected, and which of them are tool
	// calls not yet settled.
	parts     []persistence.Part
	unsettled []int
	// The Session record's fields the log changes.
	agent  string
	model  messages.ModelRef
	dir    string
	tokens messages.Tokens
	cost   float64
	// The instruction checkpoint (nil before a baseline), the last closed
	// assistant message, and the message whose retry is scheduled.
	checkpoint *persistence.Checkpoint
	lastAsst   messages.MessageID
	retry      messages.MessageID
}

type modelMessage struct {
	id    messages.MessageID
	seq   int64
	role  string
	parts string // partsString of an assistant message's
	end   string // how its step ended: the finish, or "failed" and the error type
	retry string // its scheduled retry
}

// modelStore is the store under test, shared by the workers.
type modelStore struct {
	t      *testing.T
	path   string
	noSync bool
	// ids, when set, makes IDs from this seed: with the clock, a run
	// makes the same IDs and times every time.
	ids     *uint64
	st      *persistence.Bolt
	now     atomic.Int64 // the clock, in Unix milliseconds
	flushes atomic.Int64
}

// model is one worker: its random source and the model of its Sessions,
// inputs and approvals.
type model struct {
	*modelStore
	name     string // in every ID and project it makes
	rng      *rand.Rand
	sessions map[messages.SessionID]*modelSession
	order    []messages.SessionID
	inputs   map[messages.MessageID]*modelInput
	steps    int
	approved map[string]map[string][]string // project -> permission -> sorted patterns
	op       int                            // the operation running, for failure messages
	// fail, when set, is called with a failure's message instead of the
	// test failing (it must not return).
	fail func(msg string)
}

// fatalf fails the run, naming the worker and the operation that failed,
// and ends the goroutine (a worker's or the test's).
func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	msg := fmt.Sprintf("%s, operation %d: %s", m.name, m.op, fmt.Sprintf(format, args...))
	if m.fail != nil {
		m.fail(msg)
	}
	m.t.Errorf("%s", msg)
	runtime.Goexit()
}

const modelWorkers = 3

func runModel(t *testing.T, seed uint64, ops int) {
	// With fsync, commits wait for the disk and more operations share one
	// (a quarter of them, against a fiftieth without).
	ms := &modelStore{t: t, path: filepath.Join(t.TempDir(), "model.db"), noSync: seed%2 == 0}
	ms.now.Store(modelStart.UnixMilli())
	failFlushes(t, seed)
	ms.open()
	defer func() { _ = ms.st.Close() }()
	rng := rand.New(rand.NewPCG(seed, 36))
	workers := make([]*model, modelWorkers)
	for i := range workers {
		workers[i] = newWorker(ms, i, seed)
	}
	const phase = 100
	for done := 0; done < ops; done += phase {
		var wg sync.WaitGroup
		for _, m := range workers {
			wg.Go(func() { m.run(done, min(ops, done+phase)) })
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if rng.IntN(3) == 0 {
			ms.reopen(workers)
		} else {
			for _, m := range workers {
				m.checkAll()
			}
		}
	}
	ms.reopen(workers)
	// The reads merged the memtables with bbolt only if flushes ran.
	if n := ms.flushes.Load(); ops >= 300 && n < 3 {
		t.Fatalf("seed %d: %d flushes in %d operations", seed, n, ops)
	}
}

// failFlushes makes half the flush attempts of a third of the seeds fail
// as on a full disk, leaving bbolt as it was, and in another third half
// the attempts to give the log's next file room before a flush starts: the
// store retries them, and reads must not tell.
func failFlushes(t *testing.T, seed uint64) {
	switch seed % 3 {
	case 1:
		failed := persistence.FailFlushes(t, 0.5, seed)
		t.Cleanup(func() { t.Logf("seed %d: %d flush attempts failed", seed, failed.Load()) })
	case 2:
		failed := persistence.FailLogStarts(t, 0.5, seed)
		t.Cleanup(func() { t.Logf("seed %d: %d log starts failed", seed, failed.Load()) })
	}
}

func newWorker(ms *modelStore, i int, seed uint64) *model {
	return &model{modelStore: ms, name: fmt.Sprint("w", i), rng: rand.New(rand.NewPCG(seed, uint64(i))),
		sessions: map[messages.SessionID]*modelSession{}, inputs: map[messages.MessageID]*modelInput{},
		approved: map[string]map[string][]string{}}
}

// run does operations from up to to of the worker's run.
func (m *model) run(from, to int) {
	if len(m.order) == 0 {
		m.create()
	}
	for m.op = from; m.op < to; m.op++ {
		m.do()
	}
}

// do does one random operation.
func (m *model) do() {
	switch n := m.rng.IntN(100); {
	case n < 8:
		m.create()
	case n < 45:
		m.admit()
	case n < 60:
		m.promote()
	case n < 65:
		m.compaction()
	case n < 76:
		m.step()
	case n < 82:
		m.entry()
	case n < 86:
		m.selectOrMove()
	case n < 90:
		m.lifecycle()
	default:
		m.checkSession(m.pick())
	}
}

// clock advances a millisecond a reading, so creation times never tie. The
// store may read it from its own goroutines.
func (m *modelStore) clock() time.Time {
	return time.UnixMilli(m.now.Add(1)).UTC()
}

func (m *modelStore) open() {
	o := persistence.Options{NoSync: m.noSync, FlushBytes: 4 << 10, PageSize: 7, InboxBacklog: modelBacklog, Clock: m.clock,
		OnFlush: func(int, time.Duration) { m.flushes.Add(1) }}
	if m.ids != nil {
		var key [32]byte
		binary.BigEndian.PutUint64(key[:], *m.ids)
		o.IDs = messages.NewIDs(m.clock, rand.NewChaCha8(key))
	}
	st, err := persistence.Open(m.path, o)
	if err != nil {
		m.t.Fatal(err)
	}
	m.st = st
}

// reopen closes the store and opens it again, then checks every worker's
// model.
func (m *modelStore) reopen(workers []*model) {
	// With flushes failing (failFlushes), Close's last attempt may fail
	// too: the store then says so, and Open recovers it all from the log.
	if err := m.st.Close(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		m.t.Fatal(err)
	}
	m.open()
	for _, w := range workers {
		for _, ms := range w.sessions {
			ms.stale = ms.running != ""
		}
		w.checkAll()
	}
}

func (m *model) pick() *modelSession { return m.sessions[m.order[m.rng.IntN(len(m.order))]] }

func (m *model) create() {
	var id messages.SessionID
	if m.rng.IntN(2) == 0 {
		id = messages.SessionID(fmt.Sprint("ses_", m.name, "model", m.rng.IntN(5)))
	}
	s, created, err := m.st.CreateSession(mctx, persistence.CreateSession{ID: id, Location: messages.Location{Directory: "/tmp/model"}})
	if err != nil {
		m.fatalf("create %q: %v", id, err)
	}
	_, known := m.sessions[s.ID]
	switch {
	case id != "" && s.ID != id:
		m.fatalf("create %q made %q", id, s.ID)
	case created == known:
		m.fatalf("create %q: created %v, known to the model %v", s.ID, created, known)
	case created:
		m.sessions[s.ID] = &modelSession{id: s.ID, events: []string{messages.TypeSessionCreated}, entries: map[string]string{},
			agent: s.Agent, model: s.Model, dir: s.Location.Directory}
		m.order = append(m.order, s.ID)
	}
	if want := int64(len(m.sessions[s.ID].events) - 1); s.LastSeq != want {
		m.fatalf("create %q: lastSeq %d, want %d", s.ID, s.LastSeq, want)
	}
}

var modelTexts = []string{"a", "b", "hello world"}

// modelBacklog caps each Session's unsettled inbox rows (prompts and
// compaction barriers alike); the model's admissions often reach it.
const modelBacklog = 5

func (m *model) admit() {
	ms := m.pick()
	sid := ms.id
	if m.rng.IntN(12) == 0 {
		sid = "ses_nowhere"
	}
	req := persistence.Admission{SessionID: sid, Prompt: messages.Prompt{Text: modelTexts[m.rng.IntN(len(modelTexts))]},
		Delivery: []messages.Delivery{"", messages.Steer, messages.Queue}[m.rng.IntN(3)]}
	if m.rng.IntN(5) < 3 {
		req.ID = messages.MessageID(fmt.Sprint("msg_", m.name, "model", m.rng.IntN(15)))
	}
	got, created, err := m.st.Admit(mctx, req)
	delivery := req.Delivery
	if delivery == "" {
		delivery = messages.DefaultDelivery
	}
	if sid == "ses_nowhere" {
		m.wantType(err, messages.ErrSessionNotFound, "admit to a missing Session")
		return
	}
	if in, ok := m.inputs[req.ID]; ok {
		r := in.receipt
		if r.SessionID != sid || r.Prompt.Text != req.Prompt.Text || r.Delivery != delivery {
			m.wantType(err, messages.ErrPromptConflict, fmt.Sprintf("reuse of %s", req.ID))
			return
		}
		if err != nil || created || !reflect.DeepEqual(got, r) {
			m.fatalf("exact retry of %s: %+v created=%v err=%v, want %+v", req.ID, got, created, err, r)
		}
		return
	}
	if len(ms.pending) >= modelBacklog {
		m.wantType(err, messages.ErrInboxFull, fmt.Sprintf("admission to %s with %d inputs pending", sid, len(ms.pending)))
		return
	}
	if err != nil || !created {
		m.fatalf("admit %+v: created=%v err=%v", req, created, err)
	}
	seq := int64(len(ms.events))
	if (req.ID != "" && got.ID != req.ID) || got.SessionID != sid || got.AdmittedSeq != seq || got.Delivery != delivery || got.Prompt.Text != req.Prompt.Text {
		m.fatalf("admit %+v: receipt %+v, want seq %d", req, got, seq)
	}
	ms.events = append(ms.events, messages.TypePromptAdmitted)
	ms.pending = append(ms.pending, got.ID)
	m.inputs[got.ID] = &modelInput{receipt: got, kind: persistence.InputPrompt, promoted: -1}
}

// compaction requests a manual compaction, or starts or settles one.
func (m *model) compaction() {
	ms := m.pick()
	seq := int64(len(ms.events))
	switch n := m.rng.IntN(3); {
	case n == 0:
		in, created, err := m.st.AdmitCompaction(mctx, ms.id)
		if err != nil {
			m.fatalf("compaction of %s: %v", ms.id, err)
		}
		// A request joins the queued barrier, else the running one of
		// this process; a barrier whose process stopped takes no more.
		join := ms.queued
		if join == "" && !ms.stale {
			join = ms.running
		}
		if join != "" {
			if created || in.ID != join {
				m.fatalf("compaction of %s: %s created=%v, want %s", ms.id, in.ID, created, join)
			}
			return
		}
		if !created || in.Kind != persistence.InputCompaction || in.AdmittedSeq != seq {
			m.fatalf("compaction of %s: %+v created=%v, want a new barrier at %d", ms.id, in, created, seq)
		}
		ms.queued = in.ID
		ms.events = append(ms.events, messages.TypeCompactionAdmitted)
		ms.pending = append(ms.pending, in.ID)
		ms.messages = append(ms.messages, modelMessage{id: in.ID, seq: seq, role: persistence.RoleCompaction})
		m.inputs[in.ID] = &modelInput{receipt: persistence.Admitted{ID: in.ID, SessionID: ms.id, AdmittedSeq: seq}, kind: persistence.InputCompaction, promoted: -1}
	case ms.running != "":
		id := ms.running
		var p messages.Payload = &messages.CompactionEnded{SessionID: ms.id, Reason: messages.CompactionManual, InputID: id, Text: "summary"}
		typ := messages.TypeCompactionEnded
		if n == 1 {
			p = &messages.CompactionFailed{SessionID: ms.id, Reason: messages.CompactionManual, InputID: id,
				Error: messages.Error{Type: messages.ErrInternal, Message: "no"}}
			typ = messages.TypeCompactionFailed
		}
		if _, err := m.st.Append(mctx, ms.id, p); err != nil {
			m.fatalf("settle compaction %s: %v", id, err)
		}
		ms.events = append(ms.events, typ)
		ms.unpend(id)
		m.inputs[id].promoted = seq
		ms.running, ms.stale = "", false
	case ms.queued != "":
		id := ms.queued
		if _, err := m.st.Append(mctx, ms.id, &messages.CompactionStarted{SessionID: ms.id, Reason: messages.CompactionManual, InputID: id}); err != nil {
			m.fatalf("start compaction %s: %v", id, err)
		}
		ms.events = append(ms.events, messages.TypeCompactionStarted)
		ms.queued, ms.running = "", id
	}
}

func (m *model) promote() {
	ms := m.pick()
	var id messages.MessageID
	switch {
	case len(ms.pending) > 0 && m.rng.IntN(5) > 0:
		id = ms.pending[m.rng.IntN(len(ms.pending))]
	case len(m.inputs) > 0:
		ids := make([]messages.MessageID, 0, len(m.inputs))
		for id := range m.inputs {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		id = ids[m.rng.IntN(len(ids))]
	default:
		return
	}
	evs, err := m.st.Append(mctx, ms.id, &messages.PromptPromoted{SessionID: ms.id, InputID: id})
	in := m.inputs[id]
	switch {
	case in.receipt.SessionID != ms.id || in.kind != persistence.InputPrompt:
		m.wantType(err, messages.ErrNotFound, fmt.Sprintf("promotion of %s in %s", id, ms.id))
		return
	case in.promoted >= 0:
		m.wantType(err, messages.ErrInputPromoted, fmt.Sprintf("second promotion of %s", id))
		return
	case err != nil:
		m.fatalf("promote %s: %v", id, err)
	}
	seq := int64(len(ms.events))
	if len(evs) != 1 || evs[0].Seq() != seq {
		m.fatalf("promote %s: %d events, seq %d, want %d", id, len(evs), evs[0].Seq(), seq)
	}
	in.promoted = seq
	ms.events = append(ms.events, messages.TypePromptPromoted)
	ms.unpend(id)
	ms.messages = append(ms.messages, modelMessage{id: id, seq: seq, role: persistence.RoleUser})
}

// step starts a step, or in an open one ends a text fragment, calls a
// tool, settles one, or ends the step (refused while a call is unsettled).
func (m *model) step() {
	ms := m.pick()
	seq := int64(len(ms.events))
	if ms.open == "" {
		m.steps++
		asst := messages.MessageID(fmt.Sprint("msg_", m.name, "step", m.steps))
		if _, err := m.st.Append(mctx, ms.id, &messages.StepStarted{SessionID: ms.id, AssistantMessageID: asst, Agent: "build", Attempt: 1}); err != nil {
			m.fatalf("start step %s: %v", asst, err)
		}
		ms.events = append(ms.events, messages.TypeStepStarted)
		ms.messages = append(ms.messages, modelMessage{id: asst, seq: seq, role: persistence.RoleAssistant})
		ms.open, ms.parts, ms.unsettled = asst, nil, nil
		ms.clearRetry()
		return
	}
	asst := ms.open
	switch n := m.rng.IntN(10); {
	case n < 3:
		kind, started, ended := persistence.PartText, messages.TypeTextStarted, messages.TypeTextEnded
		if m.rng.IntN(2) == 0 {
			kind, started, ended = persistence.PartReasoning, messages.TypeReasoningStarted, messages.TypeReasoningEnded
		}
		ordinal := 0
		for _, p := range ms.parts {
			if p.Kind == kind {
				ordinal++
			}
		}
		wrong := m.rng.IntN(6) == 0 // a Session-assigned ordinal must be the next one
		o := ordinal
		if wrong {
			o++
		}
		text := modelTexts[m.rng.IntN(len(modelTexts))]
		var start, end messages.Payload = &messages.TextStarted{SessionID: ms.id, AssistantMessageID: asst, Ordinal: o},
			&messages.TextEnded{SessionID: ms.id, AssistantMessageID: asst, Ordinal: o, Text: text}
		if kind == persistence.PartReasoning {
			start, end = &messages.ReasoningStarted{SessionID: ms.id, AssistantMessageID: asst, Ordinal: o},
				&messages.ReasoningEnded{SessionID: ms.id, AssistantMessageID: asst, Ordinal: o, Text: text}
		}
		_, err := m.st.Append(mctx, ms.id, start, end)
		if wrong {
			m.wantType(err, messages.ErrInvalid, fmt.Sprintf("%s ordinal %d of %s, the next being %d", kind, o, asst, ordinal))
			return
		}
		if err != nil {
			m.fatalf("%s %d of %s: %v", kind, ordinal, asst, err)
		}
		ms.events = append(ms.events, started, ended)
		ms.parts = append(ms.parts, persistence.Part{Kind: kind, Ordinal: ordinal, Text: text, Ended: true})
	case n < 6:
		call := fmt.Sprint("c", len(ms.parts))
		input := `{"path":"x"}`
		tool := &persistence.ToolPart{CallID: call, Name: "read", State: persistence.ToolRunning, Input: []byte(input), Executed: true}
		ps := []messages.Payload{&messages.ToolCalled{SessionID: ms.id, AssistantMessageID: asst, CallID: call, Name: "read", Input: []byte(input), Executed: true}}
		types := []string{messages.TypeToolCalled}
		switch m.rng.IntN(3) {
		case 0: // its input streamed first
			ps = append([]messages.Payload{&messages.ToolInputStarted{SessionID: ms.id, AssistantMessageID: asst, CallID: call, Name: "read"},
				&messages.ToolInputEnded{SessionID: ms.id, AssistantMessageID: asst, CallID: call, Name: "read", Text: input}}, ps...)
			types = append([]string{messages.TypeToolInputStarted, messages.TypeToolInputEnded}, types...)
			tool.InputText = input
		case 1: // its input still streaming: the call is pending
			ps = []messages.Payload{&messages.ToolInputStarted{SessionID: ms.id, AssistantMessageID: asst, CallID: call, Name: "read"}}
			types = []string{messages.TypeToolInputStarted}
			tool = &persistence.ToolPart{CallID: call, Name: "read", State: persistence.ToolPending}
		}
		if _, err := m.st.Append(mctx, ms.id, ps...); err != nil {
			m.fatalf("call %s of %s: %v", call, asst, err)
		}
		ms.events = append(ms.events, types...)
		ms.parts = append(ms.parts, persistence.Part{Kind: persistence.PartTool, Tool: tool})
		ms.unsettled = append(ms.unsettled, len(ms.parts)-1)
	case n < 8 && len(ms.unsettled) > 0:
		i := m.rng.IntN(len(ms.unsettled))
		t := ms.parts[ms.unsettled[i]].Tool
		var p messages.Payload = &messages.ToolSucceeded{SessionID: ms.id, AssistantMessageID: asst, CallID: t.CallID, Output: "out " + t.CallID}
		typ := messages.TypeToolSucceeded
		if m.rng.IntN(3) == 0 {
			p = &messages.ToolFailed{SessionID: ms.id, AssistantMessageID: asst, CallID: t.CallID, Error: messages.Error{Type: messages.ErrToolExecution, Message: "no"}}
			typ = messages.TypeToolFailed
		}
		if _, err := m.st.Append(mctx, ms.id, p); err != nil {
			m.fatalf("settle %s of %s: %v", t.CallID, asst, err)
		}
		ms.events = append(ms.events, typ)
		if typ == messages.TypeToolSucceeded {
			t.State, t.Output = persistence.ToolCompleted, "out "+t.CallID
		} else {
			t.State, t.Error = persistence.ToolError, &messages.Error{Type: messages.ErrToolExecution, Message: "no"}
		}
		ms.unsettled = slices.Delete(ms.unsettled, i, i+1)
	default:
		tokens := messages.Tokens{Input: int64(m.rng.IntN(100)), Output: int64(m.rng.IntN(50))}
		var p messages.Payload = &messages.StepEnded{SessionID: ms.id, AssistantMessageID: asst, Finish: "stop", Tokens: tokens, Cost: 0.25}
		typ, end := messages.TypeStepEnded, "stop"
		if m.rng.IntN(4) == 0 {
			p = &messages.StepFailed{SessionID: ms.id, AssistantMessageID: asst, Error: messages.Error{Type: messages.ErrProviderInternal, Message: "no"}}
			typ, end = messages.TypeStepFailed, "failed "+string(messages.ErrProviderInternal)
		}
		_, err := m.st.Append(mctx, ms.id, p)
		if len(ms.unsettled) > 0 {
			m.wantType(err, messages.ErrInvalid, fmt.Sprintf("end of %s with %d calls unsettled", asst, len(ms.unsettled)))
			return
		}
		if err != nil {
			m.fatalf("end step %s: %v", asst, err)
		}
		ms.events = append(ms.events, typ)
		ms.open, ms.lastAsst = "", asst
		if typ == messages.TypeStepEnded {
			ms.tokens = ms.tokens.Add(tokens)
			ms.cost += 0.25
		}
		ms.message(asst).end = end
	}
	ms.message(asst).parts = partsString(ms.parts)
}

// inputIDs returns the IDs of inbox rows, in order.
func inputIDs(ins []persistence.Input) []messages.MessageID {
	ids := make([]messages.MessageID, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
	}
	return ids
}

// asModel is the model's view of a projected message.
func asModel(msg persistence.Message) modelMessage {
	mm := modelMessage{id: msg.ID, seq: msg.Seq, role: msg.Role, parts: partsString(msg.Parts), end: msg.Finish}
	if msg.Role == persistence.RoleSystem {
		mm.parts = msg.Text + "|" + msg.Kind
	}
	if msg.Error != nil {
		mm.end = "failed " + string(msg.Error.Type)
	}
	if msg.Retry != nil {
		mm.retry = fmt.Sprint(msg.Retry.Attempt, "@", msg.Retry.At)
	}
	return mm
}

// partsString renders an assistant message's parts for comparison.
func partsString(parts []persistence.Part) string {
	var b []byte
	for _, p := range parts {
		b = fmt.Appendf(b, "%s %d %q %v", p.Kind, p.Ordinal, p.Text, p.Ended)
		if t := p.Tool; t != nil {
			b = fmt.Appendf(b, " %s %s %s %q %s %v %q", t.CallID, t.Name, t.State, t.InputText, t.Input, t.Executed, t.Output)
			if t.Error != nil {
				b = fmt.Appendf(b, " %s %s", t.Error.Type, t.Error.Message)
			}
		}
		b = append(b, ';')
	}
	return string(b)
}

// lifecycle sets or updates the instruction checkpoint (an update before
// any baseline is refused), observes a busy period's start or end, or
// schedules a retry of the last closed step.
func (m *model) lifecycle() {
	ms := m.pick()
	seq := int64(len(ms.events))
	text := modelTexts[m.rng.IntN(len(modelTexts))]
	switch n := m.rng.IntN(10); {
	case n < 2 || (n < 4 && ms.checkpoint != nil):
		if _, err := m.st.Append(mctx, ms.id, &messages.InstructionsBaselined{SessionID: ms.id, Text: text, Applied: map[string]string{"k": text}}); err != nil {
			m.fatalf("baseline of %s: %v", ms.id, err)
		}
		ms.events = append(ms.events, messages.TypeInstructionsBaselined)
		ms.checkpoint = &persistence.Checkpoint{Baseline: text, BaselineSeq: seq, Applied: map[string]string{"k": text}}
	case n < 5:
		evs, err := m.st.Append(mctx, ms.id, &messages.InstructionsUpdated{SessionID: ms.id, Text: text, Kind: "update", Applied: map[string]string{"k": text + "2"}})
		if ms.checkpoint == nil {
			m.wantType(err, messages.ErrInvalid, fmt.Sprintf("instructions of %s updated before a baseline", ms.id))
			return
		}
		if err != nil {
			m.fatalf("instructions of %s: %v", ms.id, err)
		}
		ms.events = append(ms.events, messages.TypeInstructionsUpdated)
		ms.checkpoint.Applied = map[string]string{"k": text + "2"}
		id := persistence.SystemMessageID(evs[0])
		ms.messages = append(ms.messages, modelMessage{id: id, seq: seq, role: persistence.RoleSystem, parts: text + "|update"})
	case n < 7:
		if _, err := m.st.Append(mctx, ms.id, &messages.ExecutionStarted{SessionID: ms.id}); err != nil {
			m.fatalf("execution of %s: %v", ms.id, err)
		}
		ms.events = append(ms.events, messages.TypeExecutionStarted)
	case n < 8:
		ps := []messages.Payload{&messages.ExecutionSucceeded{SessionID: ms.id},
			&messages.ExecutionFailed{SessionID: ms.id, Error: messages.Error{Type: messages.ErrProviderInternal, Message: "no"}},
			&messages.ExecutionInterrupted{SessionID: ms.id, Reason: messages.ReasonUser}}
		types := []string{messages.TypeExecutionSucceeded, messages.TypeExecutionFailed, messages.TypeExecutionInterrupted}
		i := m.rng.IntN(3)
		if _, err := m.st.Append(mctx, ms.id, ps[i]); err != nil {
			m.fatalf("execution of %s: %v", ms.id, err)
		}
		ms.events = append(ms.events, types[i])
		ms.clearRetry()
	case ms.lastAsst != "":
		at := 1_000 + seq
		if _, err := m.st.Append(mctx, ms.id, &messages.RetryScheduled{SessionID: ms.id, AssistantMessageID: ms.lastAsst, Attempt: 2, At: at,
			Error: messages.Error{Type: messages.ErrProviderInternal, Message: "busy"}}); err != nil {
			m.fatalf("retry of %s: %v", ms.lastAsst, err)
		}
		ms.events = append(ms.events, messages.TypeRetryScheduled)
		ms.clearRetry()
		ms.retry = ms.lastAsst
		ms.message(ms.retry).retry = fmt.Sprint(2, "@", at)
	}
}

// message returns the model of message id.
func (ms *modelSession) message(id messages.MessageID) *modelMessage {
	return &ms.messages[slices.IndexFunc(ms.messages, func(mm modelMessage) bool { return mm.id == id })]
}

// unpend removes a settled input from the pending ones.
func (ms *modelSession) unpend(id messages.MessageID) {
	ms.pending = slices.DeleteFunc(ms.pending, func(p messages.MessageID) bool { return p == id })
}

// clearRetry clears the Session's scheduled retry, if any.
func (ms *modelSession) clearRetry() {
	if ms.retry != "" {
		ms.message(ms.retry).retry = ""
		ms.retry = ""
	}
}

// selectOrMove selects an agent or a model for the next step, or moves the
// Session to another directory.
func (m *model) selectOrMove() {
	ms := m.pick()
	var p messages.Payload
	var typ string
	var apply func() // the change to the model once committed
	switch m.rng.IntN(3) {
	case 0:
		agent := []string{"build", "plan"}[m.rng.IntN(2)]
		p, typ, apply = &messages.AgentSelected{SessionID: ms.id, Agent: agent}, messages.TypeAgentSelected, func() { ms.agent = agent }
	case 1:
		model := messages.ModelRef{ProviderID: "script", ID: fmt.Sprint("m", m.rng.IntN(3))}
		p, typ, apply = &messages.ModelSelected{SessionID: ms.id, Model: model}, messages.TypeModelSelected, func() { ms.model = model }
	default:
		dir := fmt.Sprint("/tmp/model/d", m.rng.IntN(3))
		p, typ, apply = &messages.SessionMoved{SessionID: ms.id, Location: messages.Location{Directory: dir}}, messages.TypeSessionMoved, func() { ms.dir, ms.checkpoint = dir, nil }
	}
	if _, err := m.st.Append(mctx, ms.id, p); err != nil {
		m.fatalf("%s of %s: %v", typ, ms.id, err)
	}
	apply()
	ms.events = append(ms.events, typ)
}

// entry puts or deletes an instruction entry, or saves an approval: keys
// written, deleted and written again, across flushes.
func (m *model) entry() {
	ms := m.pick()
	key := fmt.Sprint("k", m.rng.IntN(4))
	switch m.rng.IntN(4) {
	case 0, 1:
		v := []string{"", "x", "a longer value"}[m.rng.IntN(3)]
		if err := m.st.PutEntry(mctx, ms.id, key, v); err != nil {
			m.fatalf("put entry %s/%s: %v", ms.id, key, err)
		}
		ms.entries[key] = v
	case 2:
		err := m.st.DeleteEntry(mctx, ms.id, key)
		if _, ok := ms.entries[key]; !ok {
			m.wantType(err, messages.ErrNotFound, fmt.Sprintf("delete of missing entry %s/%s", ms.id, key))
			return
		}
		if err != nil {
			m.fatalf("delete entry %s/%s: %v", ms.id, key, err)
		}
		delete(ms.entries, key)
	case 3:
		project, perm := fmt.Sprint("/", m.name, "p", m.rng.IntN(3)), []string{"bash", "edit"}[m.rng.IntN(2)]
		pats := []string{fmt.Sprint("git ", m.rng.IntN(4)), fmt.Sprint("ls ", m.rng.IntN(4))}[:1+m.rng.IntN(2)]
		if err := m.st.SaveApproval(mctx, project, perm, pats); err != nil {
			m.fatalf("save approval: %v", err)
		}
		if m.approved[project] == nil {
			m.approved[project] = map[string][]string{}
		}
		for _, p := range pats {
			if !slices.Contains(m.approved[project][perm], p) {
				m.approved[project][perm] = append(m.approved[project][perm], p)
				slices.Sort(m.approved[project][perm])
			}
		}
	}
}

func (m *model) wantType(err error, typ messages.ErrorType, what string) {
	m.t.Helper()
	if got := messages.TypeOf(err); err == nil || got != typ {
		m.fatalf("%s: error %v (%s), want %s", what, err, got, typ)
	}
}

func (m *model) checkAll() {
	list, err := m.st.List(mctx)
	if err != nil {
		m.fatalf("%v", err)
	}
	var ids []messages.SessionID // this worker's, in the store's order
	for _, s := range list {
		if _, ok := m.sessions[s.ID]; ok {
			ids = append(ids, s.ID)
		}
	}
	if !slices.Equal(ids, m.order) {
		m.fatalf("List %v, want %v", ids, m.order)
	}
	for _, sid := range m.order {
		m.checkSession(m.sessions[sid])
	}
	for i := range 3 {
		project := fmt.Sprint("/", m.name, "p", i)
		got, err := m.st.Approvals(mctx, project)
		if err != nil {
			m.fatalf("%v", err)
		}
		want := m.approved[project]
		if want == nil {
			want = map[string][]string{}
		}
		if !reflect.DeepEqual(got, want) {
			m.fatalf("approvals of %s: %v, want %v", project, got, want)
		}
		for perm, pats := range want {
			for _, p := range pats {
				if ok, err := m.st.Approved(mctx, project, perm, p); err != nil || !ok {
					m.fatalf("approved %s %s %s: %v (%v)", project, perm, p, ok, err)
				}
			}
		}
	}
	for id, in := range m.inputs {
		got, err := m.st.Input(mctx, id)
		if err != nil {
			m.fatalf("input %s: %v", id, err)
		}
		r := got.Receipt()
		if in.kind == persistence.InputCompaction {
			r = persistence.Admitted{ID: got.ID, SessionID: got.SessionID, AdmittedSeq: got.AdmittedSeq}
		}
		if got.Kind != in.kind || !reflect.DeepEqual(r, in.receipt) || (got.PromotedSeq == nil) != (in.promoted < 0) || (got.PromotedSeq != nil && *got.PromotedSeq != in.promoted) {
			m.fatalf("input %s: %+v, want %+v promoted at %d", id, got, in.receipt, in.promoted)
		}
	}
}

// checkSession compares one Session's reads with the model: its record,
// watermark, history (whole and from a random cursor, in pages), pending
// inputs and messages.
func (m *model) checkSession(ms *modelSession) {
	last := int64(len(ms.events) - 1)
	s, err := m.st.Get(mctx, ms.id)
	if err != nil || s.LastSeq != last || s.Agent != ms.agent || s.Model != ms.model || s.Location.Directory != ms.dir || s.Tokens != ms.tokens || s.Cost != ms.cost {
		m.fatalf("get %s: %+v (%v), want lastSeq %d, agent %q, model %v, dir %s, tokens %+v, cost %v", ms.id, s, err, last, ms.agent, ms.model, ms.dir, ms.tokens, ms.cost)
	}
	if w, err := m.st.Watermark(mctx, ms.id); err != nil || w != last {
		m.fatalf("watermark %s: %d (%v), want %d", ms.id, w, err, last)
	}
	for _, after := range []int64{-1, m.rng.Int64N(last + 2)} {
		var got []string
		limit := 1 + m.rng.IntN(9)
		for cur := after; ; {
			p, err := m.st.History(mctx, ms.id, persistence.Query{After: cur, Limit: limit})
			if err != nil {
				m.fatalf("history %s after %d: %v", ms.id, cur, err)
			}
			for _, ev := range p.Data {
				if ev.Seq() != cur+1 {
					m.fatalf("history %s: seq %d after %d", ms.id, ev.Seq(), cur)
				}
				cur = ev.Seq()
				got = append(got, ev.Type)
			}
			if !p.HasMore {
				break
			}
			if len(p.Data) == 0 {
				m.fatalf("history %s after %d: hasMore with no events", ms.id, cur)
			}
		}
		if want := ms.events[min(after+1, last+1):]; !slices.Equal(got, want) {
			m.fatalf("history %s after %d: %v, want %v", ms.id, after, got, want)
		}
	}
	// The log from a random cursor: its events, then one marker at the
	// watermark.
	after := m.rng.Int64N(last+2) - 1
	var got []string
	synced := 0
	for it, err := range m.st.Log(mctx, ms.id, after, false) {
		switch {
		case err != nil:
			m.fatalf("log %s after %d: %v", ms.id, after, err)
		case it.Synced != nil:
			synced++
			if it.Synced.Seq == nil || *it.Synced.Seq != last {
				m.fatalf("log %s after %d: marker %+v, want seq %d", ms.id, after, it.Synced, last)
			}
		case synced > 0:
			m.fatalf("log %s after %d: an event after the marker", ms.id, after)
		default:
			got = append(got, it.Event.Type)
		}
	}
	if want := ms.events[after+1:]; synced != 1 || !slices.Equal(got, want) {
		m.fatalf("log %s after %d: %v and %d markers, want %v", ms.id, after, got, synced, want)
	}
	pend, err := m.st.Pending(mctx, ms.id)
	if err != nil {
		m.fatalf("%v", err)
	}
	if pids := inputIDs(pend); !slices.Equal(pids, ms.pending) {
		m.fatalf("pending %s: %v, want %v", ms.id, pids, ms.pending)
	}
	entries, err := m.st.Entries(mctx, ms.id)
	if err != nil || !maps.Equal(entries, ms.entries) {
		m.fatalf("entries %s: %v (%v), want %v", ms.id, entries, err, ms.entries)
	}
	// A step boundary's read: the same, in one snapshot.
	from := m.rng.Int64N(last+2) - 1
	b, err := m.st.Boundary(mctx, ms.id, from)
	if err != nil {
		m.fatalf("boundary %s: %v", ms.id, err)
	}
	var bmsgs []modelMessage
	for _, msg := range b.Messages {
		bmsgs = append(bmsgs, asModel(msg))
	}
	wantMsgs := slices.DeleteFunc(slices.Clone(ms.messages), func(mm modelMessage) bool { return mm.seq <= from })
	bpend := inputIDs(b.Pending)
	if b.Seq != last || b.Session.ID != ms.id || b.Session.Agent != ms.agent || b.Session.Model != ms.model || b.Session.Location.Directory != ms.dir || !slices.Equal(bpend, ms.pending) || !slices.Equal(bmsgs, wantMsgs) {
		m.fatalf("boundary %s after %d: seq %d, pending %v, messages %v; want %d, %v, %v", ms.id, from, b.Seq, bpend, bmsgs, last, ms.pending, wantMsgs)
	}
	c, ok, err := m.st.Checkpoint(mctx, ms.id)
	if err != nil || ok != (ms.checkpoint != nil) || (ok && !reflect.DeepEqual(c, *ms.checkpoint)) {
		m.fatalf("checkpoint of %s: %+v %v (%v), want %+v", ms.id, c, ok, err, ms.checkpoint)
	}
	if !reflect.DeepEqual(b.Checkpoint, ms.checkpoint) {
		m.fatalf("boundary checkpoint of %s: %+v, want %+v", ms.id, b.Checkpoint, ms.checkpoint)
	}
	open, err := m.st.OpenSteps(mctx, ms.id)
	if err != nil || (ms.open == "") != (len(open) == 0) || (ms.open != "" && (len(open) != 1 || open[0].ID != ms.open)) {
		m.fatalf("open steps of %s: %d (%v), want %q", ms.id, len(open), err, ms.open)
	}
	var msgs []modelMessage
	limit := m.rng.IntN(9) // 0: the store's page size
	for cur := int64(-1); ; {
		p, err := m.st.Messages(mctx, ms.id, persistence.Query{After: cur, Limit: limit})
		if err != nil {
			m.fatalf("%v", err)
		}
		for _, msg := range p.Data {
			msgs = append(msgs, asModel(msg))
			cur = msg.Seq
		}
		if !p.HasMore {
			break
		}
		if len(p.Data) == 0 {
			m.fatalf("messages %s after %d: hasMore with no messages", ms.id, cur)
		}
	}
	if len(ms.messages) > 0 {
		want := ms.messages[m.rng.IntN(len(ms.messages))]
		if got, err := m.st.Message(mctx, ms.id, want.id); err != nil || asModel(got) != want {
			m.fatalf("message %s of %s: %+v (%v), want %+v", want.id, ms.id, asModel(got), err, want)
		}
	}
	if !slices.Equal(msgs, ms.messages) {
		m.fatalf("messages %s: %v, want %v", ms.id, msgs, ms.messages)
	}
}
