package persistence

import "github.com/sessiond/sessiond/messages"

// seqCache keeps the writer's knowledge of each Session's last seq, so an
// append or admission need not seek the end of the Session's stream (a
// merged seek through the memtables and bbolt, the largest single read of
// an admission). Like openCache it holds only committed state: values an
// operation learns or writes are staged and kept only when the batch's
// record is written; a batch that fails drops them at the next begin.
// Only the writer goroutine uses it.
type seqCache struct {
	committed map[messages.SessionID]int64
	staged    map[messages.SessionID]int64
}

func (c *seqCache) begin() { clear(c.staged) }

func (c *seqCache) get(sid messages.SessionID) (int64, bool) {
	if n, ok := c.staged[sid]; ok {
		return n, true
	}
	n, ok := c.committed[sid]
	return n, ok
}

func (c *seqCache) stage(sid messages.SessionID, last int64) {
	if c.staged == nil {
		c.staged = map[messages.SessionID]int64{}
	}
	c.staged[sid] = last
}

func (c *seqCache) commit() {
	if c.committed == nil {
		c.committed = map[messages.SessionID]int64{}
	}
	for sid, n := range c.staged {
		c.committed[sid] = n
	}
	clear(c.staged)
}
