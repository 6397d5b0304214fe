package persistence

import (
	"bytes"
	"slices"
)

// writerCache is a map of the writer's knowledge that holds only committed
// state: what an operation learns or writes is staged, visible to the later
// operations of its batch (which also see it in the memtable), and kept
// only once the batch's record is written; a batch that fails is re-run
// after begin drops what it staged. Only the writer goroutine uses it.
//
// The writer keeps four:
//   - open: decoded copies of the messages of open steps. A step's second
//     commit (its settlements and step.ended) updates the message its
//     first commit created; reading it back meant an ID-entry lookup and a
//     decode, a fifth of the writer's per-step cost.
//   - seqs: each Session's last seq, so an append or admission need not
//     seek the end of the Session's stream (a merged seek through the
//     memtables and bbolt, the largest single read of an admission).
//   - pend: each Session's count of pending inputs, when a backlog limit
//     is set (see pendingCount).
//   - compacting: the manual compactions started since Open and not yet
//     settled (see Bolt.compacting).
//
// seqs and pend age at each flush (see age): a daemon that has written to
// millions of Sessions keeps the values of those written lately, not one
// of each forever.
//
// Every write of a message or a log row goes through the writer, so a
// cached value never disagrees with the store.
type writerCache[K comparable, V any] struct {
	committed map[K]V
	// older is what committed held when the cache last aged, less what
	// has been written since: a value read from it stays until the next
	// age, one written moves to committed.
	older  map[K]V
	staged map[K]V
}

// age starts a generation: what was not written since the last age is
// forgotten at this one's end, and read from the store when needed again.
func (c *writerCache[K, V]) age() { c.older, c.committed = c.committed, nil }

// len returns how many values the cache holds.
func (c *writerCache[K, V]) len() int { return len(c.committed) + len(c.older) }

// begin starts a batch, dropping anything a failed one staged.
func (c *writerCache[K, V]) begin() { clear(c.staged) }

func (c *writerCache[K, V]) get(k K) (V, bool) {
	if v, ok := c.staged[k]; ok {
		return v, true
	}
	if v, ok := c.committed[k]; ok {
		return v, true
	}
	v, ok := c.older[k]
	return v, ok
}

func (c *writerCache[K, V]) stage(k K, v V) {
	if c.staged == nil {
		c.staged = map[K]V{}
	}
	c.staged[k] = v
}

// commit keeps what the batch staged, or forgets it where keep says no.
func (c *writerCache[K, V]) commit(keep func(V) bool) {
	if c.committed == nil {
		c.committed = map[K]V{}
	}
	for k, v := range c.staged {
		if keep(v) {
			c.committed[k] = v
		} else {
			delete(c.committed, k)
		}
		delete(c.older, k)
	}
	clear(c.staged)
}

// keepAll is commit's keep for caches that keep everything.
func keepAll[V any](V) bool { return true }

// stillOpen keeps the messages whose step is open: a closed step's message
// is read again from the store in the rare case a retry reopens it.
func stillOpen(m *Message) bool { return m.Open && m.Role == RoleAssistant }

// openMessage returns a private copy of a cached open message: projectors
// update messages in place.
func (s *Bolt) openMessage(k msgRef) (Message, bool) {
	m, ok := s.open.get(k)
	if !ok {
		return Message{}, false
	}
	return m.clone(), true
}

// detached returns a copy of m that shares no memory a caller could change
// with m (strings are shared: they cannot change). Commit returns such
// copies of the operation's working messages, which the writer goes on
// keeping (the open cache). TestDetachedMessagesShareNothing fills every
// field, so a field added to Message without a copy here fails it.
func (m *Message) detached() Message {
	out := *m
	if m.Prompt != nil {
		p := *m.Prompt
		p.Files = slices.Clone(p.Files)
		out.Prompt = &p
	}
	if m.Parts != nil {
		out.Parts = make([]Part, len(m.Parts))
		for i, p := range m.Parts {
			p.ProviderMetadata = bytes.Clone(p.ProviderMetadata)
			if t := p.Tool; t != nil {
				c := *t
				c.Input, c.Metadata = bytes.Clone(c.Input), bytes.Clone(c.Metadata)
				c.CallMetadata, c.ResultMetadata = bytes.Clone(c.CallMetadata), bytes.Clone(c.ResultMetadata)
				c.Error = clonePtr(c.Error)
				p.Tool = &c
			}
			out.Parts[i] = p
		}
	}
	out.Retry, out.Tokens, out.Error = clonePtr(m.Retry), clonePtr(m.Tokens), clonePtr(m.Error)
	if m.Compaction != nil {
		c := *m.Compaction
		c.Error, c.Usage = clonePtr(c.Error), clonePtr(c.Usage)
		out.Compaction = &c
	}
	return out
}

// clonePtr returns a pointer to a shallow copy of *p, or nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// clone copies a message deeply enough for projectors to change it: the
// parts, their tool calls and the compaction state are updated in place;
// every other pointer field is only ever replaced.
func (m *Message) clone() Message {
	out := *m
	if m.Parts != nil {
		out.Parts = make([]Part, len(m.Parts), len(m.Parts)+2)
		copy(out.Parts, m.Parts)
		for i := range out.Parts {
			if t := out.Parts[i].Tool; t != nil {
				c := *t
				out.Parts[i].Tool = &c
			}
		}
	}
	if m.Compaction != nil {
		c := *m.Compaction
		out.Compaction = &c
	}
	return out
}
