// Package messages is sessiond's vocabulary: identifiers, the event envelope,
// the catalog of durable and live-only event payloads, typed errors with
// stable codes, and the stored (msgpack) and served (JSON) encodings.
//
// It imports nothing but the standard library and two small encoding
// libraries, so every other package may depend on it and it depends on none
// of them.
//
// # Invariants
//
//   - Every durable event type string ends in a schema version (".1"); the
//     string is what clients match, and it never changes meaning once shipped.
//   - Stored payloads use explicit short msgpack tags. Tags are never reordered
//     or reused; golden files under testdata/golden pin the bytes.
//   - Event time lives only in the envelope's Created field (epoch ms).
//   - Every payload carries its SessionID.
//
// # Usage
//
//	ids := messages.NewIDs(time.Now, nil)
//	p := &messages.PromptAdmitted{...}
//	ev := messages.Event{ID: ids.Event(), Created: now, Type: p.Type(), Data: p,
//		Durable: &messages.Durable{AggregateID: p.SessionID, Seq: 1, Version: messages.VersionOf(p.Type())}}
//	b, err := messages.MarshalEvent(ev)   // stored form; UnmarshalEvent reads it back
//	j, err := json.Marshal(ev)            // served form
//
// A durable type's event needs its Durable section (the store assigns it
// when it commits the event); MarshalEvent refuses one without it, and a
// live-only event with one.
package messages
