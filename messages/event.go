package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Durable places a durable event in its aggregate's log.
type Durable struct {
	AggregateID SessionID `json:"aggregateID" msgpack:"a"`
	Seq         int64     `json:"seq" msgpack:"s"`
	// Version is the payload schema version, the number after the type's
	// last dot.
	Version int `json:"version" msgpack:"v"`
}

// Event is the envelope of every fact. Durable is nil for live-only events.
type Event struct {
	ID       EventID   `json:"id"`
	Created  int64     `json:"created"`
	Type     string    `json:"type"`
	Durable  *Durable  `json:"durable,omitempty"`
	Location *Location `json:"location,omitempty"`
	Data     Payload   `json:"data"`
}

// Seq returns the durable sequence, or -1 for a live-only event.
func (e Event) Seq() int64 {
	if e.Durable == nil {
		return -1
	}
	return e.Durable.Seq
}

// IsDurable reports whether typ names a durable event type.
func IsDurable(typ string) bool { _, ok := durable[typ]; return ok }

// IsLive reports whether typ names a live-only event type.
func IsLive(typ string) bool { _, ok := live[typ]; return ok }

// DurableTypes returns every durable event type, in no particular order.
func DurableTypes() []string {
	out := make([]string, 0, len(durable))
	for t := range durable {
		out = append(out, t)
	}
	return out
}

// NewPayload returns an empty payload of the given type, durable or live.
func NewPayload(typ string) (Payload, bool) {
	if f, ok := durable[typ]; ok {
		return f(), true
	}
	if f, ok := live[typ]; ok {
		return f(), true
	}
	return nil, false
}

// VersionOf returns the schema version suffix of a durable type string.
func VersionOf(typ string) int {
	if n := len(typ); n >= 2 && typ[n-2] == '.' && typ[n-1] >= '1' && typ[n-1] <= '9' {
		// One digit, as every type has: decoders check it per event.
		return int(typ[n-1] - '0')
	}
	i := strings.LastIndexByte(typ, '.')
	if i < 0 {
		return 0
	}
	v, err := strconv.Atoi(typ[i+1:])
	if err != nil {
		return 0
	}
	return v
}

// Synced is the Log marker emitted once replay reaches the watermark
// captured when the Log began. Seq is nil when the log was empty.
type Synced struct {
	Type        string    `json:"type"`
	AggregateID SessionID `json:"aggregateID"`
	Seq         *int64    `json:"seq,omitempty"`
}

// storedEvent is the msgpack shape of an Event. Field tags are part of the
// stored format: never reorder or reuse them.
type storedEvent struct {
	//lint:ignore U1000 read by msgpack through its struct tag (array encoding)
	_msgpack struct{}           `msgpack:",as_array"`
	Format   uint8              // envelope format, currently 1
	ID       EventID            //
	Created  int64              //
	Type     string             //
	Durable  *Durable           //
	Location *Location          //
	Data     msgpack.RawMessage //
}

const storedFormat = 1

var encPool = sync.Pool{New: func() any { return NewEncoder() }}

// Encoder encodes values in the stored form into a buffer it reuses, for
// a caller that copies each encoding where it belongs (Marshal allocates
// one slice per value). Not safe for concurrent use.
type Encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

// NewEncoder returns an Encoder.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	e.enc.SetSortMapKeys(true)
	e.enc.UseCompactInts(true)
	return e
}

