package actors

import (
	"strconv"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// liveProcess is a registered process that ignores what it is sent.
type liveProcess struct{}

func (liveProcess) SendUserMessage(*actor.PID, any)   {}
func (liveProcess) SendSystemMessage(*actor.PID, any) {}
func (liveProcess) Stop(*actor.PID)                   {}

// TestWaitersPruneSchedule pins when a waiter list is pruned: once it
// reaches twice what the last pruning (or take) left, and at least
// minPrune; a pruning drops exactly the callers whose process is gone and
// those without a reply address, and keeps the order of the rest.
func TestWaitersPruneSchedule(t *testing.T) {
	reg := actor.NewProcessRegistry(&actor.ActorSystem{})
	n := 0
	live := func() *actor.PID {
		n++
		pid, _ := reg.Add(liveProcess{}, "live"+strconv.Itoa(n))
		return pid
	}
	gone := func() *actor.PID {
		n++
		return actor.NewPID(reg.Address, "gone"+strconv.Itoa(n))
	}
	var w waiters
	// Below minPrune nothing is looked up, dead or not.
	for range minPrune {
		w.add(reg, gone())
	}
	if len(w.pids) != minPrune {
		t.Fatalf("%d listed after %d adds, want no pruning below minPrune", len(w.pids), minPrune)
	}
	// The add that finds minPrune listed prunes them all first.
	keep := live()
	w.add(reg, keep)
	if len(w.pids) != 1 || w.pids[0] != keep {
		t.Fatalf("after the first pruning: %v, want only the live caller", w.pids)
	}
	// 20 live callers and a nil one (a command sent without a reply
	// address): the pruning at minPrune keeps the 15 live ones listed by
	// then and drops the nil, so the next is due at 30.
	lives := []*actor.PID{keep}
	for range 14 {
		p := live()
		lives = append(lives, p)
		w.add(reg, p)
	}
	w.add(reg, nil)
	for range 5 {
		p := live()
		lives = append(lives, p)
		w.add(reg, p) // the first of these prunes the 16 listed to 15
	}
	if len(w.pids) != 20 || w.pruneAt != 30 {
		t.Fatalf("%d listed, next pruning at %d; want 20 and 30", len(w.pids), w.pruneAt)
	}
	for len(w.pids) < 30 {
		w.add(reg, gone())
	}
	w.add(reg, gone()) // prunes the 10 gone at 30
	if len(w.pids) != 21 || w.pruneAt != 40 {
		t.Fatalf("%d listed, next pruning at %d; want 21 and 40", len(w.pids), w.pruneAt)
	}
	for i, p := range w.pids[:20] {
		if p != lives[i] {
			t.Fatalf("caller %d is %v, want %v: pruning keeps the order", i, p, lives[i])
		}
	}
	// take starts over: the next pruning is due at minPrune again.
	if got := w.take(); len(got) != 21 || len(w.pids) != 0 {
		t.Fatalf("take returned %d and left %d", len(got), len(w.pids))
	}
	for range minPrune + 1 {
		w.add(reg, gone())
	}
	if len(w.pids) != 1 {
		t.Fatalf("%d listed after take and %d gone callers, want 1: take resets the schedule", len(w.pids), minPrune+1)
	}
}
