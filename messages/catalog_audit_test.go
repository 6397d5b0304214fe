package messages

// Audit of the event vocabulary against DESIGN.md §4, SEED.md and
// docs/api.md: the catalog's names and optional members, the strictness of
// both event decoders, the typing of their errors, and the documentation.

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// auditStored frames an envelope exactly as AppendEventData does, but
// without its checks, so tests can build rows a buggy or older writer (or
// a damaged file) could leave behind.
func auditStored(t *testing.T, se storedEvent) []byte {
	t.Helper()
	b, err := NewEncoder().Encode(&se)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(b)
}

// auditStepStarted returns a valid stored step.started.1 envelope with its
// payload encoded.
func auditStepStarted(t *testing.T) storedEvent {
	t.Helper()
	data, err := Marshal(&StepStarted{SessionID: "ses_a", AssistantMessageID: "msg_a", Agent: "build",
		Model: ModelRef{ProviderID: "p", ID: "m"}, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	return storedEvent{Format: storedFormat, ID: "evt_a", Created: 1_767_225_600_000, Type: TypeStepStarted,
		Durable: &Durable{AggregateID: "ses_a", Seq: 3, Version: 1}, Data: data}
}

// TestCatalogMatchesDesign pins every durable type's data members to
// DESIGN.md §4 (plus the members the code adds on purpose: instructions
// updated carries applied, tool success its tool metadata): the JSON names
// and their case, which members are always present, and which are omitted
// when empty.
func TestCatalogMatchesDesign(t *testing.T) {
	// required members; optional ones end in "?". Nested objects are
	// listed by dotted path.
	loc := []string{"location.directory", "location.workspaceID?"}
	model := []string{"model.providerID", "model.id"}
	errm := []string{"error.type", "error.message"}
	frag := []string{"assistantMessageID", "ordinal", "providerMetadata?"}
	usage := []string{"usage.tokens.input?", "usage.tokens.output?", "usage.tokens.reasoning?", "usage.tokens.cache.read?",
		"usage.tokens.cache.write?", "usage.cost?"}
	want := map[string][]string{
		TypeSessionCreated:     append(append([]string{"title", "agent"}, loc...), model...),
		TypeAgentSelected:      {"agent"},
		TypeModelSelected:      model,
		TypeSessionMoved:       loc,
		TypePromptAdmitted:     {"inputID", "prompt.text", "prompt.files?", "delivery"},
		TypePromptPromoted:     {"inputID"},
		TypeCompactionAdmitted: {"inputID"},
		TypeCompactionStarted:  {"reason", "inputID?"},
		// usage: sessiond's addition, what the summary requests cost.
		TypeCompactionEnded:       append([]string{"reason", "inputID?", "text", "recent"}, usage...),
		TypeCompactionFailed:      append(append([]string{"reason", "inputID?"}, errm...), usage...),
		TypeInstructionsBaselined: {"text", "applied"},
		TypeInstructionsUpdated:   {"text", "kind", "applied"},
		TypeExecutionStarted:      {},
		TypeExecutionSucceeded:    {},
		TypeExecutionFailed:       errm,
		TypeExecutionInterrupted:  {"reason"},
		TypeStepStarted:           append([]string{"assistantMessageID", "agent", "attempt"}, model...),
		TypeStepEnded: {"assistantMessageID", "finish", "cost", "tokens.input", "tokens.output", "tokens.reasoning",
			"tokens.cache.read", "tokens.cache.write"},
		TypeStepFailed:        append([]string{"assistantMessageID"}, errm...),
		TypeTextStarted:       frag,
		TypeTextEnded:         append([]string{"text"}, frag...),
		TypeReasoningStarted:  frag,
		TypeReasoningEnded:    append([]string{"text"}, frag...),
		TypeToolInputStarted:  {"assistantMessageID", "callID", "name"},
		TypeToolInputEnded:    {"assistantMessageID", "callID", "name", "text"},
		TypeToolCalled:        {"assistantMessageID", "callID", "name", "input", "executed", "providerMetadata?"},
		TypeToolSucceeded:     {"assistantMessageID", "callID", "output", "metadata?", "providerMetadata?"},
		TypeToolFailed:        append([]string{"assistantMessageID", "callID", "providerMetadata?"}, errm...),
		TypeRetryScheduled:    append([]string{"assistantMessageID", "attempt", "at"}, errm...),
		TypeTextDelta:         {"assistantMessageID", "ordinal", "delta"},
		TypeReasoningDelta:    {"assistantMessageID", "ordinal", "delta"},
		TypeToolInputDelta:    {"assistantMessageID", "callID", "delta"},
		TypeCompactionDelta:   {"inputID?", "delta"},
		TypeUsageUpdated:      {"assistantMessageID", "cost", "tokens.input", "tokens.output", "tokens.reasoning", "tokens.cache.read", "tokens.cache.write"},
		TypePermissionAsked:   {"requestID", "permission", "patterns", "where?", "metadata?", "assistantMessageID?", "callID?"},
		TypePermissionReplied: {"requestID", "reply", "message?"},
	}
	types := append(DurableTypes(), TypeTextDelta, TypeReasoningDelta, TypeToolInputDelta, TypeCompactionDelta,
		TypeUsageUpdated, TypePermissionAsked, TypePermissionReplied)
	if len(want) != len(types) {
		t.Fatalf("catalog has %d types, the audit table %d", len(types), len(want))
	}
	sort.Strings(types)
	for _, typ := range types {
		members, ok := want[typ]
		if !ok {
			t.Errorf("%s is not in DESIGN.md §4", typ)
			continue
		}
		var required, all []string
		for _, m := range append([]string{"sessionID"}, members...) {
			name, optional := strings.CutSuffix(m, "?")
			all = append(all, name)
			if !optional {
				required = append(required, name)
			}
		}
		empty, _ := NewPayload(typ)
		if got := auditJSONPaths(t, empty); !sameSet(got, required) {
			t.Errorf("%s empty: members %v, want %v", typ, got, required)
		}
		if got := auditJSONPaths(t, sample(empty)); !sameSet(got, all) {
			t.Errorf("%s full: members %v, want %v", typ, got, all)
		}
	}
	// Interruption reasons and compaction reasons are the strings SEED.md
	// and DESIGN.md name.
	if ReasonUser != "user" || ReasonShutdown != "shutdown" || ReasonSuperseded != "superseded" ||
		CompactionAuto != "auto" || CompactionManual != "manual" || CompactionOverflow != "overflow" ||
		Steer != "steer" || Queue != "queue" || InstructionsUpdate != "update" || InstructionsRemoval != "removal" {
		t.Error("a reason, delivery or kind constant differs from DESIGN.md")
	}
}

// auditJSONPaths returns the dotted member paths of p's JSON form, not
// descending into opaque members (raw JSON and the applied record).
func auditJSONPaths(t *testing.T, p Payload) []string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			sub, isObj := v.(map[string]any)
			switch k {
			case "providerMetadata", "metadata", "input", "applied":
				isObj = false
			}
			if isObj && k != "files" {
				walk(prefix+k+".", sub)
				continue
			}
			out = append(out, prefix+k)
		}
	}
	walk("", m)
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestErrorTypesMatchDesign pins the error type codes DESIGN.md §4
// lists.
func TestErrorTypesMatchDesign(t *testing.T) {
	for got, want := range map[ErrorType]string{
		ErrProviderTransport: "provider.transport", ErrProviderRateLimit: "provider.rate-limit",
		ErrProviderInternal: "provider.internal", ErrProviderInvalidRequest: "provider.invalid-request",
		ErrProviderContextOverflow: "provider.context-overflow", ErrProviderContentFilter: "provider.content-filter",
		ErrProviderUnknown: "provider.unknown", ErrAborted: "aborted", ErrToolExecution: "tool.execution",
		ErrToolResultMissing: "tool.result-missing", ErrPermissionRejected: "permission.rejected",
		ErrCompactionUnavailable: "compaction.unavailable", ErrCompactionFailed: "compaction.failed", ErrUnknown: "unknown",
	} {
		if string(got) != want {
			t.Errorf("error type %q, DESIGN.md says %q", got, want)
		}
	}
}

