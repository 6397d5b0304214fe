package persistence

// openCache keeps the writer's decoded copies of assistant messages whose
// step is open. A step's second commit (its settlements and step.ended)
// updates the message its first commit created; without the cache every
// such update first read the message's ID entry and decoded the message
// back from bbolt, a fifth of the writer's per-step cost.
//
// It holds only committed state: an operation's updates are staged when the
// operation succeeds, become visible to the later operations of the same
// transaction (which also see them in bbolt), and are kept only when the
// transaction commits. A transaction that rolls back, for a failed
// operation or a failed commit, drops what it staged at the next begin.
// Only the writer goroutine uses it. Every message write goes through
// flush, so a cached copy never disagrees with its row.
type openCache struct {
	committed map[msgRef]*Message
	staged    map[msgRef]*Message
}

// begin starts a transaction, dropping anything a rolled-back one staged.
func (c *openCache) begin() { clear(c.staged) }

// stage records the message an operation just wrote.
func (c *openCache) stage(key msgRef, m *Message) {
	if c.staged == nil {
		c.staged = map[msgRef]*Message{}
	}
	c.staged[key] = m
}

// commit keeps what the transaction staged: messages whose step is still
// open, forgetting the others (a closed step's message is read again from
// bbolt in the rare case it is reopened by a retry).
func (c *openCache) commit() {
	for key, m := range c.staged {
		if m.Open && m.Role == RoleAssistant {
			if c.committed == nil {
				c.committed = map[msgRef]*Message{}
			}
			c.committed[key] = m
		} else {
			delete(c.committed, key)
		}
	}
	clear(c.staged)
}

// get returns a private copy of a cached message: projectors update
// messages in place.
func (c *openCache) get(key msgRef) (Message, bool) {
	m, ok := c.staged[key]
	if !ok {
		m, ok = c.committed[key]
	}
	if !ok {
		return Message{}, false
	}
	return m.clone(), true
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