// Encode returns v encoded as Marshal encodes it, valid until the next
// call.
func (e *Encoder) Encode(v any) ([]byte, error) {
	e.buf.Reset()
	var err error
	if ce, ok := v.(msgpack.CustomEncoder); ok && !isNilPointer(v) {
		// What Encode would do after looking the type up by reflection.
		err = ce.EncodeMsgpack(e.enc)
	} else {
		err = e.enc.Encode(v)
	}
	if err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// Marshal encodes v in the stored msgpack form: compact integers and sorted
// map keys, so equal values always produce equal bytes.
func Marshal(v any) ([]byte, error) {
	e := encPool.Get().(*Encoder)
	defer encPool.Put(e)
	b, err := e.Encode(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// isNilPointer reports whether v holds a nil pointer, which the
// reflection encoder writes as nil without calling its codec.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Unmarshal decodes stored msgpack into v, refusing values whose declared
// sizes exceed their bytes (see checkFrame).
func Unmarshal(b []byte, v any) error {
	if err := checkFrame(b); err != nil {
		return storedError("", err)
	}
	if err := msgpack.Unmarshal(b, v); err != nil {
		return storedError("", err)
	}
	return nil
}

// decodeError is a decode failure as a typed *Error (TypeOf, the HTTP
// status table) that still wraps its cause (errors.Is(err, errFrame)).
type decodeError struct {
	typed *Error
	cause error
}

func (e *decodeError) Error() string   { return e.typed.Message }
func (e *decodeError) Unwrap() []error { return []error{e.typed, e.cause} }

// storedError types a failure to read stored bytes: this program wrote
// them, so an unreadable value is a server-side fault (internal, 500),
// never the request's, whatever the cause says.
func storedError(prefix string, err error) error {
	return &decodeError{typed: &Error{Type: ErrInternal, Message: prefix + err.Error()}, cause: err}
}

// servedError types a failure to read the served (JSON) form: it comes
// from outside this process, so it is invalid input.
func servedError(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Type == ErrInvalid {
		return err
	}
	return &decodeError{typed: &Error{Type: ErrInvalid, Message: err.Error()}, cause: err}
}

// MarshalEvent encodes an event in its stored form.
func MarshalEvent(e Event) ([]byte, error) { return MarshalEventData(e, nil) }

// MarshalEventData is MarshalEvent with the payload already encoded by
// Marshal(e.Data), or encoded here when data is nil. The store encodes
// payloads before its single writer runs, which then only frames them.
func MarshalEventData(e Event, data []byte) ([]byte, error) { return AppendEventData(nil, e, data) }

// AppendEventData is MarshalEventData appending to dst.
func AppendEventData(dst []byte, e Event, data []byte) ([]byte, error) {
	if e.Data == nil {
		return nil, fmt.Errorf("messages: marshal %s: no data", e.ID)
	}
	if e.Type == "" {
		e.Type = e.Data.Type()
	}
	if e.Type != e.Data.Type() {
		return nil, fmt.Errorf("messages: marshal %s: type %q does not match data %q", e.ID, e.Type, e.Data.Type())
	}
	// The decoders refuse an event whose durable section does not fit its
	// type (checkDurability): never write one.
	if err := checkDurability(e, IsDurable(e.Type)); err != nil {
		return nil, err
	}
	if data == nil {
		var err error
		if data, err = Marshal(e.Data); err != nil {
			return nil, fmt.Errorf("messages: marshal %s data: %w", e.ID, err)
		}
	}
	// The codec is called on se directly, not through Encoder.Encode: as an
	// interface value se would escape to the heap, an allocation per event.
	se := storedEvent{Format: storedFormat, ID: e.ID, Created: e.Created, Type: e.Type,
		Durable: e.Durable, Location: e.Location, Data: data}
	enc := encPool.Get().(*Encoder)
	defer encPool.Put(enc)
	enc.buf.Reset()
	if err := se.EncodeMsgpack(enc.enc); err != nil {
		return nil, err
	}
	return append(dst, enc.buf.Bytes()...), nil
}

// decPool reuses decoders: replay decodes hundreds of thousands of events
// per second and a fresh decoder per event dominated its cost.
var decPool = sync.Pool{New: func() any { return new(pooledDecoder) }}

type pooledDecoder struct {
	rd  bytes.Reader
	dec msgpack.Decoder
}

// UnmarshalEvent decodes an event from its stored form. It rejects unknown
// formats and types with an error rather than guessing; every error is
// typed internal (see storedError). The envelope is
// read field by field (it is a fixed array) and the payload is decoded in
// place, without an intermediate copy.
func UnmarshalEvent(b []byte) (Event, error) {
	return withDecoder(b, decodeEnvelope)
}

// withDecoder runs decode on b with a pooled decoder.
func withDecoder[T any](b []byte, decode func(*msgpack.Decoder) (T, error)) (T, error) {
	if err := checkFrame(b); err != nil {
		var zero T
		return zero, storedError("messages: unmarshal event: ", err)
	}
	p := decPool.Get().(*pooledDecoder)
	defer decPool.Put(p)
	p.rd.Reset(b)
	p.dec.Reset(&p.rd)
	v, err := decode(&p.dec)
	if err != nil {
		var zero T
		return zero, storedError("messages: unmarshal event: ", err)
	}
	return v, nil
}

// EventCreated returns the created time of a stored event, decoding only
// the head of its envelope (Session records derive timeUpdated from the
// last event, and reading the whole payload for it was most of a Get).
func EventCreated(b []byte) (int64, error) {
	return withDecoder(b, decodeHead)
}

// decodeHead reads the envelope up to and including its created time.
func decodeHead(dec *msgpack.Decoder) (int64, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n != 7 {
		return 0, fmt.Errorf("envelope has %d fields, want 7", n)
	}
	format, err := dec.DecodeUint8()
	if err != nil {
		return 0, err
	}
	if format != storedFormat {
		return 0, fmt.Errorf("unknown format %d", format)
	}
	// The ID is read the way decodeEnvelope reads it, so the head decoder
	// accepts exactly the prefixes the full decoder does.
	if _, err := dec.DecodeString(); err != nil {
		return 0, err
	}
	return dec.DecodeInt64()
}

func decodeEnvelope(dec *msgpack.Decoder) (Event, error) {
	var ev Event
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return ev, err
	}
	if n != 7 {
		return ev, fmt.Errorf("envelope has %d fields, want 7", n)
	}
	format, err := dec.DecodeUint8()
	if err != nil {
		return ev, err
	}
	if format != storedFormat {
		return ev, fmt.Errorf("unknown format %d", format)
	}
	id, err := dec.DecodeString()
	if err != nil {
		return ev, err
	}
	ev.ID = EventID(id)
	if ev.Created, err = dec.DecodeInt64(); err != nil {
		return ev, err
	}
	typ, err := dec.DecodeBytes()
	if err != nil {
		return ev, err
	}
	ctor, isDurable := durable[string(typ)] // no allocation: the map key is converted in place
	ok := isDurable
	if !ok {
		ctor, ok = live[string(typ)]
	}
	if !ok {
		return ev, fmt.Errorf("event %s: unknown type %q", ev.ID, typ)
	}
	p := ctor()
	ev.Type = p.Type()
	if err := dec.Decode(&ev.Durable); err != nil {
		return ev, err
	}
	if err := checkDurability(ev, isDurable); err != nil {
		return ev, err
	}
	if err := dec.Decode(&ev.Location); err != nil {
		return ev, err
	}
	if c, err := dec.PeekCode(); err != nil {
		return ev, err
	} else if c == msgpcode.Nil {
		// The encoder never writes one; the JSON decoder refuses it too.
		return ev, fmt.Errorf("event %s has no data", ev.ID)
	}
	if err := dec.Decode(p); err != nil {
		return ev, fmt.Errorf("event %s data: %w", ev.ID, err)
	}
	ev.Data = p
	return ev, nil
}

// UnmarshalJSON decodes the served JSON form, choosing the payload type from
// the envelope's type field. Its errors are typed invalid.
func (e *Event) UnmarshalJSON(b []byte) error {
	if err := e.unmarshalJSON(b); err != nil {
		return servedError(err)
	}
	return nil
}

func (e *Event) unmarshalJSON(b []byte) error {
	var raw struct {
		ID       EventID         `json:"id"`
		Created  int64           `json:"created"`
		Type     string          `json:"type"`
		Durable  *Durable        `json:"durable"`
		Location *Location       `json:"location"`
		Data     json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	p, ok := NewPayload(raw.Type)
	if !ok {
		return fmt.Errorf("messages: unknown event type %q", raw.Type)
	}
	if len(raw.Data) == 0 || string(raw.Data) == "null" {
		return fmt.Errorf("messages: event %s has no data", raw.ID)
	}
	if err := json.Unmarshal(raw.Data, p); err != nil {
		return fmt.Errorf("messages: event %s data: %w", raw.ID, err)
	}
	ev := Event{ID: raw.ID, Created: raw.Created, Type: raw.Type, Durable: raw.Durable, Location: raw.Location, Data: p}
	if err := checkDurability(ev, IsDurable(ev.Type)); err != nil {
		return err
	}
	*e = ev
	return nil
}

// checkDurability refuses an event whose durable section disagrees with
// its type (durableType: whether it is a durable one): readers of the log
// take a durable event's seq from it (a missing one would stop a Log
// tail), a live-only event has none, and the section's version is the
// type's.
func checkDurability(ev Event, durableType bool) error {
	switch has := ev.Durable != nil; {
	case has && !durableType:
		return Errorf(ErrInvalid, "messages: event %s: live-only type %s with a durable section", ev.ID, ev.Type)
	case !has && durableType:
		return Errorf(ErrInvalid, "messages: event %s: durable type %s without its durable section", ev.ID, ev.Type)
	case has && ev.Durable.Version != VersionOf(ev.Type):
		return Errorf(ErrInvalid, "messages: event %s: durable version %d, type %s has %d", ev.ID, ev.Durable.Version, ev.Type, VersionOf(ev.Type))
	}
	return nil
}