// TestDurableVersionMustMatchType: durable.version is the number after
// the type's last dot (DESIGN.md §4: {aggregateID, seq, version}). Both
// decoders accepted any version (a stored or served session.step.started.1
// with version 0 or 2 read as version 1's schema), and the encoder wrote
// one, so a row restored with a wrong version read back wrong.
func TestDurableVersionMustMatchType(t *testing.T) {
	for _, v := range []int{0, 2} {
		se := auditStepStarted(t)
		se.Durable.Version = v
		if _, err := UnmarshalEvent(auditStored(t, se)); err == nil {
			t.Errorf("stored step.started.1 with durable version %d decoded", v)
		}
		j := `{"id":"evt_a","created":1,"type":"session.step.started.1","durable":{"aggregateID":"ses_a","seq":3,"version":` +
			strconv.Itoa(v) + `},"data":{"sessionID":"ses_a","assistantMessageID":"msg_a","agent":"build","model":{"providerID":"p","id":"m"},"attempt":1}}`
		var ev Event
		if err := json.Unmarshal([]byte(j), &ev); err == nil {
			t.Errorf("JSON step.started.1 with durable version %d decoded", v)
		}
		bad := sampleEvent(TypeStepStarted)
		bad.Durable.Version = v
		if _, err := MarshalEvent(bad); err == nil {
			t.Errorf("MarshalEvent wrote durable version %d for a .1 type, a row no decoder may read", v)
		}
	}
	// The right version still reads.
	if _, err := UnmarshalEvent(auditStored(t, auditStepStarted(t))); err != nil {
		t.Fatal(err)
	}
}

// TestStoredEventWithoutData: a stored envelope whose data is nil
// decoded to an all-empty payload (no sessionID, no assistantMessageID);
// the JSON decoder refuses the same event ("has no data") and the encoder
// never writes one.
func TestStoredEventWithoutData(t *testing.T) {
	se := auditStepStarted(t)
	se.Data = nil
	ev, err := UnmarshalEvent(auditStored(t, se))
	if err == nil {
		t.Fatalf("stored event without data decoded to %#v", ev.Data)
	}
}

// TestStoredDecodeErrorsAreTyped: every failure to read a stored event
// or value is a typed error, and of type internal: the bytes were written
// by this program, so an unreadable row is the server's fault (500 with a
// reference), never the request's. Before, most were untyped (TypeOf says
// unknown), and a row whose durable section disagreed with its type was
// typed invalid: GET /history answered that corrupt row with 400 invalid,
// blaming the client and showing it the internal message.
func TestStoredDecodeErrorsAreTyped(t *testing.T) {
	good := auditStored(t, auditStepStarted(t))
	withType := func(typ string) []byte {
		se := auditStepStarted(t)
		se.Type = typ
		return auditStored(t, se)
	}
	format := auditStepStarted(t)
	format.Format = 2
	noDurable := auditStepStarted(t)
	noDurable.Durable = nil
	version := auditStepStarted(t)
	version.Durable.Version = 2
	noData := auditStepStarted(t)
	noData.Data = nil
	six, _ := msgpack.Marshal([]any{1, "evt_a", 1, TypeStepStarted, nil, nil})
	frame := map[string]bool{"empty": true, "truncated": true, "garbage": true, "trailing byte": true, "bin32 4 GiB": true}
	for name, b := range map[string][]byte{
		"empty":                   nil,
		"truncated":               good[:len(good)/2],
		"garbage":                 {0xc1},
		"trailing byte":           append(slices.Clone(good), 0xc0),
		"bin32 4 GiB":             []byte("\x97\x01\xc6\xc6\xc6\xc61"),
		"six fields":              six,
		"unknown format":          auditStored(t, format),
		"unknown type":            withType("session.nope.1"),
		"newer version of type":   withType("session.step.started.2"),
		"not a map payload":       auditStored(t, storedEvent{Format: 1, ID: "evt_a", Type: TypeStepStarted, Durable: &Durable{AggregateID: "ses_a", Version: 1}, Data: []byte{0x91, 0x01}}),
		"durable without durable": auditStored(t, noDurable),
		"wrong durable version":   auditStored(t, version),
		"no data":                 auditStored(t, noData),
	} {
		_, err := UnmarshalEvent(b)
		if err == nil {
			t.Errorf("%s: decoded", name)
			continue
		}
		if got := TypeOf(err); got != ErrInternal {
			t.Errorf("%s: error %q has type %q, want %q", name, err, got, ErrInternal)
		}
		if s := TypeOf(err).HTTPStatus(); s != http.StatusInternalServerError {
			t.Errorf("%s: a corrupt stored row answers %d", name, s)
		}
		if frame[name] && !errors.Is(err, errFrame) {
			t.Errorf("%s: %v no longer wraps errFrame", name, err)
		}
		if !strings.HasPrefix(err.Error(), "messages: unmarshal event: ") {
			t.Errorf("%s: message %q", name, err)
		}
		if _, err := EventCreated(b); err != nil && TypeOf(err) != ErrInternal {
			t.Errorf("%s: EventCreated error %q has type %q", name, err, TypeOf(err))
		}
	}
	// The generic stored decoder too.
	for name, b := range map[string][]byte{"empty": nil, "two values": []byte("\xa1a\xa1b"), "wrong kind": {0xa1, 'a'}} {
		var d Durable
		err := Unmarshal(b, &d)
		if err == nil {
			t.Errorf("Unmarshal %s: decoded", name)
			continue
		}
		if TypeOf(err) != ErrInternal {
			t.Errorf("Unmarshal %s: error %q has type %q", name, err, TypeOf(err))
		}
	}
}

// TestJSONDecodeErrorsAreTyped: the served form is decoded from
// outside this process, so its failures are typed invalid (400). Before,
// only a durable-section mismatch was typed; an unknown type, missing data
// or a payload of the wrong shape were untyped.
func TestJSONDecodeErrorsAreTyped(t *testing.T) {
	d := `"durable":{"aggregateID":"ses_a","seq":1,"version":1}`
	for name, j := range map[string]string{
		"unknown type":      `{"id":"evt_a","type":"session.nope.1",` + d + `,"data":{}}`,
		"newer version":     `{"id":"evt_a","type":"session.step.ended.2",` + d + `,"data":{}}`,
		"no data":           `{"id":"evt_a","type":"session.step.ended.1",` + d + `}`,
		"null data":         `{"id":"evt_a","type":"session.step.ended.1",` + d + `,"data":null}`,
		"data not object":   `{"id":"evt_a","type":"session.step.ended.1",` + d + `,"data":[1]}`,
		"member wrong type": `{"id":"evt_a","type":"session.step.ended.1",` + d + `,"data":{"cost":"x"}}`,
		"durable missing":   `{"id":"evt_a","type":"session.step.ended.1","data":{}}`,
		"live with durable": `{"id":"evt_a","type":"session.text.delta",` + d + `,"data":{}}`,
		"wrong version":     `{"id":"evt_a","type":"session.step.ended.1","durable":{"aggregateID":"ses_a","seq":1,"version":2},"data":{}}`,
		"envelope member":   `{"id":"evt_a","created":"yesterday","type":"session.step.ended.1",` + d + `,"data":{}}`,
	} {
		var ev Event
		err := json.Unmarshal([]byte(j), &ev)
		if err == nil {
			t.Errorf("%s: decoded", name)
			continue
		}
		if got := TypeOf(err); got != ErrInvalid {
			t.Errorf("%s: error %q has type %q, want %q", name, err, got, ErrInvalid)
		}
	}
}

// TestDocsDescribeVocabulary: docs/api.md is what API clients read.
// It must list every event type with its data members, optional ones
// marked "?", the error types events carry, and a status table that agrees
// with the status every error type it names elsewhere gets.
func TestDocsDescribeVocabulary(t *testing.T) {
	raw, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	lines := strings.Split(doc, "\n")
	row := func(typ string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "| `"+typ+"`") {
				return l
			}
		}
		return ""
	}
	types := append(DurableTypes(), TypeTextDelta, TypeReasoningDelta, TypeToolInputDelta, TypeCompactionDelta,
		TypeUsageUpdated, TypePermissionAsked, TypePermissionReplied)
	sort.Strings(types)
	for _, typ := range types {
		r := row(typ)
		if r == "" {
			t.Errorf("docs/api.md has no catalog row for %s", typ)
			continue
		}
		p, _ := NewPayload(typ)
		rt := reflect.TypeOf(p).Elem()
		for i := range rt.NumField() {
			tag := rt.Field(i).Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "sessionID" {
				continue
			}
			want := "`" + name + "`"
			if opts == "omitempty" {
				want = "`" + name + "?`"
			}
			if !strings.Contains(r, want) {
				t.Errorf("docs/api.md row of %s lacks %s", typ, want)
			}
		}
	}
	for _, e := range []ErrorType{ErrProviderTransport, ErrProviderRateLimit, ErrProviderInternal, ErrProviderInvalidRequest,
		ErrProviderContextOverflow, ErrProviderContentFilter, ErrProviderAuth, ErrProviderUnknown, ErrAborted, ErrToolExecution,
		ErrToolResultMissing, ErrPermissionRejected, ErrCompactionUnavailable, ErrCompactionFailed, ErrUnknown} {
		if !strings.Contains(doc, "`"+string(e)+"`") {
			t.Errorf("docs/api.md does not name the event error type %s", e)
		}
	}
	// The status table.
	table := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| (\\d{3}) \\| `([a-z.-]+)` \\|").FindAllStringSubmatch(doc, -1) {
		n, _ := strconv.Atoi(m[1])
		table[m[2]] = n
		if m[2] == "method-not-allowed" { // the HTTP adapter's own, not in messages
			continue
		}
		if got := ErrorType(m[2]).HTTPStatus(); got != n {
			t.Errorf("status table: %d %s, but messages answers %d", n, m[2], got)
		}
	}
	for _, m := range regexp.MustCompile("`(\\d{3}) ([a-z][a-z.-]*)`").FindAllStringSubmatch(doc, -1) {
		n, _ := strconv.Atoi(m[1])
		if got, ok := table[m[2]]; !ok || got != n {
			t.Errorf("docs/api.md names %s %s, but its status table has %d for it", m[1], m[2], got)
		}
	}
}
